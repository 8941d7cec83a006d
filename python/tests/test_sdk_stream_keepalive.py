# SPDX-License-Identifier: MIT
"""Stall detection of exec_stream(): with the daemon's keep-alive comments every second, a stream on
which nothing at all arrives for 3 s counts as dropped and is re-attached from its offsets, while a
quiet command whose stream carries keep-alives is left alone."""

import time

import pytest

import sandloom
from sdk_helpers import TcpProxy, once, unique

DAEMON_ENV = {"SANDBOX_SSE_KEEPALIVE_SECONDS": "1"}


@pytest.fixture
def proxy(daemon):
    p = TcpProxy(daemon.url)
    yield p
    p.close()


def _client(url, daemon):
    return sandloom.Client(url, daemon.token, timeout=30, backoff=0.05)


def test_stalled_stream_is_reattached(daemon, proxy):
    c = _client(proxy.url, daemon)
    with c.sandbox(unique("sdk"), "stall") as sb:
        # After the first stdout event the connection goes silent but stays open (the cut comes
        # only after 10 minutes): a dead daemon or network path, not a closed connection.
        proxy.cut_response = once(lambda conn: b"event: stdout" in bytes(conn.response), delay=600)
        t0 = time.monotonic()
        events = list(sb.exec_stream("echo one; echo ran >> /workspace/runs; sleep 2; echo two; exit 3"))
        elapsed = time.monotonic() - t0
        kinds = [e.kind for e in events]
        assert kinds.count("start") == 1 and kinds[-1] == "end", kinds
        assert "".join(e.text for e in events if e.kind == "stdout") == "one\ntwo\n"
        res = events[-1].result
        assert res is not None and res.status == "FAILED" and res.exit_code == 3, res
        reattached = proxy.requests_containing(b"/events?")
        assert reattached and b"stdout_offset=4" in bytes(reattached[0].request), "not re-attached from offset 4"
        assert sb.files.read_text("runs") == "ran\n"
        # About 3 s of silence, not the 60 s default.
        assert elapsed < 30, f"took {elapsed:.1f} s"
    c.close()


def test_keepalives_keep_a_quiet_stream(daemon, proxy):
    c = _client(proxy.url, daemon)
    with c.sandbox(unique("sdk"), "quiet") as sb:
        events = list(sb.exec_stream("echo a; sleep 5; echo b"))
        assert "".join(e.text for e in events if e.kind == "stdout") == "a\nb\n"
        assert events[-1].result.status == "SUCCEEDED"
        assert not proxy.requests_containing(b"/events?"), "a stream with keep-alives was re-attached"
    c.close()
