/* SPDX-License-Identifier: MIT */
#include "netns.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macros.h"

int netns_open_current(int *ret_fd) {
        int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        *ret_fd = fd;
        return 0;
}

static int loopback_up(void) {
        _cleanup_close_ int sock = -EBADF;
        struct ifreq ifr = {};

        sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (sock < 0)
                return negative_errno();
        memcpy(ifr.ifr_name, "lo", 3);
        if (ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
                return negative_errno();
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(sock, SIOCSIFFLAGS, &ifr) < 0)
                return negative_errno();
        return 0;
}

int netns_create(int home_fd, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (unshare(CLONE_NEWNET) < 0)
                return negative_errno();

        r = netns_open_current(&fd);
        if (r >= 0)
                r = loopback_up();

        if (setns(home_fd, CLONE_NEWNET) < 0)
                return -ENOTRECOVERABLE;
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}
