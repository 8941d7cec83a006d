# SPDX-License-Identifier: MIT
"""How execs end (issue 3): timeouts (also of a tree that ignores SIGTERM), cancel, release while
execs run, a background server reachable from the next exec of the same sandbox only, graceful
shutdown, and kill -9 of the daemon with execs running (WORKER_LOST, no survivors, store intact,
exec_id idempotency across the restart)."""

import os
import signal
import time

from helpers import Sandbox, assert_ok, wait_until
from exec_helpers import (denv, assert_no_uid_processes, brief, cancel, children_of, describe_pids, exec_id,
                          find_uid_process, get_exec, in_thread, post_exec, run, sh, uid_pids,
                          wait_exec, wait_running)

GRACE = 5          # SANDBOX_TERMINATE_GRACE_SECONDS default
SLACK = 5

DAEMON_ENV = denv()


# --- timeouts -------------------------------------------------------------------------------------

def test_timeout_of_a_plain_command(sandbox):
    t0 = time.monotonic()
    rec = run(sandbox, ["/bin/sleep", "100"], timeout_seconds=1)
    elapsed = time.monotonic() - t0
    assert rec["status"] == "TIMED_OUT", brief(rec)
    assert elapsed < 1 + GRACE + SLACK, f"TIMED_OUT after {elapsed:.1f}s"
    assert rec["duration_ms"] >= 900, brief(rec)
    assert_no_uid_processes(sandbox.uid, 5, "after a timeout")


def test_timeout_of_a_sigterm_ignoring_tree(sandbox):
    script = "trap '' TERM; sleep 100 & setsid sleep 101 & (sleep 102 &); sleep 103; echo never"
    t0 = time.monotonic()
    rec = sh(sandbox, script, timeout_seconds=1)
    elapsed = time.monotonic() - t0
    assert rec["status"] == "TIMED_OUT", brief(rec)
    assert "never" not in rec["stdout"]
    assert elapsed < 1 + GRACE + SLACK, f"TIMED_OUT after {elapsed:.1f}s (timeout 1 + grace {GRACE})"
    assert_no_uid_processes(sandbox.uid, 5, "after a timeout of a SIGTERM-ignoring tree")


def test_timeout_honours_sigterm_quickly(sandbox):
    t0 = time.monotonic()
    rec = sh(sandbox, "sleep 100", timeout_seconds=1)
    assert rec["status"] == "TIMED_OUT" and time.monotonic() - t0 < 1 + GRACE, brief(rec)


def test_background_exec_times_out(sandbox):
    eid = exec_id()
    run(sandbox, ["/bin/sleep", "100"], exec_id=eid, background=True, exec_scope="t", timeout_seconds=1)
    rec = wait_exec(sandbox, eid, timeout=1 + GRACE + SLACK + 5)
    assert rec["status"] == "TIMED_OUT", brief(rec)
    assert_no_uid_processes(sandbox.uid, 5)


# --- cancel ---------------------------------------------------------------------------------------

def test_cancel_a_background_exec(sandbox):
    eid = exec_id()
    run(sandbox, ["/bin/sh", "-c", "echo started; trap '' TERM; sleep 100 & setsid sleep 101 & wait"], exec_id=eid,
        background=True, exec_scope="c")
    wait_running(sandbox, eid)
    find_uid_process(sandbox.uid, "sleep 101")
    r = assert_ok(cancel(sandbox, eid))
    assert r == {"exec_id": eid, "cancelled": True} or (r["exec_id"] == eid and r["cancelled"] is True), r
    rec = wait_exec(sandbox, eid, timeout=GRACE + SLACK + 10)
    assert rec["status"] == "CANCELLED", brief(rec)
    assert rec["stdout"] == "started\n"
    assert_no_uid_processes(sandbox.uid, 5, "after cancel")
    # cancelling an ended exec: cancelled false, the record unchanged
    r = assert_ok(cancel(sandbox, eid))
    assert r["cancelled"] is False, r
    assert assert_ok(get_exec(sandbox, eid))["status"] == "CANCELLED"


def test_cancel_a_foreground_exec_from_another_request(sandbox):
    eid = exec_id()
    fg = in_thread(run, sandbox, ["/bin/sleep", "100"], exec_id=eid)
    wait_running(sandbox, eid)
    assert assert_ok(cancel(sandbox, eid))["cancelled"] is True
    rec = fg.get(GRACE + SLACK + 10)
    assert rec["status"] == "CANCELLED", brief(rec)
    assert_no_uid_processes(sandbox.uid, 5)


def test_cancel_of_a_finished_exec_is_false(sandbox):
    eid = run(sandbox, ["/bin/true"])["exec_id"]
    r = assert_ok(cancel(sandbox, eid))
    assert r["exec_id"] == eid and r["cancelled"] is False, r
    assert assert_ok(get_exec(sandbox, eid))["status"] == "SUCCEEDED"


# --- foreground trees and background lifetime ------------------------------------------------------

def test_nothing_survives_a_foreground_exec(sandbox):
    rec = sh(sandbox, "sleep 100 & setsid sleep 101 & nohup sleep 102 >/dev/null 2>&1 & (sleep 103 &); "
                      "sh -c 'setsid sh -c \"sleep 104 &\" &'; echo started")
    assert rec["status"] == "SUCCEEDED" and rec["stdout"] == "started\n", brief(rec)
    assert_no_uid_processes(sandbox.uid, 5, "after a foreground exec ended")


def test_background_exec_lives_until_it_exits(sandbox):
    eid = exec_id()
    run(sandbox, ["/bin/sh", "-c", "sleep 3; echo bye"], exec_id=eid, background=True, exec_scope="bg")
    wait_running(sandbox, eid)
    assert find_uid_process(sandbox.uid, "sleep 3")
    rec = wait_exec(sandbox, eid, timeout=30)
    assert rec["status"] == "SUCCEEDED" and rec["stdout"] == "bye\n", brief(rec)
    assert_no_uid_processes(sandbox.uid, 5)


# --- release while running ------------------------------------------------------------------------

def test_release_cancels_running_execs(client):
    s = Sandbox.create(client)
    bg = exec_id()
    run(s, ["/bin/sleep", "100"], exec_id=bg, background=True, exec_scope="bg")
    fg_id = exec_id()
    fg = in_thread(run, s, ["/bin/sh", "-c", "trap '' TERM; sleep 100"], exec_id=fg_id, exec_scope="fg")
    wait_running(s, fg_id)
    wait_running(s, bg)
    t0 = time.monotonic()
    r = s.release()
    assert_ok(r)
    assert r.json()["status"] == "RELEASED", r
    rec = fg.get(GRACE + SLACK + 20)
    assert rec["status"] == "CANCELLED", brief(rec)
    assert time.monotonic() - t0 < GRACE + SLACK + 10
    assert_no_uid_processes(s.uid, 5, "after release")


# --- networking between execs ---------------------------------------------------------------------

SERVER = ("import http.server, socketserver, sys\n"
          "class H(http.server.BaseHTTPRequestHandler):\n"
          "    def do_GET(self):\n"
          "        b = b'hello from ' + sys.argv[2].encode()\n"
          "        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers()\n"
          "        self.wfile.write(b)\n"
          "    def log_message(self, *a): pass\n"
          "s = http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H)\n"
          "print('listening', flush=True)\n"
          "s.serve_forever()\n")


def test_background_server_is_reachable_from_the_same_sandbox_only(client):
    a, b = Sandbox.create(client), Sandbox.create(client)
    port = str(20000 + os.getpid() % 20000)
    srv = exec_id()
    run(a, ["python3", "-c", SERVER, port, a.id], exec_id=srv, background=True, exec_scope="server")
    fetch = (f"for i in $(seq 1 50); do curl -s --max-time 2 http://127.0.0.1:{port}/ && exit 0; "
             f"sleep 0.1; done; exit 9")
    rec = sh(a, fetch, exec_scope="client", timeout_seconds=60)
    assert rec["status"] == "SUCCEEDED" and rec["stdout"] == f"hello from {a.id}", brief(rec)
    rec = sh(a, f"python3 -c \"import urllib.request; print(urllib.request.urlopen('http://localhost:{port}/').read().decode())\"",
             exec_scope="client")
    assert rec["stdout"] == f"hello from {a.id}\n", brief(rec)
    # From another sandbox: connection refused (curl exit 7), nothing answered.
    rec = sh(b, f"curl -s --max-time 5 http://127.0.0.1:{port}/; echo rc=$?")
    assert rec["stdout"] == "rc=7\n", brief(rec)
    # And not from the host's loopback (the default network mode has its own namespace).
    import socket
    with socket.socket() as sock:
        sock.settimeout(2)
        assert sock.connect_ex(("127.0.0.1", int(port))) != 0, "the sandbox's server listens on the host's loopback"
    assert_ok(cancel(a, srv))
    assert wait_exec(a, srv)["status"] == "CANCELLED"
    a.release()
    b.release()


# --- daemon restarts ------------------------------------------------------------------------------

def test_kill9_with_execs_running_then_restart(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_NETNS_LINGER_SECONDS": "1"}))
    c = d.client()
    s = Sandbox.create(c)
    other = Sandbox.create(c)
    done_id = exec_id()
    done = sh(s, "echo kept; echo data > /workspace/kept.txt", exec_id=done_id)
    assert done["status"] == "SUCCEEDED"
    bg, fg_id = exec_id(), exec_id()
    run(s, ["/bin/sh", "-c", "trap '' TERM HUP; sleep 300"], exec_id=bg, background=True, exec_scope="bg")
    fg = in_thread(post_exec, s, ["/bin/sleep", "301"], exec_id=fg_id, exec_scope="fg")
    ob = exec_id()
    run(other, ["/bin/sh", "-c", "setsid sleep 302 & sleep 303"], exec_id=ob, background=True)
    for sb, eid in ((s, bg), (s, fg_id), (other, ob)):
        wait_running(sb, eid)
    find_uid_process(s.uid, "sleep 301")
    find_uid_process(other.uid, "sleep 302")
    helpers_before = children_of(d.proc.pid)

    d.kill9()
    fg.join(30)                       # its connection broke; whatever it got is not checked
    for uid in (s.uid, other.uid):
        assert_no_uid_processes(uid, 10, "after kill -9 of the daemon")
    left = [p for p in helpers_before if os.path.exists(f"/proc/{p}")]
    assert not left, f"the daemon's helpers outlive it: {describe_pids(left)}"

    d.start()
    c = d.client()
    for sb in (s, other):
        assert_ok(sb.resolve())
        assert_ok(sb.connect())
    for sb, eid in ((s, bg), (s, fg_id), (other, ob)):
        rec = assert_ok(get_exec(sb, eid))
        assert rec["status"] == "WORKER_LOST", (eid, brief(rec))
    # the store is intact: the finished exec, the files, the sandboxes
    kept = assert_ok(get_exec(s, done_id))
    assert kept["status"] == "SUCCEEDED" and kept["stdout"] == "kept\n", brief(kept)
    assert s.read("kept.txt") == b"data\n"
    # idempotency across the restart: a retry returns the stored record, runs nothing
    again = run(s, ["/bin/sh", "-c", "echo kept; echo data > /workspace/kept.txt"], exec_id=done_id)
    assert again["started_at"] == kept["started_at"] and again["stdout"] == "kept\n"
    lost = run(s, ["/bin/sh", "-c", "trap '' TERM HUP; sleep 300"], exec_id=bg, background=True, exec_scope="bg")
    assert lost["status"] == "WORKER_LOST", brief(lost)
    assert not uid_pids(s.uid), "a retry of a lost exec ran it again"
    # and execs work again
    assert sh(s, "cat kept.txt")["stdout"] == "data\n"


def test_graceful_shutdown_lets_a_short_exec_finish(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_SHUTDOWN_GRACE_SECONDS": "10"}))
    s = Sandbox.create(d.client())
    eid = exec_id()
    fg = in_thread(run, s, ["/bin/sh", "-c", "sleep 2; echo finished"], exec_id=eid)
    wait_running(s, eid)
    d.signal(signal.SIGTERM)
    rec = fg.get(30)
    assert rec["status"] == "SUCCEEDED" and rec["stdout"] == "finished\n", brief(rec)
    rc = d.wait(30)
    assert rc == 0, f"exit code {rc} after SIGTERM; stderr {d.stderr()[-1500:]}"
    d.start()
    assert_ok(s.resolve())
    assert_ok(s.connect())
    assert assert_ok(get_exec(s, eid))["status"] == "SUCCEEDED"


def _health_text(c):
    """The GET /health body ("ok" / "stopping"), or None once the daemon no longer answers."""
    try:
        r = c.request("GET", "/health", auth=False, timeout=5)
    except OSError:
        return None
    return r.body.decode().strip()


def test_graceful_shutdown_refuses_new_execs_and_kills_after_the_grace(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_SHUTDOWN_GRACE_SECONDS": "2"}))
    c = d.client()
    s = Sandbox.create(c)
    bg, fg_id = exec_id(), exec_id()
    run(s, ["/bin/sh", "-c", "trap '' TERM; sleep 300"], exec_id=bg, background=True, exec_scope="bg")
    fg = in_thread(post_exec, s, ["/bin/sleep", "300"], exec_id=fg_id, exec_scope="fg")
    wait_running(s, bg)
    wait_running(s, fg_id)
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    wait_until(lambda: _health_text(c) in ("stopping", None), timeout=10)
    if d.alive():
        try:
            r = post_exec(s, ["/bin/true"], exec_scope="new", timeout=10)
            assert r.status == 503, f"a new exec was admitted during shutdown: {r!r}"
        except OSError:
            pass                          # the listener is already closed: also a refusal
    rc = d.wait(2 + GRACE + SLACK + 20)
    elapsed = time.monotonic() - t0
    assert rc == 0, f"exit code {rc} after SIGTERM; stderr {d.stderr()[-1500:]}"
    assert elapsed < 2 + GRACE + SLACK + 10, f"shutdown took {elapsed:.1f}s with a 2 s grace"
    fg.join(10)
    assert_no_uid_processes(s.uid, 5, "after graceful shutdown")
    d.start()
    assert_ok(s.resolve())
    assert_ok(s.connect())
    for eid in (bg, fg_id):
        rec = assert_ok(get_exec(s, eid))
        assert rec["status"] == "WORKER_LOST", (eid, brief(rec))
