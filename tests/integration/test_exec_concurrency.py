# SPDX-License-Identifier: MIT
"""Concurrent execs (issue 3): 64 scoped execs over 4 sandboxes at once, exec-scope conflicts, the
per-sandbox parallel cap (429), the worker admission cap with its bounded queue (503), and 200
parked `sleep 5` execs that must not starve GET /health."""

import threading
import time

from helpers import Sandbox, assert_error, assert_ok
from exec_helpers import (denv, brief, cancel, exec_id, in_thread, post_exec, run, wait_exec, wait_running,
                          assert_no_uid_processes)

DAEMON_ENV = denv()


def _parallel(n, fn):
    """Runs FN(i) for i in range(N) at once (after a barrier); returns the results in order."""
    results = [None] * n
    errors = []
    barrier = threading.Barrier(n)

    def one(i):
        try:
            barrier.wait(60)
            results[i] = fn(i)
        except BaseException as e:
            errors.append((i, e))

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "requests still hanging after 300 s"
    assert not errors, f"{len(errors)} requests raised, first: {errors[0]!r}"
    return results


def test_64_concurrent_scoped_execs_over_4_sandboxes(client):
    boxes = [Sandbox.create(client) for _ in range(4)]

    def one(i):
        s = boxes[i % 4]
        return post_exec(s, ["/bin/sh", "-c", "sleep 0.5; echo $0-$1", "sbx", str(i)], exec_scope=f"scope-{i // 4}",
                         exec_id=f"conc-{i}")

    t0 = time.monotonic()
    answers = _parallel(64, one)
    elapsed = time.monotonic() - t0
    for i, r in enumerate(answers):
        rec = assert_ok(r)
        assert rec["status"] == "SUCCEEDED" and rec["stdout"] == f"sbx-{i}\n", (i, brief(rec))
        assert rec["exec_scope"] == f"scope-{i // 4}"
    # 16 per sandbox ran in parallel, not one after the other (64 x 0.5 s = 32 s serially).
    assert elapsed < 25, f"64 concurrent 0.5 s execs took {elapsed:.1f}s"
    for s in boxes:
        s.release()


def test_same_scope_conflicts_other_scopes_run(sandbox):
    a = exec_id()
    run(sandbox, ["/bin/sleep", "60"], exec_id=a, background=True, exec_scope="build")
    wait_running(sandbox, a)
    assert_error(post_exec(sandbox, ["/bin/true"], exec_scope="build"), 409, "SANDBOX_EXEC_SCOPE_BUSY")
    assert_error(post_exec(sandbox, ["/bin/true"], exec_scope="build", background=True), 409,
                 "SANDBOX_EXEC_SCOPE_BUSY")
    # another scope runs beside it
    assert run(sandbox, ["/bin/echo", "beside"], exec_scope="test")["stdout"] == "beside\n"
    # an unscoped exec needs the whole sandbox
    assert_error(post_exec(sandbox, ["/bin/true"]), 409, "SANDBOX_EXEC_SCOPE_BUSY")
    assert_ok(cancel(sandbox, a))
    assert wait_exec(sandbox, a)["status"] == "CANCELLED"
    # the scope is free again, and so is the whole sandbox
    assert run(sandbox, ["/bin/true"], exec_scope="build")["status"] == "SUCCEEDED"
    assert run(sandbox, ["/bin/true"])["status"] == "SUCCEEDED"


def test_unscoped_exec_holds_the_whole_sandbox(sandbox, client):
    a = exec_id()
    run(sandbox, ["/bin/sleep", "60"], exec_id=a, background=True)
    wait_running(sandbox, a)
    assert_error(post_exec(sandbox, ["/bin/true"], exec_scope="x"), 409, "SANDBOX_EXEC_SCOPE_BUSY")
    assert_error(post_exec(sandbox, ["/bin/true"]), 409, "SANDBOX_EXEC_SCOPE_BUSY")
    # another sandbox is not affected
    other = Sandbox.create(client)
    assert run(other, ["/bin/true"])["status"] == "SUCCEEDED"
    other.release()
    assert_ok(cancel(sandbox, a))
    wait_exec(sandbox, a)
    assert run(sandbox, ["/bin/true"], exec_scope="x")["status"] == "SUCCEEDED"


def test_foreground_scope_conflict_while_it_runs(sandbox):
    eid = "fg-" + exec_id()
    fg = in_thread(run, sandbox, ["/bin/sh", "-c", "sleep 2; echo fg"], exec_scope="fg", exec_id=eid)
    wait_running(sandbox, eid)
    assert_error(post_exec(sandbox, ["/bin/true"], exec_scope="fg"), 409, "SANDBOX_EXEC_SCOPE_BUSY")
    assert fg.get()["stdout"] == "fg\n"


def test_parallel_cap_per_sandbox_is_429(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_MAX_PARALLEL_EXECS_PER_SANDBOX": "2"}))
    c = d.client()
    s, other = Sandbox.create(c), Sandbox.create(c)
    ids = [exec_id() for _ in range(2)]
    for i, eid in enumerate(ids):
        run(s, ["/bin/sleep", "60"], exec_id=eid, background=True, exec_scope=f"s{i}")
    r = post_exec(s, ["/bin/true"], exec_scope="s3")
    assert_error(r, 429, "SANDBOX_PARALLEL_EXEC_LIMIT")
    # nothing was queued: after the cap frees, the refused one did not run on its own
    assert run(other, ["/bin/true"], exec_scope="s3")["status"] == "SUCCEEDED"
    assert_ok(cancel(s, ids[0]))
    wait_exec(s, ids[0])
    assert run(s, ["/bin/true"], exec_scope="s3")["status"] == "SUCCEEDED"
    assert_ok(cancel(s, ids[1]))
    wait_exec(s, ids[1])


def wait_queued(c, n, timeout=20):
    """Waits until /healthz (execs.queued) counts N queued exec requests."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        hz = assert_ok(c.get("/healthz"))
        last = hz.get("execs") or {}
        if last.get("queued") == n:
            return
        time.sleep(0.05)
    raise AssertionError(f"/healthz never showed {n} queued exec(s): {last!r}")


def test_worker_admission_cap_queues_then_503(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_MAX_RUNNING_EXECS": "2", "SANDBOX_ADMISSION_QUEUE_LENGTH": "1",
                            "SANDBOX_ADMISSION_TIMEOUT_SECONDS": "2"}))
    c = d.client()
    boxes = [Sandbox.create(c) for _ in range(4)]
    running = []
    for s in boxes[:2]:
        eid = exec_id()
        run(s, ["/bin/sleep", "60"], exec_id=eid, background=True, exec_scope="hold")
        running.append((s, eid))
    # The third waits in the queue for the admission timeout, then gets 503.
    t0 = time.monotonic()
    r = post_exec(boxes[2], ["/bin/true"])
    waited = time.monotonic() - t0
    assert_error(r, 503, "SANDBOX_WORKER_BUSY")
    assert 1.0 <= waited < 15, f"queued request answered after {waited:.2f}s (admission timeout 2 s)"
    # While one waits in the queue (length 1), another gets 503 at once.
    queued = in_thread(post_exec, boxes[2], ["/bin/echo", "queued"])
    wait_queued(c, 1)
    t0 = time.monotonic()
    r = post_exec(boxes[3], ["/bin/true"])
    assert_error(r, 503, "SANDBOX_WORKER_BUSY")
    assert time.monotonic() - t0 < 1.5, "a request beyond the queue length waited"
    assert_error(queued.get(30), 503, "SANDBOX_WORKER_BUSY")
    # A queued request is admitted when a slot frees.
    queued = in_thread(post_exec, boxes[2], ["/bin/echo", "admitted"])
    wait_queued(c, 1)
    assert_ok(cancel(*running[0]))
    rec = assert_ok(queued.get(30))
    assert rec["status"] == "SUCCEEDED" and rec["stdout"] == "admitted\n", brief(rec)
    s, eid = running[1]
    assert_ok(cancel(s, eid))
    wait_exec(s, eid)


def test_200_parked_execs_do_not_starve_health(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_MAX_RUNNING_EXECS": "256", "SANDBOX_MAX_PARALLEL_EXECS_PER_SANDBOX": "16",
                            "SANDBOX_HTTP_THREADS": "4"}))
    c = d.client()
    boxes = [Sandbox.create(c) for _ in range(20)]
    n = 200
    results = [None] * n
    health = []
    stop = threading.Event()
    barrier = threading.Barrier(n + 1)

    def one(i):
        try:
            barrier.wait(60)
            results[i] = post_exec(boxes[i % 20], ["/bin/sleep", "5"], exec_scope=f"p{i // 20}", timeout=120)
        except BaseException as e:
            results[i] = e

    def prober():
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                r = c.request("GET", "/health", auth=False, timeout=10)
                health.append((time.monotonic() - t0, r.status))
            except OSError as e:
                health.append((time.monotonic() - t0, repr(e)))
            time.sleep(0.1)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait(60)
    time.sleep(1.0)                         # the execs are being launched / parked now
    p = threading.Thread(target=prober, daemon=True)
    p.start()
    for t in threads:
        t.join(180)
    stop.set()
    p.join(15)
    assert not any(t.is_alive() for t in threads), "exec requests still hanging"
    bad = [(i, r) for i, r in enumerate(results) if not (hasattr(r, "status") and r.status == 200 and
                                                         r.json().get("status") == "SUCCEEDED")]
    assert not bad, f"{len(bad)} of {n} execs did not succeed; first: {bad[:3]}"
    assert len(health) >= 10, f"only {len(health)} health probes ran"
    # Starved would mean waiting for the 5 s execs to end; 2.5 s leaves room for a loaded machine.
    slow = [h for h in health if h[1] != 200 or h[0] >= 2.5]
    assert not slow, f"GET /health starved while 200 execs were parked: {slow[:10]} of {len(health)}"
    for s in boxes:
        assert_no_uid_processes(s.uid, 5)
