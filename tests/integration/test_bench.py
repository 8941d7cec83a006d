# SPDX-License-Identifier: MIT
"""`sandloom bench` keeps working: tiny runs of every subcommand against the fixture daemon, checking
the JSON's structure and sanity (counts, no failures, ordered percentiles, nothing left behind).
No timing thresholds: benchmarks measure time, tests do not decide on it."""

import json
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BINARY, clean_env
from helpers import API, assert_ok

LATENCY_KEYS = ("count", "min_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms", "mean_ms")


def run_bench(daemon, *args, token=None, timeout=120):
    env = clean_env({"SANDBOX_INTERNAL_TOKEN": daemon.token if token is None else token})
    p = subprocess.run([BINARY, "bench", *args, "--url", daemon.url, "--no-progress"], stdin=subprocess.DEVNULL,
                       capture_output=True, env=env, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def bench_json(daemon, *args):
    rc, out, err = run_bench(daemon, *args, "--json")
    assert rc == 0, f"sandloom bench {' '.join(args)} exited {rc}; stderr: {err!r}"
    return json.loads(out)


def check_latency(lat, count):
    assert set(LATENCY_KEYS) <= set(lat), lat
    assert lat["count"] == count, lat
    assert 0 < lat["min_ms"] <= lat["p50_ms"] <= lat["p95_ms"] <= lat["p99_ms"] <= lat["max_ms"], lat
    assert lat["min_ms"] <= lat["mean_ms"] <= lat["max_ms"], lat


def check_daemon_identity(doc, daemon):
    assert doc["url"] == daemon.url
    d = doc["daemon"]
    assert d["isolation_level"] in ("basic", "standard", "strict"), d
    assert d["network_mode"] in ("none", "host"), d
    assert d["store"] == "sqlite", d


def live_bench_sandboxes(client):
    body = assert_ok(client.get(API, query={"limit": 10000}))
    return [s["sandbox_id"] for s in body["sandboxes"] if s["sandbox_id"].startswith("bench-")]


def test_serial_reports_every_run_and_releases_its_sandbox(daemon, client):
    doc = bench_json(daemon, "serial", "-n", "20")
    assert doc["command"] == "serial"
    check_daemon_identity(doc, daemon)
    assert doc["runs"] == 20 and doc["warmup"] == 10 and doc["argv"] == ["/bin/true"]
    assert doc["execs_ok"] == 20 and doc["failures"] == 0
    assert doc["conflicts_409"] == 0 and doc["limited_429"] == 0 and doc["errors"] == {}
    check_latency(doc["latency"], 20)
    assert doc["server_duration"]["count"] == 20
    # The daemon's own duration is part of the end-to-end latency, never more (ms granularity).
    assert doc["server_duration"]["min_ms"] <= doc["latency"]["max_ms"] + 1
    assert doc["throughput_per_s"] > 0 and doc["wall_s"] > 0
    assert doc["connections_opened"] <= 1, "the client does not keep its connection alive"
    assert doc["released"] == 1
    assert live_bench_sandboxes(client) == []


def test_load_spreads_scoped_execs_over_sandboxes(daemon, client):
    doc = bench_json(daemon, "load", "--execs", "20", "--concurrency", "4", "--sandboxes", "2")
    assert doc["command"] == "load" and doc["sandboxes"] == 2 and doc["concurrency"] == 4
    assert doc["exclusive"] is False and doc["argv"] == ["/bin/sh", "-c", "printf x"]
    assert doc["execs"] == 20 and doc["warmup"] == 2
    assert doc["execs_ok"] == 20 and doc["failures"] == 0
    assert doc["conflicts_409"] == 0 and doc["limited_429"] == 0
    assert 1 <= doc["in_flight_max"] <= 4
    assert doc["connections_opened"] <= 4, "more connections than requests in flight: no keep-alive"
    check_latency(doc["latency"], 20)
    assert doc["throughput_per_s"] > 0
    assert doc["released"] == 2
    assert live_bench_sandboxes(client) == []


def test_load_exclusive_counts_scope_conflicts_apart_from_failures(daemon, client):
    # One sandbox, four requests in flight, no exec_scope: the daemon refuses all but one at once
    # with 409 SANDBOX_EXEC_SCOPE_BUSY, and the tool counts those as conflicts, not failures.
    doc = bench_json(daemon, "load", "--execs", "20", "--concurrency", "4", "--sandboxes", "1", "--exclusive",
                     "--warmup", "1")
    assert doc["exclusive"] is True
    assert doc["failures"] == 0
    assert doc["conflicts_409"] >= 1
    assert doc["execs_ok"] + doc["conflicts_409"] + doc["limited_429"] == 20
    assert doc["errors"].get("HTTP 409 SANDBOX_EXEC_SCOPE_BUSY") == doc["conflicts_409"], doc["errors"]
    check_latency(doc["latency"], doc["execs_ok"])
    assert live_bench_sandboxes(client) == []


def test_load_by_duration(daemon):
    doc = bench_json(daemon, "load", "--duration", "1s", "--concurrency", "2", "--sandboxes", "2")
    assert doc["duration_s"] == 1.0 and "execs" not in doc
    assert doc["execs_ok"] >= 1 and doc["failures"] == 0
    check_latency(doc["latency"], doc["execs_ok"])


def test_load_writes_every_sample(daemon, tmp_path):
    path = tmp_path / "samples.txt"
    doc = bench_json(daemon, "load", "--execs", "10", "--concurrency", "2", "--sandboxes", "2", "--samples", str(path))
    values = [float(x) for x in path.read_text().split()]
    assert len(values) == 10 and values == sorted(values)
    # The reported figures are nearest-rank percentiles of exactly these samples.
    lat = doc["latency"]
    for p, key in ((0, "min_ms"), (50, "p50_ms"), (95, "p95_ms"), (99, "p99_ms"), (100, "max_ms")):
        rank = max(1, -(-p * len(values) // 100))
        assert abs(values[rank - 1] - lat[key]) < 0.002, (key, values, lat)
    assert abs(sum(values) / len(values) - lat["mean_ms"]) < 0.01, (values, lat)
    # Written to a temporary file and renamed: nothing else is left next to it.
    assert sorted(x.name for x in tmp_path.iterdir()) == ["samples.txt"]


def test_samples_to_an_unwritable_place_is_an_error_and_leaves_nothing(daemon, tmp_path):
    path = tmp_path / "missing-dir" / "samples.txt"
    rc, out, err = run_bench(daemon, "serial", "-n", "3", "--samples", str(path))
    assert rc == 1 and err.startswith("sandloom bench: SAMPLES_FILE: "), err
    assert not path.parent.exists()


def test_create_counts_and_releases(daemon, client):
    doc = bench_json(daemon, "create", "-n", "10")
    assert doc["count"] == 10 and doc["created"] == 10 and doc["failures"] == 0
    assert doc["concurrency"] == 8
    assert doc["creations_per_s"] > 0
    check_latency(doc["latency"], 10)
    assert doc["released"] == 10
    assert live_bench_sandboxes(client) == []


def test_idle_finds_the_local_daemon_and_reads_its_memory(daemon, client):
    doc = bench_json(daemon, "idle", "--count", "5", "--settle", "0")
    assert doc["daemon_pid"] == daemon.proc.pid and doc["source"] == "proc"
    assert doc["created"] == 5
    for when in ("before", "after"):
        snap = doc[when]
        assert snap["daemon_rss_kib"] > 0 and snap["daemon_threads"] >= 1
        assert snap["host_processes"] >= 2 and snap["daemon_tree_processes"] >= 1
    assert doc["daemon_rss_growth_kib"] == doc["after"]["daemon_rss_kib"] - doc["before"]["daemon_rss_kib"]
    assert doc["released"] == 5
    assert live_bench_sandboxes(client) == []
    # The daemon's own report, read right after /proc, agrees with it (same pid, RSS within 2x).
    rep = doc["daemon_report"]
    assert rep["pid"] == daemon.proc.pid, rep
    assert doc["after"]["daemon_rss_kib"] / 2 <= rep["rss_bytes"] / 1024 <= doc["after"]["daemon_rss_kib"] * 2, (rep, doc)
    assert isinstance(rep["children"], int) and rep["children"] >= 0, rep


def test_idle_from_the_daemons_own_report(daemon, client):
    """--source daemon: what `idle` does against a daemon on another host (GET /healthz "process")."""
    doc = bench_json(daemon, "idle", "--count", "5", "--settle", "0", "--source", "daemon")
    assert doc["source"] == "daemon" and doc["daemon_pid"] == daemon.proc.pid
    assert doc["created"] == 5 and doc["released"] == 5
    for when in ("before", "after"):
        snap = doc[when]
        assert snap["daemon_rss_kib"] > 1024 and snap["daemon_threads"] >= 1, snap
        assert snap["daemon_tree_processes"] >= 1, snap
        # Only this host's /proc knows these: not made up from the daemon's report.
        assert "host_processes" not in snap and "spawner_rss_kib" not in snap, snap
    assert "new_processes" not in doc
    assert doc["new_daemon_tree_processes"] == doc["after"]["daemon_tree_processes"] - doc["before"]["daemon_tree_processes"]
    assert doc["daemon_rss_growth_kib"] == doc["after"]["daemon_rss_kib"] - doc["before"]["daemon_rss_kib"]
    assert live_bench_sandboxes(client) == []
    rc, out, err = run_bench(daemon, "idle", "--count", "2", "--settle", "0", "--source", "daemon")
    assert rc == 0, err
    assert "(from its /healthz)" in out and "host processes" not in out, out


def test_memory_from_the_daemons_own_report_sees_the_running_execs(daemon, client):
    doc = bench_json(daemon, "memory", "--concurrency", "4", "--hold", "3s", "--source", "daemon")
    assert doc["source"] == "daemon" and doc["daemon_pid"] == daemon.proc.pid
    assert doc["execs_ok"] == 4 and doc["failures"] == 0 and doc["samples"] >= 1
    assert doc["busy_peak"]["daemon_rss_kib"] > 0 and doc["idle"]["daemon_rss_kib"] > 0
    # The daemon counted its own tree while the 4 sleeps ran.
    assert doc["busy_peak"]["daemon_tree_processes"] >= doc["idle"]["daemon_tree_processes"] + 4, doc
    assert live_bench_sandboxes(client) == []


def test_memory_samples_while_every_exec_is_in_flight(daemon, client):
    doc = bench_json(daemon, "memory", "--concurrency", "4", "--hold", "5s")
    assert doc["daemon_pid"] == daemon.proc.pid
    assert doc["execs_ok"] == 4 and doc["failures"] == 0
    assert doc["samples"] >= 1
    assert doc["busy_peak"]["daemon_rss_kib"] > 0 and doc["idle"]["daemon_rss_kib"] > 0
    # The 4 sleeps were running when the peak was sampled: the daemon's tree held them.
    assert doc["busy_peak"]["daemon_tree_processes"] >= doc["idle"]["daemon_tree_processes"] + 4
    assert live_bench_sandboxes(client) == []


def test_baseline_times_fork_exec_and_bwrap():
    p = subprocess.run([BINARY, "bench", "baseline", "-n", "5", "--json", "--no-progress"], capture_output=True,
                       env=clean_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["runs"] == 5
    assert doc["fork_exec"]["available"] is True
    check_latency(doc["fork_exec"], 5)
    if not shutil.which("bwrap"):
        pytest.skip("bwrap is not installed (scripts/deps installs bubblewrap): the bwrap half is not checked")
    if not doc["bwrap"]["available"]:
        pytest.skip(f"bwrap cannot run here: {doc['bwrap']['reason']}")
    check_latency(doc["bwrap"], 5)
    assert "--unshare-net" in doc["bwrap"]["argv"] and "--unshare-pid" in doc["bwrap"]["argv"]
    assert "--unshare-net" not in doc["bwrap_no_netns"]["argv"]
    assert doc["bwrap_over_fork_exec_p50"] > 0


def test_baseline_probe_survives_a_child_flooding_stderr(tmp_path):
    """The probe run reads the child's stderr while it runs: a child writing far more than a pipe
    holds (64 KiB) before exiting must not deadlock against the parent's waitpid."""
    fake = tmp_path / "chatty-bwrap"
    fake.write_text("#!/bin/sh\necho 'CHATTY-MARK first line' >&2\n"
                    "head -c 400000 /dev/zero | tr '\\0' x >&2\nexit 3\n")
    fake.chmod(0o755)
    p = subprocess.run([BINARY, "bench", "baseline", "-n", "2", "--bwrap", str(fake), "--json", "--no-progress"],
                       capture_output=True, env=clean_env(), timeout=60)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["fork_exec"]["available"] is True
    for v in ("bwrap", "bwrap_no_netns"):
        assert doc[v]["available"] is False
        assert doc[v]["reason"] == f"{fake} exited with status 3: CHATTY-MARK first line", doc[v]


def test_human_table_by_default(daemon):
    rc, out, err = run_bench(daemon, "serial", "-n", "3")
    assert rc == 0, err
    assert out.startswith("sandloom bench serial — " + daemon.url)
    assert "end to end over HTTP" in out and "p50" in out and "failures: 0" in out


def test_unreachable_daemon_is_a_one_line_error():
    p = subprocess.run([BINARY, "bench", "serial", "--url", "http://127.0.0.1:1", "--no-progress"],
                       capture_output=True, env=clean_env({"SANDBOX_INTERNAL_TOKEN": "x" * 32}), timeout=60)
    err = p.stderr.decode()
    assert p.returncode == 1 and p.stdout == b""
    assert err.startswith("sandloom bench: UNREACHABLE: ") and err.count("\n") == 1, err


def test_wrong_token_is_refused_at_set_up_without_echoing_it(daemon):
    token = "wrong-" + "z" * 40
    rc, out, err = run_bench(daemon, "serial", "-n", "3", token=token)
    assert rc == 1 and out == ""
    assert err.startswith("sandloom bench: SANDBOX_UNAUTHORIZED") and err.count("\n") == 1, err
    assert token not in err


def test_help_and_usage_errors():
    p = subprocess.run([BINARY, "bench", "--help"], capture_output=True, env=clean_env(), timeout=30)
    assert p.returncode == 0
    for name in ("serial", "load", "create", "idle", "memory", "baseline"):
        assert f"  {name} " in p.stdout.decode()
        q = subprocess.run([BINARY, "bench", name, "--help"], capture_output=True, env=clean_env(), timeout=30)
        assert q.returncode == 0 and q.stdout.decode().startswith(f"Usage: sandloom bench {name}")
    load = subprocess.run([BINARY, "bench", "load", "--help"], capture_output=True, env=clean_env(), timeout=30)
    for opt in ("--sandboxes", "--execs", "--concurrency", "--duration", "--exclusive", "--json"):
        assert opt in load.stdout.decode()
    for args in (["load", "--count", "5"], ["serial", "-n", "0"], ["load", "--duration", "10 parsecs"], ["frobnicate"],
                 ["serial", "extra"], ["load", "--concurrency", "100000"],
                 ["load", "--execs", "10", "--duration", "1s"], ["idle", "--daemon-pid", "0"],
                 ["idle", "--source", "sideways"], ["memory", "--source", "daemon", "--daemon-pid", "5"],
                 ["serial", "--source", "proc"]):
        r = subprocess.run([BINARY, "bench", *args], capture_output=True, env=clean_env(), timeout=30)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.decode().startswith("sandloom bench: ") and r.stderr.decode().count("\n") == 1, r.stderr


def test_interrupt_stops_the_run_and_releases_what_it_created(daemon, client):
    env = clean_env({"SANDBOX_INTERNAL_TOKEN": daemon.token})
    p = subprocess.Popen([BINARY, "bench", "load", "--duration", "60s", "--concurrency", "2", "--sandboxes", "3",
                          "--url", daemon.url, "--json", "--no-progress"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 60
        while len(live_bench_sandboxes(client)) < 3 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert len(live_bench_sandboxes(client)) == 3, "the run never created its sandboxes"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, err
    assert out == b"" and err.decode().startswith("sandloom bench: INTERRUPTED"), err
    assert live_bench_sandboxes(client) == []
