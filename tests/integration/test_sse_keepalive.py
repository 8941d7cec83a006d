# SPDX-License-Identifier: MIT
"""Keep-alive comments on exec event streams (SANDBOX_SSE_KEEPALIVE_SECONDS): a silent command's
stream carries `: keep-alive` lines between its events, the events themselves are unchanged, resume
offsets still work, and the setting 0 turns them off."""

import http.client
import json
import os
import re
import socket
import subprocess
import threading
import time

import pytest

from conftest import BINARY, clean_env
from helpers import Sandbox
from exec_helpers import (check_sse_order, denv, exec_body, exec_id, exec_path, sse_request, stream_text,
                          wait_exec)

DAEMON_ENV = denv({"SANDBOX_SSE_KEEPALIVE_SECONDS": "1"})
CLI = os.path.abspath(os.environ.get("SANDLOOM_CLI_BINARY", BINARY))


def raw_stream(stream, limit=10000):
    """Reads an SSE response to its end: [(kind, value, t)] with kind 'comment' (value: the text)
    or 'event' (value: (name, parsed data)), in arrival order."""
    items, name, data = [], None, []
    try:
        while len(items) < limit:
            line = stream.resp.readline()
            if not line:
                break
            t = time.monotonic() - stream.t0
            line = line.decode("utf-8").rstrip("\r\n")
            if line == "":
                if name or data:
                    items.append(("event", (name or "message", json.loads("\n".join(data))), t))
                    if name == "end":
                        break
                name, data = None, []
                continue
            if line.startswith(":"):
                assert name is None and not data, f"comment inside an event: {line!r}"
                items.append(("comment", line, t))
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            else:
                raise AssertionError(f"unexpected SSE line {line!r}")
    finally:
        stream.close()
    return items


def events_of(items):
    return [(v[0], v[1], t) for kind, v, t in items if kind == "event"]


def post_sse(s, argv, **kw):
    return sse_request(s, "POST", f"{s.base}/exec", body=exec_body(s, argv, **kw), timeout=60)


def test_silent_command_gets_keepalives(sandbox):
    stream = post_sse(sandbox, ["/bin/sh", "-c", "echo before; sleep 3; echo after"])
    assert stream.status == 200
    assert stream.headers.get("x-sandloom-keepalive-seconds") == "1", stream.headers
    items = raw_stream(stream)
    names = [(k, v[0] if k == "event" else v) for k, v, _ in items]
    kinds = [k for k, _, _ in items]
    assert kinds.count("comment") >= 2, f"too few keep-alives over a 3 s silence: {names}"
    assert all(v == ": keep-alive" for k, v, _ in items if k == "comment"), names
    # The comments fall in the silence: after "before", before "after".
    first_out = next(i for i, (k, v, _) in enumerate(items) if k == "event" and v[0] == "stdout")
    last_out = max(i for i, (k, v, _) in enumerate(items) if k == "event" and v[0] == "stdout")
    between = [k for k in kinds[first_out:last_out] if k == "comment"]
    if first_out == last_out:
        raise AssertionError(f"before and after arrived in one event: {names}")
    assert len(between) >= 2, f"keep-alives not between the outputs: {names}"
    # About one a second (the period), not more: a 3 s silence has 2 or 3 (4 with slow timing).
    assert len(between) <= 4, f"too many keep-alives for a 3 s silence: {names}"
    events = events_of(items)
    end = check_sse_order(events)
    assert end["status"] == "SUCCEEDED" and end["exit_code"] == 0, end
    assert stream_text(events) == "before\nafter\n"


def test_no_keepalive_while_output_flows(sandbox):
    stream = post_sse(sandbox, ["/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 0.3; done"])
    items = raw_stream(stream)
    events = events_of(items)
    assert check_sse_order(events)["status"] == "SUCCEEDED"
    assert stream_text(events) == "".join(f"{i}\n" for i in range(1, 11))
    # Output every 0.3 s: never a second of silence between the first and the last line.
    first = next(i for i, (k, v, _) in enumerate(items) if k == "event" and v[0] == "stdout")
    last = max(i for i, (k, v, _) in enumerate(items) if k == "event" and v[0] == "stdout")
    assert not [k for k, _, _ in items[first:last] if k == "comment"], items


def test_keepalive_before_start_and_with_resume_offsets(sandbox):
    eid = exec_id("ka")
    body = exec_body(sandbox, ["/bin/sh", "-c", "printf abcdef; sleep 2.5; printf ghij"], exec_id=eid,
                     background=True)
    rec = sandbox.client.post(f"{sandbox.base}/exec", body)
    assert rec.status in (200, 201, 202), rec
    # A resumed stream (offset 3) of a running, silent command: comments, then the rest.
    time.sleep(0.5)
    stream = sse_request(sandbox, "GET", exec_path(sandbox, eid, "/events"),
                         query={"generation": sandbox.gen(), "offset": 3}, timeout=60)
    assert stream.status == 200
    items = raw_stream(stream)
    events = events_of(items)
    end = check_sse_order(events, start_offset=3)
    assert end["status"] == "SUCCEEDED", end
    assert stream_text(events) == "defghij", events
    assert any(k == "comment" for k, _, _ in items), items
    wait_exec(sandbox, eid)


def test_keepalive_off_with_zero(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_SSE_KEEPALIVE_SECONDS": "0"}))
    s = Sandbox.create(d.client())
    try:
        stream = post_sse(s, ["/bin/sh", "-c", "echo before; sleep 3; echo after"])
        assert stream.status == 200
        assert stream.headers.get("x-sandloom-keepalive-seconds") == "0", stream.headers
        items = raw_stream(stream)
        assert not [i for i in items if i[0] == "comment"], items
        events = events_of(items)
        end = check_sse_order(events)
        assert end["status"] == "SUCCEEDED", end
        assert stream_text(events) == "before\nafter\n"
    finally:
        s.release()


def test_no_keepalive_on_an_ended_exec(sandbox):
    eid = exec_id("kd")
    rec = sandbox.client.post(f"{sandbox.base}/exec", exec_body(sandbox, ["/bin/echo", "hi"], exec_id=eid))
    assert rec.status == 200, rec
    stream = sse_request(sandbox, "GET", exec_path(sandbox, eid, "/events"), query={"generation": sandbox.gen()},
                         timeout=30)
    items = raw_stream(stream)
    assert [k for k, _, _ in items] == ["event"] * len(items), items
    assert stream_text(events_of(items)) == "hi\n"


# ---------------------------------------------------------------- the CLI's stall detection

class StallingProxy:
    """A TCP proxy in front of the daemon. With STALLS > 0, the first STALLS connections whose
    answer carries an `event: stdout` go silent right after forwarding it: nothing more is
    forwarded either way, yet the connection stays open (a daemon or network path that died
    without a FIN). Other connections are forwarded as they are."""

    def __init__(self, upstream_port, stalls=1):
        self.upstream = upstream_port
        self.stalls_left = stalls
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stalled = threading.Event()
        self.requests = []
        self.lock = threading.Lock()
        self.open = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self.upstream))
            conn = {"silent": False}
            with self.lock:
                self.open += [c, u]
            threading.Thread(target=self._pump, args=(c, u, False, conn), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, True, conn), daemon=True).start()

    def _pump(self, src, dst, answers, conn):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if conn["silent"]:
                    continue                # swallowed: the peer hears nothing
                if not answers:
                    with self.lock:
                        self.requests += re.findall(rb"^(GET|POST) (\S+)", data, re.M)
                dst.sendall(data)
                if answers and b"event: stdout" in data:
                    with self.lock:
                        if self.stalls_left > 0:
                            self.stalls_left -= 1
                            conn["silent"] = True
                            self.stalled.set()
        except OSError:
            pass
        if not conn["silent"]:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def paths(self, method, fragment):
        with self.lock:
            return [p for m, p in self.requests if m == method and fragment in p]

    def close(self):
        self.sock.close()
        with self.lock:
            for s in self.open:
                try:
                    s.close()
                except OSError:
                    pass


@pytest.fixture
def stalling_proxy(daemon):
    made = []

    def make(**kw):
        p = StallingProxy(int(daemon.url.rsplit(":", 1)[1]), **kw)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def cli_env(daemon, url):
    e = clean_env()
    e["SANDBOX_BASE_URL"] = url
    e["SANDBOX_INTERNAL_TOKEN"] = daemon.token
    return e


def test_cli_reattaches_a_stalled_stream(daemon, sandbox, stalling_proxy):
    """The proxy goes silent after "one": with 1 s keep-alives the CLI gives up on the stream after
    about 3 s without a byte, re-attaches from its offsets and finishes the command's output and exit
    status, without running it twice."""
    proxy = stalling_proxy(stalls=1)
    t0 = time.monotonic()
    p = subprocess.run([CLI, "exec", sandbox.id, "--", "sh", "-c",
                        "echo one; echo ran >> /workspace/runs; sleep 2; echo two; echo three >&2; exit 3"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(daemon, proxy.url), timeout=90)
    elapsed = time.monotonic() - t0
    assert proxy.stalled.is_set(), "the proxy never went silent"
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert p.stdout == b"one\ntwo\n" and p.stderr == b"three\n", (p.stdout, p.stderr)
    assert sandbox.read("runs") == b"ran\n"
    events = proxy.paths(b"GET", b"/events?")
    assert events and b"stdout_offset=4" in events[0], proxy.requests
    # Noticed after about 3 keep-alive periods, not the 60 s default nor never.
    assert elapsed < 30, f"took {elapsed:.1f} s"


def test_cli_keepalives_keep_a_silent_stream(daemon, sandbox, stalling_proxy):
    """A command silent for longer than the stall limit (5 s > 3 x 1 s) is not re-attached: the
    keep-alives count as signs of life."""
    proxy = stalling_proxy(stalls=0)
    p = subprocess.run([CLI, "exec", sandbox.id, "--", "sh", "-c", "echo a; sleep 5; echo b"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(daemon, proxy.url), timeout=90)
    assert p.returncode == 0 and p.stdout == b"a\nb\n", (p.returncode, p.stdout, p.stderr)
    assert not proxy.paths(b"GET", b"/events?"), proxy.requests
    assert len(proxy.paths(b"POST", b"/exec")) == 1, proxy.requests


def test_daemon_stops_cleanly_with_a_kept_alive_stream_open(daemon_factory):
    """SIGTERM while a silent command's stream is receiving keep-alives: the stream ends, the daemon
    exits 0 (the fixture also checks its stderr for sanitizer reports, e.g. a leaked timer)."""
    d = daemon_factory(env=denv({"SANDBOX_SSE_KEEPALIVE_SECONDS": "1", "SANDBOX_SHUTDOWN_GRACE_SECONDS": "1"}))
    s = Sandbox.create(d.client())
    stream = post_sse(s, ["/bin/sh", "-c", "echo go; sleep 60"])
    seen = []
    for _ in range(50):
        line = stream.resp.readline()
        seen.append(line)
        if line.startswith(b": keep-alive"):
            break
    assert any(line.startswith(b": keep-alive") for line in seen), seen
    rc = d.stop()
    assert rc == 0, (rc, d.stderr()[-2000:])
    try:
        stream.body_text()  # the stream ends (cleanly or cut), it does not hang
    except (OSError, http.client.HTTPException):
        pass
    stream.close()
