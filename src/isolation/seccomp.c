/* SPDX-License-Identifier: MIT */
#include "seccomp-filter.h"

#include <errno.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macros.h"

/* Syscalls refused outright. NR is the x86_64 number, used when this libseccomp is older
 * than the syscall (it then cannot resolve the name); 0 = no fallback. */
typedef struct Denied {
        const char *name;
        int nr_x86_64;
        int error;
} Denied;

static const Denied denied_always[] = {
        /* clone3's flags live in memory a filter cannot read: answer ENOSYS so that glibc
         * falls back to clone(), whose flags we can filter. */
        { "clone3", 435, ENOSYS },
        { "setns", 308, EPERM },

        /* The mount family (also needs CAP_SYS_ADMIN; defence in depth). */
        { "mount", 165, EPERM },
        { "umount", 0, EPERM },
        { "umount2", 166, EPERM },
        { "pivot_root", 155, EPERM },
        { "open_tree", 428, EPERM },
        { "move_mount", 429, EPERM },
        { "fsopen", 430, EPERM },
        { "fsconfig", 431, EPERM },
        { "fsmount", 432, EPERM },
        { "fspick", 433, EPERM },
        { "mount_setattr", 442, EPERM },
        { "open_tree_attr", 467, EPERM },
        { "chroot", 161, EPERM },

        /* Kernel keyrings are per uid, not per namespace: they would outlive a sandbox. */
        { "keyctl", 250, EPERM },
        { "add_key", 248, EPERM },
        { "request_key", 249, EPERM },

        /* Large kernel attack surface that a command runner does not need. */
        { "bpf", 321, EPERM },
        { "perf_event_open", 298, EPERM },
        { "userfaultfd", 323, EPERM },
        { "io_uring_setup", 425, EPERM },
        { "io_uring_enter", 426, EPERM },
        { "io_uring_register", 427, EPERM },
        { "fanotify_init", 300, EPERM },
        { "lookup_dcookie", 212, EPERM },

        /* The machine itself. */
        { "kexec_load", 246, EPERM },
        { "kexec_file_load", 320, EPERM },
        { "init_module", 175, EPERM },
        { "finit_module", 313, EPERM },
        { "delete_module", 176, EPERM },
        { "reboot", 169, EPERM },
        { "swapon", 167, EPERM },
        { "swapoff", 168, EPERM },
        { "acct", 163, EPERM },
        { "quotactl", 179, EPERM },
        { "quotactl_fd", 443, EPERM },
        { "syslog", 103, EPERM },
        { "settimeofday", 164, EPERM },
        { "clock_settime", 227, EPERM },
        { "iopl", 172, EPERM },
        { "ioperm", 173, EPERM },
        { "uselib", 134, EPERM },
        { "vhangup", 153, EPERM },
        { "nfsservctl", 180, EPERM },

        /* File handles bypass path-based confinement (the "shocker" escape). */
        { "open_by_handle_at", 304, EPERM },
        { "name_to_handle_at", 303, EPERM },

        /* Other processes' memory placement. */
        { "move_pages", 279, EPERM },
        { "migrate_pages", 256, EPERM },
};

static const Denied denied_strict[] = {
        { "ptrace", 101, EPERM },
        { "process_vm_readv", 310, EPERM },
        { "process_vm_writev", 311, EPERM },
        { "pidfd_getfd", 438, EPERM },
        { "kcmp", 312, EPERM },
};

/* Namespace flags refused in clone() and unshare(). */
static const uint64_t ns_flags[] = {
        CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
};
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* ioctl commands refused (compared on the low 32 bits: the kernel truncates the command
 * to unsigned int, so a value with junk in the high bits must not slip past). */
static const unsigned long denied_ioctls[] = {
        TIOCSTI,                /* push input into a terminal another process reads */
        TIOCLINUX,              /* console selection paste, same effect */
        FS_IOC_FSSETXATTR,      /* change the project id: escapes project quotas */
};

static void ctx_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}

static int resolve(const Denied *d) {
        int nr = seccomp_syscall_resolve_name(d->name);

        if (nr >= 0)
                return nr;
        if (seccomp_arch_native() == SCMP_ARCH_X86_64 && d->nr_x86_64 > 0)
                return d->nr_x86_64;
        return -1;      /* unknown here: nothing to refuse */
}

static int deny_list(scmp_filter_ctx ctx, const Denied *list, size_t n) {
        for (size_t i = 0; i < n; i++) {
                int nr = resolve(&list[i]), r;

                if (nr < 0)
                        continue;
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(list[i].error), nr, 0);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_rules(scmp_filter_ctx ctx, IsolationLevel level) {
        int r;

        r = deny_list(ctx, denied_always, ELEMENTSOF(denied_always));
        if (r < 0)
                return r;

        for (size_t i = 0; i < ELEMENTSOF(ns_flags); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
                if (r < 0)
                        return r;
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
                if (r < 0)
                        return r;
        }
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWTIME, CLONE_NEWTIME));
        if (r < 0)
                return r;

        for (size_t i = 0; i < ELEMENTSOF(denied_ioctls); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, denied_ioctls[i] & 0xffffffffu));
                if (r < 0)
                        return r;
        }

        if (level >= ISOLATION_LEVEL_STRICT) {
                r = deny_list(ctx, denied_strict, ELEMENTSOF(denied_strict));
                if (r < 0)
                        return r;
                /* Only the query form: setting a persona could e.g. turn off ASLR
                 * (ADDR_NO_RANDOMIZE) for what the sandbox runs next. */
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                                     SCMP_A0(SCMP_CMP_NE, 0xffffffffu));
                if (r < 0)
                        return r;
        }
        return 0;
}

int seccomp_program_compile(IsolationLevel level, SeccompProgram *ret) {
        _cleanup_(ctx_releasep) scmp_filter_ctx ctx = NULL;
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ struct sock_filter *insns = NULL;
        struct stat st;
        int r;

        if (level < ISOLATION_LEVEL_MIN || level > ISOLATION_LEVEL_MAX)
                return -EINVAL;

        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        /* Foreign ABIs (i386 via int 0x80, x32) are not in the filter: their syscall
         * numbers mean other things, so such a call kills the process. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return r;
        /* We load the exported program ourselves, after setting no_new_privs. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r < 0)
                return r;
        r = add_rules(ctx, level);
        if (r < 0)
                return r;

        fd = memfd_create("sandloom-seccomp", MFD_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0 ||
            st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS)
                return -EBADMSG;
        insns = malloc((size_t) st.st_size);
        if (!insns)
                return -ENOMEM;
        if (pread(fd, insns, (size_t) st.st_size, 0) != st.st_size)
                return -EIO;

        ret->prog.len = (unsigned short) (st.st_size / sizeof(struct sock_filter));
        ret->prog.filter = TAKE_PTR(insns);
        return 0;
}

void seccomp_program_free(SeccompProgram *p) {
        if (!p)
                return;
        free(p->prog.filter);
        p->prog.filter = NULL;
        p->prog.len = 0;
}

int seccomp_program_load(const SeccompProgram *p) {
        if (!p || !p->prog.filter)
                return -EINVAL;
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p->prog) < 0)
                return negative_errno();
        return 0;
}
