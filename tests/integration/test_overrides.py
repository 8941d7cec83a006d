# SPDX-License-Identifier: MIT
"""Per-sandbox limits asked for at resolve (issue 4): `"limits": {"memory_bytes", "max_processes",
"cpu_quota", "disk_quota_bytes"}` in the resolve body, within the operator's maxima (SANDBOX_MAX_*; by
default the worker's default is the maximum: a sandbox may lower its limits, not raise them). A value
over its maximum is 422 SANDBOX_LIMIT_EXCEEDS_MAXIMUM; the effective limits are in the sandbox record
(persisted with it); and they are enforced by the same code as the defaults — the sandbox's cgroups here
(the kernel files of the cgroup the command really runs in are read), the sampling supervisor where
cgroups are unusable, and the disk quota. The field is optional: a client that does not send it gets
the worker's defaults, as before."""

import os
import shutil

import pytest

from helpers import Sandbox, assert_error, assert_ok, unique_id, wait_until
from exec_helpers import (FORK_BOMB, Background, assert_no_uid_processes, brief, denv, find_uid_process, post_exec,
                          run, uid_pids, v1_hierarchies)

MiB = 1024 * 1024
GiB = 1024 * MiB
API = "/api/v1/sandboxes"


def resolve(c, limits=None, sandbox_id=None, scope="scope-ovr"):
    body = {"sandbox_id": sandbox_id or unique_id(), "workspace_scope_id": scope}
    if limits is not None:
        body["limits"] = limits
    return c.post(f"{API}/resolve", body)


def create(c, limits=None):
    s = Sandbox(c)
    r = s.resolve(**({"limits": limits} if limits is not None else {}))
    assert_ok(r)
    assert_ok(s.connect())
    return s


HIERARCHIES = v1_hierarchies()
need_v1 = pytest.mark.skipif(not {"memory", "pids", "cpu"} <= set(HIERARCHIES),
                             reason="cgroup v1 memory, pids and cpu hierarchies are not mounted on this host")


def cgroup_file(pid, controller, name):
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            if controller in ctls.split(","):
                assert "/s-" in path, f"process {pid} is not in a sandbox cgroup: {path}"
                with open(f"{HIERARCHIES[controller]}{path}/{name}") as g:
                    return int(g.read().strip())
    raise AssertionError(f"process {pid} has no {controller} cgroup")


# --- the wire format ------------------------------------------------------------------------------

def test_without_limits_the_record_shows_the_worker_defaults(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_MEMORY_LIMIT_BYTES": "512M", "SANDBOX_MAX_PROCESSES": "100"}))
    c = d.client()
    r = assert_ok(resolve(c))
    assert r["limits"] == {"memory_bytes": 512 * MiB, "max_processes": 100, "cpu_quota": None,
                           "disk_quota_bytes": None}, r
    got = assert_ok(c.get(f"{API}/{r['sandbox_id']}"))
    assert got["limits"] == r["limits"]


def test_limits_within_the_maxima_are_kept_and_shown(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_MAX_MEMORY_LIMIT_BYTES": "4G", "SANDBOX_MAX_CPU_QUOTA": "2",
                                 "SANDBOX_MAX_DISK_QUOTA_BYTES": "1G"}))
    c = d.client()
    asked = {"memory_bytes": 2 * GiB, "max_processes": 50, "cpu_quota": 1.5, "disk_quota_bytes": 100 * MiB}
    r = assert_ok(resolve(c, asked))
    assert r["limits"] == asked, r
    # Only some of them: the others are the defaults.
    r2 = assert_ok(resolve(c, {"max_processes": 10}))
    assert r2["limits"] == {"memory_bytes": GiB, "max_processes": 10, "cpu_quota": None, "disk_quota_bytes": None}
    # Persisted: the same after a restart of the daemon.
    d.stop()
    d.start()
    got = assert_ok(d.client().get(f"{API}/{r['sandbox_id']}"))
    assert got["limits"] == asked, got


@pytest.mark.parametrize("limits", [
    {"memory_bytes": 2 * GiB},                      # default 1 GiB, no maximum set: the default is the maximum
    {"max_processes": 257},
    {"cpu_quota": 0.5},                             # default 0.25 (below), no maximum set
    {"disk_quota_bytes": 2 * GiB},                  # default 1 GiB (below)
])
def test_limits_above_the_maximum_are_422(daemon_factory, limits):
    d = daemon_factory(env=denv({"SANDBOX_CPU_QUOTA": "0.25", "SANDBOX_DISK_QUOTA_BYTES": "1G"}))
    c = d.client()
    sid = unique_id()
    r = resolve(c, limits, sandbox_id=sid)
    assert_error(r, 422, "SANDBOX_LIMIT_EXCEEDS_MAXIMUM")
    assert "maximum" in r.json()["detail"]["message"]
    # Nothing was created.
    assert_error(c.get(f"{API}/{sid}"), 404, "SANDBOX_NOT_FOUND")


def test_lowering_is_always_allowed_and_unlimited_defaults_take_any_value(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_MEMORY_LIMIT_BYTES": "0"}))
    c = d.client()
    r = assert_ok(resolve(c, {"memory_bytes": 64 * GiB, "max_processes": 1, "cpu_quota": 0.1,
                              "disk_quota_bytes": 10 * MiB}))
    assert r["limits"] == {"memory_bytes": 64 * GiB, "max_processes": 1, "cpu_quota": 0.1,
                           "disk_quota_bytes": 10 * MiB}


@pytest.mark.parametrize("limits", [
    "1G", [1], {"memory_bytes": "1G"}, {"memory_bytes": -1}, {"memory_bytes": 1024}, {"max_processes": 0},
    {"max_processes": 1.5}, {"cpu_quota": 0}, {"cpu_quota": 0.0005}, {"cpu_quota": "1"}, {"cpu_quota": 5000},
    {"disk_quota_bytes": True}, {"no_such_limit": 1},
])
def test_malformed_limits_are_422_invalid_request(daemon, limits):
    r = resolve(daemon.client(), limits)
    assert_error(r, 422, "SANDBOX_INVALID_REQUEST")
    assert any("limits" in ".".join(map(str, e["loc"])) for e in r.json()["detail"]["errors"]), r.json()


def test_null_limits_are_the_defaults(daemon):
    r = assert_ok(resolve(daemon.client(), None))
    body = {"sandbox_id": unique_id(), "workspace_scope_id": "s", "limits": None}
    r2 = assert_ok(daemon.client().post(f"{API}/resolve", body))
    assert r2["limits"] == r["limits"]


def test_a_live_sandbox_keeps_its_limits_and_other_limits_are_409(daemon):
    c = daemon.client()
    sid = unique_id()
    assert_ok(resolve(c, {"max_processes": 30}, sandbox_id=sid))
    # The same limits (or none) answer as always; others are a conflict, not silently ignored.
    assert assert_ok(resolve(c, {"max_processes": 30}, sandbox_id=sid))["limits"]["max_processes"] == 30
    assert assert_ok(resolve(c, None, sandbox_id=sid))["limits"]["max_processes"] == 30
    assert_error(resolve(c, {"max_processes": 31}, sandbox_id=sid), 409, "SANDBOX_LIMITS_MISMATCH")
    # A new lifecycle takes new limits.
    assert_ok(c.delete(f"{API}/{sid}"))
    assert assert_ok(resolve(c, {"max_processes": 31}, sandbox_id=sid))["limits"]["max_processes"] == 31
    assert_ok(c.delete(f"{API}/{sid}"))
    assert assert_ok(resolve(c, None, sandbox_id=sid))["limits"]["max_processes"] == 256


# --- enforcement: cgroups -------------------------------------------------------------------------

MEMORY_HOG = ("l = []\n"
              "while len(l) < 16:\n"
              "    l.append(b'x' * (32 << 20))\n"
              "print('survived')\n"
              "#hog")


@need_v1
def test_memory_override_is_the_sandbox_cgroup_limit_and_is_enforced(daemon_factory):
    d = daemon_factory(env=denv())
    c = d.client()
    small, default = create(c, {"memory_bytes": 128 * MiB}), create(c)
    bg = Background(run, small, ["python3", "-c", MEMORY_HOG], timeout_seconds=120)
    bg.start()
    pid = find_uid_process(small.uid, "#hog", timeout=20)
    assert cgroup_file(pid, "memory", "memory.limit_in_bytes") == 128 * MiB
    rec = bg.get(120)
    assert rec["status"] == "FAILED" and rec["oom_killed"] is True, brief(rec)
    assert rec["max_rss_bytes"] <= 128 * MiB, brief(rec)
    # Positive control: the same 512 MiB fits the default limit (1 GiB).
    rec = run(default, ["python3", "-c", MEMORY_HOG], timeout_seconds=120)
    assert rec["status"] == "SUCCEEDED" and "survived" in rec["stdout"], brief(rec)
    assert_no_uid_processes(small.uid, 5)


@need_v1
def test_process_and_cpu_overrides_are_the_sandbox_cgroup_limits(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_MAX_CPU_QUOTA": "1"}))
    c = d.client()
    s = create(c, {"max_processes": 20, "cpu_quota": 0.25})
    bg = Background(run, s, ["python3", "-c", FORK_BOMB + "#forkbomb"], timeout_seconds=5)
    bg.start()
    pid = find_uid_process(s.uid, "forkbomb", timeout=20)
    assert cgroup_file(pid, "pids", "pids.max") == 20
    assert cgroup_file(pid, "cpu", "cpu.cfs_quota_us") == cgroup_file(pid, "cpu", "cpu.cfs_period_us") // 4
    most = 0
    while bg.is_alive():
        most = max(most, len(uid_pids(s.uid)))
    rec = bg.get(60)
    assert rec["status"] == "TIMED_OUT", brief(rec)
    assert 10 < most <= 20, f"{most} processes of uid {s.uid}, limit 20"
    assert_no_uid_processes(s.uid, 10)


# --- enforcement: the sampling supervisor (no usable cgroup) ---------------------------------------

RO_CGROUPS = ('for m in $(awk \'$9 ~ /^cgroup/ {print $5}\' /proc/self/mountinfo); do '
              'mount -o remount,bind,ro "$m" || exit 99; done; exec "$@"')


@pytest.mark.skipif(not shutil.which("unshare"), reason="unshare (util-linux) is not installed")
def test_memory_override_is_enforced_by_the_sampler_without_cgroups(daemon_factory):
    d = daemon_factory(env=denv(), run=False)
    orig = d.command
    d.command = lambda: ["unshare", "-m", "--propagation", "private", "sh", "-c", RO_CGROUPS, "sh", *orig()]
    d.start()
    c = d.client()
    small, default = create(c, {"memory_bytes": 150 * MiB}), create(c)
    # Held after the allocation: sampled, the kill may come up to one interval late.
    held = MEMORY_HOG.replace("print('survived')", "import time; time.sleep(5); print('survived')")
    rec = run(small, ["python3", "-c", held], timeout_seconds=120)
    assert rec["status"] == "FAILED" and rec["oom_killed"] is True, brief(rec)
    assert "limit of 150 MiB" in rec["stderr"], brief(rec)
    rec = run(default, ["python3", "-c", MEMORY_HOG], timeout_seconds=120)
    assert rec["status"] == "SUCCEEDED" and "survived" in rec["stdout"], brief(rec)


# --- enforcement: disk ----------------------------------------------------------------------------

def test_disk_quota_override_is_enforced(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_MIN_FREE_BYTES": "0", "SANDBOX_DISK_USAGE_REFRESH_SECONDS": "1"}))
    c = d.client()
    s, other = create(c, {"disk_quota_bytes": 2 * MiB}), create(c)
    assert assert_ok(s.get())["disk"]["quota_bytes"] == 2 * MiB
    assert assert_ok(other.get())["disk"]["quota_bytes"] == 0
    assert_ok(s.raw_put("/workspace/blob.bin", os.urandom(3 * MiB)))
    assert wait_until(lambda: assert_ok(s.get())["disk"]["bytes"] >= 3 * MiB, timeout=15)
    assert_error(s.files_put("/workspace/more.txt", b"x"), 507, "SANDBOX_DISK_QUOTA_EXCEEDED")
    assert_error(post_exec(s, ["/bin/true"]), 507, "SANDBOX_DISK_QUOTA_EXCEEDED")
    # The sandbox without a quota of its own is not held to it.
    assert_ok(other.raw_put("/workspace/blob.bin", os.urandom(3 * MiB)))
    assert_ok(other.files_put("/workspace/more.txt", b"x"))


def test_bad_maximum_refuses_start_up(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_MAX_CPU_QUOTA": "lots"}), run=False)
    with pytest.raises(Exception) as e:
        d.start()
    assert type(e.value).__name__ == "DaemonError", repr(e.value)
    assert "SANDBOX_MAX_CPU_QUOTA" in d.all_stderr()
