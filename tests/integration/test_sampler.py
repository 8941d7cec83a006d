# SPDX-License-Identifier: MIT
"""The sampling supervisor (issue 4): on a worker where no cgroup can limit a sandbox, memory and
processes are limited by sampling /proc (src/core/sampler.c) — RLIMIT_NPROC refuses forks past the
limit, and the sampler kills every process of a sandbox uid that is over its memory or process limit.
/healthz and doctor say "sampled" for both, never a cgroup.

The degraded worker: the daemon runs in a private mount namespace (`unshare -m`) in which every cgroup
mount is read-only, so the launch helper can create no cgroup at all (no limit cgroups, no v2 tracking).

Set SANDLOOM_TEST_RUNTIME=bwrap to run it on the bwrap runtime."""

import json
import os
import shutil
import signal
import subprocess

import pytest

from conftest import BINARY, clean_env
from helpers import Sandbox, assert_ok, wait_until
from exec_helpers import (FORK_BOMB, Background, assert_no_uid_processes, brief, denv, find_uid_process, run,
                          uid_pids)

MiB = 1024 * 1024

# Inside `unshare -m --propagation private`: every cgroup mount read-only for this namespace only.
RO_CGROUPS = ('for m in $(awk \'$9 ~ /^cgroup/ {print $5}\' /proc/self/mountinfo); do '
              'mount -o remount,bind,ro "$m" || exit 99; done; exec "$@"')
RO_PREFIX = ["unshare", "-m", "--propagation", "private", "sh", "-c", RO_CGROUPS, "sh"]

pytestmark = pytest.mark.skipif(not shutil.which("unshare"), reason="unshare (util-linux) is not installed; "
                                                                    "scripts/deps installs it")


def degraded(daemon_factory, settings=None):
    """A daemon on which no cgroup is writable."""
    d = daemon_factory(env=denv(settings), run=False)
    orig = d.command
    d.command = lambda: [*RO_PREFIX, *orig()]
    d.start()
    return d


def healthz(d):
    return assert_ok(d.client().get("/healthz"))


def in_memory_cgroup(pid):
    """The memory cgroup path of PID (host view), or None."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            if "memory" in ctls.split(","):
                return path
    return None


# 2 GiB in 64 MiB pieces, every page written, then held: on a fast machine the allocation alone
# may take less than one sampling interval (sampled means it can go over for that long).
MEMORY_BOMB = ("import time\n"
               "l = []\n"
               "while len(l) < 32:\n"
               "    l.append(b'x' * (64 << 20))\n"
               "time.sleep(5)\n"
               "print('survived')\n"
               "#membomb")


def test_memory_bomb_is_killed_by_the_sampler_and_other_sandboxes_are_not_disturbed(daemon_factory):
    d = degraded(daemon_factory, {"SANDBOX_MEMORY_LIMIT_BYTES": "256M"})
    c = d.client()
    rc = healthz(d)["resource_control"]
    assert rc["memory"]["mechanism"] == "sampled", rc["memory"]
    bomb, calm = Sandbox.create(c), Sandbox.create(c)
    other = Background(run, calm, ["/bin/sh", "-c", "sleep 2; echo fine"])
    other.start()
    bg = Background(run, bomb, ["python3", "-c", MEMORY_BOMB], timeout_seconds=120)
    bg.start()
    # Really no memory cgroup of a sandbox: the bomb sits in the daemon's own one.
    pid = find_uid_process(bomb.uid, "membomb", timeout=20)
    path = in_memory_cgroup(pid)
    assert path is None or "/s-" not in path, f"the bomb is in a sandbox memory cgroup: {path}"
    rec = bg.get(120)
    assert rec["status"] == "FAILED" and rec["oom_killed"] is True and rec["signal"] == 9, brief(rec)
    assert "survived" not in rec["stdout"]
    assert "sandloom: killed" in rec["stderr"] and "memory" in rec["stderr"] and "limit of 256 MiB" in rec["stderr"], brief(rec)
    rec2 = other.get(60)
    assert rec2["status"] == "SUCCEEDED" and rec2["stdout"] == "fine\n" and rec2["oom_killed"] is False, brief(rec2)
    # The daemon is alive, counted the kill, and the sandbox works again.
    assert c.get("/health").status == 200
    sampler = healthz(d)["resource_control"]["sampler"]
    assert sampler["kills"]["memory"] >= 1 and sampler["kills"]["pids"] == 0, sampler
    rec3 = run(bomb, ["/bin/echo", "again"])
    assert rec3["status"] == "SUCCEEDED" and rec3["oom_killed"] is False and rec3["stderr"] == "", brief(rec3)
    assert_no_uid_processes(bomb.uid, 5)


def test_every_exec_of_the_over_limit_sandbox_is_killed_and_marked(daemon_factory):
    d = degraded(daemon_factory, {"SANDBOX_MEMORY_LIMIT_BYTES": "200M"})
    s = Sandbox.create(d.client())
    idle = Background(run, s, ["/bin/sh", "-c", "sleep 60 #idle"], exec_scope="a", timeout_seconds=120)
    idle.start()
    find_uid_process(s.uid, "idle", timeout=20)
    rec = run(s, ["python3", "-c", MEMORY_BOMB], exec_scope="b", timeout_seconds=120)
    assert rec["status"] == "FAILED" and rec["oom_killed"] is True, brief(rec)
    rec2 = idle.get(60)
    # The limit is the sandbox's: the idle exec went with it, and says why.
    assert rec2["status"] == "FAILED" and rec2["oom_killed"] is True and rec2["signal"] == 9, brief(rec2)
    assert rec2["duration_ms"] < 50000, brief(rec2)


def test_fork_bomb_never_exceeds_the_limit_without_a_pids_cgroup(daemon_factory):
    limit = 64
    d = degraded(daemon_factory, {"SANDBOX_MAX_PROCESSES": str(limit)})
    c = d.client()
    rc = healthz(d)["resource_control"]
    assert rc["pids"]["mechanism"] == "sampled", rc["pids"]
    s = Sandbox.create(c)
    bg = Background(run, s, ["python3", "-c", FORK_BOMB + "#forkbomb"], timeout_seconds=6)
    bg.start()
    find_uid_process(s.uid, "forkbomb", timeout=20)
    most, health_ok, samples = 0, 0, 0
    while bg.is_alive() and samples < 400:
        most = max(most, len(uid_pids(s.uid)))
        samples += 1
        if samples % 20 == 0:
            health_ok += c.get("/health").status == 200
    rec = bg.get(60)
    # RLIMIT_NPROC (per uid, one uid per sandbox) refuses the forks past the limit: the bomb
    # reaches it and spins there until its timeout, like under a pids cgroup.
    assert rec["status"] == "TIMED_OUT", brief(rec)
    assert limit // 2 < most <= limit, f"{most} processes of uid {s.uid} seen, limit {limit}"
    assert health_ok == samples // 20, "/health did not answer during the fork bomb"
    assert_no_uid_processes(s.uid, 10, "after the fork bomb")


def _spawn_as(uid, n):
    """N sleeping processes of UID started by the test (root) itself: they escape the sandbox's
    RLIMIT_NPROC, as processes of the uid that were never limited would. Each one execs
    /bin/sleep: a forked copy of pytest would carry its whole resident memory (counted once per
    process), and 15 of them can pass the memory limit before the process count is looked at."""
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            try:
                os.setgid(uid)
                os.setuid(uid)
                os.execv("/bin/sleep", ["sleep", "60"])
            finally:
                os._exit(127)
        pids.append(pid)
    return pids


def test_processes_over_the_limit_are_all_killed_by_the_sampler(daemon_factory):
    limit = 10
    d = degraded(daemon_factory, {"SANDBOX_MAX_PROCESSES": str(limit)})
    s = Sandbox.create(d.client())
    bg = Background(run, s, ["/bin/sh", "-c", "sleep 60 #victim"], timeout_seconds=120)
    bg.start()
    find_uid_process(s.uid, "victim", timeout=20)
    extra = _spawn_as(s.uid, limit + 5)
    try:
        rec = bg.get(30)
    finally:
        for p in extra:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(p, 0)
    assert rec["status"] == "FAILED" and rec["signal"] == 9 and rec["oom_killed"] is False, brief(rec)
    assert "sandloom: killed" in rec["stderr"] and f"over its limit of {limit}" in rec["stderr"], brief(rec)
    sampler = healthz(d)["resource_control"]["sampler"]
    assert sampler["kills"]["pids"] >= 1, sampler
    assert_no_uid_processes(s.uid, 5)


def test_healthz_says_sampled_for_memory_and_pids_with_evidence(daemon_factory):
    d = degraded(daemon_factory, {"SANDBOX_SAMPLE_INTERVAL_MS": "100"})
    h = healthz(d)
    rc = h["resource_control"]
    for res in ("memory", "pids"):
        assert rc[res]["mechanism"] == "sampled", rc[res]
        assert "sampling supervisor" in rc[res]["evidence"], rc[res]
        assert "Read-only file system" in rc[res]["evidence"], rc[res]
    assert rc["pids"]["limit"] == 256 and rc["memory"]["limit"] == 1 << 30, rc
    assert "RLIMIT_NPROC" in rc["pids"]["evidence"]
    assert not rc["cpu"]["mechanism"].startswith("cgroup"), rc["cpu"]
    sampler = rc["sampler"]
    assert sampler["interval_ms"] == 100 and sampler["enforces"] == ["memory", "pids"], sampler
    assert wait_until(lambda: healthz(d)["resource_control"]["sampler"]["ticks"] >= 3, timeout=10)
    # No exec, no sandbox process: no tick looks at /proc.
    sampler = healthz(d)["resource_control"]["sampler"]
    assert sampler["scans"] == 0 and sampler["execs_running"] == 0, sampler
    s = Sandbox.create(d.client())
    bg = Background(run, s, ["/bin/sh", "-c", "sleep 1.5"])
    bg.start()
    assert wait_until(lambda: healthz(d)["resource_control"]["sampler"]["scans"] >= 3, timeout=10)
    sampler = healthz(d)["resource_control"]["sampler"]
    assert sampler["execs_running"] == 1 and sampler["sandbox_processes"] >= 1, sampler
    print(f"\nsampler scan with {sampler['processes_seen']} processes ({sampler['sandbox_processes']} of sandboxes): "
          f"wall last {sampler['last_scan_us']} us, mean {sampler['mean_scan_us']} us, max {sampler['max_scan_us']} us; "
          f"CPU last {sampler['last_scan_cpu_us']} us, mean {sampler['mean_scan_cpu_us']} us")
    assert bg.get(30)["status"] == "SUCCEEDED"
    assert wait_until(lambda: healthz(d)["resource_control"]["sampler"]["execs_running"] == 0, timeout=10)
    assert "sampler" not in d.client().get("/healthz", auth=False).json()


def test_doctor_says_sampled_where_cgroups_are_read_only(tmp_path):
    p = subprocess.run([*RO_PREFIX, BINARY, "doctor", "--json", "--data-dir", str(tmp_path / "data")],
                       stdin=subprocess.DEVNULL, capture_output=True, env=clean_env(None), timeout=30)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    checks = {c["check"]: c for c in json.loads(p.stdout)["checks"]}
    for res in ("memory", "pids"):
        row = checks[f"limit {res}"]
        assert row["status"] == "WARN" and row["detail"].startswith("sampled:"), row
        assert "enforced" not in row["detail"].split(":")[0]


def test_no_sampler_where_cgroups_limit_memory_and_pids(daemon_factory):
    d = daemon_factory(env=denv())
    rc = healthz(d)["resource_control"]
    if rc["memory"]["mechanism"] == "sampled" or rc["pids"]["mechanism"] == "sampled":
        pytest.skip("this host has no usable memory or pids cgroup")
    assert "sampler" not in rc, rc


def test_sampler_scan_cost_with_many_processes(daemon_factory):
    n = 1000
    d = degraded(daemon_factory, {"SANDBOX_MAX_PROCESSES": str(n + 100)})
    s = Sandbox.create(d.client())
    script = f"i=0; while [ $i -lt {n} ]; do sleep 120 & i=$((i+1)); done; echo started; wait #many"
    bg = Background(run, s, ["/bin/sh", "-c", script], timeout_seconds=300)
    bg.start()
    assert wait_until(lambda: len(uid_pids(s.uid)) >= n, timeout=60), len(uid_pids(s.uid))
    scans0 = healthz(d)["resource_control"]["sampler"]["scans"]
    assert wait_until(lambda: healthz(d)["resource_control"]["sampler"]["scans"] >= scans0 + 10, timeout=30)
    sampler = healthz(d)["resource_control"]["sampler"]
    assert sampler["sandbox_processes"] >= n, sampler
    assert sampler["kills"] == {"memory": 0, "pids": 0}, sampler
    print(f"\nsampler scan with {sampler['processes_seen']} processes ({sampler['sandbox_processes']} of sandboxes): "
          f"wall last {sampler['last_scan_us']} us, mean {sampler['mean_scan_us']} us, max {sampler['max_scan_us']} us; "
          f"CPU last {sampler['last_scan_cpu_us']} us, mean {sampler['mean_scan_cpu_us']} us; per tick of {sampler['interval_ms']} ms")
    assert_ok(s.release())
    bg.get(60)
    assert_no_uid_processes(s.uid, 10)
