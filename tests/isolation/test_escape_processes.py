# SPDX-License-Identifier: MIT
"""Escapes through processes, at every isolation level: seeing, signalling or ptracing another
sandbox's processes, the init's /proc entries and fds, fds leaked into the sandbox, and processes
that try to outlive a foreground exec (sleep &, setsid, nohup, double fork, daemonize)."""

import os
import time

from helpers import assert_ok
from exec_helpers import (assert_no_uid_processes, brief, cancel, exec_id, find_uid_process, pid_alive, run, sh,
                          uid_pids, wait_exec, wait_running)
from escape_helpers import attack, expect

OTHER_PROCESSES = r'''
import signal, time
target, needle = int(sys.argv[1]), sys.argv[2][::-1]      # reversed: our own argv must not match
say("proc_pids=" + str(len([p for p in os.listdir("/proc") if p.isdigit()]) if os.path.isdir("/proc") else "none"))
say("see_target=" + attempt(os.stat, "/proc/%d" % target))
found = False
if os.path.isdir("/proc"):
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if needle.encode() in open("/proc/%s/cmdline" % p, "rb").read():
                    found = True
            except OSError:
                pass
say("found_by_scan=" + str(found))
say("signal0=" + attempt(os.kill, target, 0))
say("sigkill=" + attempt(os.kill, target, signal.SIGKILL))
say("sigstop=" + attempt(os.kill, target, signal.SIGSTOP))
say("ptrace_attach=" + lc("ptrace", ctypes.c_long(16), ctypes.c_long(target), None, None))
say("ptrace_seize=" + lc("ptrace", ctypes.c_long(0x4206), ctypes.c_long(target), None, None))
# positive controls: the same primitives on our own child
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
say("own_signal0=" + attempt(os.kill, child, 0))
say("own_ptrace_attach=" + lc("ptrace", ctypes.c_long(16), ctypes.c_long(child), None, None))
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)
'''


def test_another_sandboxs_processes_cannot_be_seen_signalled_or_traced(lvl):
    a, b = lvl.sandbox(), lvl.sandbox()
    needle = f"{900000 + os.getpid() % 90000}"
    victim = exec_id()
    run(b, ["/bin/sleep", needle], exec_id=victim, background=True, exec_scope="victim")
    wait_running(b, victim)
    pid = find_uid_process(b.uid, f"sleep {needle}")
    res, rec = attack(a, OTHER_PROCESSES, pid, needle[::-1])
    basic = lvl.rank == 1
    strict = lvl.rank >= 3
    no_such = "errno=ESRCH"
    expect(res, {
        "see_target": "errno=ENOENT",
        "found_by_scan": "False",
        # basic: the pid exists in the shared pid namespace, another uid: EPERM. standard+: not in ours.
        "signal0": "errno=EPERM" if basic else no_such,
        "sigkill": "errno=EPERM" if basic else no_such,
        "sigstop": "errno=EPERM" if basic else no_such,
        "ptrace_attach": "errno=EPERM" if basic or strict else no_such,
        "ptrace_seize": "errno=EPERM" if basic or strict else no_such,
        "own_signal0": "ok",
        "own_ptrace_attach": "errno=EPERM" if strict else "ok",
    }, rec)
    if basic:                               # no host /proc at basic: nothing to list at all
        assert res["proc_pids"] in ("0", "none"), res
    else:                                   # standard+: our init and the attack script only
        assert res["proc_pids"] == "2", res
    assert pid_alive(pid), "the other sandbox's process died"
    with open(f"/proc/{pid}/stat") as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
    assert state in ("S", "R"), f"the other sandbox's process is in state {state}"
    assert assert_ok(b.client.get(f"{b.base}/exec/{victim}", {"generation": b.generation}))["status"] == "RUNNING"
    assert_ok(cancel(b, victim))
    wait_exec(b, victim)


INIT_AND_FDS = r"""
import fcntl
leaked = []
for fd in range(3, 4096):
    try:
        fcntl.fcntl(fd, fcntl.F_GETFD)
        leaked.append(fd)
    except OSError:
        pass
say("leaked_fds=" + ",".join(map(str, leaked)))
say("tty_stdio=" + ",".join(str(os.isatty(f)) for f in (0, 1, 2)))
HARMLESS = ("/dev/null", "anon_inode:[eventfd]", "anon_inode:[signalfd]")
def init_fds():
    try:
        names = os.listdir("/proc/1/fd")
    except OSError as e:
        return ename(e.errno)
    bad = []
    for n in names:
        try:
            t = os.readlink("/proc/1/fd/" + n)
        except OSError as e:
            t = ename(e.errno)
        if not (t.startswith("pipe:") or t in HARMLESS):
            bad.append(n + "->" + t)
    return "readable-clean" if not bad else "LEAK:" + ",".join(bad)
def init_environ():
    try:
        data = open("/proc/1/environ", "rb").read()
    except OSError as e:
        return ename(e.errno)
    return "readable-empty" if not data else "LEAK:%d bytes" % len(data)
def init_root():
    try:
        names = sorted(os.listdir("/proc/1/root/"))
    except OSError as e:
        return ename(e.errno)
    return "same-as-ours" if names == sorted(os.listdir("/")) else "OTHER:" + ",".join(names)
say("list_init_fd=" + init_fds())
say("init_environ=" + init_environ())
say("init_mem=" + attempt(lambda: open("/proc/1/mem", "rb").read(1)))
say("init_root=" + init_root())
if os.path.isdir("/proc/self"):
    say("init_comm=" + open("/proc/1/comm").read().strip())
    say("init_cmdline=" + repr(open("/proc/1/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace"))[1:-1])
    say("self_fds=" + ",".join(sorted(os.listdir("/proc/self/fd"))))
    say("pids=" + ",".join(sorted(p for p in os.listdir("/proc") if p.isdigit())))
"""


def init_is_bwrap(lvl):
    """With the bwrap runtime at standard+, pid 1 is bwrap's own init: dumpable, so its /proc
    entries are readable. It holds nothing (checked below), runs under the same seccomp filter
    without capabilities; the native runtime's init is non-dumpable instead."""
    return lvl.runtime == "bwrap" and lvl.rank >= 2


def test_proc_1_and_leaked_fds(lvl):
    s = lvl.sandbox()
    res, rec = attack(s, INIT_AND_FDS)
    want = {"leaked_fds": "", "tty_stdio": "False,False,False"}
    if lvl.rank == 1:
        want.update({"list_init_fd": "errno=ENOENT", "init_environ": "errno=ENOENT", "init_mem": "errno=ENOENT",
                     "init_root": "errno=ENOENT"})
    elif init_is_bwrap(lvl):
        want.update({"list_init_fd": "readable-clean", "init_environ": "readable-empty", "init_mem": "errno=EIO",
                     "init_root": "same-as-ours", "init_comm": "bwrap", "self_fds": "0,1,2,3", "pids": "1,2"})
    else:
        want.update({"list_init_fd": "errno=EACCES", "init_environ": "errno=EACCES", "init_mem": "errno=EACCES",
                     "init_root": "errno=EACCES", "init_comm": "sandloom-init", "self_fds": "0,1,2,3",
                     "pids": "1,2"})
    expect(res, want, rec)
    if lvl.rank >= 2:
        # /proc/PID/cmdline is readable without ptrace access: the init, forked from the daemon,
        # must not show the daemon's command line (its data directory, listen address, flags).
        cmdline = res.get("init_cmdline", "")
        for leak in (lvl.data_dir, "--data-dir", "--listen", "sandloom serve"):
            assert leak not in cmdline, f"/proc/1/cmdline shows the daemon's command line: {cmdline!r}"


def _fd_targets(pid):
    out = {}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for n in names:
        try:
            out[int(n)] = os.readlink(f"/proc/{pid}/fd/{n}")
        except OSError:
            pass
    return out


def _unexpected_fds(lvl, uid):
    """{pid: {fd: target}} of fds a sandbox process should not hold, and whether any of them is
    something other than a pipe or /dev/null (or lies in the data directory)."""
    bad, fatal = {}, False
    for pid in uid_pids(uid):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            targets = _fd_targets(pid)
        except OSError:
            continue            # gone meanwhile
        is_init = comm == "sandloom-init"
        extra_pipes = 0
        for fd, target in sorted(targets.items()):
            ok_target = target.startswith("pipe:") or target == "/dev/null"
            # bwrap's own monitor processes (bwrap runtime) wait on these: internal, not the daemon's.
            if comm == "bwrap" and target in ("anon_inode:[eventfd]", "anon_inode:[signalfd]"):
                continue
            # Our init (standard+) holds exactly one more fd: the pipe its main child's status goes to.
            if is_init and fd > 2 and target.startswith("pipe:") and extra_pipes == 0:
                extra_pipes += 1
                continue
            if fd > 2 or not ok_target or lvl.data_dir in target:
                bad.setdefault(pid, {})[fd] = target
                fatal = fatal or not ok_target or lvl.data_dir in target
    return bad, fatal


def test_sandbox_processes_hold_no_daemon_fds(lvl):
    """Host-side view of every process of a running exec (the init included at standard+): only
    stdio, and stdio is pipes or /dev/null, never a socket, the database or the data directory."""
    s = lvl.sandbox()
    eid = exec_id()
    run(s, ["/bin/sh", "-c", "sleep 120 & wait"], exec_id=eid, background=True, exec_scope="fds")
    wait_running(s, eid)
    find_uid_process(s.uid, "sleep 120")
    # At standard+ the init starts the command with vfork semantics and closes its copies of the
    # exec's own stdio pipes when the command has called execve(); on a loaded machine the command
    # can be seen running before the init has run again. So the processes are looked at until
    # their fds settle (at most 3 s): anything still held then is a leak, and a daemon socket,
    # the database or the data directory fails at once.
    deadline = time.monotonic() + 3
    while True:
        bad, fatal = _unexpected_fds(lvl, s.uid)
        if not bad or fatal or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert_ok(cancel(s, eid))
    wait_exec(s, eid)
    assert not bad, f"sandbox processes hold unexpected fds: {bad}"


SURVIVORS = r'''
import subprocess, time
subprocess.Popen(["/bin/sleep", "201"])
subprocess.Popen(["/bin/sleep", "202"], start_new_session=True)
subprocess.Popen(["nohup", "/bin/sleep", "203"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.Popen(["/bin/sh", "-c", "trap '' TERM HUP INT; sleep 204"], start_new_session=True)
if os.fork() == 0:                      # the classic daemonize: fork, setsid, fork, close stdio
    os.setsid()
    if os.fork() == 0:
        devnull = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.execv("/bin/sleep", ["sleep", "205"])
    os._exit(0)
os.wait()
say("started=yes")
'''


def test_no_process_outlives_a_foreground_exec(lvl):
    s = lvl.sandbox()
    # Positive control: a background exec's process really is visible on the host while it runs.
    eid = exec_id()
    run(s, ["/bin/sleep", "200"], exec_id=eid, background=True, exec_scope="ctl")
    wait_running(s, eid)
    find_uid_process(s.uid, "sleep 200")
    assert_ok(cancel(s, eid))
    assert wait_exec(s, eid)["status"] == "CANCELLED"
    assert_no_uid_processes(s.uid, 5, "after cancel of the control")

    res, rec = attack(s, SURVIVORS)
    expect(res, {"started": "yes"}, rec)
    assert_no_uid_processes(s.uid, 5, "after a foreground exec that left daemons behind")
    rec = sh(s, "sleep 206 & setsid sleep 207 & nohup sleep 208 >/dev/null 2>&1 & (sleep 209 &); "
                "sh -c 'setsid sh -c \"sleep 210 &\" &'; disown 2>/dev/null; echo done")
    assert rec["stdout"] == "done\n", brief(rec)
    assert_no_uid_processes(s.uid, 5, "after a foreground shell that backgrounded sleeps")


PROC_KNOBS = r'''
say("write_proc_sys=" + attempt(lambda: open("/proc/sys/kernel/hostname", "w").write("sandloom-evil")))
say("write_core_pattern=" + attempt(lambda: open("/proc/sys/kernel/core_pattern", "w").write("|/workspace/x")))
say("sysrq=" + attempt(lambda: open("/proc/sysrq-trigger", "w").write("h")))
say("kcore=" + attempt(lambda: open("/proc/kcore", "rb").read(1)))
say("kmsg=" + attempt(lambda: open("/proc/kmsg", "rb").read(1)))
say("self_status_control=" + attempt(lambda: open("/proc/self/status").read()))
'''


def test_private_proc_is_not_a_way_out(lvl):
    """standard+: the private /proc of the sandbox's PID namespace gives no write to kernel knobs
    and no kernel memory or log; basic has no /proc at all."""
    if lvl.rank == 1:                       # an empty, read-only /proc directory
        res, rec = attack(lvl.sandbox(), PROC_KNOBS)
        # sysrq: creating a file in an empty read-only /proc (EROFS), or no /proc at all (ENOENT)
        assert res.get("sysrq") in ("errno=EROFS", "errno=ENOENT"), res
        expect(res, {"write_proc_sys": "errno=ENOENT", "write_core_pattern": "errno=ENOENT",
                     "kcore": "errno=ENOENT", "kmsg": "errno=ENOENT", "self_status_control": "errno=ENOENT"}, rec)
        return
    with open("/proc/sys/kernel/core_pattern") as f:
        core_pattern = f.read()
    res, rec = attack(lvl.sandbox(), PROC_KNOBS)

    def denied(path):                       # some kernels have no kcore / sysrq-trigger at all
        return "errno=EACCES" if os.path.exists(path) else "errno=ENOENT"
    expect(res, {"write_proc_sys": "errno=EACCES", "write_core_pattern": "errno=EACCES",
                 "sysrq": denied("/proc/sysrq-trigger"), "kcore": denied("/proc/kcore"), "kmsg": denied("/proc/kmsg"),
                 "self_status_control": "ok"}, rec)
    with open("/proc/sys/kernel/core_pattern") as f:
        assert f.read() == core_pattern


FD_WALK = r'''
decoy_rel = sys.argv[1].lstrip("/")
reached, walked = [], 0
if os.path.isdir("/proc"):
    for p in sorted(x for x in os.listdir("/proc") if x.isdigit()):
        for sub in ("fd", "cwd", "root"):
            base = "/proc/%s/%s" % (p, sub)
            try:
                names = os.listdir(base) if sub == "fd" else [""]
            except OSError:
                continue
            for n in names:
                link = base + ("/" + n if n else "")
                walked += 1
                for rel in (decoy_rel, "../" * 12 + decoy_rel):
                    try:
                        with open(os.path.join(link, rel, "file.txt"), "rb") as f:
                            reached.append("%s -> %s: %r" % (link, rel, f.read(40)))
                    except OSError:
                        pass
say("walked=" + str(walked))
say("reached=" + "; ".join(reached))
# PTRACE_SEIZE: full ptrace access without stopping pid 1 (a stopped init would hang the exec)
r = lc("ptrace", ctypes.c_long(0x4206), ctypes.c_long(1), None, None)
if r == "ok":                           # then pid 1 must be no more than we are
    st = dict(l.split(":", 1) for l in open("/proc/1/status").read().splitlines() if ":" in l)
    r = "ok-unprivileged" if (st["CapEff"].strip() == "0" * 16 and st["NoNewPrivs"].strip() == "1" and
                               st["Seccomp"].strip() == "2") else "ok-PRIVILEGED"
say("ptrace_init=" + r)
'''


def test_no_magic_link_in_proc_reaches_the_host(lvl, decoy):
    """Every /proc/*/{fd/*,cwd,root} the sandbox can see is tried as a way to the host's
    filesystem (the decoy directory, world-readable, by its host path): none may lead there.
    The init (pid 1 at standard+) must not be ptrace-able, or (bwrap) be no more privileged
    than the sandbox itself."""
    dpath, mark = decoy
    s = lvl.sandbox()
    # Positive control: the sandbox uid could read the canary on the host, were it reachable.
    import subprocess
    r = subprocess.run(["/bin/cat", os.path.join(dpath, "file.txt")], user=s.uid, group=s.uid, extra_groups=[],
                       capture_output=True, timeout=10)
    assert r.returncode == 0 and mark.encode() in r.stdout
    res, rec = attack(s, FD_WALK, dpath)
    assert res.get("reached") == "", f"the host filesystem is reachable through /proc magic links: {res.get('reached')}"
    if lvl.rank >= 2:
        assert int(res.get("walked", "0")) > 0, res
    # basic: pid 1 is the host's init (root): EPERM too. bwrap's init: see init_is_bwrap().
    expect(res, {"ptrace_init": "ok-unprivileged" if init_is_bwrap(lvl) and lvl.rank < 3 else "errno=EPERM"}, rec)
