# SPDX-License-Identifier: MIT
"""Exec input and output (issue 3): stdin as text and base64, output as text (invalid UTF-8 becomes
U+FFFD, a sequence split across read chunks is carried over) or base64 (exact bytes), the 8 MiB cap
on 20 MB of output without deadlock, the output endpoint with offsets, long-polling, and the SSE
stream (order, offsets, chunks before the end, disconnect, re-attach with an offset)."""

import base64
import hashlib
import time

from helpers import assert_error, assert_ok
from exec_helpers import (denv, MAX_OUTPUT, brief, cancel, check_sse_order, collect_sse, exec_id, get_exec, get_output,
                          run, sh, sse_events, sse_exec, stream_text, wait_exec, wait_running)

ALL_BYTES = bytes(range(256)) * 4

DAEMON_ENV = denv()


# --- stdin ----------------------------------------------------------------------------------------

def test_stdin_text_reaches_the_command(sandbox):
    text = "h\u00e9llo\nworld \u2603\n"
    rec = run(sandbox, ["/bin/cat"], stdin=text)
    assert rec["status"] == "SUCCEEDED" and rec["stdout"] == text, brief(rec)
    assert rec["stdout_bytes"] == len(text.encode())


def test_stdin_base64_binary_is_exact(sandbox):
    rec = run(sandbox, ["/usr/bin/sha256sum"], stdin_base64=base64.b64encode(ALL_BYTES).decode())
    assert rec["stdout"].split()[0] == hashlib.sha256(ALL_BYTES).hexdigest(), brief(rec)
    rec = run(sandbox, ["/bin/cat"], stdin_base64=base64.b64encode(ALL_BYTES).decode(), output_encoding="base64")
    assert base64.b64decode(rec["stdout_base64"]) == ALL_BYTES, brief(rec)
    assert rec["stdout_bytes"] == len(ALL_BYTES)


def test_large_stdin_and_a_command_that_does_not_read_it(sandbox):
    data = bytes(range(256)) * (4 * 1024 * 4)               # 4 MiB
    b64 = base64.b64encode(data).decode()
    rec = run(sandbox, ["/usr/bin/wc", "-c"], stdin_base64=b64)
    assert rec["stdout"].strip() == str(len(data)), brief(rec)
    # The command exits without reading: no hang, no deadlock, no daemon error.
    t0 = time.monotonic()
    rec = run(sandbox, ["/bin/true"], stdin_base64=b64, timeout_seconds=60)
    assert rec["status"] == "SUCCEEDED", brief(rec)
    assert time.monotonic() - t0 < 30


# --- encodings ------------------------------------------------------------------------------------

def test_base64_output_encoding_gives_exact_bytes_of_both_streams(sandbox):
    rec = run(sandbox, ["python3", "-c",
                        "import sys; sys.stdout.buffer.write(bytes(range(256))*4); sys.stderr.buffer.write(b'\\xff\\x00e')"],
              output_encoding="base64")
    assert rec["status"] == "SUCCEEDED", brief(rec)
    assert base64.b64decode(rec["stdout_base64"]) == ALL_BYTES
    assert base64.b64decode(rec["stderr_base64"]) == b"\xff\x00e"
    assert rec["stdout_bytes"] == 1024 and rec["stderr_bytes"] == 3
    assert "stdout" not in rec or rec["stdout"] in (None, ""), "text output beside base64"


def test_invalid_utf8_becomes_replacement_only_where_invalid(sandbox):
    cases = {
        r"printf 'a\377b\300\n'": b"a\xffb\xc0\n",
        r"printf 'x\303'": b"x\xc3",                          # truncated at the very end
        r"printf '\342\202'; printf 'z'": b"\xe2\x82z",        # truncated 3-byte sequence before ASCII
        r"printf 'ok \303\251 \342\202\254\n'": "ok \u00e9 \u20ac\n".encode(),
    }
    for script, raw in cases.items():
        rec = sh(sandbox, script)
        assert rec["stdout"] == raw.decode("utf-8", "replace"), (script, brief(rec))
        assert rec["stdout_bytes"] == len(raw), (script, brief(rec))
        rec = sh(sandbox, script, output_encoding="base64")
        assert base64.b64decode(rec["stdout_base64"]) == raw, (script, brief(rec))


def test_encoded_surrogates_and_overlongs_never_eat_valid_text(sandbox):
    raw = b"A\xed\xa0\x80B\xc0\xafC\xf4\x90\x80\x80D"
    rec = sh(sandbox, r"printf 'A\355\240\200B\300\257C\364\220\200\200D'")
    out = rec["stdout"]
    assert out.replace("\ufffd", "") == "ABCD", brief(rec)
    assert "\ufffd" in out.split("B")[0] and out.count("\ufffd") >= 3, brief(rec)
    assert out == raw.decode("utf-8", "replace"), f"differs from the Unicode maximal-subpart rule: {out!r}"


def test_utf8_sequence_split_across_chunks_is_carried_over(sandbox):
    # Each printf is a separate write(); the sleep makes them separate reads in the daemon.
    script = r"printf '\303'; sleep 0.4; printf '\251\n'; printf '\360\237'; sleep 0.4; printf '\230'; sleep 0.4; printf '\200\n'"
    want = "\u00e9\n\U0001F600\n"
    rec = sh(sandbox, script)
    assert rec["stdout"] == want, f"split sequence broken: {rec['stdout']!r}"
    assert rec["stdout_bytes"] == len(want.encode())
    rec = sh(sandbox, script, output_encoding="base64")
    assert base64.b64decode(rec["stdout_base64"]) == want.encode()
    # SSE chunks carry the split over as well: joined they are the same text, no U+FFFD.
    events = collect_sse(sse_exec(sandbox, ["/bin/sh", "-c", script]))
    assert events[-1][0] == "end", events
    joined = stream_text(events)
    assert joined == want, f"SSE chunks broke the sequence: {[e for e in events if e[0] == 'stdout']}"


# --- the cap --------------------------------------------------------------------------------------

def test_20mb_of_output_is_truncated_without_deadlock(sandbox):
    t0 = time.monotonic()
    rec = run(sandbox, ["python3", "-c",
                        "import sys\nfor i in range(20): sys.stdout.write('a' * 1000000)\nsys.stdout.flush()\n"
                        "sys.stderr.write('stderr-after-the-flood\\n')"], timeout_seconds=120)
    assert time.monotonic() - t0 < 90
    assert rec["status"] == "SUCCEEDED" and rec["exit_code"] == 0, \
        f"the command did not run undisturbed past the cap: {brief(rec)}"
    assert rec["truncated"] is True
    assert rec["stdout_bytes"] == 20_000_000, brief(rec)
    assert len(rec["stdout"]) == MAX_OUTPUT and set(rec["stdout"]) == {"a"}, brief(rec)
    assert rec["stderr"] == "stderr-after-the-flood\n" and rec["stderr_bytes"] == 23, brief(rec)


def test_both_streams_flooded_at_once(sandbox):
    rec = sh(sandbox, "head -c 20000000 /dev/zero >&2 & head -c 20000000 /dev/zero; wait; echo end >&2",
             output_encoding="base64", timeout_seconds=120)
    assert rec["status"] == "SUCCEEDED" and rec["truncated"] is True, brief(rec)
    assert rec["stdout_bytes"] == 20_000_000 and rec["stderr_bytes"] == 20_000_004, brief(rec)
    out, err = base64.b64decode(rec["stdout_base64"]), base64.b64decode(rec["stderr_base64"])
    assert len(out) == MAX_OUTPUT and out.count(0) == MAX_OUTPUT
    assert len(err) == MAX_OUTPUT


def test_output_under_the_cap_is_not_truncated(sandbox):
    rec = sh(sandbox, "head -c 1000000 /dev/zero | tr '\\0' b")
    assert rec["truncated"] is False and len(rec["stdout"]) == 1_000_000 and rec["stdout_bytes"] == 1_000_000


# --- the output endpoint --------------------------------------------------------------------------

def test_output_endpoint_reads_raw_bytes_from_an_offset(sandbox):
    eid = exec_id()
    run(sandbox, ["python3", "-c",
                  "import sys; sys.stdout.buffer.write(bytes(range(256))*4); sys.stderr.buffer.write(b'E' * 10)"],
        exec_id=eid)
    r = get_output(sandbox, eid, "stdout", 0)
    assert r.status == 200 and r.body == ALL_BYTES, r
    assert get_output(sandbox, eid, "stdout", 1000).body == ALL_BYTES[1000:]
    r = get_output(sandbox, eid, "stdout", 1024)
    assert r.status == 200 and r.body == b"", r
    assert get_output(sandbox, eid, "stderr", 3).body == b"E" * 7
    r = get_output(sandbox, eid, "stdout", 5000)                   # past the end
    assert (r.status == 200 and r.body == b"") or r.status in (416, 422), r


def test_output_endpoint_follows_a_running_exec(sandbox):
    eid = exec_id()
    run(sandbox, ["/bin/sh", "-c", "printf first; sleep 60"], exec_id=eid, background=True, exec_scope="out")
    wait_running(sandbox, eid)
    deadline = time.monotonic() + 10
    body = b""
    while time.monotonic() < deadline:
        body = get_output(sandbox, eid, "stdout", 0).body
        if body == b"first":
            break
        time.sleep(0.1)
    assert body == b"first", f"output of a running exec not readable: {body!r}"
    assert get_output(sandbox, eid, "stdout", 2).body == b"rst"
    assert assert_ok(get_exec(sandbox, eid))["status"] == "RUNNING"
    assert_ok(cancel(sandbox, eid))
    assert wait_exec(sandbox, eid)["status"] == "CANCELLED"


def test_output_of_a_large_exec_is_served_from_the_spool(sandbox):
    eid = exec_id()
    rec = sh(sandbox, "head -c 3000000 /dev/zero | tr '\\0' q", exec_id=eid)
    assert rec["stdout_bytes"] == 3_000_000
    r = get_output(sandbox, eid, "stdout", 2_999_990)
    assert r.body == b"q" * 10, r
    r = get_output(sandbox, eid, "stdout", 0)
    assert len(r.body) == 3_000_000 and r.body.count(b"q") == 3_000_000


# --- long-poll ------------------------------------------------------------------------------------

def test_long_poll_returns_when_the_exec_ends(sandbox):
    eid = exec_id()
    run(sandbox, ["/bin/sh", "-c", "sleep 2; echo done"], exec_id=eid, background=True, exec_scope="lp")
    t0 = time.monotonic()
    rec = assert_ok(get_exec(sandbox, eid, wait_seconds=30))
    elapsed = time.monotonic() - t0
    assert rec["status"] == "SUCCEEDED" and rec["stdout"] == "done\n", brief(rec)
    assert elapsed < 20, f"long-poll answered {elapsed:.1f}s after a 2 s command"


def test_long_poll_times_out_with_running(sandbox):
    eid = exec_id()
    run(sandbox, ["/bin/sleep", "60"], exec_id=eid, background=True, exec_scope="lp2")
    t0 = time.monotonic()
    rec = assert_ok(get_exec(sandbox, eid, wait_seconds=1))
    elapsed = time.monotonic() - t0
    assert rec["status"] == "RUNNING", brief(rec)
    assert 0.5 <= elapsed < 10, f"wait_seconds=1 answered after {elapsed:.2f}s"
    assert_ok(cancel(sandbox, eid))
    wait_exec(sandbox, eid)


def test_long_poll_on_a_finished_exec_answers_at_once(sandbox):
    eid = run(sandbox, ["/bin/true"])["exec_id"]
    t0 = time.monotonic()
    assert assert_ok(get_exec(sandbox, eid, wait_seconds=30))["status"] == "SUCCEEDED"
    assert time.monotonic() - t0 < 5


# --- SSE ------------------------------------------------------------------------------------------

def test_sse_streams_chunks_in_order_before_the_end(sandbox):
    eid = exec_id()
    stream = sse_exec(sandbox, ["/bin/sh", "-c", "echo a; sleep 3; echo b; echo e >&2"], exec_id=eid)
    assert stream.status == 200, stream.body_text()[:500]
    assert stream.headers.get("content-type", "").startswith("text/event-stream"), stream.headers
    events = collect_sse(stream)
    end = check_sse_order(events)
    start = events[0][1]
    assert isinstance(start, dict) and start.get("exec_id") == eid, start
    assert stream_text(events, "stdout") == "a\nb\n" and stream_text(events, "stderr") == "e\n", events
    t_first = next(t for name, _, t in events if name == "stdout")
    t_end = events[-1][2]
    assert t_first < 2.5, f"the first chunk arrived {t_first:.2f}s after the request (command sleeps 3 s after it)"
    assert t_end - t_first >= 1.5, f"first chunk {t_first:.2f}s, end {t_end:.2f}s: output was not streamed"
    assert end["status"] == "SUCCEEDED" and end["stdout"] == "a\nb\n" and end["exec_id"] == eid, brief(end)
    stored = assert_ok(get_exec(sandbox, eid))
    for k in ("status", "exit_code", "stdout", "stderr", "started_at", "finished_at"):
        assert stored[k] == end[k], (k, stored[k], end[k])


def test_sse_many_chunks_have_contiguous_offsets(sandbox):
    events = collect_sse(sse_exec(sandbox, ["/bin/sh", "-c",
                                            "i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done"]))
    check_sse_order(events)
    want = "".join(f"line-{i}\n" for i in range(3000))
    assert stream_text(events) == want
    assert events[-1][1]["stdout_bytes"] == len(want)


def test_sse_errors_before_the_start_are_plain_json(sandbox):
    stream = sse_exec(sandbox, ["/bin/true"], generation=sandbox.generation + 7)
    assert stream.status == 409, stream.status
    body = stream.body_text()
    assert "STALE_SANDBOX_GENERATION" in body, body
    stream.close()


def test_sse_client_disconnect_does_not_stop_a_foreground_exec(sandbox):
    eid = exec_id()
    stream = sse_exec(sandbox, ["/bin/sh", "-c", "sleep 1; echo out; echo x > /workspace/after-disconnect"],
                      exec_id=eid)
    first = next(stream.events())
    assert first[0] == "start", first
    stream.close()
    rec = wait_exec(sandbox, eid, timeout=30)
    assert rec["status"] == "SUCCEEDED" and rec["stdout"] == "out\n", brief(rec)
    assert sandbox.read("after-disconnect") == b"x\n"


def test_sse_reattach_with_an_offset_on_a_finished_exec(sandbox):
    eid = exec_id()
    sh(sandbox, "echo 0123456789; echo err >&2", exec_id=eid)
    events = collect_sse(sse_events(sandbox, eid, offset=4))
    end = check_sse_order(events, start_offset=4, expect_start=False)
    assert stream_text(events) == "456789\n", events
    assert end["status"] == "SUCCEEDED" and end["stdout"] == "0123456789\n"
    events = collect_sse(sse_events(sandbox, eid, offset=0))
    check_sse_order(events, expect_start=False)
    assert stream_text(events) == "0123456789\n"
    events = collect_sse(sse_events(sandbox, eid, offset=11))
    assert stream_text(events) == "" and events[-1][0] == "end", events


def test_sse_reattach_to_a_running_exec_follows_it_to_the_end(sandbox):
    eid = exec_id()
    run(sandbox, ["/bin/sh", "-c", "echo first; sleep 2; echo second"], exec_id=eid, background=True,
        exec_scope="sse")
    wait_running(sandbox, eid)
    events = collect_sse(sse_events(sandbox, eid, offset=0))
    end = check_sse_order(events, expect_start=False)
    assert stream_text(events) == "first\nsecond\n", events
    assert end["status"] == "SUCCEEDED"


def test_sse_reattach_validation(sandbox):
    eid = run(sandbox, ["/bin/true"])["exec_id"]
    r = sandbox.client.get(f"{sandbox.base}/exec/{eid}/events", {"generation": sandbox.generation, "offset": "-3"},
                           headers={"Accept": "text/event-stream"})
    assert_error(r, 422, "SANDBOX_INVALID_REQUEST")
    r = sandbox.client.get(f"{sandbox.base}/exec/{eid}/events", {"generation": sandbox.generation + 5},
                           headers={"Accept": "text/event-stream"})
    assert_error(r, 409, "STALE_SANDBOX_GENERATION")
