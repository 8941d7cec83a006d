/* SPDX-License-Identifier: MIT */
#include "caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macros.h"

#define CAP_PROBE_MAX 64

int caps_drop_bounding(void) {
        /* Each drop replaces the credentials (~1.5 us); a read is a fraction of that, and
         * the spawner has usually emptied the set for all its children already. */
        for (unsigned long cap = 0; cap < CAP_PROBE_MAX; cap++) {
                int r = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);

                if (r < 0)
                        break;          /* EINVAL: past the kernel's last capability */
                if (r > 0 && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
                        return negative_errno();
        }

        /* uid 0 gets no capabilities back by execve() or by a setuid transition. */
        if (prctl(PR_SET_SECUREBITS,
                  SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                  SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
                  0, 0, 0) < 0)
                return negative_errno();
        return 0;
}

int caps_clear(void) {
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};

        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                return negative_errno();
        if (syscall(SYS_capset, &hdr, data) < 0)
                return negative_errno();

        if (syscall(SYS_capget, &hdr, data) < 0)
                return negative_errno();
        /* The ambient set is a subset of permitted: empty too. The bounding set was read
         * back by caps_drop_bounding(). */
        for (unsigned i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
                if (data[i].effective || data[i].permitted || data[i].inheritable)
                        return -EPERM;
        return 0;
}
