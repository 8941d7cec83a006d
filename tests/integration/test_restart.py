# SPDX-License-Identifier: MIT
"""Restarting the daemon on the same data directory: sandboxes and files survive, the generation
bumps by one, worker_id stays, worker_epoch changes — after SIGTERM and after kill -9. The token
is generated on first start and reused."""

import os
import re
import signal
import stat

import pytest

from helpers import Sandbox, assert_error, assert_ok, sandbox_fs_dir, wait_until


def _populate(c):
    s = Sandbox.create(c)
    s.write("persist.txt", b"survives restarts")
    assert_ok(s.mkdir("dir/sub", parents=True))
    assert_ok(s.raw_put("dir/sub/blob.bin", bytes(range(256)) * 100))
    assigned = Sandbox(c)
    assert_ok(assigned.resolve())
    return s, assigned


def _check_after_restart(c, s, before, assigned, assigned_before):
    after = assert_ok(s.get())
    assert after["generation"] == before["generation"] + 1, (before, after)
    assert after["worker_id"] == before["worker_id"]
    assert after["worker_epoch"] != before["worker_epoch"]
    assert after["lifecycle_id"] == before["lifecycle_id"], "a restart must not start a new lifecycle"
    assert after["sandbox_uid"] == before["sandbox_uid"]
    # The old generation is fenced off.
    assert_error(s.files_get("persist.txt", generation=before["generation"]), 409, "STALE_SANDBOX_GENERATION")
    # A client re-resolves (same scope) and reconnects with the new generation; files are intact.
    route = assert_ok(s.resolve())
    assert route["generation"] == before["generation"] + 1
    assert_ok(s.connect())
    assert s.read("persist.txt") == b"survives restarts"
    assert s.raw_get("dir/sub/blob.bin").body == bytes(range(256)) * 100
    a = assert_ok(assigned.get())
    assert a["generation"] == assigned_before["generation"] + 1
    hz = assert_ok(c.get("/healthz"))
    assert hz["worker_id"] == before["worker_id"] and hz["worker_epoch"] == after["worker_epoch"]


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_sandboxes_and_files_survive_restart(daemon_factory, how):
    d = daemon_factory()
    c = d.client()
    s, assigned = _populate(c)
    before = assert_ok(s.get())
    assigned_before = assert_ok(assigned.get())
    if how == "sigterm":
        assert d.stop() == 0, f"SIGTERM exit code {d.proc.returncode}; stderr: {d.stderr()[-2000:]}"
    else:
        d.kill9()
    d.start()
    _check_after_restart(d.client(), s, before, assigned, assigned_before)


def test_ready_sandbox_is_ready_again_after_restart(daemon_factory):
    d = daemon_factory()
    s = Sandbox.create(d.client())
    d.stop()
    d.start()
    assert assert_ok(s.get())["status"] == "READY"


def test_two_restarts_bump_generation_twice(daemon_factory):
    d = daemon_factory()
    s = Sandbox.create(d.client())
    g = s.generation
    for _ in range(2):
        d.stop()
        d.start()
    assert assert_ok(s.get())["generation"] == g + 2


def test_release_survives_restart_and_workspace_is_finally_deleted(daemon_factory):
    d = daemon_factory()
    c = d.client()
    s = Sandbox.create(c)
    s.write("gone.txt", b"x")
    fs = sandbox_fs_dir(d.data_dir, s.uid)
    old_gen = s.generation
    assert_ok(s.release())
    d.kill9()
    d.start()
    r = assert_ok(s.resolve())
    assert r["status"] == "ASSIGNED" and r["generation"] > old_gen
    assert wait_until(lambda: not os.path.exists(fs), timeout=15), "released workspace not deleted after restart"


def test_token_is_generated_on_first_start_and_reused(daemon_factory):
    d = daemon_factory(token=None)
    path = os.path.join(d.data_dir, "token")
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0
    token = open(path).read().strip()
    assert re.fullmatch(r"[0-9a-f]{64}", token), "DATA/token is not 64 hex characters"
    c = d.client()
    assert_ok(c.get("/api/v1/sandboxes"))
    assert_error(d.client(token="0" * 64).get("/api/v1/sandboxes"), 401, "SANDBOX_UNAUTHORIZED")
    assert token in d.stdout(), "the generated token is not printed on first start"
    d.stop()
    d.start()
    assert d.token == token
    assert_ok(d.client().get("/api/v1/sandboxes"))


def test_token_from_environment_wins_and_file_is_not_needed(daemon_factory):
    d = daemon_factory(token="env-token-" + "a" * 20)
    assert_ok(d.client().get("/api/v1/sandboxes"))


def test_token_file_setting_is_used(daemon_factory, tmp_path):
    tf = tmp_path / "token-file"
    tf.write_text("file-token-0123456789abcdef\n")
    os.chmod(tf, 0o600)
    d = daemon_factory(token=None, env={"SANDBOX_INTERNAL_TOKEN_FILE": str(tf)})
    d.token = "file-token-0123456789abcdef"   # also checked absent from stderr at teardown
    c = d.client(token="file-token-0123456789abcdef")
    assert_ok(c.get("/api/v1/sandboxes"))
    assert "file-token-0123456789abcdef" not in d.stderr()


def test_worker_id_is_kept_in_data_dir(daemon_factory):
    d = daemon_factory()
    wid = assert_ok(d.client().get("/healthz"))["worker_id"]
    assert os.path.exists(os.path.join(d.data_dir, "worker_id"))
    d.stop()
    d.start()
    assert assert_ok(d.client().get("/healthz"))["worker_id"] == wid


def test_configured_worker_id_is_used(daemon_factory):
    d = daemon_factory(env={"SANDBOX_WORKER_ID": "worker-a.1"})
    assert assert_ok(d.client().get("/healthz"))["worker_id"] == "worker-a.1"


def test_second_daemon_on_same_data_dir_is_refused_or_harmless(daemon_factory):
    d = daemon_factory()
    s = Sandbox.create(d.client())
    s.write("f", b"1")
    second = daemon_factory(data_dir=d.data_dir, token=d.token, run=False)
    try:
        second.start()
        started = True
    except Exception:
        started = False
    if started:
        second.stop()
    # Whatever happened, the first daemon still serves its sandbox.
    assert d.alive() and d.client().health_ok()
    r = s.files_get("f")
    assert r.status in (200, 409), r
