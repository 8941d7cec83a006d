# SPDX-License-Identifier: MIT
"""The `sandloom sandbox|exec|fs` CLI against the real daemon: every subcommand in text and
--json, exit statuses (the command's own through `exec`), live streaming, re-attaching a dropped
stream without running twice, Ctrl-C, errors as one line with a code, where the URL and token
come from (flags, environment, a data directory), and byte-exact binary files through put/get.
Every run checks that the token appears in neither stdout nor stderr."""

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import BINARY, clean_env
from helpers import API, assert_ok, unique_id, wait_until

# The client under test; by default the daemon's own binary (SANDLOOM_CLI_BINARY runs, say, a
# sanitizer build of the client against a normal daemon).
CLI = os.path.abspath(os.environ.get("SANDLOOM_CLI_BINARY", BINARY))
SANDBOX_VERBS = ("create", "ls", "show", "rm", "audit")
FS_VERBS = ("ls", "stat", "cat", "get", "put", "rm", "mv", "mkdir")


class Cli:
    """Runs the binary with the daemon's URL and token in the environment (unless told otherwise)."""

    def __init__(self, daemon):
        self.daemon = daemon

    def env(self, extra=None, auth=True):
        e = clean_env()
        if auth:
            e["SANDBOX_BASE_URL"] = self.daemon.url
            e["SANDBOX_INTERNAL_TOKEN"] = self.daemon.token
        e.update(extra or {})
        return e

    def __call__(self, *args, env=None, auth=True, input=None, timeout=120, cwd=None, check=None):
        p = subprocess.run([CLI, *args], input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=self.env(env, auth), timeout=timeout, cwd=cwd)
        self.no_token(p)
        if check is not None:
            assert p.returncode == check, f"{args}: rc {p.returncode} != {check}; stderr {p.stderr[-2000:]!r}"
        return p

    def ok(self, *args, **kw):
        return self(*args, check=0, **kw)

    def json(self, *args, **kw):
        return json.loads(self.ok(*args, "--json", **kw).stdout)

    def popen(self, *args, env=None, **kw):
        return subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env(env),
                                **kw)

    def no_token(self, p):
        token = self.daemon.token.encode()
        assert token not in p.stdout and token not in p.stderr, "the token was printed"


def assert_error(p, code, rc=1):
    """One line on stderr, "sandloom: CODE: message", and exit status RC."""
    err = p.stderr.decode()
    assert p.returncode == rc, f"rc {p.returncode} != {rc}; stderr {err!r}"
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith(f"sandloom: {code}: "), f"expected code {code}: {err!r}"
    return err


def assert_usage(p):
    err = p.stderr.decode()
    assert p.returncode == 2, f"rc {p.returncode}; stderr {err!r}"
    assert err.startswith("sandloom ") and "--help" in err, err
    return err


@pytest.fixture
def cli(daemon):
    return Cli(daemon)


@pytest.fixture
def sbx(sandbox):
    """A READY sandbox made through the API (the CLI's own create is tested separately)."""
    return sandbox


# ---------------------------------------------------------------- help and usage

def test_help_on_every_command_without_a_daemon(cli):
    env = {}   # no URL, no token: help needs neither
    top = cli.ok("--help", auth=False, env=env).stdout.decode()
    for name in ("sandbox", "exec", "fs"):
        assert re.search(rf"^  {name} ", top, re.M), top
    for group, verbs in (("sandbox", SANDBOX_VERBS), ("fs", FS_VERBS)):
        out = cli.ok(group, "--help", auth=False).stdout.decode()
        assert out.startswith(f"Usage: sandloom {group} COMMAND")
        for verb in verbs:
            assert re.search(rf"^  {verb} ", out, re.M), f"{group} --help lacks {verb}: {out}"
            for flag in ("--help", "-h"):
                h = cli.ok(group, verb, flag, auth=False).stdout.decode()
                assert h.startswith(f"Usage: sandloom {group} {verb} "), h
                for opt in ("--url", "--token", "--data-dir", "--help"):
                    assert opt in h, f"{group} {verb} --help lacks {opt}"
                assert ("--json" in h) == (verb != "cat"), f"{group} {verb}: --json in help"
    h = cli.ok("exec", "--help", auth=False).stdout.decode()
    assert h.startswith("Usage: sandloom exec ")
    for opt in ("--cwd", "--env", "--timeout", "--scope", "--exec-id", "--stdin", "--json", "124", "128+N"):
        assert opt in h, f"exec --help lacks {opt}"
    # --help wins over everything else on the line, also after other arguments
    assert cli.ok("fs", "put", "some-id", "x", "--help", auth=False).stdout.startswith(b"Usage: sandloom fs put")


@pytest.mark.parametrize("args", [
    ("sandbox",),
    ("sandbox", "frobnicate"),
    ("fs", "nope"),
    ("sandbox", "show"),
    ("sandbox", "show", "a", "b"),
    ("sandbox", "ls", "--bogus"),
    ("sandbox", "create", "--scope"),
    ("sandbox", "ls", "--json=yes"),
    ("fs", "mv", "id", "only-one"),
    ("fs", "cat", "id", "f", "--json"),
    ("fs", "ls", "-lx", "id"),
    ("exec",),
    ("exec", "id"),
    ("exec", "id", "--"),
    ("exec", "--", "true"),
    ("exec", "id", "--timeout", "0", "--", "true"),
    ("exec", "id", "--timeout", "abc", "--", "true"),
    ("exec", "id", "--env", "NOEQUALS", "--", "true"),
])
def test_usage_errors_exit_2(cli, args):
    assert_usage(cli(*args))


# ---------------------------------------------------------------- sandbox

def test_sandbox_create_ls_show_audit_rm(cli, client):
    sid = unique_id("cli")
    out = cli.ok("sandbox", "create", sid).stdout.decode()
    assert out == f"{sid} 1\n"
    # idempotent from the same (default) scope
    assert cli.ok("sandbox", "create", sid).stdout.decode() == f"{sid} 1\n"
    rec = cli.json("sandbox", "create", sid)
    assert rec["sandbox_id"] == sid and rec["status"] == "READY" and rec["generation"] == 1
    assert rec["workspace_scope_id"] == "default"

    table = cli.ok("sandbox", "ls").stdout.decode().splitlines()
    assert table[0].split() == ["SANDBOX_ID", "STATUS", "GEN", "SCOPE", "CREATED"]
    row = [line.split() for line in table[1:] if line.split()[0] == sid]
    assert row and row[0][1:4] == ["READY", "1", "default"], table
    listed = cli.json("sandbox", "ls")
    assert listed["total"] == len(listed["sandboxes"])
    assert sid in [s["sandbox_id"] for s in listed["sandboxes"]]
    assert sid in [s["sandbox_id"] for s in cli.json("sandbox", "ls", "--scope", "default")["sandboxes"]]
    other = unique_id("cli")
    assert cli.json("sandbox", "create", other, "--scope", other)["workspace_scope_id"] == other
    assert [s["sandbox_id"] for s in cli.json("sandbox", "ls", "-s", other)["sandboxes"]] == [other]
    cli.ok("sandbox", "rm", other)

    show = cli.ok("sandbox", "show", sid).stdout.decode()
    assert re.search(r"^status: +READY$", show, re.M) and re.search(rf"^sandbox_id: +{sid}$", show, re.M), show
    assert cli.json("sandbox", "show", sid)["sandbox_uid"] == rec["sandbox_uid"]

    audit = cli.ok("sandbox", "audit", sid).stdout.decode().splitlines()
    assert audit[0].split()[:3] == ["SEQ", "AT", "EVENT"]
    assert [line.split()[2] for line in audit[1:]] == ["created", "connected"]
    events = cli.json("sandbox", "audit", sid)
    assert events["sandbox_id"] == sid and [e["event"] for e in events["events"]] == ["created", "connected"]

    assert cli.ok("sandbox", "rm", sid, "--reason", "done by cli").stdout.decode() == f"{sid} RELEASED\n"
    assert cli.json("sandbox", "show", sid)["status"] == "RELEASED"
    assert sid not in [s["sandbox_id"] for s in cli.json("sandbox", "ls")["sandboxes"]]
    assert sid in [s["sandbox_id"] for s in cli.json("sandbox", "ls", "--all")["sandboxes"]]
    assert sid in [s["sandbox_id"] for s in cli.json("sandbox", "ls", "--status", "RELEASED")["sandboxes"]]
    released = [e for e in cli.json("sandbox", "audit", sid)["events"] if e["event"] == "releasing"]
    assert released and released[0]["reason"] == "done by cli"
    # releasing an unknown sandbox answers RELEASED, as the API does
    assert cli.json("sandbox", "rm", unique_id("never"))["status"] == "RELEASED"


def test_sandbox_create_makes_up_an_id(cli, client):
    out = cli.ok("sandbox", "create").stdout.decode()
    m = re.fullmatch(r"(sbx-[0-9a-f]{12}) 1\n", out)
    assert m, out
    assert_ok(client.get(f"{API}/{m.group(1)}"))
    cli.ok("sandbox", "rm", m.group(1))


def test_sandbox_errors_carry_the_code(cli):
    sid = unique_id("cli")
    cli.ok("sandbox", "create", sid, "--scope", "scope-a")
    assert_error(cli("sandbox", "create", sid, "--scope", "scope-b"), "SANDBOX_SCOPE_MISMATCH")
    assert_error(cli("sandbox", "show", unique_id("missing")), "SANDBOX_NOT_FOUND")
    assert_error(cli("sandbox", "audit", unique_id("missing")), "SANDBOX_NOT_FOUND")
    assert_error(cli("sandbox", "create", "bad id with spaces"), "SANDBOX_INVALID_REQUEST")
    assert_error(cli("sandbox", "ls", "--status", "SLEEPY"), "SANDBOX_INVALID_REQUEST")
    cli.ok("sandbox", "rm", sid)


# ---------------------------------------------------------------- exec

@pytest.mark.parametrize("argv,rc", [
    (["true"], 0),
    (["sh", "-c", "exit 3"], 3),
    (["sh", "-c", "exit 255"], 255),
    (["sh", "-c", "kill -9 $$"], 128 + 9),
    (["sh", "-c", "kill -TERM $$"], 128 + 15),
    (["no-such-command-xyz"], 127),
    (["/workspace"], 126),
])
def test_exec_exits_with_the_commands_status(cli, sbx, argv, rc):
    p = cli("exec", sbx.id, "--", *argv)
    assert p.returncode == rc, (p.returncode, p.stderr)
    rec = cli("exec", sbx.id, "--json", "--", *argv)
    assert rec.returncode == rc
    assert json.loads(rec.stdout)["sandbox_id"] == sbx.id


def test_exec_timeout_exits_124(cli, sbx):
    p = cli("exec", sbx.id, "--timeout", "1", "--", "sleep", "60")
    assert p.returncode == 124, p.stderr
    p = cli("exec", sbx.id, "--timeout", "1", "--json", "--", "sleep", "60")
    assert p.returncode == 124 and json.loads(p.stdout)["status"] == "TIMED_OUT"


def test_exec_output_streams_byte_exact(cli, sbx):
    p = cli.ok("exec", sbx.id, "--", "sh", "-c", "printf 'out1\\n'; printf 'err1\\n' >&2; printf 'out2'")
    assert p.stdout == b"out1\nout2" and p.stderr == b"err1\n"
    # every byte value, not valid UTF-8: passed through untouched
    data = bytes(range(256)) * 64 + os.urandom(100000)
    sbx.raw_put("bin.dat", data)
    p = cli.ok("exec", sbx.id, "--", "cat", "bin.dat")
    assert p.stdout == data
    p = cli.ok("exec", sbx.id, "--", "sh", "-c", "cat bin.dat >&2")
    assert p.stderr == data and p.stdout == b""


def test_exec_options_cwd_env_stdin(cli, sbx, tmp_path):
    sbx.mkdir("sub/dir", parents=True)
    p = cli.ok("exec", sbx.id, "--cwd", "sub/dir", "--env", "A=1", "-e", "B=x=y", "--", "sh", "-c", 'pwd; echo "$A $B"')
    assert p.stdout == b"/workspace/sub/dir\n1 x=y\n"
    # options may also follow the id without --; the command starts at the first non-option
    p = cli.ok("exec", sbx.id, "-w", "/home/sandbox", "pwd")
    assert p.stdout == b"/home/sandbox\n"
    p = cli.ok("exec", sbx.id, "ls", "-la", "/workspace")
    assert b"sub" in p.stdout
    blob = os.urandom(300000)
    (tmp_path / "in.bin").write_bytes(blob)
    assert cli.ok("exec", sbx.id, "--stdin", str(tmp_path / "in.bin"), "--", "sha256sum").stdout.split()[0] == \
        hashlib.sha256(blob).hexdigest().encode()
    assert cli.ok("exec", sbx.id, "--stdin", "-", "--", "cat", input=b"piped\x00in").stdout == b"piped\x00in"
    assert cli.ok("exec", sbx.id, "--", "cat").stdout == b""   # no --stdin: /dev/null
    assert_error(cli("exec", sbx.id, "--stdin", str(tmp_path / "missing"), "--", "cat"), "CLI_LOCAL_FILE")


def test_exec_json_prints_the_record(cli, sbx):
    p = cli("exec", sbx.id, "--json", "--exec-id", "json-1", "--", "sh", "-c", "echo hi; echo oops >&2; exit 4")
    assert p.returncode == 4
    rec = json.loads(p.stdout)
    assert rec["exec_id"] == "json-1" and rec["status"] == "FAILED" and rec["exit_code"] == 4
    assert rec["stdout"] == "hi\n" and rec["stderr"] == "oops\n"
    assert p.stderr == b""


def test_exec_errors_carry_the_code(cli, sbx, client):
    assert_error(cli("exec", unique_id("missing"), "--", "true"), "SANDBOX_NOT_FOUND")
    assert_error(cli("exec", sbx.id, "--cwd", "/etc", "--", "true"), "SANDBOX_INVALID_CWD")
    assert_error(cli("exec", sbx.id, "--env", "1BAD=x", "--", "true"), "SANDBOX_INVALID_REQUEST")
    # a scope held by another exec
    r = assert_ok(client.post(f"{sbx.base}/exec", {"generation": sbx.generation, "argv": ["sleep", "60"],
                                                   "background": True, "exec_scope": "busy"}))
    try:
        assert_error(cli("exec", sbx.id, "--scope", "busy", "--", "true"), "SANDBOX_EXEC_SCOPE_BUSY")
        assert_error(cli("exec", sbx.id, "--scope", "busy", "--json", "--", "true"), "SANDBOX_EXEC_SCOPE_BUSY")
        assert cli.ok("exec", sbx.id, "--scope", "other", "--", "echo", "parallel").stdout == b"parallel\n"
    finally:
        client.post(f"{sbx.base}/exec/{r['exec_id']}/cancel", {"generation": sbx.generation})


def test_exec_same_exec_id_never_runs_twice(cli, sbx):
    cmd = ["sh", "-c", "echo ran >> /workspace/runs; echo output; exit 5"]
    first = cli("exec", sbx.id, "--exec-id", "once-1", "--", *cmd)
    second = cli("exec", sbx.id, "--exec-id", "once-1", "--", *cmd)
    assert first.returncode == second.returncode == 5
    assert first.stdout == second.stdout == b"output\n"
    assert sbx.read("runs") == b"ran\n"
    # the same id for another command is refused
    assert_error(cli("exec", sbx.id, "--exec-id", "once-1", "--", "true"), "EXEC_ID_CONFLICT")


def test_exec_streams_live(cli, sbx):
    """The first line arrives while the command still runs: it waits for a file that the test
    writes only after reading that line (no timing involved)."""
    p = cli.popen("exec", sbx.id, "--", "sh", "-c",
                  "echo first; echo e1 >&2; while [ ! -e /workspace/go ]; do sleep 0.05; done; echo second")
    try:
        line = _readline(p.stdout, 60)
        assert line == b"first\n"
        assert p.poll() is None, "the CLI ended before the command could"
        sbx.write("go", b"")
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0 and out == b"second\n" and err == b"e1\n"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_ctrl_c_cancels_the_command(cli, sbx, client):
    p = cli.popen("exec", sbx.id, "--exec-id", "cancel-me", "--", "sh", "-c", "echo started; sleep 120")
    try:
        assert _readline(p.stdout, 60) == b"started\n"
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
        assert p.returncode == 130
        rec = assert_ok(client.get(f"{sbx.base}/exec/cancel-me", query={"generation": sbx.generation}))
        assert rec["status"] == "CANCELLED"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_closed_stdout_cancels_the_command(cli, sbx, client):
    """`sandloom exec ID -- yes | head -1`: the reader goes away, the command must not run on."""
    p = cli.popen("exec", sbx.id, "--exec-id", "piped-1", "--", "yes")
    try:
        assert _readline(p.stdout, 60) == b"y\n"
        p.stdout.close()
        p.wait(timeout=60)
        assert p.returncode == 128 + signal.SIGPIPE
        rec = assert_ok(client.get(f"{sbx.base}/exec/piped-1", query={"generation": sbx.generation,
                                                                       "wait_seconds": 30}))
        assert rec["status"] == "CANCELLED"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_unwritable_stdout(cli, sbx, client):
    # /dev/full: the error is reported, the command is cancelled rather than left running
    with open("/dev/full", "wb") as full:
        p = subprocess.run([CLI, "exec", sbx.id, "--exec-id", "full-1", "--", "sh", "-c", "echo x; sleep 120"],
                           stdout=full, stderr=subprocess.PIPE, env=cli.env(), timeout=60)
    assert_error(p, "CLI_LOCAL_FILE")
    rec = assert_ok(client.get(f"{sbx.base}/exec/full-1", query={"generation": sbx.generation, "wait_seconds": 30}))
    assert rec["status"] == "CANCELLED"
    # a closed stdout: nothing is written into whatever the CLI opens next (its HTTP socket)
    p = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", CLI, "exec", sbx.id, "--", "sh", "-c", "echo x; echo y >&2"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli.env(), timeout=60)
    assert p.returncode == 0 and p.stderr == b"y\n", p.stderr


def _readline(pipe, timeout):
    """One line from PIPE, or fail after TIMEOUT seconds (a guard against a hang, not a measurement)."""
    result = []
    t = threading.Thread(target=lambda: result.append(pipe.readline()), daemon=True)
    t.start()
    t.join(timeout)
    assert result, f"no line within {timeout}s"
    return result[0]


class CuttingProxy:
    """A TCP proxy in front of the daemon that drops one connection: by default the first whose
    answer carries an `event: stdout`, right after forwarding it (a stream lost in the middle of
    an exec); with CUT_REQUEST, the first whose request contains it, half a second after
    forwarding the request (the daemon has it, the client never gets an answer). CUTS: how many
    connections to drop (libcurl itself retries once a request that got nothing on a reused
    connection; the second cut reaches the CLI's own retry)."""

    def __init__(self, upstream_port, cut_request=None, cuts=1):
        self.upstream = upstream_port
        self.cut_request = cut_request
        self.cuts_left = cuts
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.cut = threading.Event()
        self.requests = []
        self.lock = threading.Lock()
        self.closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closing:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self.upstream))
            conn = {"dead": False}    # once cut, nothing more is forwarded either way
            threading.Thread(target=self._pump, args=(c, u, False, conn), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, True, conn), daemon=True).start()

    def _should_cut(self, data, answers):
        with self.lock:
            if self.cuts_left == 0:
                return False
            if (answers and self.cut_request is None and b"event: stdout" in data) or \
                    (not answers and self.cut_request is not None and self.cut_request in data):
                self.cuts_left -= 1
                if self.cuts_left == 0:
                    self.cut.set()
                return True
        return False

    def _pump(self, src, dst, answers, conn):
        try:
            while True:
                data = src.recv(65536)
                if not data or conn["dead"]:
                    break
                if not answers:
                    with self.lock:
                        self.requests += re.findall(rb"^(GET|POST|PUT|DELETE) (\S+)", data, re.M)
                cut = self._should_cut(data, answers)
                if cut and not answers:
                    conn["dead"] = True   # before the request goes on: its answer must not come back
                dst.sendall(data)
                if cut:
                    conn["dead"] = True
                    if not answers:
                        time.sleep(0.5)
                    break
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def methods(self, method, fragment):
        with self.lock:
            return [path for m, path in self.requests if m == method and fragment in path]

    def close(self):
        self.closing = True
        self.sock.close()


@pytest.fixture
def proxy_factory(daemon):
    made = []

    def make(**kw):
        p = CuttingProxy(int(daemon.url.rsplit(":", 1)[1]), **kw)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def test_exec_reattaches_a_dropped_stream_without_running_twice(cli, sbx, proxy_factory):
    proxy = proxy_factory()
    proc = subprocess.Popen([CLI, "exec", sbx.id, "--", "sh", "-c",
                             "echo one; echo ran >> /workspace/runs; "
                             "while [ ! -e /workspace/go ]; do sleep 0.05; done; echo two; echo three >&2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli.env({"SANDBOX_BASE_URL": proxy.url}))
    try:
        assert _readline(proc.stdout, 60) == b"one\n"
        assert wait_until(proxy.cut.is_set, timeout=30), "the proxy never cut the stream"
        sbx.write("go", b"")
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    cli.no_token(subprocess.CompletedProcess([], 0, out, err))
    assert proc.returncode == 0, err
    assert out == b"two\n" and err == b"three\n"   # after "one": nothing twice, nothing lost
    assert sbx.read("runs") == b"ran\n"
    events = proxy.methods(b"GET", b"/events?")
    assert events and b"stdout_offset=4" in events[0], proxy.requests


@pytest.mark.parametrize("json_mode", [False, True])
def test_exec_survives_losing_the_answer_to_its_request(cli, sbx, proxy_factory, json_mode):
    """The request reaches the daemon, the connection dies before any answer: the CLI asks again
    (same exec_id), prints the output once, and the command ran once."""
    proxy = proxy_factory(cut_request=b"/exec HTTP/1.1", cuts=2)
    args = ["exec", sbx.id, "--exec-id", f"lost-{int(json_mode)}"] + (["--json"] if json_mode else []) + \
        ["--", "sh", "-c", "echo ran >> /workspace/runs; echo out; echo err >&2; exit 6"]
    p = cli(*args, env={"SANDBOX_BASE_URL": proxy.url})
    assert proxy.cut.is_set()
    assert p.returncode == 6, p.stderr
    if json_mode:
        rec = json.loads(p.stdout)
        assert rec["stdout"] == "out\n" and rec["stderr"] == "err\n" and rec["exit_code"] == 6
    else:
        assert p.stdout == b"out\n" and p.stderr == b"err\n"
    assert sbx.read("runs") == b"ran\n"
    if json_mode:   # then the CLI long-polls the record
        assert proxy.methods(b"GET", b"/exec/lost-1?"), proxy.requests
    else:           # no start event seen: the CLI sends the identical request again
        assert len(proxy.methods(b"POST", b"/exec")) == 3, proxy.requests


# ---------------------------------------------------------------- fs

def test_fs_put_get_cat_binary_byte_exact(cli, sbx, tmp_path):
    data = bytes(range(256)) * 256 + os.urandom(3 * 1024 * 1024 + 17)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    cli.ok("fs", "put", sbx.id, "up/file.bin", str(src), "--parents")
    assert sbx.raw_get("up/file.bin").body == data
    # from stdin (chunked upload), to stdout
    r = cli.json("fs", "put", sbx.id, "/workspace/up/piped.bin", "-", input=data)
    assert r["size_bytes"] == len(data) and r["path"] == "/workspace/up/piped.bin"
    assert cli.ok("fs", "put", sbx.id, "up/empty", input=b"").stdout == b""
    assert cli.ok("fs", "get", sbx.id, "up/piped.bin", "-").stdout == data
    assert cli.ok("fs", "cat", sbx.id, "up/file.bin").stdout == data
    assert cli.ok("fs", "cat", sbx.id, "up/empty").stdout == b""
    # to a named file, into a directory, and by default into the working directory
    cli.ok("fs", "get", sbx.id, "up/file.bin", str(tmp_path / "named.bin"))
    assert (tmp_path / "named.bin").read_bytes() == data
    (tmp_path / "into").mkdir()
    got = cli.json("fs", "get", sbx.id, "up/file.bin", str(tmp_path / "into"))
    assert got["size_bytes"] == len(data) and (tmp_path / "into" / "file.bin").read_bytes() == data
    cli.ok("fs", "get", sbx.id, "/workspace/up/piped.bin", cwd=tmp_path)
    assert (tmp_path / "piped.bin").read_bytes() == data
    # no stray temporary files
    assert sorted(os.listdir(tmp_path)) == ["into", "named.bin", "piped.bin", "src.bin"]


def test_fs_get_failure_leaves_no_file(cli, sbx, tmp_path):
    assert_error(cli("fs", "get", sbx.id, "nope.txt", cwd=tmp_path), "SANDBOX_FILE_NOT_FOUND")
    assert_error(cli("fs", "cat", sbx.id, "nope.txt"), "SANDBOX_FILE_NOT_FOUND")
    sbx.mkdir("adir")
    assert_error(cli("fs", "get", sbx.id, "adir", str(tmp_path / "x")), "SANDBOX_NOT_A_REGULAR_FILE")
    assert os.listdir(tmp_path) == []


RSS_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_fs_large_file_streams_in_bounded_memory(cli, sbx, tmp_path):
    size = 96 * 1024 * 1024
    src = tmp_path / "large.bin"
    chunk = os.urandom(1024 * 1024)
    h = hashlib.sha256()
    with open(src, "wb") as f:
        for i in range(size // len(chunk)):
            piece = chunk[i:] + chunk[:i]
            f.write(piece)
            h.update(piece)
    for args in (("fs", "put", sbx.id, "large.bin", str(src)),
                 ("fs", "get", sbx.id, "large.bin", str(tmp_path / "back.bin"))):
        # The CLI is forked from a small launcher, not from pytest: a child's ru_maxrss counts the
        # pages it shared with its parent at fork (with vfork, the parent's own peak).
        p = subprocess.run([sys.executable, "-c", RSS_LAUNCHER, CLI, *args], env=cli.env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        assert p.returncode == 0, p.stderr
        maxrss_kib = int(p.stdout.split()[-1])
        # far below the file's 96 MiB
        assert maxrss_kib < 48 * 1024, f"{args[1]} used {maxrss_kib} KiB"
    with open(tmp_path / "back.bin", "rb") as f:
        assert hashlib.file_digest(f, "sha256").hexdigest() == h.hexdigest()


def test_fs_ls_stat_mkdir_mv_rm(cli, sbx):
    cli.ok("fs", "mkdir", sbx.id, "d1")
    cli.ok("fs", "mkdir", sbx.id, "-p", "d2/a/b", "d3")
    assert_error(cli("fs", "mkdir", sbx.id, "d1"), "SANDBOX_FILE_EXISTS")
    assert_error(cli("fs", "mkdir", sbx.id, "x/y/z"), "SANDBOX_FILE_NOT_FOUND")
    sbx.write("d1/f.txt", b"hello")
    assert cli.ok("fs", "ls", sbx.id).stdout.decode().splitlines() == ["d1/", "d2/", "d3/"]
    assert cli.ok("fs", "ls", sbx.id, "/workspace/d1").stdout == b"f.txt\n"
    long = cli.ok("fs", "ls", "-l", sbx.id, "d1").stdout.decode()
    assert re.fullmatch(r"- 0644 +5 \S+Z f\.txt\n", long), long
    listing = cli.json("fs", "ls", sbx.id, "d1")
    assert listing["path"] == "/workspace/d1" and listing["total"] == 1
    assert listing["entries"][0]["name"] == "f.txt" and listing["entries"][0]["size_bytes"] == 5
    st = cli.json("fs", "stat", sbx.id, "d1/f.txt")
    assert st["type"] == "file" and st["size_bytes"] == 5 and st["path"] == "/workspace/d1/f.txt"
    assert re.search(r"^type: +file$", cli.ok("fs", "stat", sbx.id, "d1/f.txt").stdout.decode(), re.M)

    cli.ok("fs", "mv", sbx.id, "d1/f.txt", "d3/g.txt")
    assert sbx.read("d3/g.txt") == b"hello"
    sbx.write("d1/other", b"x")
    assert_error(cli("fs", "mv", sbx.id, "d1/other", "d3/g.txt"), "SANDBOX_FILE_EXISTS")
    assert cli.json("fs", "mv", sbx.id, "d1/other", "d3/g.txt", "--force")["status"] == "ok"
    assert sbx.read("d3/g.txt") == b"x"

    assert_error(cli("fs", "rm", sbx.id, "d3"), "SANDBOX_DIRECTORY_NOT_EMPTY")
    cli.ok("fs", "rm", sbx.id, "-r", "d3", "d2")
    cli.ok("fs", "rm", sbx.id, "d1")
    assert cli.ok("fs", "ls", sbx.id).stdout == b""
    assert_error(cli("fs", "rm", sbx.id, "/workspace"), "SANDBOX_PATH_IS_ROOT")
    assert_error(cli("fs", "ls", sbx.id, "/etc"), "SANDBOX_PATH_OUTSIDE_WORKSPACE")
    assert_error(cli("fs", "stat", sbx.id, "missing"), "SANDBOX_FILE_NOT_FOUND")
    assert_error(cli("fs", "ls", unique_id("missing")), "SANDBOX_NOT_FOUND")


def test_fs_ls_reads_every_page(cli, sbx, client):
    n = 450   # more than two default pages of 200
    script = f"i=0; while [ $i -lt {n} ]; do : > /workspace/many/f$i; i=$((i+1)); done"
    sbx.mkdir("many")
    cli.ok("exec", sbx.id, "--", "sh", "-c", script)
    assert len(cli.ok("fs", "ls", sbx.id, "many").stdout.splitlines()) == n
    listing = cli.json("fs", "ls", sbx.id, "many")
    assert listing["total"] == n and len({e["name"] for e in listing["entries"]}) == n


# ---------------------------------------------------------------- where the URL and token come from

def test_url_and_token_from_flags(cli, sbx, tmp_path):
    flags = ("--url", cli.daemon.url, "--token", cli.daemon.token)
    p = cli("fs", "ls", sbx.id, *flags, auth=False)
    assert p.returncode == 0, p.stderr
    token_file = tmp_path / "token"
    token_file.write_text(cli.daemon.token + "\n")
    p = cli("exec", sbx.id, "--url", cli.daemon.url, "--token-file", str(token_file), "--", "echo", "ok", auth=False)
    assert p.returncode == 0 and p.stdout == b"ok\n", p.stderr
    # flags beat the environment
    assert cli("sandbox", "show", sbx.id, "--token", cli.daemon.token,
               env={"SANDBOX_INTERNAL_TOKEN": "wrong"}).returncode == 0
    assert_error(cli("sandbox", "show", sbx.id, "--token", "wrong-token"), "SANDBOX_UNAUTHORIZED")
    assert_error(cli("sandbox", "ls", "--url", "ftp://x"), "CLI_BAD_URL")
    assert_error(cli("sandbox", "ls", "--token-file", str(tmp_path / "none")), "CLI_NO_TOKEN")


def test_wrong_token_error_never_echoes_it(cli, sbx):
    secret = "s3cr3t-" + os.urandom(8).hex()
    for args in (("sandbox", "ls"), ("exec", sbx.id, "--", "true"), ("fs", "cat", sbx.id, "x"),
                 ("fs", "put", sbx.id, "x", "-")):
        p = cli(*args, env={"SANDBOX_INTERNAL_TOKEN": secret}, input=b"data")
        assert_error(p, "SANDBOX_UNAUTHORIZED")
        assert secret.encode() not in p.stderr + p.stdout


def test_missing_token(cli, tmp_path):
    p = cli("sandbox", "ls", "--url", cli.daemon.url, "--data-dir", str(tmp_path / "nowhere"), auth=False)
    err = assert_error(p, "CLI_NO_TOKEN")
    assert "--token" in err and "SANDBOX_INTERNAL_TOKEN" in err


def test_unreachable_daemon(cli, sbx):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()   # nothing listens there now
    for args in (("sandbox", "ls"), ("exec", sbx.id, "--", "true"), ("fs", "get", sbx.id, "x", "-")):
        p = cli(*args, env={"SANDBOX_BASE_URL": f"http://127.0.0.1:{port}"}, timeout=60)
        err = assert_error(p, "CLI_CONNECTION_FAILED")
        assert f"127.0.0.1:{port}" in err


def test_url_and_token_from_a_data_directory(daemon_factory, tmp_path):
    """A daemon without SANDBOX_INTERNAL_TOKEN writes DATA/token; it writes DATA/endpoint always."""
    data = tmp_path / "home" / "data"
    data.parent.mkdir()
    d = daemon_factory(token=None, data_dir=data)
    cli = Cli(d)
    assert (data / "token").exists() and (data / "endpoint").read_text().strip() == d.url
    sid = unique_id("dd")
    p = cli("sandbox", "create", sid, "--data-dir", str(data), auth=False)
    assert p.returncode == 0 and p.stdout.decode() == f"{sid} 1\n", p.stderr
    p = cli("exec", sid, "--", "echo", "hi", auth=False, env={"SANDBOX_DATA_DIR": str(data)})
    assert p.returncode == 0 and p.stdout == b"hi\n", p.stderr
    # the default data directory is ./data
    p = cli("fs", "ls", sid, auth=False, cwd=tmp_path / "home")
    assert p.returncode == 0, p.stderr
    # the environment beats the data directory
    assert_error(cli("sandbox", "show", sid, "--data-dir", str(data), auth=False,
                     env={"SANDBOX_INTERNAL_TOKEN": "not-it"}), "SANDBOX_UNAUTHORIZED")
    cli.ok("sandbox", "rm", sid, "--data-dir", str(data), auth=False)


def test_exec_across_a_daemon_crash_reports_worker_lost(daemon_factory, tmp_path):
    """The daemon is SIGKILLed under a running exec and restarted on the same address: the CLI
    re-attaches (learning the new generation) and reports WORKER_LOST, exit status 1."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    d = daemon_factory(run=False)
    d.listen = f"127.0.0.1:{port}"
    d.start()
    cli = Cli(d)
    sid = unique_id("crash")
    cli.ok("sandbox", "create", sid)
    proc = subprocess.Popen([CLI, "exec", sid, "--", "sh", "-c", "echo started; sleep 120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli.env())
    try:
        assert _readline(proc.stdout, 60) == b"started\n"
        d.kill9()
        d.start()
        assert d.url == f"http://127.0.0.1:{port}"
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    assert out == b""
    assert err.decode().startswith("sandloom: WORKER_LOST: ") and err.count(b"\n") == 1, err
    cli.ok("sandbox", "rm", sid)


def test_loopback_daemon_is_not_reached_through_http_proxy(cli, sbx):
    """With $http_proxy set (common on CI and corporate hosts) a local daemon is still reached
    directly: through the proxy the call would fail, and the proxy would see the token."""
    trap = socket.socket()
    trap.bind(("127.0.0.1", 0))
    trap.listen(4)
    trap.settimeout(0.5)
    proxy = f"http://127.0.0.1:{trap.getsockname()[1]}"
    try:
        for extra in ({"http_proxy": proxy}, {"http_proxy": proxy, "no_proxy": "example.com"}):
            p = cli("exec", sbx.id, "--", "echo", "direct", env=extra, timeout=60)
            assert p.returncode == 0 and p.stdout == b"direct\n", p.stderr
        with pytest.raises(socket.timeout):
            trap.accept()
    finally:
        trap.close()
