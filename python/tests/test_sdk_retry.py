# SPDX-License-Identifier: MIT
"""Connections: keep-alive reuse, reconnecting after the daemon closed an idle connection, retries
with the same exec_id after a connection cut mid-request (the command runs once), stream
re-attachment after a cut, and connection failures surfacing as sandloom.ConnectionError."""

import socket
import time

import pytest

import sandloom
from sdk_helpers import TcpProxy, once, unique

# The daemon closes idle keep-alive connections after 5 s (the minimum), to test reconnecting.
DAEMON_ENV = {"SANDBOX_HTTP_IDLE_TIMEOUT_SECONDS": "5"}


@pytest.fixture
def proxy(daemon):
    p = TcpProxy(daemon.url)
    yield p
    p.close()


def _client(url, daemon, **kw):
    kw.setdefault("timeout", 30)
    kw.setdefault("backoff", 0.05)
    return sandloom.Client(url, daemon.token, **kw)


def test_calls_share_one_kept_alive_connection(daemon, proxy):
    c = _client(proxy.url, daemon)
    with c.sandbox(unique("sdk"), "ka") as sb:
        for i in range(10):
            sb.files.write(f"f{i}", b"x")
        assert [e.name for e in sb.files.list()] == [f"f{i}" for i in range(10)]
        n = len(proxy.conns)
    assert n == 1, f"{n} connections for 12 calls"


def test_reconnects_after_the_daemon_closed_an_idle_connection(daemon, proxy):
    c = _client(proxy.url, daemon)
    with c.sandbox(unique("sdk"), "idle") as sb:
        sb.files.write("a", b"1")
        time.sleep(6.5)             # past SANDBOX_HTTP_IDLE_TIMEOUT_SECONDS: the daemon closes it
        # A non-idempotent call (never retried once it may have arrived) still works: the closed
        # connection is noticed before it is used.
        sb.files.mkdir("d")
        assert sb.files.stat("d").is_dir
        assert len(proxy.conns) >= 2


def test_exec_retried_with_the_same_exec_id_after_a_cut_runs_once(daemon, proxy):
    c = _client(proxy.url, daemon)
    with c.sandbox(unique("sdk"), "cut") as sb:
        # Cut the first connection that carries an exec request, 0.5 s after it was forwarded (the
        # daemon has received it and started the command); no answer reaches the SDK.
        proxy.cut_request = once(lambda conn: b"POST " in conn.request and b"/exec" in conn.request, delay=0.5)
        r = sb.exec("echo ran >> /workspace/runs; sleep 1; echo finished")
        assert r.status == "SUCCEEDED" and r.stdout == "finished\n", r
        posts = proxy.requests_containing(b'"exec_id":"' + r.exec_id.encode())
        assert len(posts) == 2 and posts[0].cut, "expected the cut request and one retry"
        assert sb.files.read_text("runs") == "ran\n", "the retry ran the command a second time"


def test_stream_reattaches_after_a_cut_and_yields_every_byte_once(daemon, proxy):
    c = _client(proxy.url, daemon)
    with c.sandbox(unique("sdk"), "sse") as sb:
        # Cut the event stream as soon as the second stdout chunk has been relayed.
        proxy.cut_response = once(lambda conn: bytes(conn.response).count(b"event: stdout") >= 2)
        script = "for i in $(seq 1 15); do echo line$i; echo e$i >&2; sleep 0.1; done; echo ran >> /workspace/runs"
        events = list(sb.exec_stream(script))
        kinds = [e.kind for e in events]
        assert kinds.count("start") == 1 and kinds[-1] == "end"
        out = "".join(e.text for e in events if e.kind == "stdout")
        err = "".join(e.text for e in events if e.kind == "stderr")
        assert out == "".join(f"line{i}\n" for i in range(1, 16)), out
        assert err == "".join(f"e{i}\n" for i in range(1, 16)), err
        assert len(proxy.requests_containing(b"/events?")) >= 1, "the stream was not re-attached"
        assert any(conn.cut for conn in proxy.conns)
        assert sb.files.read_text("runs") == "ran\n"


def test_non_idempotent_call_is_not_retried_once_it_may_have_arrived(daemon, proxy):
    c = _client(proxy.url, daemon)
    with c.sandbox(unique("sdk"), "mv") as sb:
        sb.files.write("src", b"data")
        proxy.cut_request = once(lambda conn: b"/files/move" in conn.request, delay=0.3)
        with pytest.raises(sandloom.ConnectionError) as ei:
            sb.files.move("src", "dst")
        assert ei.value.code == "SANDLOOM_CONNECTION_ERROR" and ei.value.status == 0
        assert isinstance(ei.value, sandloom.SandloomError)
        assert len(proxy.requests_containing(b"/files/move")) == 1, "a move was sent twice"
        # The daemon did the move once; the SDK said it could not know.
        assert sb.files.exists("dst") and not sb.files.exists("src")


def test_idempotent_call_is_retried_after_a_cut(daemon, proxy):
    c = _client(proxy.url, daemon)
    with c.sandbox(unique("sdk"), "put") as sb:
        proxy.cut_request = once(lambda conn: b"PUT " in conn.request and b"/files" in conn.request, delay=0.2)
        sb.files.write("w", b"payload")
        assert sb.files.read("w") == b"payload"
        assert len(proxy.requests_containing(b"PUT ")) == 2


def test_unreachable_daemon_is_a_connection_error_after_retries(daemon):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                       # nothing listens there now
    c = sandloom.Client(f"http://127.0.0.1:{port}", "whatever", retries=2, backoff=0.01)
    t0 = time.monotonic()
    with pytest.raises(sandloom.ConnectionError) as ei:
        c.get("abc")
    assert ei.value.code == "SANDLOOM_CONNECTION_ERROR" and ei.value.status == 0
    assert "3 attempts" in str(ei.value)
    assert isinstance(ei.value.__cause__, OSError)
    assert time.monotonic() - t0 < 5
    assert c.health() is False
    with pytest.raises(sandloom.ConnectionError):
        c.sandbox("abc")


def test_read_timeout_is_a_connection_error(daemon):
    # A listener that accepts and never answers.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    try:
        c = sandloom.Client(f"http://127.0.0.1:{srv.getsockname()[1]}", "t", timeout=0.5, retries=1, backoff=0.01)
        with pytest.raises(sandloom.ConnectionError) as ei:
            c.list()
        assert isinstance(ei.value, sandloom.RequestTimeout) and "timed out" in str(ei.value)
    finally:
        srv.close()


def test_a_failed_release_never_hides_the_blocks_own_exception(daemon):
    p = TcpProxy(daemon.url)
    c = _client(p.url, daemon, retries=1)
    sid = unique("sdk")
    with pytest.raises(RuntimeError, match="the block's own error"):
        with c.sandbox(sid, "exit"):
            p.close()                           # the daemon becomes unreachable for this client
            c.close()
            raise RuntimeError("the block's own error")
    # Without an exception in the block, the failed release is reported.
    p2 = TcpProxy(daemon.url)
    c2 = _client(p2.url, daemon, retries=1)
    with pytest.raises(sandloom.ConnectionError):
        with c2.sandbox(sid, "exit"):
            p2.close()
            c2.close()
    sandloom.Client(daemon.url, daemon.token).release(sid)


def test_stream_request_cut_is_sent_again_and_runs_once(daemon, proxy):
    c = _client(proxy.url, daemon)
    with c.sandbox(unique("sdk"), "sse-post") as sb:
        proxy.cut_request = once(lambda conn: b"text/event-stream" in conn.request and b"POST " in conn.request,
                                 delay=0.3)
        events = list(sb.exec_stream("echo ran >> /workspace/runs; sleep 0.5; echo out"))
        assert [e.kind for e in events].count("start") == 1 and events[-1].kind == "end"
        assert "".join(e.text for e in events if e.kind == "stdout") == "out\n"
        assert any(conn.cut for conn in proxy.conns)
        assert sb.files.read_text("runs") == "ran\n", "the exec ran twice"


def test_exec_across_a_daemon_restart_is_not_run_again(daemon_factory):
    """The daemon restarts while a foreground exec runs: the SDK reconnects, re-resolves the new generation
    (same lifecycle), retries with the same exec_id and gets the stored WORKER_LOST record."""
    import threading

    d = daemon_factory(env={"SANDBOX_SHUTDOWN_GRACE_SECONDS": "0"})
    with TcpProxy(d.url) as p:
        c = sandloom.Client(p.url, d.token, retries=8, backoff=0.25)
        sb = c.sandbox(unique("sdk"), "restart-exec")
        out = {}

        def run():
            try:
                out["r"] = sb.exec("echo ran >> /workspace/runs; sleep 30", exec_id="survivor")
            except Exception as e:      # noqa: BLE001 - reported below
                out["e"] = e
        t = threading.Thread(target=run)
        t.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(b"survivor" in bytes(x.request) for x in p.conns):
            time.sleep(0.05)
        time.sleep(0.5)                 # the command has started
        d.stop()                        # grace 0: the running exec is recorded WORKER_LOST
        d.start()
        p.set_upstream(d.url)
        t.join(60)
        assert not t.is_alive()
        assert "e" not in out, out.get("e")
        r = out["r"]
        assert r.exec_id == "survivor" and r.status == "WORKER_LOST", r
        assert sb.files.read_text("runs") == "ran\n", "the command ran again after the restart"
        sb.release()
