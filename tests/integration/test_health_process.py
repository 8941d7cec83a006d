# SPDX-License-Identifier: MIT
"""The "process" block of the authenticated /healthz: what the daemon costs (pid, RSS, threads, the
processes in its tree), read by the daemon from /proc/self so `sandloom bench idle|memory` can
measure a daemon on another host. Only with the token."""

import os
import time

from exec_helpers import children_index, run
from helpers import assert_ok


def proc_descendants(root):
    """The number of descendants of ROOT, from this host's /proc."""
    children = children_index()
    seen, todo = 0, [root]
    while todo:
        kids = children.get(todo.pop(), [])
        seen += len(kids)
        todo.extend(kids)
    return seen


def proc_status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_process_block_needs_the_token(client):
    for headers in ({}, {"Authorization": "Bearer not-the-token"}):
        r = client.get("/healthz", auth=False, headers=headers)
        if r.status == 200:
            assert "process" not in r.json(), f"/healthz without a valid token shows the process block: {r.json()}"
        else:
            assert r.status == 401, r


def test_process_block_matches_what_proc_says(client, daemon):
    pid = daemon.proc.pid
    for attempt in range(5):
        p = assert_ok(client.get("/healthz"))["process"]
        assert set(p) == {"pid", "rss_bytes", "threads", "children"}, p
        assert p["pid"] == pid
        rss_kib = proc_status(pid, "VmRSS")
        # Same process, read moments apart: within a factor of two, and plausible for a daemon.
        assert 1 << 20 < p["rss_bytes"] < 8 << 30, p
        assert rss_kib * 1024 / 2 <= p["rss_bytes"] <= rss_kib * 1024 * 2, (p, rss_kib)
        assert p["threads"] >= 1 and abs(p["threads"] - proc_status(pid, "Threads")) <= 4, p
        ours = proc_descendants(pid)
        if p["children"] == ours:
            break
        time.sleep(0.2)  # a process started or ended between the two counts: look again
    else:
        raise AssertionError(f"the daemon counts {p['children']} descendants, /proc shows {ours}")


def test_process_block_counts_the_processes_of_a_running_exec(client, sandbox):
    before = assert_ok(client.get("/healthz"))["process"]["children"]
    rec = run(sandbox, ["/bin/sh", "-c", "sleep 5 & sleep 5 & wait"], background=True)
    assert rec["status"] == "RUNNING", rec
    deadline = time.monotonic() + 10
    seen = before
    while time.monotonic() < deadline:
        seen = assert_ok(client.get("/healthz"))["process"]["children"]
        if seen >= before + 3:
            break
        time.sleep(0.1)
    assert seen >= before + 3, f"children stayed {seen} (idle {before}) while sh and two sleeps ran"
