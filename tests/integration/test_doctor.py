# SPDX-License-Identifier: MIT
"""`sandloom doctor` (table, JSON, exit status, data-directory modes, the store) and /healthz
"resource_control", on this host and on degraded ones: capabilities dropped with capsh,
cgroups made read-only in a private mount namespace (`unshare -m`)."""

import json
import os
import re
import shutil
import sqlite3
import subprocess
import time

import pytest

from conftest import BINARY, clean_env
from helpers import assert_ok

MECHANISMS = {"cgroup-v2", "cgroup-v1", "project-quota", "rlimit", "sampled", "none"}
RESOURCES = ("memory", "pids", "cpu", "disk", "open_files")
EXPECTED_CHECKS = ("privileges", "capabilities", "namespace mount", "namespace ipc", "namespace uts", "namespace net",
                   "namespace pid", "namespace cgroup", "namespace user", "mount + pivot_root", "seccomp",
                   "isolation level", "overlayfs", "cgroup version", "cgroup v2 (tracking)", "cgroup v1", "bubblewrap",
                   "data directory", "project quotas", "limit memory", "limit pids", "limit cpu", "limit disk",
                   "limit open_files", "disk space", "store")

# A shell prologue that, inside `unshare -m --propagation private`, makes every cgroup mount
# read-only for this mount namespace only (per-mount flag; the host's mounts are untouched).
RO_CGROUPS = ('for m in $(awk \'$9 ~ /^cgroup/ {print $5}\' /proc/self/mountinfo); do '
              'mount -o remount,bind,ro "$m" || exit 99; done; exec "$@"')


def v1_controllers():
    """Controllers bound to a v1 hierarchy on this host, from /proc/self/mountinfo."""
    found = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            fields = post.split()
            if len(fields) >= 3 and fields[0] == "cgroup":
                found.update(o for o in fields[2].split(",") if o not in ("rw", "ro") and "=" not in o)
    return found


def expected_cgroup_mechanism(controller):
    return "cgroup-v1" if controller in v1_controllers() else None


def run_doctor(*args, env=None, prefix=(), timeout=20):
    t0 = time.monotonic()
    p = subprocess.run([*prefix, BINARY, "doctor", *args], stdin=subprocess.DEVNULL, capture_output=True,
                       env=clean_env(env), timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode(), time.monotonic() - t0


def doctor_json(data_dir, env=None, prefix=()):
    rc, out, err, elapsed = run_doctor("--json", "--data-dir", str(data_dir), env=env, prefix=prefix)
    assert rc in (0, 1), (rc, out, err)
    doc = json.loads(out)
    return rc, {c["check"]: c for c in doc["checks"]}, doc, elapsed


def need_tool(name):
    if not shutil.which(name):
        pytest.skip(f"{name} is not installed (scripts/deps installs it)")


# --- doctor on this host ---

def test_doctor_table_has_a_status_and_a_fix_for_every_row_and_exits_0_here(tmp_path):
    rc, out, err, elapsed = run_doctor("--data-dir", str(tmp_path / "data"))
    assert rc == 0, out + err
    assert elapsed < 2.0, f"doctor took {elapsed:.2f}s"
    lines = out.splitlines()
    assert lines[0].startswith("CHECK")
    rows = {}
    for i, line in enumerate(lines[1:], 1):
        m = re.match(r"^(\S.*?)\s{2,}(OK|WARN|FAIL)\s{2,}(\S.*)$", line)
        if not m:
            continue
        rows[m.group(1)] = m.group(2)
        if m.group(2) != "OK":
            assert lines[i + 1].strip().startswith("fix: "), f"{line!r} has no fix line"
    for check in EXPECTED_CHECKS:
        assert check in rows, f"no row for {check}:\n{out}"
    assert "FAIL" not in rows.values()
    assert "The daemon can serve on this host." in out


def test_doctor_json_parses_and_reports_cgroup_v1_for_memory_pids_cpu_on_this_host(tmp_path):
    rc, checks, doc, elapsed = doctor_json(tmp_path / "data")
    assert rc == 0 and doc["can_serve"] is True, doc
    assert elapsed < 2.0
    for check in EXPECTED_CHECKS:
        assert check in checks, f"--json lacks {check}"
    for c in checks.values():
        assert c["status"] in ("OK", "WARN", "FAIL")
        assert c["detail"]
        assert (c["status"] == "OK") == (c["fix"] is None), c
    for controller in ("memory", "pids", "cpu"):
        want = expected_cgroup_mechanism(controller)
        if want is None:
            pytest.skip(f"no v1 {controller} hierarchy on this host")
        row = checks[f"limit {controller}"]
        assert row["status"] == "OK" and row["detail"].startswith(want + ":"), row
    if {"memory", "pids", "cpu"} <= v1_controllers():
        detail = checks["cgroup version"]["detail"]
        assert detail.startswith("v1 hierarchies: ") and all(c in re.split(r"[ ,;]+", detail) for c in ("memory", "pids", "cpu")), detail
    assert checks["privileges"]["status"] == "OK"
    assert checks["namespace mount"]["status"] == "OK"
    assert checks["seccomp"]["status"] == "OK"
    assert checks["data directory"]["detail"].endswith("not created yet (the daemon creates it root-owned 0711)")
    assert not os.path.exists(tmp_path / "data"), "doctor created the data directory"


def test_doctor_leaves_no_probe_cgroup_or_scratch_directory(tmp_path):
    before = set(os.listdir("/tmp"))
    doctor_json(tmp_path / "data")
    leftovers = [n for n in set(os.listdir("/tmp")) - before if n.startswith("sandloom-doctor-")]
    assert not leftovers, leftovers
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        assert not [d for d in dirs if d.startswith("sandloom-probe-")], f"probe cgroup left in {root}"
        if root.count("/") > 6:
            dirs[:] = []


# --- the data directory, the token, the store ---

def make_data_dir(path, dir_mode=0o711, token_mode=0o600, db_mode=0o600, token="t0ps3cret-" + "a" * 30):
    path.mkdir()
    os.chmod(path, dir_mode)
    (path / "token").write_text(token + "\n")
    os.chmod(path / "token", token_mode)
    db = sqlite3.connect(path / "sandloom.db")
    db.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, min_binary INTEGER, applied_at TEXT)")
    db.execute("INSERT INTO schema_migrations VALUES (7, 1, 'now')")
    db.commit()
    db.close()
    os.chmod(path / "sandloom.db", db_mode)
    return token


def test_doctor_accepts_a_correct_data_dir_and_reads_the_schema_version(tmp_path):
    make_data_dir(tmp_path / "data")
    rc, checks, doc, _ = doctor_json(tmp_path / "data")
    assert rc == 0, doc
    assert checks["data directory"]["status"] == "OK"
    assert checks["token"]["status"] == "OK"
    assert checks["database file"]["status"] == "OK"
    assert checks["store"]["status"] == "OK" and "schema version 7" in checks["store"]["detail"]


def test_doctor_flags_wrong_modes_and_never_prints_the_token(tmp_path):
    token = make_data_dir(tmp_path / "data", dir_mode=0o777, token_mode=0o644, db_mode=0o644)
    os.chmod(tmp_path / "data", 0o777)      # umask-proof
    rc, checks, doc, _ = doctor_json(tmp_path / "data")
    assert rc == 1 and doc["can_serve"] is False
    assert checks["data directory"]["status"] == "FAIL" and "0777" in checks["data directory"]["detail"]
    assert checks["token"]["status"] == "FAIL" and "0644" in checks["token"]["detail"]
    assert "chmod 0600" in checks["token"]["fix"]
    assert checks["database file"]["status"] == "FAIL"
    rc2, out, err, _ = run_doctor("--data-dir", str(tmp_path / "data"))
    assert rc2 == 1 and "cannot serve" in out
    for text in (json.dumps(doc), out, err):
        assert token not in text, "doctor printed the token"


def test_doctor_warns_about_a_data_dir_not_owned_by_root(tmp_path):
    make_data_dir(tmp_path / "data")
    os.chown(tmp_path / "data", 65534, 65534)
    rc, checks, _, _ = doctor_json(tmp_path / "data")
    assert checks["data directory"]["status"] == "WARN", checks["data directory"]
    assert "uid 65534" in checks["data directory"]["detail"]


def test_doctor_fails_on_a_corrupt_store(tmp_path):
    make_data_dir(tmp_path / "data")
    with open(tmp_path / "data" / "sandloom.db", "wb") as f:
        f.write(b"this is not a database" * 100)
    rc, checks, _, _ = doctor_json(tmp_path / "data")
    assert rc == 1 and checks["store"]["status"] == "FAIL", checks["store"]


def test_doctor_reads_the_store_a_daemon_created(daemon_factory, tmp_path):
    d = daemon_factory()
    d.stop()
    rc, checks, _, _ = doctor_json(d.data_dir)
    assert rc == 0
    assert checks["store"]["status"] == "OK" and "schema version" in checks["store"]["detail"]
    assert checks["data directory"]["status"] == "OK"


def test_doctor_rejects_unknown_options():
    rc, out, err, _ = run_doctor("--no-such-option")
    assert rc == 2 and "Unknown option" in err


# --- degraded hosts: doctor ---

def test_doctor_without_cap_sys_admin_fails_the_namespace_rows_and_exits_1(tmp_path):
    need_tool("capsh")
    prefix = ["capsh", "--drop=cap_sys_admin", "--", "-c", 'exec "$0" "$@"']
    rc, checks, doc, _ = doctor_json(tmp_path / "data", prefix=prefix)
    assert rc == 1 and doc["can_serve"] is False
    assert checks["capabilities"]["status"] == "FAIL" and "cap_sys_admin" in checks["capabilities"]["detail"]
    for ns in ("mount", "ipc", "uts", "net"):
        row = checks[f"namespace {ns}"]
        assert row["status"] == "FAIL" and "Operation not permitted" in row["detail"], row
    assert checks["mount + pivot_root"]["status"] == "FAIL"
    assert checks["isolation level"]["status"] == "FAIL"
    # What does not need CAP_SYS_ADMIN still works, and is said to.
    assert checks["seccomp"]["status"] == "OK"
    assert checks["privileges"]["status"] == "OK"


def test_doctor_with_read_only_cgroups_reports_exactly_the_cgroup_failures(tmp_path):
    need_tool("unshare")
    prefix = ["unshare", "-m", "--propagation", "private", "sh", "-c", RO_CGROUPS, "sh"]
    rc, checks, doc, _ = doctor_json(tmp_path / "data", prefix=prefix)
    assert rc == 0, "read-only cgroups weaken limits; the daemon can still serve"
    # No cgroup: memory and pids are left to the sampling supervisor, and it says so.
    for controller in ("memory", "pids"):
        row = checks[f"limit {controller}"]
        assert row["status"] == "WARN" and row["detail"].startswith("sampled:"), row
        assert "Read-only file system" in row["detail"] and "sampling supervisor" in row["detail"], row
    for controller in ("pids", "cpu"):
        row = checks[f"limit {controller}"]
        assert row["status"] == "WARN" and not row["detail"].startswith("cgroup"), row
        assert "Read-only file system" in row["detail"]
    assert checks["cgroup v1"]["status"] == "WARN" and "Read-only file system" in checks["cgroup v1"]["detail"]
    assert checks["namespace mount"]["status"] == "OK"


# --- /healthz resource_control ---

def resource_control(d):
    h = assert_ok(d.client().get("/healthz"))
    assert "resource_control" in h, h.keys()
    rc = h["resource_control"]
    for res in RESOURCES:
        entry = rc[res]
        assert entry["mechanism"] in MECHANISMS, entry
        assert isinstance(entry["evidence"], str) and entry["evidence"], entry
    return rc, h


def test_healthz_resource_control_reports_cgroup_v1_here_with_limits_and_evidence(daemon_factory):
    d = daemon_factory(env={"SANDBOX_MAX_OPEN_FILES": "2000"})
    rc, h = resource_control(d)
    for controller in ("memory", "pids", "cpu"):
        want = expected_cgroup_mechanism(controller)
        if want is None:
            pytest.skip(f"no v1 {controller} hierarchy on this host")
        assert rc[controller]["mechanism"] == want, rc[controller]
    assert rc["open_files"] == {"mechanism": "rlimit", "limit": 2000,
                                "evidence": "setrlimit(RLIMIT_NOFILE, 2000) in a forked child: ok"}
    cfg = h["config"]
    if "SANDBOX_MEMORY_LIMIT_BYTES" in cfg:
        assert rc["memory"]["limit"] == int(cfg["SANDBOX_MEMORY_LIMIT_BYTES"])
    if "SANDBOX_MAX_PROCESSES" in cfg:
        assert rc["pids"]["limit"] == int(cfg["SANDBOX_MAX_PROCESSES"])
    # No quota configured: nothing enforces one, and it says so.
    assert rc["disk"]["mechanism"] == "none" and rc["disk"]["limit"] is None, rc["disk"]
    # Unauthenticated callers learn nothing of it.
    assert "resource_control" not in d.client().get("/healthz", auth=False).json()


def project_quota_on(path):
    with open("/proc/self/mountinfo") as f:
        best = ("", "")
        for line in f:
            pre, _, post = line.partition(" - ")
            point, opts = pre.split()[4], pre.split()[5] + "," + post.split()[2]
            if (path + "/").startswith(point.rstrip("/") + "/") and len(point) >= len(best[0]):
                best = (point, opts)
    return any(o in best[1].split(",") for o in ("prjquota", "pquota"))


def test_healthz_disk_quota_is_soft_where_the_data_filesystem_has_no_project_quotas(daemon_factory, tmp_path):
    if project_quota_on(str(tmp_path)):
        pytest.skip("the test directory's filesystem has project quotas")
    d = daemon_factory(env={"SANDBOX_DISK_QUOTA_BYTES": str(64 << 20)})
    rc, _ = resource_control(d)
    assert rc["disk"]["mechanism"] == "sampled" and rc["disk"]["limit"] == 64 << 20, rc["disk"]
    _, checks, _, _ = doctor_json(d.data_dir, env={"SANDBOX_DISK_QUOTA_BYTES": str(64 << 20)})
    assert checks["limit disk"]["status"] == "WARN" and checks["limit disk"]["detail"].startswith("sampled:")
    assert checks["project quotas"]["status"] == "WARN"


def test_healthz_with_read_only_cgroups_says_no_cgroup_limits(daemon_factory):
    need_tool("unshare")
    d = daemon_factory(run=False)
    orig = d.command
    d.command = lambda: ["unshare", "-m", "--propagation", "private", "sh", "-c", RO_CGROUPS, "sh", *orig()]
    d.start()
    rc, _ = resource_control(d)
    # Sampled (src/core/sampler.c), never a cgroup; test_sampler.py shows it enforced.
    assert rc["memory"]["mechanism"] == "sampled", rc["memory"]
    assert rc["pids"]["mechanism"] == "sampled", rc["pids"]
    assert "Read-only file system" in rc["memory"]["evidence"]
    for controller in ("pids", "cpu"):
        assert not rc[controller]["mechanism"].startswith("cgroup"), rc[controller]
        assert "Read-only file system" in rc[controller]["evidence"]
    assert rc["open_files"]["mechanism"] == "rlimit"


def test_healthz_without_cap_sys_resource_and_a_low_hard_nofile_says_no_open_files_limit(daemon_factory):
    need_tool("capsh")
    d = daemon_factory(env={"SANDBOX_MAX_OPEN_FILES": "4096"}, run=False)
    orig = d.command
    d.command = lambda: ["capsh", "--drop=cap_sys_resource", "--", "-c", 'ulimit -Sn 1024 && ulimit -Hn 2048 && exec "$0" "$@"', *orig()]
    d.start()
    rc, _ = resource_control(d)
    assert rc["open_files"]["mechanism"] == "none", rc["open_files"]
    assert "setrlimit(RLIMIT_NOFILE, 4096)" in rc["open_files"]["evidence"]
    assert "Operation not permitted" in rc["open_files"]["evidence"]


def test_doctor_and_healthz_agree_on_the_mechanisms(daemon_factory):
    d = daemon_factory()
    rc, _ = resource_control(d)
    _, checks, _, _ = doctor_json(d.data_dir)
    for res in RESOURCES:
        assert checks[f"limit {res}"]["detail"].startswith(rc[res]["mechanism"] + ":"), (res, checks[f"limit {res}"], rc[res])
