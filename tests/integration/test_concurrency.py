# SPDX-License-Identifier: MIT
"""20 concurrent writers on one file while readers read it in a loop: every read is exactly one
of the written versions (writes are atomic: temp file, fsync, rename)."""

import base64
import hashlib
import random
import threading
import time

from helpers import Sandbox, assert_error, assert_ok

# Short hold wait: queueing 80 small writes takes well under a second, so a deadlocked hold shows
# up as SANDBOX_BUSY after 5 s instead of stalling the suite for the default 30 s per request.
DAEMON_ENV = {"SANDBOX_HOLD_WAIT_SECONDS": "5"}
WRITERS = 20
ROUNDS = 4
READERS = 4
SIZE = 64 * 1024


def version(writer, rnd):
    rng = random.Random(writer * 1000 + rnd)
    head = f"writer {writer} round {rnd}\n".encode()
    return head + rng.randbytes(SIZE - len(head))


def test_concurrent_writers_readers_only_ever_see_whole_versions(client, sandbox):
    path = "/workspace/contended.bin"
    initial = version(999, 0)
    assert_ok(sandbox.raw_put(path, initial))
    valid = {hashlib.sha256(initial).hexdigest()}
    for w in range(WRITERS):
        for r in range(ROUNDS):
            valid.add(hashlib.sha256(version(w, r)).hexdigest())

    failures = []
    reads = [0]
    lock = threading.Lock()
    done = threading.Event()
    start = threading.Barrier(WRITERS + READERS)

    def fail(msg):
        with lock:
            if len(failures) < 20:
                failures.append(msg)

    def guarded(fn):
        def run(*a):
            try:
                fn(*a)
            except OSError as e:
                fail(f"{fn.__name__}{a}: {e!r}")
        return run

    @guarded
    def writer(w):
        start.wait()
        for r in range(ROUNDS):
            if failures:
                return          # fail fast: one broken write is enough to report
            data = version(w, r)
            # Alternate the JSON and the raw write paths.
            resp = sandbox.files_put(path, data, timeout=15) if (w + r) % 2 else \
                sandbox.raw_put(path, data, timeout=15)
            if resp.status != 200:
                fail(f"writer {w} round {r}: {resp.status} {resp.body[:200]!r}")

    @guarded
    def reader(i):
        start.wait()
        n = 0
        while (not done.is_set() or n < 5) and not failures:
            if n % 2:
                resp = sandbox.raw_get(path, timeout=15)
                body = resp.body
            else:
                resp = sandbox.files_get(path, timeout=15)
                body = base64.b64decode(resp.json()["content_base64"]) if resp.status == 200 else b""
            n += 1
            if resp.status != 200:
                fail(f"reader {i}: {resp.status} {resp.body[:200]!r}")
                continue
            h = hashlib.sha256(body).hexdigest()
            if h not in valid:
                fail(f"reader {i} saw a torn/unknown version: {len(body)} bytes, starts {body[:40]!r}")
        with lock:
            reads[0] += n

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    threads += [threading.Thread(target=reader, args=(i,)) for i in range(READERS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads[:WRITERS]:
        t.join(timeout=120)
    done.set()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a writer or reader hung"
    assert not failures, "\n".join(failures)
    assert reads[0] >= READERS * 5 or failures
    final = sandbox.raw_get(path).body
    assert hashlib.sha256(final).hexdigest() in valid
    assert final.startswith(b"writer ")
    # No temp files left behind next to the target.
    names = [e["name"] for e in assert_ok(sandbox.list("/workspace"))["entries"]]
    assert names == ["contended.bin"], f"leftovers after concurrent writes: {names} ({time.monotonic() - t0:.1f}s)"


def test_many_sandboxes_in_parallel(client):
    """Creation, writes and releases of distinct sandboxes do not interfere."""
    errors = []

    def one(i):
        try:
            s = Sandbox.create(client)
            s.write("id.txt", s.id.encode())
            assert s.read("id.txt") == s.id.encode()
            assert_ok(s.release())
        except AssertionError as e:
            errors.append(f"{i}: {e}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors


def test_resolve_race_on_one_id_yields_one_lifecycle(client):
    s0 = Sandbox(client)
    results = []

    def go():
        s = Sandbox(client, s0.id, s0.scope)
        r = s.resolve()
        results.append(r)

    threads = [threading.Thread(target=go) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=15)
    assert len(results) == 12
    for r in results:
        assert r.status == 200, r
    assert len({(r.json()["lifecycle_id"], r.json()["generation"], r.json()["sandbox_uid"]) for r in results}) == 1


def test_busy_path_gets_409_sandbox_busy(daemon_factory):
    """A write that cannot get its path hold within SANDBOX_HOLD_WAIT_SECONDS answers 409
    SANDBOX_BUSY: a raw upload to the path is kept in flight while a second write comes."""
    d = daemon_factory(env={"SANDBOX_HOLD_WAIT_SECONDS": "1"})
    c = d.client()
    s = Sandbox.create(c)
    from helpers import build_url
    conn = c.connection(timeout=15)
    total = 4 * 1024 * 1024
    try:
        conn.putrequest("PUT", build_url(f"{s.base}/files/raw", {"path": "held.bin", "generation": s.generation}))
        conn.putheader("Authorization", f"Bearer {c.token}")
        conn.putheader("Content-Length", str(total))
        conn.endheaders()
        conn.send(b"h" * (total // 2))
        time.sleep(0.3)
        t0 = time.monotonic()
        r = s.files_put("held.bin", b"second writer", timeout=20)
        waited = time.monotonic() - t0
        conn.send(b"h" * (total - total // 2))
        first = conn.getresponse()
        first_body = first.read()
    finally:
        conn.close()
    assert first.status == 200, first_body
    assert_error(r, 409, "SANDBOX_BUSY")
    assert waited < 10
    assert s.raw_get("held.bin").body == b"h" * total
