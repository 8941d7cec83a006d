/* SPDX-License-Identifier: MIT */
/* Runs inside a sandbox and tries one primitive, printing "ok" or "errno=NAME" so that the
 * isolation suite can assert the exact failure. Usage: sandbox-probe COMMAND [ARGS...] */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int num(const char *s) {
        return (int) strtol(s, NULL, 10);
}

static int result(long r) {
        if (r < 0)
                printf("errno=%s\n", strerrorname_np(errno) ?: "?");
        else
                printf("ok\n");
        return 0;
}

static unsigned long parse_ns(const char *s) {
        if (!strcmp(s, "user")) return CLONE_NEWUSER;
        if (!strcmp(s, "net")) return CLONE_NEWNET;
        if (!strcmp(s, "mnt")) return CLONE_NEWNS;
        if (!strcmp(s, "pid")) return CLONE_NEWPID;
        if (!strcmp(s, "uts")) return CLONE_NEWUTS;
        if (!strcmp(s, "ipc")) return CLONE_NEWIPC;
        if (!strcmp(s, "cgroup")) return CLONE_NEWCGROUP;
        return 0;
}

static int cmd_ids(void) {
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = {};
        uid_t ru, eu, su;
        gid_t rg, eg, sg;
        unsigned long long bnd = 0, amb = 0;

        getresuid(&ru, &eu, &su);
        getresgid(&rg, &eg, &sg);
        syscall(SYS_capget, &hdr, d);
        for (int c = 0; c < 64; c++) {
                int r = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
                if (r < 0)
                        break;
                if (r > 0)
                        bnd |= 1ULL << c;
                if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) > 0)
                        amb |= 1ULL << c;
        }
        printf("ruid=%u euid=%u suid=%u rgid=%u egid=%u sgid=%u groups=%d eff=%x%08x prm=%x%08x inh=%x%08x "
               "bnd=%llx amb=%llx nnp=%d seccomp=%d\n",
               ru, eu, su, rg, eg, sg, getgroups(0, NULL), d[1].effective, d[0].effective, d[1].permitted,
               d[0].permitted, d[1].inheritable, d[0].inheritable, bnd, amb,
               prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), prctl(PR_GET_SECCOMP, 0, 0, 0, 0));
        return 0;
}

static int cmd_fds(void) {
        bool first = true;

        printf("fds=");
        for (int fd = 0; fd < 4096; fd++)
                if (fcntl(fd, F_GETFD) >= 0) {
                        printf("%s%d", first ? "" : ",", fd);
                        first = false;
                }
        printf("\n");
        return 0;
}

static int cmd_statvfs(const char *path) {
        struct statvfs st;

        if (statvfs(path, &st) < 0)
                return result(-1);
        printf("ro=%d nosuid=%d nodev=%d noexec=%d\n", !!(st.f_flag & ST_RDONLY), !!(st.f_flag & ST_NOSUID),
               !!(st.f_flag & ST_NODEV), !!(st.f_flag & ST_NOEXEC));
        return 0;
}

static int cmd_tiocsti(bool control) {
        int m = posix_openpt(O_RDWR | O_NOCTTY), s;
        char c = 'x';
        struct winsize ws;

        if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
                printf("setup-failed errno=%s\n", strerrorname_np(errno));
                return 1;
        }
        s = open(ptsname(m), O_RDWR | O_NOCTTY);
        if (s < 0) {
                printf("setup-failed errno=%s\n", strerrorname_np(errno));
                return 1;
        }
        if (control)
                return result(ioctl(s, TIOCGWINSZ, &ws));
        return result(ioctl(s, TIOCSTI, &c));
}

static int cmd_connect_only(const char *port) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) num(port)) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        return result(connect(fd, (struct sockaddr *) &a, sizeof a));
}

static int cmd_connect(const char *port) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) num(port)) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        char buf[16] = {};

        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        if (connect(fd, (struct sockaddr *) &a, sizeof a) < 0)
                return result(-1);
        (void) !read(fd, buf, sizeof buf - 1);
        printf("ok %s\n", buf);
        return 0;
}

static int listen_on(const char *port) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) num(port)) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        if (bind(fd, (struct sockaddr *) &a, sizeof a) < 0 || listen(fd, 16) < 0)
                return -1;
        return fd;
}

static int cmd_listen(const char *port, const char *seconds) {
        int fd = listen_on(port);
        time_t end = time(NULL) + num(seconds);

        if (fd < 0)
                return result(-1);
        printf("listening\n");
        fflush(stdout);
        while (time(NULL) < end) {
                int c = accept(fd, NULL, NULL);
                if (c >= 0) {
                        (void) !write(c, "hello", 5);
                        close(c);
                }
        }
        return 0;
}

static int cmd_selfconnect(const char *port) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) num(port)) };
        int fd;

        if (listen_on(port) < 0)
                return result(-1);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        return result(connect(fd, (struct sockaddr *) &a, sizeof a));
}

static int cmd_clone3(void) {
        struct clone_args args = { .exit_signal = SIGCHLD };
        long pid = syscall(SYS_clone3, &args, sizeof args);

        if (pid == 0)
                _exit(0);
        if (pid > 0)
                waitpid((pid_t) pid, NULL, 0);
        return result(pid);
}

static int cmd_fork(void) {
        pid_t pid = fork();

        if (pid == 0)
                _exit(0);
        if (pid > 0)
                waitpid(pid, NULL, 0);
        return result(pid);
}

static int cmd_clone_ns(const char *ns) {
        long pid = syscall(SYS_clone, parse_ns(ns) | SIGCHLD, NULL, NULL, NULL, NULL);

        if (pid == 0)
                _exit(0);
        if (pid > 0)
                waitpid((pid_t) pid, NULL, 0);
        return result(pid);
}

static int cmd_ptrace(void) {
        pid_t pid = fork();
        long r;

        if (pid == 0) {
                pause();
                _exit(0);
        }
        r = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
        result(r);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 0;
}

/* PTRACE_ATTACH to our parent (bwrap's monitor or our init, or the spawner), detach again. */
static int cmd_ptrace_parent(void) {
        pid_t parent = getppid();
        long r = ptrace(PTRACE_ATTACH, parent, NULL, NULL);

        if (r == 0) {
                (void) waitpid(parent, NULL, __WALL);
                (void) ptrace(PTRACE_DETACH, parent, NULL, NULL);
        }
        return result(r);
}

static int cmd_i386(void) {
        long ret;

        /* getpid through the 32-bit entry point */
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20) : "memory");
        printf("survived %ld\n", ret);
        return 0;
}

static int cmd_fssetxattr(const char *path) {
        struct fsxattr fsx = {};
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return result(-1);
        if (ioctl(fd, FS_IOC_FSGETXATTR, &fsx) < 0)
                printf("get-failed ");
        fsx.fsx_projid = 4242;
        return result(ioctl(fd, FS_IOC_FSSETXATTR, &fsx));
}

static int cmd_name_to_handle(const char *path) {
        struct {
                struct file_handle h;
                unsigned char buf[128];
        } fh = { .h.handle_bytes = 128 };
        int mount_id;

        return result(name_to_handle_at(AT_FDCWD, path, &fh.h, &mount_id, 0));
}

static int cmd_rlimits(void) {
        struct rlimit core, nofile, cpu, fsize, nproc;

        getrlimit(RLIMIT_CORE, &core);
        getrlimit(RLIMIT_NOFILE, &nofile);
        getrlimit(RLIMIT_CPU, &cpu);
        getrlimit(RLIMIT_FSIZE, &fsize);
        getrlimit(RLIMIT_NPROC, &nproc);
        printf("core=%lld nofile=%lld cpu=%lld fsize=%lld nproc=%lld\n", (long long) core.rlim_cur,
               (long long) nofile.rlim_cur, (long long) cpu.rlim_cur, (long long) fsize.rlim_cur,
               (long long) nproc.rlim_cur);
        return 0;
}

static int cmd_listdir(const char *path) {
        DIR *d = opendir(path);
        struct dirent *de;

        if (!d)
                return result(-1);
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        printf("%s\n", de->d_name);
        closedir(d);
        return 0;
}

int main(int argc, char **argv) {
        const char *c = argc > 1 ? argv[1] : "";
        const char *a1 = argc > 2 ? argv[2] : "", *a2 = argc > 3 ? argv[3] : "";

        setvbuf(stdout, NULL, _IOLBF, 0);
        if (!strcmp(c, "ids")) return cmd_ids();
        if (!strcmp(c, "fds")) return cmd_fds();
        if (!strcmp(c, "env")) {
                for (char **e = environ; *e; e++)
                        printf("%s\n", *e);
                return 0;
        }
        if (!strcmp(c, "open-read")) return result(open(a1, O_RDONLY | O_CLOEXEC));
        if (!strcmp(c, "open-write")) return result(open(a1, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        if (!strcmp(c, "mkdir")) return result(mkdir(a1, 0755));
        if (!strcmp(c, "stat")) {
                struct stat st;
                return result(stat(a1, &st));
        }
        if (!strcmp(c, "statvfs")) return cmd_statvfs(a1);
        if (!strcmp(c, "listdir")) return cmd_listdir(a1);
        if (!strcmp(c, "mount")) return result(mount("none", "/tmp", "tmpfs", 0, NULL));
        if (!strcmp(c, "umount")) return result(umount2("/workspace", MNT_DETACH));
        if (!strcmp(c, "pivot_root")) return result(syscall(SYS_pivot_root, "/tmp", "/tmp"));
        if (!strcmp(c, "open_tree")) return result(syscall(SYS_open_tree, AT_FDCWD, "/usr", 1 /* CLONE */));
        if (!strcmp(c, "fsopen")) return result(syscall(SYS_fsopen, "tmpfs", 0));
        if (!strcmp(c, "chroot")) return result(chroot("/tmp"));
        if (!strcmp(c, "unshare")) return result(unshare((int) parse_ns(a1)));
        if (!strcmp(c, "unshare-files")) return result(unshare(CLONE_FILES));
        if (!strcmp(c, "clone-ns")) return cmd_clone_ns(a1);
        if (!strcmp(c, "clone3")) return cmd_clone3();
        if (!strcmp(c, "fork")) return cmd_fork();
        if (!strcmp(c, "setns")) return result(setns(0, CLONE_NEWNET));
        if (!strcmp(c, "keyctl"))
                return result(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 1));
        if (!strcmp(c, "add_key"))
                return result(syscall(SYS_add_key, "user", "sandloom-test", "secret", 6, KEY_SPEC_USER_KEYRING));
        if (!strcmp(c, "tiocsti")) return cmd_tiocsti(false);
        if (!strcmp(c, "tiocgwinsz")) return cmd_tiocsti(true);
        if (!strcmp(c, "sethostname")) return result(sethostname("evil", 4));
        if (!strcmp(c, "hostname")) {
                struct utsname u;
                uname(&u);
                printf("%s\n", u.nodename);
                return 0;
        }
        if (!strcmp(c, "bpf")) return result(syscall(SYS_bpf, 0, NULL, 0));
        if (!strcmp(c, "perf_event_open")) return result(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
        if (!strcmp(c, "userfaultfd")) return result(syscall(SYS_userfaultfd, 0));
        if (!strcmp(c, "io_uring_setup")) return result(syscall(SYS_io_uring_setup, 1, NULL));
        if (!strcmp(c, "name_to_handle_at")) return cmd_name_to_handle(a1);
        if (!strcmp(c, "fssetxattr")) return cmd_fssetxattr(a1);
        if (!strcmp(c, "mknod-dev")) return result(mknod(a1, S_IFCHR | 0666, makedev(1, 3)));
        if (!strcmp(c, "ptrace")) return cmd_ptrace();
        if (!strcmp(c, "ptrace-parent")) return cmd_ptrace_parent();
        if (!strcmp(c, "personality")) return result(personality(ADDR_NO_RANDOMIZE));
        if (!strcmp(c, "personality-query")) return result(personality(0xffffffff));
        if (!strcmp(c, "i386")) return cmd_i386();
        if (!strcmp(c, "x32")) return result(syscall(0x40000000 | SYS_getpid));
        if (!strcmp(c, "connect")) return cmd_connect(a1);
        if (!strcmp(c, "connect-only")) return cmd_connect_only(a1);
        if (!strcmp(c, "listen")) return cmd_listen(a1, a2);
        if (!strcmp(c, "selfconnect")) return cmd_selfconnect(a1);
        if (!strcmp(c, "rlimits")) return cmd_rlimits();
        if (!strcmp(c, "kill")) return result(kill(num(a1), num(a2)));
        fprintf(stderr, "sandbox-probe: unknown command %s\n", c);
        return 2;
}
