# SPDX-License-Identifier: MIT
"""Escapes through the filesystem, from inside sandboxes at every isolation level: another
sandbox's files by their host path, symlinks planted by an exec and followed by the files API, the
daemon's data directory / token / database, writes to system directories, masked /etc secrets,
and setuid binaries. Each attack asserts the exact errno, beside a positive control."""

import glob
import os
import shutil
import subprocess

from helpers import assert_ok, read_tar, make_tar, sandbox_fs_dir, snapshot
from exec_helpers import brief, marker, sh
from escape_helpers import attack, expect

OTHER_FILES = r'''
other_ws, data = sys.argv[1], sys.argv[2]
say("read_own=" + open("/workspace/own.txt").read())
say("write_own=" + attempt(lambda: open("/workspace/new.txt", "w").write("x")))
say("read_other=" + attempt(lambda: open(other_ws + "/secret.txt").read()))
say("write_other=" + attempt(lambda: open(other_ws + "/planted.txt", "w").write("x")))
say("list_other=" + attempt(os.listdir, other_ws))
say("stat_other=" + attempt(os.stat, other_ws))
say("list_data=" + attempt(os.listdir, data))
say("list_sandboxes=" + attempt(os.listdir, data + "/sandboxes"))
say("open_by_dotdot=" + attempt(os.listdir, "/workspace/../../../../.." + other_ws))
'''


def test_other_sandboxs_files_by_host_path(lvl):
    a, b = lvl.sandbox(), lvl.sandbox()
    secret = marker()
    a.write("own.txt", "own-" + secret)
    b.write("secret.txt", secret)
    other_ws = os.path.join(sandbox_fs_dir(lvl.data_dir, b.uid), "workspace")
    # Positive control: the host path is real and holds the secret.
    with open(os.path.join(other_ws, "secret.txt")) as f:
        assert f.read() == secret
    res, rec = attack(a, OTHER_FILES, other_ws, lvl.data_dir)
    expect(res, {"read_own": "own-" + secret, "write_own": "ok",
                 "read_other": "errno=ENOENT", "write_other": "errno=ENOENT", "list_other": "errno=ENOENT",
                 "stat_other": "errno=ENOENT", "list_data": "errno=ENOENT", "list_sandboxes": "errno=ENOENT",
                 "open_by_dotdot": "errno=ENOENT"}, rec)
    assert secret not in rec["stdout"].replace("own-" + secret, "")
    assert not os.path.exists(os.path.join(other_ws, "planted.txt"))


DAEMON_FILES = r'''
data, token_path, db = sys.argv[1], sys.argv[2], sys.argv[3]
say("token=" + attempt(lambda: open(token_path).read()))
say("db=" + attempt(lambda: open(db, "rb").read(16)))
say("data=" + attempt(os.listdir, data))
say("proc_daemon_environ=" + attempt(lambda: open("/proc/%s/environ" % sys.argv[4], "rb").read()))
say("proc_daemon_root=" + attempt(os.listdir, "/proc/%s/root/" % sys.argv[4]))
say("proc_daemon_cwd=" + attempt(os.listdir, "/proc/%s/cwd/" % sys.argv[4]))
say("env_has_sandbox_vars=" + str(any(k.startswith("SANDBOX_") for k in os.environ)))
'''


def test_daemon_token_database_and_data_are_unreachable(lvl):
    s = lvl.sandbox()
    d = lvl.daemon
    token_path = os.path.join(d.data_dir, "token")
    with open(token_path) as f:                         # positive control: the token file is real
        assert f.read().strip() == d.token
    dbs = [p for p in glob.glob(os.path.join(d.data_dir, "*")) if os.path.isfile(p) and
           open(p, "rb").read(16) == b"SQLite format 3\x00"]
    assert dbs, f"no SQLite database found in {os.listdir(d.data_dir)}"
    res, rec = attack(s, DAEMON_FILES, d.data_dir, token_path, dbs[0], d.proc.pid)
    expect(res, {"token": "errno=ENOENT", "db": "errno=ENOENT", "data": "errno=ENOENT",
                 "proc_daemon_environ": "errno=ENOENT", "proc_daemon_root": "errno=ENOENT",
                 "proc_daemon_cwd": "errno=ENOENT", "env_has_sandbox_vars": "False"}, rec)
    assert d.token not in rec["stdout"] + rec["stderr"]
    # The token appears in no file the sandbox can read (grep reads the token from stdin; only file
    # names are printed, never the token).
    rec = sh(s, "grep -rslF -f - /etc /workspace /home /cache /envs /tmp /dev/shm; echo rc=$?",
             stdin=d.token + "\n")
    assert rec["stdout"].splitlines()[-1] in ("rc=1", "rc=2") and rec["stdout"].count("\n") == 1, brief(rec)


def test_symlink_planted_by_an_exec_is_not_followed_by_the_files_api(lvl, decoy):
    dpath, mark = decoy
    s = lvl.sandbox()
    before = snapshot(dpath)
    # Positive control: the sandbox uid itself could read a canary by its host path on the host, so a
    # resolver that followed the links (even under the sandbox's fsuid) would reach it.
    r = subprocess.run(["/bin/cat", os.path.join(dpath, "file.txt")], user=s.uid, group=s.uid, extra_groups=[],
                       capture_output=True, timeout=10)
    assert r.returncode == 0 and mark.encode() in r.stdout
    rec = sh(s, f"ln -s {dpath} dlink && ln -s {dpath}/file.txt flink && ln -s ../../../../../../..{dpath} rlink && "
                f"mkdir -p real/sub && echo inside > real/f.txt && ln -s real good && ln -s /workspace/real/f.txt agood "
                f"&& echo planted")
    assert rec["status"] == "SUCCEEDED", brief(rec)
    # Positive controls: links inside the sandbox work through the API.
    assert s.read("good/f.txt") == b"inside\n"
    assert s.read("agood") == b"inside\n"

    canary = f"CANARY-{mark}".encode()           # the content of every canary file

    def refused(r, what):
        assert r.status in (400, 404, 409), f"{what}: {r!r}"
        assert canary not in r.body, f"{what}: a canary leaked: {r.body[:300]!r}"

    for p in ("flink", "dlink/file.txt", "rlink/file.txt", "dlink/sub/inner.txt", f"dlink/canary-{mark}.txt"):
        refused(s.files_get(p), f"read {p}")
        refused(s.raw_get(p), f"raw read {p}")
        if "/" in p:
            refused(s.stat(p), f"stat {p}")
    for p in ("dlink", "rlink", "dlink/sub"):
        r = s.list(p)
        refused(r, f"list {p}")
        assert f"canary-{mark}".encode() not in r.body, f"list {p} showed the decoy's names"
        r = s.archive_get(p)
        assert canary not in r.body, f"archive of {p} leaked a canary"
        assert r.status in (400, 404, 409), f"archive {p}: {r!r}"
    for p in ("dlink/file.txt", "rlink/file.txt", "dlink/new.txt", "dlink/sub/deep/x.txt"):
        r = s.files_put(p, b"pwned")
        assert r.status in (400, 404, 409), f"write {p}: {r!r}"
        r = s.raw_put(p, b"pwned")
        assert r.status in (400, 404, 409), f"raw write {p}: {r!r}"
    r = s.files_put("flink", b"replaces the link, never its target")
    assert r.status in (200, 400, 409), r
    for p in ("dlink/file.txt", "rlink/sub/inner.txt", "dlink/sub"):
        r = s.delete(p, recursive=True)
        assert r.status in (400, 404, 409), f"delete {p}: {r!r}"
    r = s.move("dlink/moved.txt", "stolen.txt")
    assert r.status in (400, 404, 409), f"move out of the decoy: {r!r}"
    r = s.move("real/f.txt", "dlink/f.txt")
    assert r.status in (400, 404, 409), f"move into the decoy: {r!r}"
    tar = make_tar([{"name": "file.txt", "data": b"overwritten"}, {"name": "planted.txt", "data": b"x"}])
    for p in ("dlink", "rlink", "dlink/sub"):
        r = s.archive_put(p, tar)
        assert r.status in (400, 404, 409), f"archive upload into {p}: {r!r}"
    # The whole workspace as an archive: the links are links, the canaries are not in it.
    r = s.archive_get("/workspace")
    assert_ok(r)
    members = read_tar(r.body)
    assert canary not in r.body
    through = [k for k in members if "dlink/" in k or "rlink/" in k]
    assert not through, f"the archive followed the links: {through}"
    # Deleting the links removes the links only.
    for p in ("dlink", "rlink"):
        r = s.delete(p, recursive=True)
        assert r.status in (200, 400, 409), f"delete link {p}: {r!r}"
    assert snapshot(dpath) == before, "the decoy changed"
    assert sorted(os.listdir(dpath)) == sorted(before_names(before)), "something appeared in the decoy"


def before_names(snap):
    return {k.split("/")[0] for k in snap}


SYSTEM_DIRS = r'''
say("create_usr=" + attempt(open, "/usr/sandloom-escape", "w"))
say("create_usr_bin=" + attempt(open, "/usr/bin/sandloom-escape", "w"))
say("create_etc=" + attempt(open, "/etc/sandloom-escape", "w"))
say("write_passwd=" + attempt(open, "/etc/passwd", "a"))
say("unlink_usr_bin=" + attempt(os.unlink, "/usr/bin/id"))
say("chmod_usr_bin=" + attempt(os.chmod, "/usr/bin/id", 0o4777))
say("rename_etc=" + attempt(os.rename, "/etc/hosts", "/etc/hosts2"))
say("mkdir_root=" + attempt(os.mkdir, "/sandloom-escape"))
say("read_shadow=" + attempt(lambda: open("/etc/shadow").read()))
say("read_gshadow=" + attempt(lambda: open("/etc/gshadow").read()))
say("read_hosts=" + attempt(lambda: open("/etc/hosts").read()))
say("write_workspace=" + attempt(lambda: open("/workspace/w", "w").write("x")))
say("write_tmp=" + attempt(lambda: open("/tmp/w", "w").write("x")))
say("write_home=" + attempt(lambda: open("/home/sandbox/w", "w").write("x")))
'''


def test_system_directories_are_read_only_and_secrets_masked(lvl):
    s = lvl.sandbox()
    assert os.path.exists("/etc/shadow") and os.path.exists("/etc/gshadow")
    res, rec = attack(s, SYSTEM_DIRS)
    expect(res, {"create_usr": "errno=EROFS", "create_usr_bin": "errno=EROFS", "create_etc": "errno=EROFS",
                 "write_passwd": "errno=EACCES", "unlink_usr_bin": "errno=EROFS", "chmod_usr_bin": "errno=EROFS",
                 "rename_etc": "errno=EROFS", "mkdir_root": "errno=EROFS",
                 "read_shadow": "errno=EACCES", "read_gshadow": "errno=EACCES",
                 "read_hosts": "ok", "write_workspace": "ok", "write_tmp": "ok", "write_home": "ok"}, rec)
    for p in ("/usr/sandloom-escape", "/usr/bin/sandloom-escape", "/etc/sandloom-escape", "/sandloom-escape"):
        assert not os.path.exists(p), f"{p} appeared on the host"
    assert os.path.exists("/usr/bin/id") and os.stat("/usr/bin/id").st_mode & 0o7777 == 0o755


def test_setuid_root_binary_gives_no_root(lvl):
    s = lvl.sandbox()
    ws = os.path.join(sandbox_fs_dir(lvl.data_dir, s.uid), "workspace")
    for name, src, mode in (("suid-id", "/usr/bin/id", 0o4755), ("suid-py", os.path.realpath("/usr/bin/python3"), 0o6755)):
        dst = os.path.join(ws, name)
        shutil.copyfile(src, dst)
        os.chown(dst, 0, 0)
        os.chmod(dst, mode)
    rec = sh(s, "stat -c '%a %u %g' suid-id suid-py; ./suid-id; "
                "./suid-py -c 'import os; print(os.getresuid(), os.getresgid())'")
    u = s.uid
    lines = rec["stdout"].splitlines()
    # Positive control: the bits are there as the sandbox sees the files (root shows as 0, or as the
    # overflow id 65534 inside bwrap's user namespace).
    assert len(lines) == 4 and lines[0].split()[0] == "4755" and lines[1].split()[0] == "6755", brief(rec)
    for line in lines[:2]:
        assert set(line.split()[1:]) <= {"0", "65534"}, brief(rec)
    assert lines[2:] == [f"uid={u}(sandbox) gid={u}(sandbox) groups={u}(sandbox)", f"({u}, {u}, {u}) ({u}, {u}, {u})"], \
        brief(rec)
