# SPDX-License-Identifier: MIT
"""The exec API (issue 3): every field of the record, every validation and error code, exec_id
idempotency within a lifecycle, and the per-exec environment, working directory and identity."""

import base64
import re
import threading
import time

import pytest

from helpers import API, Sandbox, assert_error, assert_ok, quote, sandbox_fs_dir
from exec_helpers import (denv, RECORD_FIELDS, brief, cancel, exec_id, get_exec, get_output, post_exec, run, sh,
                          signal_of, wait_exec)

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")

DAEMON_ENV = denv()


# --- the record -----------------------------------------------------------------------------------

def test_foreground_exec_answers_the_full_record(sandbox):
    eid = exec_id()
    t0 = time.monotonic()
    rec = sh(sandbox, "echo out; echo err >&2; exit 3", exec_id=eid)
    elapsed = time.monotonic() - t0
    missing = RECORD_FIELDS - set(rec)
    assert not missing, f"record lacks {sorted(missing)}: {brief(rec)}"
    assert rec["exec_id"] == eid
    assert rec["sandbox_id"] == sandbox.id
    assert rec["generation"] == sandbox.generation
    assert rec["status"] == "FAILED", brief(rec)
    assert rec["exit_code"] == 3
    assert signal_of(rec) == 0
    assert rec["stdout"] == "out\n" and rec["stderr"] == "err\n"
    assert rec["truncated"] is False
    assert rec["stdout_bytes"] == 4 and rec["stderr_bytes"] == 4
    assert rec["background"] is False
    assert rec["exec_scope"] in (None, ""), brief(rec)
    for k in ("duration_ms", "cpu_ms", "max_rss_bytes"):
        assert isinstance(rec[k], int) and rec[k] >= 0, (k, brief(rec))
    assert rec["duration_ms"] <= elapsed * 1000 + 50, (rec["duration_ms"], elapsed)
    assert rec["max_rss_bytes"] > 0, brief(rec)
    assert TIMESTAMP.match(rec["started_at"]) and TIMESTAMP.match(rec["finished_at"]), brief(rec)
    assert rec["finished_at"] >= rec["started_at"]
    # GET answers the same stored record.
    got = assert_ok(get_exec(sandbox, eid))
    for k in RECORD_FIELDS:
        assert got[k] == rec[k], f"GET differs from the POST answer in {k}: {got[k]!r} != {rec[k]!r}"


def test_exit_zero_is_succeeded(sandbox):
    rec = run(sandbox, ["/bin/true"])
    assert rec["status"] == "SUCCEEDED" and rec["exit_code"] == 0 and signal_of(rec) == 0, brief(rec)
    assert rec["stdout"] == "" and rec["stderr"] == "" and rec["stdout_bytes"] == 0


def test_unknown_command_is_failed_with_127(sandbox):
    rec = run(sandbox, ["no-such-command-sandloom"])
    assert rec["status"] == "FAILED" and rec["exit_code"] == 127, brief(rec)
    rec = run(sandbox, ["/workspace/not-there"])
    assert rec["status"] == "FAILED" and rec["exit_code"] == 127, brief(rec)


def test_death_by_signal_is_reported_as_the_signal(sandbox):
    rec = sh(sandbox, "kill -KILL $$")
    assert rec["status"] == "FAILED", brief(rec)
    assert signal_of(rec) == 9, brief(rec)
    assert rec["exit_code"] in (None, 137), brief(rec)


def test_duration_and_cpu_and_memory_are_measured(sandbox):
    rec = run(sandbox, ["python3", "-c",
                        "import time\nx = b'x' * (64 << 20)\nt = time.process_time()\n"
                        "while time.process_time() - t < 0.3: pass\ntime.sleep(0.3)"])
    assert rec["status"] == "SUCCEEDED", brief(rec)
    assert rec["duration_ms"] >= 500, brief(rec)         # 0.3 s of CPU + 0.3 s of sleep
    assert rec["cpu_ms"] >= 250, brief(rec)
    assert rec["max_rss_bytes"] >= 64 << 20, brief(rec)


def test_background_exec_answers_running_at_once(sandbox):
    eid = exec_id()
    t0 = time.monotonic()
    rec = run(sandbox, ["/bin/sleep", "30"], exec_id=eid, background=True, exec_scope="bg")
    assert time.monotonic() - t0 < 10, "a background exec waited for its command"
    assert rec["status"] == "RUNNING" and rec["background"] is True and rec["exec_scope"] == "bg", brief(rec)
    assert rec["exit_code"] is None and rec["finished_at"] in (None, ""), brief(rec)
    assert assert_ok(get_exec(sandbox, eid))["status"] == "RUNNING"
    assert_ok(cancel(sandbox, eid))
    assert wait_exec(sandbox, eid)["status"] == "CANCELLED"


def test_generated_exec_ids_are_distinct(sandbox):
    a = run(sandbox, ["/bin/true"])
    b = run(sandbox, ["/bin/true"])
    assert isinstance(a["exec_id"], str) and a["exec_id"] and a["exec_id"] != b["exec_id"], (a, b)
    assert assert_ok(get_exec(sandbox, a["exec_id"]))["exec_id"] == a["exec_id"]


def test_healthz_reports_the_isolation_in_force(client):
    hz = assert_ok(client.get("/healthz"))
    iso = hz.get("isolation")
    assert isinstance(iso, dict) and iso.get("level") in ("basic", "standard", "strict"), hz.get("isolation")


# --- environment, working directory, identity -------------------------------------------------------

def test_environment_is_clean_plus_the_requests(sandbox, daemon):
    rec = run(sandbox, ["/usr/bin/env"], env={"FOO": "bar baz", "EMPTY": "", "UNICODE": "h\u00e9"})
    assert rec["status"] == "SUCCEEDED", brief(rec)
    env = dict(line.split("=", 1) for line in rec["stdout"].splitlines() if "=" in line)
    assert env.get("FOO") == "bar baz" and env.get("EMPTY") == "" and env.get("UNICODE") == "h\u00e9", env
    assert env.get("HOME") == "/home/sandbox" and env.get("USER") == "sandbox", env
    assert env.get("LANG") == "C.UTF-8" and env.get("TMPDIR") == "/tmp", env
    assert "/usr/bin" in env.get("PATH", "").split(":"), env
    for k in ("XDG_CACHE_HOME", "PIP_CACHE_DIR", "npm_config_cache"):
        assert env.get(k, "").startswith("/cache"), (k, env)
    leaked = [k for k in env if k.startswith("SANDBOX_") or k.startswith("SANDLOOM_")]
    assert not leaked, f"daemon settings leak into the sandbox: {leaked}"
    assert daemon.token not in rec["stdout"], "the token is in the sandbox's environment"


def test_cwd_default_and_explicit(sandbox):
    assert sh(sandbox, "pwd")["stdout"] == "/workspace\n"
    assert sh(sandbox, "pwd", cwd="/home/sandbox")["stdout"] == "/home/sandbox\n"
    assert sh(sandbox, "pwd", cwd="/cache")["stdout"] == "/cache\n"
    assert_ok(sandbox.mkdir("sub/dir", parents=True))
    assert sh(sandbox, "pwd", cwd="/workspace/sub/dir")["stdout"] == "/workspace/sub/dir\n"


@pytest.mark.parametrize("cwd", ["/workspace/does-not-exist", "/etc", "/", "/tmp", "/workspace/a-file",
                                 "/workspace/link-to-etc", "/workspace/../etc"])
def test_invalid_cwd_is_400(sandbox, cwd):
    sandbox.write("a-file", b"x")
    assert sh(sandbox, "ln -sfn /etc /workspace/link-to-etc")["status"] == "SUCCEEDED"
    assert_error(post_exec(sandbox, ["/bin/pwd"], cwd=cwd), 400, "SANDBOX_INVALID_CWD")


def test_identity_is_the_sandbox_uid(sandbox):
    rec = sh(sandbox, "id -u; id -g; id -G")
    assert rec["stdout"] == f"{sandbox.uid}\n{sandbox.uid}\n{sandbox.uid}\n", brief(rec)


def test_files_written_by_an_exec_are_seen_by_the_files_api_and_back(sandbox, daemon):
    sandbox.write("in.txt", b"from the api\n")
    rec = sh(sandbox, "cat in.txt; echo 'from the exec' > out.txt")
    assert rec["stdout"] == "from the api\n"
    assert sandbox.read("out.txt") == b"from the exec\n"
    fs = sandbox_fs_dir(daemon.data_dir, sandbox.uid)
    import os
    st = os.stat(os.path.join(fs, "workspace", "out.txt"))
    assert st.st_uid == sandbox.uid and st.st_gid == sandbox.uid


def test_stdin_defaults_to_empty(sandbox):
    # No stdin: the command reads EOF at once (it does not hang on the daemon's stdin).
    rec = run(sandbox, ["/bin/cat"], timeout_seconds=20)
    assert rec["status"] == "SUCCEEDED" and rec["stdout"] == "", brief(rec)


def test_timeout_default_and_bounds_accepted(sandbox):
    for t in (1, 300, 86400):
        rec = run(sandbox, ["/bin/true"], timeout_seconds=t)
        assert rec["status"] == "SUCCEEDED", (t, brief(rec))


# --- validation -----------------------------------------------------------------------------------

SECRET = "s3cr3t-value-never-echoed"

INVALID_BODIES = {
    "argv_missing": lambda g: {"generation": g},
    "argv_empty": lambda g: {"generation": g, "argv": []},
    "argv_not_list": lambda g: {"generation": g, "argv": "echo hi"},
    "argv_257": lambda g: {"generation": g, "argv": ["/bin/true"] + ["x"] * 256},
    "argv_non_string": lambda g: {"generation": g, "argv": ["/bin/echo", 5]},
    "argv_null_entry": lambda g: {"generation": g, "argv": ["/bin/echo", None]},
    "argv_nul_byte": lambda g: {"generation": g, "argv": ["/bin/echo", "a\u0000" + SECRET]},
    "generation_missing": lambda g: {"argv": ["/bin/true"]},
    "generation_string": lambda g: {"generation": "one", "argv": ["/bin/true"]},
    "generation_negative": lambda g: {"generation": -1, "argv": ["/bin/true"]},
    "env_not_object": lambda g: {"generation": g, "argv": ["/bin/true"], "env": ["A=1"]},
    "env_value_not_string": lambda g: {"generation": g, "argv": ["/bin/true"], "env": {"A": 1}},
    "env_129": lambda g: {"generation": g, "argv": ["/bin/true"], "env": {f"V{i}": "x" for i in range(129)}},
    "env_name_with_equals": lambda g: {"generation": g, "argv": ["/bin/true"], "env": {"A=B": SECRET}},
    "env_name_empty": lambda g: {"generation": g, "argv": ["/bin/true"], "env": {"": SECRET}},
    "env_value_nul": lambda g: {"generation": g, "argv": ["/bin/true"], "env": {"A": "x\u0000" + SECRET}},
    "timeout_zero": lambda g: {"generation": g, "argv": ["/bin/true"], "timeout_seconds": 0},
    "timeout_too_big": lambda g: {"generation": g, "argv": ["/bin/true"], "timeout_seconds": 86401},
    "timeout_negative": lambda g: {"generation": g, "argv": ["/bin/true"], "timeout_seconds": -5},
    "timeout_string": lambda g: {"generation": g, "argv": ["/bin/true"], "timeout_seconds": "10"},
    "background_string": lambda g: {"generation": g, "argv": ["/bin/true"], "background": "yes"},
    "exec_id_empty": lambda g: {"generation": g, "argv": ["/bin/true"], "exec_id": ""},
    "exec_id_too_long": lambda g: {"generation": g, "argv": ["/bin/true"], "exec_id": "e" * 129},
    "exec_id_slash": lambda g: {"generation": g, "argv": ["/bin/true"], "exec_id": "a/b"},
    "exec_id_not_string": lambda g: {"generation": g, "argv": ["/bin/true"], "exec_id": 12},
    "exec_scope_too_long": lambda g: {"generation": g, "argv": ["/bin/true"], "exec_scope": "s" * 129},
    "exec_scope_not_string": lambda g: {"generation": g, "argv": ["/bin/true"], "exec_scope": ["a"]},
    "cwd_not_string": lambda g: {"generation": g, "argv": ["/bin/true"], "cwd": 7},
    "stdin_and_stdin_base64": lambda g: {"generation": g, "argv": ["/bin/cat"], "stdin": "a",
                                         "stdin_base64": "YQ=="},
    "stdin_base64_invalid": lambda g: {"generation": g, "argv": ["/bin/cat"], "stdin_base64": "!!not base64!!"},
    "stdin_not_string": lambda g: {"generation": g, "argv": ["/bin/cat"], "stdin": 5},
    "output_encoding_unknown": lambda g: {"generation": g, "argv": ["/bin/true"], "output_encoding": "hex"},
}


@pytest.mark.parametrize("case", sorted(INVALID_BODIES))
def test_invalid_exec_request_is_422(sandbox, case):
    body = INVALID_BODIES[case](sandbox.generation)
    assert_error(post_exec(sandbox, body=body), 422, "SANDBOX_INVALID_REQUEST", forbidden=(SECRET,))


def test_argv_of_256_entries_and_128_env_are_accepted(sandbox):
    rec = run(sandbox, ["/bin/sh", "-c", "echo $#", "sh"] + ["a"] * 252,
              env={f"V{i}": str(i) for i in range(128)})
    assert rec["status"] == "SUCCEEDED" and rec["stdout"] == "252\n", brief(rec)


def test_non_json_and_empty_bodies_are_422(sandbox):
    c = sandbox.client
    for body in (b"", b"{", b"[]", b"null", b"\"argv\""):
        r = c.request("POST", f"{sandbox.base}/exec", body=body, headers={"Content-Type": "application/json"})
        assert_error(r, 422, "SANDBOX_INVALID_REQUEST")


def test_sensitive_env_is_refused_with_400(sandbox):
    r = post_exec(sandbox, ["/bin/true"], sensitive_env=[{"name": "API_KEY", "secret_ref": SECRET}])
    assert_error(r, 400, "SANDBOX_SENSITIVE_ENV_UNSUPPORTED", forbidden=(SECRET,))


def test_unauthenticated_exec_is_401(sandbox):
    c = sandbox.client
    r = c.request("POST", f"{sandbox.base}/exec", json_body={"generation": sandbox.generation, "argv": ["/bin/true"]},
                  auth=False)
    assert r.status == 401, r
    r = c.request("GET", f"{sandbox.base}/exec/x", query={"generation": sandbox.generation}, auth=False)
    assert r.status == 401, r


# --- state and fencing ----------------------------------------------------------------------------

def test_stale_generation_is_409(client):
    sandbox = Sandbox.create(client)
    old = sandbox.generation
    old_eid = run(sandbox, ["/bin/true"])["exec_id"]
    assert_ok(sandbox.release())
    assert_ok(sandbox.resolve())
    assert_ok(sandbox.connect())
    assert sandbox.generation > old
    # the previous lifecycle's generation is fenced off, its records too
    assert_error(post_exec(sandbox, ["/bin/true"], generation=old), 409, "STALE_SANDBOX_GENERATION")
    assert_error(get_exec(sandbox, old_eid, generation=old), 409, "STALE_SANDBOX_GENERATION")
    eid = run(sandbox, ["/bin/true"])["exec_id"]
    for g in (old, sandbox.generation + 1, sandbox.generation + 1000):
        assert_error(post_exec(sandbox, ["/bin/true"], generation=g), 409, "STALE_SANDBOX_GENERATION")
        assert_error(get_exec(sandbox, eid, generation=g), 409, "STALE_SANDBOX_GENERATION")
        assert_error(get_output(sandbox, eid, generation=g), 409, "STALE_SANDBOX_GENERATION")
        assert_error(cancel(sandbox, eid, generation=g), 409, "STALE_SANDBOX_GENERATION")
    sandbox.release()


def test_unknown_sandbox_is_404(client):
    s = Sandbox(client, sandbox_id="never-resolved-" + exec_id())
    s.generation = 1
    assert_error(post_exec(s, ["/bin/true"]), 404, "SANDBOX_NOT_FOUND")
    assert_error(get_exec(s, "x"), 404, "SANDBOX_NOT_FOUND")


def test_exec_before_connect_is_409_not_ready(client):
    s = Sandbox(client)
    assert_ok(s.resolve())
    assert_error(post_exec(s, ["/bin/true"]), 409, "SANDBOX_NOT_READY")
    assert_ok(s.connect())
    assert run(s, ["/bin/true"])["status"] == "SUCCEEDED"
    s.release()


def test_exec_after_release_is_refused(client):
    s = Sandbox.create(client)
    g = s.generation
    assert_ok(s.release())
    r = post_exec(s, ["/bin/true"], generation=g)
    assert r.status in (404, 409), r


def test_unknown_exec_is_404(sandbox):
    assert_error(get_exec(sandbox, "no-such-exec"), 404, "EXEC_NOT_FOUND")
    assert_error(get_exec(sandbox, "no-such-exec", wait_seconds=1), 404, "EXEC_NOT_FOUND")
    assert_error(get_output(sandbox, "no-such-exec"), 404, "EXEC_NOT_FOUND")
    assert_error(cancel(sandbox, "no-such-exec"), 404, "EXEC_NOT_FOUND")
    r = sandbox.client.get(f"{sandbox.base}/exec/no-such-exec/events", {"generation": sandbox.generation},
                           headers={"Accept": "text/event-stream"})
    assert_error(r, 404, "EXEC_NOT_FOUND")


def test_exec_of_another_sandbox_is_not_visible(client, sandbox):
    other = Sandbox.create(client)
    eid = run(other, ["/bin/echo", "mine"])["exec_id"]
    assert_error(get_exec(sandbox, eid), 404, "EXEC_NOT_FOUND")
    assert_error(get_output(sandbox, eid), 404, "EXEC_NOT_FOUND")
    other.release()


def test_query_validation_on_get_output_cancel(sandbox):
    eid = run(sandbox, ["/bin/echo", "x"])["exec_id"]
    c = sandbox.client
    base = f"{sandbox.base}/exec/{eid}"
    assert_error(c.get(base), 422, "SANDBOX_INVALID_REQUEST")                                  # no generation
    assert_error(c.get(base, {"generation": "x"}), 422, "SANDBOX_INVALID_REQUEST")
    assert_error(c.get(base, {"generation": sandbox.generation, "wait_seconds": "-1"}), 422,
                 "SANDBOX_INVALID_REQUEST")
    assert_error(c.get(base, {"generation": sandbox.generation, "wait_seconds": "abc"}), 422,
                 "SANDBOX_INVALID_REQUEST")
    assert_error(c.get(base + "/output", {"generation": sandbox.generation, "stream": "stdin"}), 422,
                 "SANDBOX_INVALID_REQUEST")
    assert_error(c.get(base + "/output", {"generation": sandbox.generation, "stream": "stdout",
                                          "offset": "-1"}), 422, "SANDBOX_INVALID_REQUEST")
    assert_error(c.post(base + "/cancel", {}), 422, "SANDBOX_INVALID_REQUEST")


# --- exec_id idempotency --------------------------------------------------------------------------

COUNT_SCRIPT = "echo run >> /workspace/count-$1; sleep 1; echo done"


def count_lines(s, name):
    r = s.files_get(f"count-{name}")
    if r.status == 404:
        return 0
    return base64.b64decode(assert_ok(r)["content_base64"]).count(b"run\n")


def test_retry_of_a_finished_exec_returns_the_stored_record(sandbox):
    eid = exec_id()
    argv = ["/bin/sh", "-c", COUNT_SCRIPT, "sh", eid]
    first = run(sandbox, argv, exec_id=eid)
    again = run(sandbox, argv, exec_id=eid)
    assert first["status"] == "SUCCEEDED" and first["stdout"] == "done\n", brief(first)
    for k in ("status", "exit_code", "stdout", "started_at", "finished_at", "duration_ms"):
        assert again[k] == first[k], f"retry changed {k}: {again[k]!r} != {first[k]!r}"
    assert count_lines(sandbox, eid) == 1, "a retry ran the command again"


def test_same_exec_id_with_another_command_is_409(sandbox):
    eid = exec_id()
    run(sandbox, ["/bin/echo", "one"], exec_id=eid)
    assert_error(post_exec(sandbox, ["/bin/echo", "two"], exec_id=eid), 409, "EXEC_ID_CONFLICT")
    # while running, too
    eid2 = exec_id()
    run(sandbox, ["/bin/sleep", "30"], exec_id=eid2, background=True, exec_scope="a")
    assert_error(post_exec(sandbox, ["/bin/sleep", "31"], exec_id=eid2, background=True, exec_scope="a"), 409,
                 "EXEC_ID_CONFLICT")
    assert_ok(cancel(sandbox, eid2))
    wait_exec(sandbox, eid2)


def test_ten_concurrent_retries_run_once(sandbox):
    eid = exec_id()
    argv = ["/bin/sh", "-c", COUNT_SCRIPT, "sh", eid]
    answers = []
    lock = threading.Lock()
    barrier = threading.Barrier(10)

    def one():
        barrier.wait()
        r = post_exec(sandbox, argv, exec_id=eid)
        with lock:
            answers.append(r)

    threads = [threading.Thread(target=one) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(answers) == 10
    for r in answers:
        rec = assert_ok(r)
        assert rec["exec_id"] == eid and rec["status"] in ("RUNNING", "SUCCEEDED"), brief(rec)
        if rec["status"] == "SUCCEEDED":
            assert rec["stdout"] == "done\n", brief(rec)
    final = wait_exec(sandbox, eid)
    assert final["status"] == "SUCCEEDED" and final["stdout"] == "done\n", brief(final)
    assert count_lines(sandbox, eid) == 1, "ten concurrent retries ran the command more than once"
    # all retries agree with the stored record once it is final
    for r in answers:
        rec = r.json()
        if rec["status"] == "SUCCEEDED":
            assert rec["started_at"] == final["started_at"], (brief(rec), brief(final))


def test_exec_id_is_free_again_after_release_and_re_resolve(client):
    s = Sandbox.create(client)
    eid = exec_id()
    argv = ["/bin/sh", "-c", "echo run >> /home/sandbox/runs; head -c 8 /dev/urandom | od -An -tx1"]
    first = run(s, argv, exec_id=eid)
    assert first["status"] == "SUCCEEDED"
    assert_ok(s.release())
    assert_ok(s.resolve())
    assert_ok(s.connect())
    second = run(s, argv, exec_id=eid)
    assert second["status"] == "SUCCEEDED" and second["generation"] == s.generation, brief(second)
    assert second["stdout"] != first["stdout"], "the new lifecycle answered the old record"
    assert second["started_at"] > first["started_at"]
    assert s.read("/home/sandbox/runs") == b"run\n"
    s.release()


def test_exec_records_are_per_sandbox(client):
    a, b = Sandbox.create(client), Sandbox.create(client)
    eid = exec_id()
    ra = run(a, ["/bin/echo", "a"], exec_id=eid)
    rb = run(b, ["/bin/echo", "b"], exec_id=eid)          # same id, other sandbox: no conflict
    assert ra["stdout"] == "a\n" and rb["stdout"] == "b\n"
    a.release()
    b.release()


def test_exec_id_with_url_special_characters(sandbox):
    eid = "id:with.dots_and-dash:" + exec_id()
    run(sandbox, ["/bin/echo", "x"], exec_id=eid)
    r = sandbox.client.get(f"{API}/{quote(sandbox.id)}/exec/{quote(eid)}", {"generation": sandbox.generation})
    assert assert_ok(r)["exec_id"] == eid
