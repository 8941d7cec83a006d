# SPDX-License-Identifier: MIT
"""Escapes through the kernel interface, at every isolation level: mount, user/network/other
namespaces, setns, clone3, the keyring, TIOCSTI, the hostname, and the network (the daemon's own
port and the host's services are unreachable in the default `none` mode; `host` mode reaches them,
which is the positive control)."""

import os
import socket
import subprocess

import pytest

from helpers import Sandbox, assert_ok
from exec_helpers import brief, sh
from escape_helpers import attack, expect
from level_daemon import finish_daemons, start_level_daemon

MOUNTS = r'''
say("mount_tmpfs=" + lc("mount", b"none", b"/tmp", b"tmpfs", ctypes.c_ulong(0), None))
say("mount_bind=" + lc("mount", b"/workspace", b"/tmp", None, ctypes.c_ulong(4096), None))
say("remount_usr_rw=" + lc("mount", None, b"/usr", None, ctypes.c_ulong(32 | 4096), None))
say("umount_workspace=" + lc("umount2", b"/workspace", 2))
say("chroot=" + attempt(os.chroot, "/tmp"))
say("pivot_root=" + sc(155, b"/tmp", b"/tmp"))
say("open_tree=" + sc(428, -100, b"/workspace", 1))
say("fsopen=" + sc(430, b"tmpfs", 0))
say("statvfs_control=" + attempt(os.statvfs, "/tmp"))
'''


def test_mount_family_is_denied(lvl):
    res, rec = attack(lvl.sandbox(), MOUNTS)
    expect(res, {"mount_tmpfs": "errno=EPERM", "mount_bind": "errno=EPERM", "remount_usr_rw": "errno=EPERM",
                 "umount_workspace": "errno=EPERM", "chroot": "errno=EPERM", "pivot_root": "errno=EPERM",
                 "open_tree": "errno=EPERM", "fsopen": "errno=EPERM", "statvfs_control": "ok"}, rec)


NAMESPACES = r'''
CLONE_FILES, CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x400, 0x20000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
for name, flag in (("user", CLONE_NEWUSER), ("net", CLONE_NEWNET), ("mnt", CLONE_NEWNS), ("pid", CLONE_NEWPID),
                   ("uts", CLONE_NEWUTS), ("ipc", CLONE_NEWIPC), ("cgroup", CLONE_NEWCGROUP),
                   ("user_net", CLONE_NEWUSER | CLONE_NEWNET)):
    say("unshare_" + name + "=" + lc("unshare", flag))
say("unshare_files_control=" + lc("unshare", CLONE_FILES))
say("setns=" + lc("setns", 0, 0))
say("clone3=" + sc(435, 0, 0))
'''


def test_namespace_creation_is_denied(lvl):
    res, rec = attack(lvl.sandbox(), NAMESPACES)
    want = {f"unshare_{n}": "errno=EPERM" for n in ("user", "net", "mnt", "pid", "uts", "ipc", "cgroup", "user_net")}
    want.update({"unshare_files_control": "ok", "setns": "errno=EPERM", "clone3": "errno=ENOSYS"})
    expect(res, want, rec)


def test_unshare_tool_fails_user_and_net(lvl):
    s = lvl.sandbox()
    rec = sh(s, "unshare -U true; echo user=$?; unshare -n true; echo net=$?; unshare -Urn true; echo both=$?; "
                "unshare true; echo control=$?")
    assert rec["stdout"] == "user=1\nnet=1\nboth=1\ncontrol=0\n", brief(rec)
    assert rec["stderr"].count("Operation not permitted") >= 3, brief(rec)


KEYRING = r'''
KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING = -4, -3
say("keyctl_get_user=" + sc(250, 0, KEY_SPEC_USER_KEYRING, 1))
say("keyctl_join_session=" + sc(250, 1, None))
say("keyctl_read_user=" + sc(250, 11, KEY_SPEC_USER_KEYRING, None, 0))
say("add_key=" + sc(248, b"user", b"sandloom-escape", b"secret", 6, KEY_SPEC_USER_KEYRING))
say("request_key=" + sc(249, b"user", b"sandloom-escape", None, KEY_SPEC_SESSION_KEYRING))
say("getpid_control=" + sc(39))
'''


def test_kernel_keyring_is_denied(lvl):
    res, rec = attack(lvl.sandbox(), KEYRING)
    expect(res, {"keyctl_get_user": "errno=EPERM", "keyctl_join_session": "errno=EPERM",
                 "keyctl_read_user": "errno=EPERM", "add_key": "errno=EPERM", "request_key": "errno=EPERM",
                 "getpid_control": "ok"}, rec)


TTY = r'''
import fcntl, termios, struct
say("dev_tty=" + attempt(os.open, "/dev/tty", os.O_RDWR))
master, slave = os.openpty()
say("tiocsti_slave=" + attempt(fcntl.ioctl, slave, termios.TIOCSTI, b"x"))
say("tiocsti_master=" + attempt(fcntl.ioctl, master, termios.TIOCSTI, b"x"))
say("tiocgwinsz_control=" + attempt(fcntl.ioctl, slave, termios.TIOCGWINSZ, b"\0" * 8))
pid = os.fork()
if pid == 0:                            # a pty as our controlling terminal: still no TIOCSTI
    os.setsid()
    try:
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        r = attempt(fcntl.ioctl, slave, termios.TIOCSTI, b"x")
    except OSError as e:
        r = "sctty-" + ename(e.errno)
    say("tiocsti_ctty=" + r)
    os._exit(0)
os.waitpid(pid, 0)
'''


def test_tiocsti_is_denied(lvl):
    res, rec = attack(lvl.sandbox(), TTY)
    expect(res, {"dev_tty": "errno=ENXIO", "tiocsti_slave": "errno=EPERM", "tiocsti_master": "errno=EPERM",
                 "tiocgwinsz_control": "ok", "tiocsti_ctty": "errno=EPERM"}, rec)


HOSTNAME = r'''
say("nodename=" + os.uname().nodename)
say("sethostname=" + lc("sethostname", b"sandloom-evil", 13))
say("setdomainname=" + lc("setdomainname", b"sandloom-evil", 13))
say("nodename_after=" + os.uname().nodename)
'''


def test_hostname_cannot_be_changed(lvl):
    s = lvl.sandbox()
    before = socket.gethostname()
    res, rec = attack(s, HOSTNAME)
    expect(res, {"nodename": s.id.lower(), "sethostname": "errno=EPERM", "setdomainname": "errno=EPERM",
                 "nodename_after": s.id.lower()}, rec)
    rec = sh(s, "hostname sandloom-evil; echo rc=$?")
    assert rec["stdout"] == "rc=1\n", brief(rec)
    assert socket.gethostname() == before


NETWORK = r'''
import socket
def conn(host, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect((host, port))
        return "ok"
    except OSError as e:
        return ename(e.errno)
    finally:
        s.close()
port = int(sys.argv[1])
say("daemon_port=" + conn("127.0.0.1", port))
say("daemon_port_localhost=" + conn("localhost", port))
say("host_service=" + conn(sys.argv[2], int(sys.argv[3])) if sys.argv[2] else "host_service=none")
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(1)
say("loopback_control=" + conn("127.0.0.1", l.getsockname()[1]))
'''


def _host_address():
    """A non-loopback IPv4 address of this host, or ''."""
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            addr = parts[parts.index("inet") + 1].split("/")[0]
            if not addr.startswith("127."):
                return addr
    return ""


@pytest.fixture
def host_listener():
    """A TCP service on all of the host's addresses (the daemon listens on 127.0.0.1 only)."""
    ls = socket.socket()
    ls.bind(("0.0.0.0", 0))
    ls.listen(16)
    yield ls.getsockname()[1]
    ls.close()


def test_daemon_port_and_host_services_are_unreachable_in_none_mode(lvl, host_listener):
    s = lvl.sandbox()
    port = lvl.client.port
    addr = _host_address()
    res, rec = attack(s, NETWORK, port, addr, host_listener)
    want = {"daemon_port": "errno=ECONNREFUSED", "daemon_port_localhost": "errno=ECONNREFUSED",
            "loopback_control": "ok"}
    if addr:
        want["host_service"] = "errno=ENETUNREACH"
    expect(res, want, rec)


def test_host_network_mode_reaches_the_host_positive_control(iso, tmp_path, host_listener):
    d, _ = start_level_daemon(str(tmp_path / "host-mode"), iso.runtime, iso.level, SANDBOX_NETWORK_MODE="host")
    try:
        from helpers import Sandbox
        s = Sandbox.create(d.client())
        res, rec = attack(s, NETWORK, d.client().port, "127.0.0.1", host_listener)
        expect(res, {"daemon_port": "ok", "host_service": "ok", "loopback_control": "ok"}, rec)
        s.release()
    finally:
        problems = finish_daemons([d])
    assert not problems, problems


# --- kernel state left behind by a released sandbox ----------------------------------------------

def _plant_user_key(uid):
    """As root on the host: a key in UID's user keyring, as a process of that uid could have
    left it (sandboxes cannot: keyctl is denied inside). Returns True if /proc/key-users lists UID."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            r = libc.syscall(ctypes.c_long(248), b"user", b"sandloom-leftover", b"secret", ctypes.c_long(6),
                             ctypes.c_long(-4))
            os._exit(0 if r >= 0 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    with open("/proc/key-users") as f:
        listed = any(line.split(":")[0].strip() == str(uid) for line in f)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and listed


def _resolve_until(c, want_status, timeout=15.0):
    import time
    deadline = time.monotonic() + timeout
    while True:
        s = Sandbox(c)
        r = s.resolve()
        if r.status == want_status or time.monotonic() > deadline:
            return s, r
        time.sleep(0.2)


def test_uid_with_a_leftover_kernel_key_is_not_given_to_the_next_sandbox(daemon_factory):
    import random
    # A uid range of two, far outside the default pool: the planted key stays in the kernel.
    start = 2_100_000_000 + random.randrange(0, 1_000_000) * 2
    d = daemon_factory(env={"SANDBOX_UID_START": str(start), "SANDBOX_UID_END": str(start + 1),
                            "SANDBOX_UID_QUARANTINE_SECONDS": "0"})
    c = d.client()
    first = [Sandbox.create(c) for _ in range(2)]
    assert {s.uid for s in first} == {start, start + 1}
    for s in first:
        assert_ok(s.release())
    # Positive control: with nothing left behind, both released uids come back (quarantine 0).
    again = []
    for _ in range(2):
        s, r = _resolve_until(c, 200)
        assert_ok(r)
        assert_ok(s.connect())
        again.append(s)
    assert {s.uid for s in again} == {start, start + 1}
    # A key appears for one uid while its sandbox is live (as its processes could have left it),
    # then both sandboxes are released.
    tainted = again[0].uid
    assert _plant_user_key(tainted), "could not plant a key for the sandbox's uid (positive control)"
    for s in again:
        assert_ok(s.release())
    s, r = _resolve_until(c, 200)
    assert_ok(r)
    assert s.uid == start + start + 1 - tainted, f"got uid {s.uid}"
    # The tainted uid is never handed out: the pool is exhausted instead.
    third = Sandbox(c)
    r = third.resolve()
    assert r.status == 503 and b"SANDBOX_UID_EXHAUSTED" in r.body, f"a uid with a leftover key was reused: {r!r}"
    s.release()
