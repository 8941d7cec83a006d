# SPDX-License-Identifier: MIT
"""Per-sandbox limits, aggregated over all its execs (issue 4, DESIGN §6), enforced by the sandbox's
cgroups: memory (an OOM-killed command ends FAILED with oom_killed), pids (a fork bomb never has more
processes on the host than the limit, and the pids cgroup's own counter shows it stopped it), CPU
quota (throttled), and the peak memory reported in max_rss_bytes. Each test tries to exceed the
limit and reads the kernel's counters of the cgroup the sandbox's processes are really in
(/proc/PID/cgroup), so a limit only configured but not in force fails it.

Set SANDLOOM_TEST_RUNTIME=bwrap to run it on the bwrap runtime."""

import os

import pytest

from helpers import Sandbox, wait_until
from exec_helpers import (FORK_BOMB, Background, assert_no_uid_processes, brief, denv, find_uid_process, run,
                          uid_pids, v1_hierarchies)

MiB = 1024 * 1024
V1_ROOT = "/sys/fs/cgroup"


HIERARCHIES = v1_hierarchies()
pytestmark = pytest.mark.skipif(not {"memory", "pids", "cpu"} <= set(HIERARCHIES),
                                reason="these tests exercise cgroup v1 memory, pids and cpu hierarchies, "
                                       "which this host does not mount")


def cgroup_dir(pid, controller):
    """The directory of PID's cgroup in CONTROLLER's v1 hierarchy (the host's view)."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            if controller in ctls.split(","):
                return HIERARCHIES[controller] + path
    raise AssertionError(f"process {pid} has no {controller} cgroup")


def keyed(path):
    with open(path) as f:
        return {k: int(v) for k, v in (line.split() for line in f if line.strip())}


def read_int(path):
    with open(path) as f:
        return int(f.read().strip())


def sandbox_cgroup(s, needle, controller):
    """Waits for a process of S whose command line contains NEEDLE; its CONTROLLER cgroup."""
    pid = find_uid_process(s.uid, needle, timeout=20)
    assert pid, f"no process of uid {s.uid} running {needle!r}"
    d = cgroup_dir(pid, controller)
    assert "/s-" in d, f"process {pid} is not in a sandbox cgroup: {d}"
    return d


def test_memory_bomb_is_oom_killed_and_other_sandboxes_are_not_disturbed(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_MEMORY_LIMIT_BYTES": "256M"}))
    c = d.client()
    bomb, calm = Sandbox.create(c), Sandbox.create(c)
    # 2 GiB in 64 MiB pieces, every page written.
    code = "import time\nl = []\nwhile len(l) < 32:\n    l.append(b'x' * (64 << 20))\nprint('survived')"
    other = Background(run, calm, ["/bin/sh", "-c", "sleep 2; echo fine"])
    other.start()
    rec = run(bomb, ["python3", "-c", code], timeout_seconds=120)
    assert rec["status"] == "FAILED" and rec["oom_killed"] is True and rec["signal"] == 9, brief(rec)
    assert "survived" not in rec["stdout"]
    # The peak charged to the sandbox never went over its limit.
    assert rec["max_rss_bytes"] <= 256 * MiB, brief(rec)
    rec2 = other.get(60)
    assert rec2["status"] == "SUCCEEDED" and rec2["stdout"] == "fine\n" and rec2["oom_killed"] is False, brief(rec2)
    # The daemon is alive and the sandbox still works after the kill.
    assert d.client().get("/health").status == 200
    rec3 = run(bomb, ["/bin/echo", "again"])
    assert rec3["status"] == "SUCCEEDED" and rec3["oom_killed"] is False, brief(rec3)
    assert_no_uid_processes(bomb.uid, 5)


def test_fork_bomb_is_stopped_by_the_pids_cgroup(daemon_factory):
    limit = 64
    d = daemon_factory(env=denv({"SANDBOX_MAX_PROCESSES": str(limit), "SANDBOX_NETNS_LINGER_SECONDS": "1"}))
    c = d.client()
    s = Sandbox.create(c)
    bg = Background(run, s, ["python3", "-c", FORK_BOMB + "#forkbomb"], timeout_seconds=6)
    bg.start()
    pids_dir = sandbox_cgroup(s, "forkbomb", "pids")
    assert read_int(f"{pids_dir}/pids.max") == limit
    most, health_ok, samples = 0, 0, 0
    while bg.is_alive() and samples < 400:
        most = max(most, len(uid_pids(s.uid)))
        samples += 1
        if samples % 20 == 0:
            health_ok += c.get("/health").status == 200
    rec = bg.get(60)
    assert rec["status"] == "TIMED_OUT", brief(rec)
    # Host view: never more of the uid's processes than the sandbox's limit, and the limit was
    # reached (so the bomb was really stopped by it, not by lack of trying).
    assert 0 < most <= limit, f"{most} processes of uid {s.uid} seen, limit {limit}"
    events = keyed(f"{pids_dir}/pids.events")
    assert events.get("max", 0) > 0, f"pids.events of {pids_dir}: {events} (the cgroup never refused a fork)"
    assert health_ok == samples // 20, "/health did not answer during the fork bomb"
    assert_no_uid_processes(s.uid, 10, "after the fork bomb")
    # The sandbox's cgroups are removed once it has been idle for the linger time.
    assert wait_until(lambda: not os.path.exists(pids_dir), timeout=15), f"{pids_dir} is still there"


def test_cpu_quota_throttles_a_busy_loop(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_CPU_QUOTA": "0.5"}))
    s = Sandbox.create(d.client())
    # Until it has had 1 s of CPU (not of wall time): on a loaded host it keeps asking for more
    # than its quota long enough to be throttled.
    code = "import time\nwhile time.process_time() < 1.0:\n    pass\n#busyloop"
    bg = Background(run, s, ["python3", "-c", code], timeout_seconds=60)
    bg.start()
    cpu_dir = sandbox_cgroup(s, "busyloop", "cpu")
    assert read_int(f"{cpu_dir}/cpu.cfs_quota_us") == read_int(f"{cpu_dir}/cpu.cfs_period_us") // 2
    rec = bg.get(60)
    assert rec["status"] == "SUCCEEDED", brief(rec)
    stat = keyed(f"{cpu_dir}/cpu.stat")
    assert stat["nr_throttled"] > 0, f"cpu.stat of {cpu_dir}: {stat}"
    # Half a core: about half of the wall time; well under it in any case.
    assert rec["cpu_ms"] < 0.75 * rec["duration_ms"], brief(rec)


def test_max_rss_reports_the_peak_memory_of_the_exec(daemon_factory):
    d = daemon_factory(env=denv())
    s = Sandbox.create(d.client())
    rec = run(s, ["python3", "-c", "b = b'x' * (100 << 20)"])
    assert rec["status"] == "SUCCEEDED", brief(rec)
    assert 100 * MiB <= rec["max_rss_bytes"] <= 140 * MiB, brief(rec)
    # A small command afterwards reports its own peak, not the previous one's.
    rec = run(s, ["/bin/true"])
    assert rec["max_rss_bytes"] < 50 * MiB, brief(rec)


def test_limits_and_rlimits_reach_the_command(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_MEMORY_LIMIT_BYTES": "300M", "SANDBOX_MAX_PROCESSES": "100",
                                 "SANDBOX_CPU_SECONDS": "50", "SANDBOX_MAX_FILE_SIZE_BYTES": "1M",
                                 "SANDBOX_MAX_OPEN_FILES": "200"}))
    s = Sandbox.create(d.client())
    bg = Background(run, s, ["/bin/sh", "-c", "ulimit -t; ulimit -f; ulimit -n; sleep 1 #rlimits"])
    bg.start()
    # Where the command's processes really are (the host's view: the sandbox may have a cgroup
    # namespace), and the limits written there.
    dirs = {ctl: sandbox_cgroup(s, "rlimits", ctl) for ctl in ("memory", "pids", "cpu", "cpuacct")}
    assert read_int(f"{dirs['memory']}/memory.limit_in_bytes") == 300 * MiB
    assert read_int(f"{dirs['pids']}/pids.max") == 100
    assert read_int(f"{dirs['cpu']}/cpu.cfs_quota_us") == -1            # SANDBOX_CPU_QUOTA unset
    rec = bg.get(60)
    assert rec["status"] == "SUCCEEDED", brief(rec)
    assert rec["stdout"].splitlines() == ["50", "2048", "200"], brief(rec)    # ulimit -f: 512-byte blocks
    # RLIMIT_FSIZE really stops a writer.
    rec = run(s, ["/bin/sh", "-c", "head -c 2000000 /dev/zero > /workspace/big; echo rc=$?"])
    assert "rc=0" not in rec["stdout"], brief(rec)


def test_bad_cpu_quota_refuses_start_up(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_CPU_QUOTA": "half"}), run=False)
    with pytest.raises(Exception) as e:
        d.start()
    assert type(e.value).__name__ == "DaemonError", repr(e.value)
    assert "SANDBOX_CPU_QUOTA" in d.all_stderr()
