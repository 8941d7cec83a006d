# SPDX-License-Identifier: MIT
"""Sandbox.exec / exec_background / exec_stream against the real daemon."""

import time

import pytest

import sandloom
from sandloom import ExecResult
from sdk_helpers import unique


def test_string_command_runs_through_sh_and_list_runs_as_argv(sb):
    r = sb.exec("echo $((6 * 7)); echo oops >&2; exit 3")
    assert isinstance(r, ExecResult)
    assert (r.status, r.exit_code, r.stdout, r.stderr) == ("FAILED", 3, "42\n", "oops\n")
    assert not r.ok and r.done
    # A list is the argv itself: no shell expands anything.
    r = sb.exec(["echo", "$((6 * 7))", "a b"])
    assert (r.status, r.exit_code, r.stdout) == ("SUCCEEDED", 0, "$((6 * 7)) a b\n")
    assert r.ok


def test_record_fields(sb):
    r = sb.exec(["sh", "-c", "head -c 100000 /dev/zero > /dev/null; printf abc"])
    assert r.exec_id.startswith("sdk-") and r.sandbox_id == sb.sandbox_id
    assert r.generation == sb.generation
    assert r.stdout == "abc" and r.stdout_raw == b"abc" and r.stdout_bytes == 3
    assert r.stderr == "" and r.stderr_raw == b"" and r.stderr_bytes == 0
    assert r.truncated is False and r.oom_killed is False and r.signal is None
    assert isinstance(r.duration_ms, int) and r.duration_ms >= 0
    assert isinstance(r.cpu_ms, int) and isinstance(r.max_rss_bytes, int) and r.max_rss_bytes > 0
    assert r.started_at and r.finished_at and r.background is False and r.exec_scope is None
    assert r.raw["status"] == "SUCCEEDED"


def test_cwd_env_stdin(sb):
    sb.files.mkdir("/workspace/sub/dir", parents=True)
    r = sb.exec("pwd; echo $GREETING; cat", cwd="sub/dir", env={"GREETING": "hi there"}, stdin="from stdin")
    assert r.stdout == "/workspace/sub/dir\nhi there\nfrom stdin", r
    blob = bytes(range(256))
    r = sb.exec(["python3", "-c", "import sys; d = sys.stdin.buffer.read(); sys.stdout.buffer.write(d[::-1])"],
                stdin=blob)
    assert r.ok and r.stdout_raw == blob[::-1]


def test_binary_output_exact_with_base64_and_replaced_in_text(sb):
    cmd = ["python3", "-c", "import sys; sys.stdout.buffer.write(b'ok\\xff\\xfe' + 'é'.encode())"]
    r = sb.exec(cmd)
    assert r.stdout_raw == b"ok\xff\xfe\xc3\xa9"
    assert r.stdout == "ok\ufffd\ufffdé"
    t = sb.exec(cmd, output_encoding="text")
    assert t.stdout_raw is None and t.stdout.startswith("ok\ufffd") and t.stdout.endswith("é")


def test_timeout_ends_timed_out(sb):
    t0 = time.monotonic()
    r = sb.exec("sleep 30", timeout=1)
    assert r.status == "TIMED_OUT" and r.exit_code is None, r
    assert time.monotonic() - t0 < 20


def test_exec_id_is_idempotent_and_reuse_with_another_request_conflicts(sb):
    eid = unique("ex")
    r1 = sb.exec("echo run >> /workspace/runs; cat /workspace/runs | wc -l", exec_id=eid)
    r2 = sb.exec("echo run >> /workspace/runs; cat /workspace/runs | wc -l", exec_id=eid)
    assert r1.exec_id == r2.exec_id == eid
    assert r1.stdout == r2.stdout == "1\n"
    assert sb.files.read_text("runs") == "run\n", "the same exec_id ran the command twice"
    with pytest.raises(sandloom.ExecIdConflict) as ei:
        sb.exec("echo something else", exec_id=eid)
    assert ei.value.status == 409 and ei.value.code == "EXEC_ID_CONFLICT"


def test_long_command_is_waited_for_by_polling(daemon):
    # long_poll_seconds=1: the foreground POST gives up after 1 s, then the SDK long-polls the record.
    c = sandloom.Client(daemon.url, daemon.token, long_poll_seconds=1)
    with c.sandbox(unique("sdk"), "poll") as sb:
        t0 = time.monotonic()
        r = sb.exec("echo start >> /workspace/count; sleep 3.5; echo done")
        assert time.monotonic() - t0 >= 3
        assert r.status == "SUCCEEDED" and r.stdout == "done\n", r
        assert sb.files.read_text("count") == "start\n", "the exec ran more than once"


def test_exec_scopes_run_in_parallel_and_same_scope_is_busy(sb):
    a = sb.exec_background("sleep 20", scope="a")
    try:
        b = sb.exec("echo parallel", scope="b")
        assert b.stdout == "parallel\n" and b.exec_scope == "b"
        with pytest.raises(sandloom.ScopeBusy) as ei:
            sb.exec("echo same scope", scope="a")
        assert ei.value.code == "SANDBOX_EXEC_SCOPE_BUSY" and ei.value.status == 409
        with pytest.raises(sandloom.ScopeBusy):
            sb.exec("echo needs the whole sandbox")
    finally:
        a.cancel()


def test_invalid_cwd_and_unknown_command(sb):
    with pytest.raises(sandloom.InvalidCwd) as ei:
        sb.exec("true", cwd="/etc")
    assert ei.value.status == 400
    r = sb.exec(["no-such-command-xyz"])
    assert r.status == "FAILED" and r.exit_code == 127 and "command not found" in r.stderr


def test_bad_arguments_are_type_errors_or_422(sb):
    with pytest.raises(TypeError):
        sb.exec(b"echo bytes")
    with pytest.raises(TypeError):
        sb.exec(["echo", 3])
    with pytest.raises(sandloom.InvalidRequest) as ei:
        sb.exec([])
    assert ei.value.status == 422 and ei.value.errors and {"loc", "type", "msg"} <= set(ei.value.errors[0])
    with pytest.raises(sandloom.InvalidRequest):
        sb.exec("true", env={"1BAD": "x"})


# --- background ---

def test_background_status_wait_output(sb):
    h = sb.exec_background("echo one; sleep 1; echo two >&2; echo three")
    assert isinstance(h, sandloom.ExecHandle) and h.exec_id.startswith("sdk-")
    assert h.last is not None and h.last.status == "RUNNING" and h.last.background is True
    st = h.status()
    assert st.exec_id == h.exec_id and st.status in ("RUNNING", "SUCCEEDED")
    r = h.wait()
    assert r.status == "SUCCEEDED" and r.stdout == "one\nthree\n" and r.stderr == "two\n"
    assert h.output() == b"one\nthree\n"
    assert h.output("stderr") == b"two\n"
    assert h.output(offset=4, limit=3) == b"thr"
    assert h.status().status == "SUCCEEDED"


def test_background_cancel(sb):
    h = sb.exec_background("echo started; sleep 60")
    assert h.cancel() is True
    r = h.wait(timeout=30)
    assert r.status == "CANCELLED", r
    assert h.cancel() is False, "a second cancel of an ended exec answers false"


def test_wait_with_timeout_raises_with_the_running_record(sb):
    h = sb.exec_background("sleep 30")
    try:
        t0 = time.monotonic()
        with pytest.raises(sandloom.ExecWaitTimeout) as ei:
            h.wait(timeout=1.5)
        assert 1 <= time.monotonic() - t0 < 15
        assert ei.value.code == "SANDLOOM_WAIT_TIMEOUT" and ei.value.result.status == "RUNNING"
    finally:
        h.cancel()


def test_exec_handle_of_an_existing_exec_and_unknown_exec(sb):
    h = sb.exec_background("echo later", exec_id=unique("bg"))
    again = sb.exec_handle(h.exec_id)
    assert again.wait().stdout == "later\n"
    assert sb.get_exec(h.exec_id).status == "SUCCEEDED"
    with pytest.raises(sandloom.ExecNotFound) as ei:
        sb.get_exec("no-such-exec")
    assert ei.value.code == "EXEC_NOT_FOUND" and ei.value.status == 404


# --- streaming ---

def test_exec_stream_yields_start_chunks_end(sb):
    events = list(sb.exec_stream("for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.2; done; exit 4"))
    kinds = [e.kind for e in events]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("start") == 1 and kinds.count("end") == 1
    out = "".join(e.text for e in events if e.kind == "stdout")
    err = b"".join(e.data for e in events if e.kind == "stderr")
    assert out == "out1\nout2\nout3\n" and err == b"err1\nerr2\nerr3\n"
    offs = [e.offset for e in events if e.kind == "stdout"]
    assert offs == sorted(offs) and offs[0] == 0
    res = events[-1].result
    assert res is not None and res.status == "FAILED" and res.exit_code == 4 and res.stdout == out
    # The chunks arrive as they are produced, not all at the end.
    assert kinds.count("stdout") >= 2


def test_exec_stream_keeps_utf8_sequences_whole(sb):
    text = "é中😀" * 3000
    events = list(sb.exec_stream(["python3", "-c", f"import sys; sys.stdout.write({text!r})"]))
    chunks = [e.text for e in events if e.kind == "stdout"]
    assert "".join(chunks) == text
    assert all("\ufffd" not in c for c in chunks)


def test_events_reattach_to_a_background_exec(sb):
    h = sb.exec_background("echo a; sleep 0.5; echo b; sleep 0.5; echo c")
    evs = list(h.events())
    assert "".join(e.text for e in evs if e.kind == "stdout") == "a\nb\nc\n"
    assert evs[-1].kind == "end" and evs[-1].result.status == "SUCCEEDED"
    # From an offset: only the rest.
    evs = list(h.events(stdout_offset=2))
    assert "".join(e.text for e in evs if e.kind == "stdout") == "b\nc\n"


def test_stream_error_event_is_raised_as_its_class(daemon_factory):
    """An exec that waited in the admission queue and got no slot: the stream's `error` event."""
    d = daemon_factory(env={"SANDBOX_MAX_RUNNING_EXECS": "1", "SANDBOX_ADMISSION_TIMEOUT_SECONDS": "1"})
    c = sandloom.Client(d.url, d.token)
    with c.sandbox(unique("sdk"), "busy1") as a, c.sandbox(unique("sdk"), "busy2") as b:
        h = a.exec_background("sleep 30")
        try:
            with pytest.raises(sandloom.Unavailable) as ei:
                list(b.exec_stream("echo never"))
            assert ei.value.code == "SANDBOX_WORKER_BUSY" and ei.value.status == 503
            with pytest.raises(sandloom.Unavailable):
                b.exec("echo never")
        finally:
            h.cancel()


def test_one_sandbox_from_many_threads(sb):
    import threading

    errors = []

    def work(i):
        try:
            for j in range(5):
                sb.files.write(f"t{i}/f{j}", f"{i}-{j}", make_parents=True)
                assert sb.files.read_text(f"t{i}/f{j}") == f"{i}-{j}"
            r = sb.exec(f"cat t{i}/f4", scope=f"thread-{i}")
            assert r.stdout == f"{i}-4", r
        except Exception as e:      # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(sb.files.list()) == 8


def test_get_exec_long_polls_and_sandbox_audit(sb):
    h = sb.exec_background("sleep 1.5; echo late")
    t0 = time.monotonic()
    r = sb.get_exec(h.exec_id, wait_seconds=30)
    assert r.status == "SUCCEEDED" and r.stdout == "late\n"
    assert 1 <= time.monotonic() - t0 < 20, "wait_seconds did not wait for the end"
    assert sb.get_exec(h.exec_id, output_encoding="text").raw.get("stdout") == "late\n"
    assert [e.event for e in sb.audit()][:2] == ["created", "connected"]


def test_client_as_context_manager(daemon):
    with sandloom.Client(daemon.url, daemon.token) as c:
        assert c.timeout == 60.0 and c.health()
        with c.sandbox(unique("sdk")) as sb:
            assert sb.exec(["true"]).ok
