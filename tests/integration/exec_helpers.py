# SPDX-License-Identifier: MIT
"""Helpers for the exec API tests (issue 3) and the escape suite: requests, SSE parsing, long-polls,
and host-side views of sandbox processes (the test process runs as root and scans /proc).

Standard library only, like helpers.py (which this module builds on and never changes)."""

import json
import os
import secrets
import signal
import threading
import time

from helpers import assert_ok, build_url, unique_id

# SANDLOOM_TEST_RUNTIME=bwrap runs this suite's daemons on the bwrap runtime (SANDBOX_RUNTIME);
# conftest strips SANDBOX_* from the test's environment, so it is passed explicitly.
RUNTIME_ENV = {"SANDBOX_RUNTIME": os.environ["SANDLOOM_TEST_RUNTIME"]} if os.environ.get("SANDLOOM_TEST_RUNTIME") else {}


def denv(settings=None):
    """A daemon environment: the runtime under test plus SETTINGS ({name: value})."""
    env = dict(RUNTIME_ENV)
    env.update(settings or {})
    return env


FINAL_STATUSES = {"SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELLED", "WORKER_LOST"}
ALL_STATUSES = FINAL_STATUSES | {"RUNNING"}

# Every field the contract promises in an exec record (text encoding).
RECORD_FIELDS = {"exec_id", "sandbox_id", "generation", "status", "exit_code", "signal", "stdout", "stderr",
                 "truncated", "stdout_bytes", "stderr_bytes", "duration_ms", "cpu_ms", "max_rss_bytes",
                 "started_at", "finished_at", "exec_scope", "background"}
MAX_OUTPUT = 8 * 1024 * 1024


def exec_id(prefix="ex"):
    return unique_id(prefix)


# --- requests -------------------------------------------------------------------------------------

def exec_body(s, argv, **kw):
    body = {"generation": s.generation, "argv": list(argv)}
    body.update(kw)
    return body


def post_exec(s, argv=None, *, body=None, headers=None, timeout=120, **kw):
    """POST …/exec; ARGV + KW build the body unless BODY is given verbatim. Returns a Response."""
    if body is None:
        body = exec_body(s, argv, **kw)
    return s.client.post(f"{s.base}/exec", body, headers=headers, timeout=timeout)


def run(s, argv, *, expect_status=None, timeout=120, **kw):
    """Runs ARGV (foreground unless background=True) and returns the record (asserting 200)."""
    r = post_exec(s, argv, timeout=timeout, **kw)
    rec = assert_ok(r)
    assert isinstance(rec, dict), f"exec answer is not a JSON object: {r!r}"
    if expect_status is not None:
        assert rec.get("status") == expect_status, f"expected {expect_status}, got {brief(rec)}"
    return rec


def sh(s, script, **kw):
    return run(s, ["/bin/sh", "-c", script], **kw)


def py(s, code, **kw):
    """Runs python3 -c CODE (with PRELUDE) inside the sandbox; returns the record."""
    return run(s, ["python3", "-c", PRELUDE + code], **kw)


def exec_path(s, eid, suffix=""):
    return f"{s.base}/exec/{eid}{suffix}"


def get_exec(s, eid, wait_seconds=None, generation=None, timeout=None):
    q = {"generation": s.gen(generation)}
    if wait_seconds is not None:
        q["wait_seconds"] = wait_seconds
    t = timeout if timeout is not None else (60 + (wait_seconds or 0))
    return s.client.get(exec_path(s, eid), q, timeout=t)


def wait_exec(s, eid, timeout=60, generation=None):
    """Long-polls until the exec is no longer RUNNING; returns the record (asserts it ended)."""
    deadline = time.monotonic() + timeout
    rec = None
    while time.monotonic() < deadline:
        left = max(1, min(10, int(deadline - time.monotonic())))
        rec = assert_ok(get_exec(s, eid, wait_seconds=left, generation=generation))
        if rec["status"] != "RUNNING":
            return rec
    raise AssertionError(f"exec {eid} still RUNNING after {timeout}s: {brief(rec)}")


def wait_running(s, eid, timeout=20, generation=None):
    """Waits until GET answers the exec as RUNNING (it exists and has started)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = get_exec(s, eid, generation=generation)
        if last.status == 200 and last.json().get("status") == "RUNNING":
            return last.json()
        time.sleep(0.05)
    raise AssertionError(f"exec {eid} never seen RUNNING within {timeout}s: {last!r}")


def get_output(s, eid, stream="stdout", offset=0, generation=None, **q):
    query = {"generation": s.gen(generation), "stream": stream, "offset": offset}
    query.update(q)
    return s.client.get(exec_path(s, eid, "/output"), query)


def cancel(s, eid, generation=None):
    return s.client.post(exec_path(s, eid, "/cancel"), {"generation": s.gen(generation)})


def brief(rec):
    """A record without its (possibly huge) output, for assertion messages."""
    if not isinstance(rec, dict):
        return repr(rec)[:500]
    out = {}
    for k, v in rec.items():
        if isinstance(v, str) and len(v) > 300:
            v = v[:300] + f"...({len(v)} chars)"
        out[k] = v
    return out


def signal_of(rec):
    """The record's signal as a number (accepts 9, "SIGKILL", "KILL"); 0 for none."""
    v = rec.get("signal")
    if v in (None, 0, ""):
        return 0
    if isinstance(v, int):
        return v
    name = str(v).upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    return int(getattr(signal, name))


# --- Server-Sent Events ---------------------------------------------------------------------------

class SSEStream:
    """An open SSE response. events() yields (name, data, t_arrival) as they arrive; data is the
    parsed JSON of the data lines (or the raw text if it is not JSON)."""

    def __init__(self, conn, resp, t0):
        self.conn = conn
        self.resp = resp
        self.t0 = t0
        self.status = resp.status
        self.headers = {k.lower(): v for k, v in resp.getheaders()}

    def events(self):
        name, data = None, []
        while True:
            line = self.resp.readline()
            if not line:
                if data:
                    yield self._event(name, data)
                return
            line = line.decode("utf-8").rstrip("\r\n")
            if line == "":
                if data or name:
                    yield self._event(name, data)
                name, data = None, []
                continue
            if line.startswith(":"):
                continue                    # comment / keep-alive
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)

    def _event(self, name, data):
        text = "\n".join(data)
        try:
            payload = json.loads(text)
        except ValueError:
            payload = text
        return (name or "message", payload, time.monotonic() - self.t0)

    def body_text(self):
        return self.resp.read().decode("utf-8", "replace")

    def close(self):
        try:
            self.conn.close()
        except OSError:
            pass


def sse_request(s, method, path, *, body=None, query=None, timeout=120):
    c = s.client
    conn = c.connection(timeout)
    headers = dict(c.auth_headers())
    headers["Accept"] = "text/event-stream"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    t0 = time.monotonic()
    conn.request(method, build_url(path, query), body=data, headers=headers)
    resp = conn.getresponse()
    return SSEStream(conn, resp, t0)


def sse_exec(s, argv, timeout=120, **kw):
    return sse_request(s, "POST", f"{s.base}/exec", body=exec_body(s, argv, **kw), timeout=timeout)


def sse_events(s, eid, offset=None, generation=None, timeout=120, **q):
    query = {"generation": s.gen(generation)}
    if offset is not None:
        query["offset"] = offset
    query.update(q)
    return sse_request(s, "GET", exec_path(s, eid, "/events"), query=query, timeout=timeout)


def collect_sse(stream, limit=100000):
    out = []
    for ev in stream.events():
        out.append(ev)
        if ev[0] == "end" or len(out) >= limit:
            break
    stream.close()
    return out


def stream_text(events, name="stdout"):
    return "".join(ev[1]["data"] for ev in events if ev[0] == name)


def check_sse_order(events, start_offset=0, expect_start=True):
    """start first (if expected), end last and once, per-stream offsets contiguous from
    START_OFFSET (ASCII output only: text length = byte length). Returns the end record."""
    names = [e[0] for e in events]
    assert names, "no SSE event at all"
    if expect_start:
        assert names[0] == "start", f"first event is {names[0]!r}, not start: {names}"
        assert names.count("start") == 1, names
    assert names[-1] == "end" and names.count("end") == 1, f"events do not end with one 'end': {names}"
    for stream in ("stdout", "stderr"):
        pos = start_offset if stream == "stdout" else None
        for name, data, _ in events:
            if name != stream:
                continue
            assert isinstance(data, dict) and "offset" in data and "data" in data, f"bad {stream} event {data!r}"
            if pos is None:
                pos = data["offset"]
            assert data["offset"] == pos, f"{stream} offsets not contiguous: got {data['offset']}, want {pos}"
            pos += len(data["data"].encode())
    assert set(names) <= {"start", "stdout", "stderr", "end"}, f"unexpected SSE events: {set(names)}"
    end = events[-1][1]
    assert isinstance(end, dict) and end.get("status") in FINAL_STATUSES, f"end event without a record: {end!r}"
    return end


# --- host-side process views ----------------------------------------------------------------------

def _status_fields(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return {k: v.strip() for k, _, v in (line.partition(":") for line in f)}
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def uid_pids(uid):
    """PIDs (in the host's view) of every process whose real, effective or saved uid is UID,
    zombies included."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = _status_fields(name)
        if not st or "Uid" not in st:
            continue
        if str(uid) in st["Uid"].split():
            pids.append(int(name))
    return pids


def describe_pids(pids):
    out = []
    for p in pids:
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            st = _status_fields(p) or {}
            out.append(f"{p} [{st.get('State', '?')}] {cmd!r}")
        except OSError:
            out.append(f"{p} (gone)")
    return out


def wait_no_uid_processes(uid, timeout=5.0):
    """True once no process of UID exists (an orphan may stay a zombie for a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        if not uid_pids(uid):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def assert_no_uid_processes(uid, timeout=5.0, what=""):
    if not wait_no_uid_processes(uid, timeout):
        left = describe_pids(uid_pids(uid))
        raise AssertionError(f"processes of uid {uid} survive{' ' + what if what else ''}: {left}")


def children_index():
    """{ppid: [pid, ...]} for every process on this host, from one pass over /proc."""
    index = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may contain spaces and parentheses
        rest = stat[stat.rfind(")") + 2:].split()
        if len(rest) > 1:
            index.setdefault(int(rest[1]), []).append(int(name))
    return index


def children_of(pid):
    return children_index().get(pid, [])


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def find_uid_process(uid, needle, timeout=10.0):
    """Host pid of a (non-zombie) process of UID whose command line contains NEEDLE. A launcher
    process (bwrap runtime: its command line holds the whole command) is never the one."""
    deadline = time.monotonic() + timeout
    while True:
        for p in uid_pids(uid):
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
                with open(f"/proc/{p}/comm") as f:
                    if f.read().strip() == "bwrap":
                        continue
            except OSError:
                continue
            if needle in cmd and pid_alive(p):
                return p
        if time.monotonic() > deadline:
            raise AssertionError(f"no process of uid {uid} running {needle!r}: {describe_pids(uid_pids(uid))}")
        time.sleep(0.05)


# --- threads --------------------------------------------------------------------------------------

class Background(threading.Thread):
    """Runs FN(*args, **kwargs) in a thread and keeps its result or exception."""

    def __init__(self, fn, *args, **kwargs):
        super().__init__(daemon=True)
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.result = self.error = None

    def run(self):
        try:
            self.result = self.fn(*self.args, **self.kwargs)
        except BaseException as e:          # reported by get()
            self.error = e

    def get(self, timeout=120):
        self.join(timeout)
        assert not self.is_alive(), f"{self.fn.__name__} still running after {timeout}s"
        if self.error is not None:
            raise self.error
        return self.result


def in_thread(fn, *args, **kwargs):
    t = Background(fn, *args, **kwargs)
    t.start()
    return t


def marker():
    return secrets.token_hex(8)


# --- code run inside sandboxes (python3 -c) -------------------------------------------------------

# Results are printed as "ok" or "errno=ENAME" so a test can assert the exact failure.
PRELUDE = r'''
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def ename(e):
    return "errno=" + errno.errorcode.get(e, str(e))
def attempt(f, *a):
    try:
        f(*a)
        return "ok"
    except OSError as e:
        return ename(e.errno)
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) if isinstance(x, int) else x for x in args])
    return "ok" if r >= 0 else ename(ctypes.get_errno())
def lc(fn, *args):
    ctypes.set_errno(0)
    r = getattr(libc, fn)(*args)
    return "ok" if r >= 0 else ename(ctypes.get_errno())
def say(*a):
    print(*a, flush=True)
'''


def v1_hierarchies():
    """{controller: mount point} of the cgroup v1 hierarchies, from /proc/self/mountinfo."""
    found = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            fields = post.split()
            if len(fields) < 3 or fields[0] != "cgroup":
                continue
            for opt in fields[2].split(","):
                if opt in ("memory", "pids", "cpu", "cpuacct"):
                    found.setdefault(opt, pre.split()[4])
    return found


# Python run inside a sandbox: forks for ever, each child forking on as well.
FORK_BOMB = """
import os, time
while True:
    try:
        if os.fork() == 0:
            continue        # the child forks on as well
    except OSError:
        time.sleep(0.05)
"""
