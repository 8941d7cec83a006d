# SPDX-License-Identifier: MIT
"""Client construction, the sandbox lifecycle (resolve + connect, context manager, release, list,
get, audit) and generation fencing: a stale generation is re-resolved within the same lifecycle,
and a sandbox released meanwhile raises SandboxReleased instead of continuing in a fresh one."""

import os

import pytest

import sandloom
from sdk_helpers import TcpProxy, unique


# --- Client construction ---

def test_client_from_arguments_environment_and_data_dir(daemon, tmp_path, monkeypatch):
    for k in ("SANDBOX_BASE_URL", "SANDBOX_INTERNAL_TOKEN", "SANDBOX_INTERNAL_TOKEN_FILE", "SANDBOX_DATA_DIR"):
        monkeypatch.delenv(k, raising=False)
    c = sandloom.Client(daemon.url + "/", daemon.token)
    assert c.base_url == daemon.url and c.health()
    assert daemon.token not in repr(c)

    monkeypatch.setenv("SANDBOX_BASE_URL", daemon.url)
    monkeypatch.setenv("SANDBOX_INTERNAL_TOKEN", daemon.token)
    assert sandloom.Client().list() is not None

    # A data directory as a daemon leaves it: endpoint and token files.
    monkeypatch.delenv("SANDBOX_BASE_URL")
    monkeypatch.delenv("SANDBOX_INTERNAL_TOKEN")
    ddir = tmp_path / "data"
    ddir.mkdir()
    (ddir / "endpoint").write_text(daemon.url + "\n")
    (ddir / "token").write_text(daemon.token + "\n")
    c = sandloom.Client(data_dir=str(ddir))
    assert c.base_url == daemon.url and isinstance(c.list(), list)
    monkeypatch.setenv("SANDBOX_DATA_DIR", str(ddir))
    assert sandloom.Client().base_url == daemon.url

    # The token file named by SANDBOX_INTERNAL_TOKEN_FILE wins over DATA/token.
    (tmp_path / "tok").write_text("wrong-token\n")
    monkeypatch.setenv("SANDBOX_INTERNAL_TOKEN_FILE", str(tmp_path / "tok"))
    with pytest.raises(sandloom.Unauthorized):
        sandloom.Client().list()


def test_client_without_a_token_says_how_to_give_one(tmp_path, monkeypatch):
    for k in ("SANDBOX_BASE_URL", "SANDBOX_INTERNAL_TOKEN", "SANDBOX_INTERNAL_TOKEN_FILE", "SANDBOX_DATA_DIR"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(sandloom.AuthError) as ei:
        sandloom.Client(data_dir=str(tmp_path))
    assert ei.value.code == "SANDLOOM_NO_TOKEN" and "SANDBOX_INTERNAL_TOKEN" in ei.value.message
    with pytest.raises(sandloom.SandloomError) as ei:
        sandloom.Client("ftp://x", "t")
    assert ei.value.code == "SANDLOOM_INVALID_URL"


def test_wrong_token_is_unauthorized_and_never_echoed(daemon):
    c = sandloom.Client(daemon.url, "not-the-token-12345")
    with pytest.raises(sandloom.Unauthorized) as ei:
        c.list()
    assert ei.value.status == 401 and ei.value.code == "SANDBOX_UNAUTHORIZED"
    assert isinstance(ei.value, sandloom.AuthError)
    assert "not-the-token-12345" not in str(ei.value)
    assert c.health() is True      # /health needs no token


def test_healthz(client):
    hz = client.healthz()
    assert hz["status"] and "isolation" in hz and "execs" in hz


# --- lifecycle ---

def test_sandbox_resolves_connects_and_releases_at_the_end_of_the_block(client):
    sid = unique("sdk")
    with client.sandbox(sid, "team-a", profile="default") as sb:
        assert sb.info.status == "READY" and sb.info.workspace_scope_id == "team-a"
        assert sb.generation >= 1 and sb.lifecycle_id
        sb.files.write("x", "y")
        info = sb.refresh()
        assert info.sandbox_id == sid and info.status == "READY" and info.disk is not None
        assert client.get(sid).lifecycle_id == sb.lifecycle_id
        assert sid in [s.sandbox_id for s in client.list("team-a")]
        assert sb.open().generation == sb.generation, "open() again is idempotent while live"
    info = client.get(sid)
    assert info.status == "RELEASED" and not info.live and info.released_at
    assert sid not in [s.sandbox_id for s in client.list("team-a")]
    assert sid in [s.sandbox_id for s in client.list("team-a", status="any")]
    events = [e.event for e in client.audit(sid)]
    assert events[:2] == ["created", "connected"] and events[-1] == "released"
    rel = [e for e in client.audit(sid) if e.event == "released"][0]
    assert rel.reason == "sdk context exit" and rel.lifecycle_id == sb.lifecycle_id


def test_keep_leaves_the_sandbox_and_an_exception_still_releases(client):
    sid = unique("sdk")
    with client.sandbox(sid, "k", keep=True) as sb:
        sb.files.write("kept", "1")
    assert client.get(sid).status == "READY"
    with client.sandbox(sid, "k") as sb2:
        assert sb2.files.read("kept") == b"1", "the kept sandbox's files are still there"
        sb2.keep = True
    assert client.get(sid).status == "READY"
    with pytest.raises(RuntimeError):
        with client.sandbox(sid, "k"):
            raise RuntimeError("boom")
    assert client.get(sid).status == "RELEASED"


def test_list_pages_and_limit(client):
    scope = unique("many")
    ids = sorted(unique("p") for _ in range(7))
    for sid in ids:
        client.resolve(sid, scope)
    try:
        got = client.list(scope, page_size=3)
        assert [s.sandbox_id for s in got] == ids and all(s.status == "ASSIGNED" for s in got)
        assert [s.sandbox_id for s in client.list(scope, limit=4, page_size=3)] == ids[:4]
        assert client.list(scope, status="READY") == []
    finally:
        for sid in ids:
            client.release(sid)


def test_release_and_get_of_unknown_sandbox(client):
    client.release("never-existed-" + unique())         # RELEASED for an unknown id too
    with pytest.raises(sandloom.SandboxNotFound) as ei:
        client.get("never-existed-" + unique())
    assert ei.value.status == 404 and isinstance(ei.value, sandloom.NotFound)


def test_scope_mismatch(client):
    sid = unique("sdk")
    with client.sandbox(sid, "scope-one"):
        with pytest.raises(sandloom.ScopeMismatch) as ei:
            client.sandbox(sid, "scope-two")
        assert ei.value.code == "SANDBOX_SCOPE_MISMATCH" and isinstance(ei.value, sandloom.Conflict)


def test_released_by_someone_else_raises_sandbox_released(client):
    sid = unique("sdk")
    sb = client.sandbox(sid, "rel")
    sb.files.write("mine.txt", "old lifecycle")
    client.release(sid)                          # another client releases it
    with pytest.raises(sandloom.SandboxReleased) as ei:
        sb.files.read("mine.txt")
    assert ei.value.code == "SANDBOX_RELEASED" and ei.value.status == 409
    with pytest.raises(sandloom.SandboxReleased):
        sb.exec("true")
    # Nothing was resolved on our behalf: the sandbox is still released, not a fresh lifecycle.
    assert client.get(sid).status == "RELEASED"


def test_released_and_resolved_again_raises_instead_of_using_the_fresh_one(client):
    sid = unique("sdk")
    sb = client.sandbox(sid, "rel2")
    sb.files.write("mine.txt", "old lifecycle")
    old_gen, old_lc = sb.generation, sb.lifecycle_id
    client.release(sid)
    other = client.sandbox(sid, "rel2")          # someone starts a new lifecycle: generation + 1
    assert other.generation > old_gen and other.lifecycle_id != old_lc
    with pytest.raises(sandloom.SandboxReleased) as ei:
        sb.files.write("mine.txt", "would land in the new, empty sandbox")
    assert "released" in ei.value.message
    with pytest.raises(sandloom.SandboxReleased):
        sb.exec("touch /workspace/should-not-exist")
    with pytest.raises(sandloom.SandboxReleased):
        list(sb.exec_stream("touch /workspace/should-not-exist"))
    assert sb.generation == old_gen, "the object kept its own (dead) lifecycle"
    # The new lifecycle saw none of it.
    assert other.files.list() == []
    other.release()


def test_stale_generation_after_a_restart_is_re_resolved_in_the_same_lifecycle(daemon_factory):
    d = daemon_factory()
    with TcpProxy(d.url) as proxy:           # a fixed address in front of a daemon whose port changes
        c = sandloom.Client(proxy.url, d.token, backoff=0.05)
        sb = c.sandbox(unique("sdk"), "restart")
        sb.files.write("persist.txt", "survives")
        gen, lc = sb.generation, sb.lifecycle_id
        assert d.stop() == 0
        d.start()                            # same data directory: the worker re-owns it at generation + 1
        proxy.set_upstream(d.url)
        # The next call meets STALE_SANDBOX_GENERATION and re-resolves once, transparently.
        assert sb.files.read("persist.txt") == b"survives"
        assert sb.generation == gen + 1 and sb.lifecycle_id == lc
        assert sb.exec("cat persist.txt").stdout == "survives"
        events = [e.event for e in c.audit(sb.sandbox_id)]
        assert "reowned" in events and "released" not in events
        sb.release()


def test_second_stale_generation_is_raised(daemon_factory):
    """Only one re-resolve per call: a generation that is stale again right after raises StaleGeneration."""
    d = daemon_factory()
    c = sandloom.Client(d.url, d.token)
    sb = c.sandbox(unique("sdk"), "stale")
    calls = []

    def always_stale(gen):
        calls.append(gen)
        raise sandloom.StaleGeneration("STALE_SANDBOX_GENERATION", 409, "simulated")
    with pytest.raises(sandloom.StaleGeneration):
        sb.call(always_stale)
    assert calls == [sb.generation, sb.generation]
    sb.release()


def test_data_dir_of_a_daemon_with_a_generated_token(daemon_factory, monkeypatch):
    d = daemon_factory(token=None)           # the daemon generates DATA/token and writes DATA/endpoint
    for k in ("SANDBOX_BASE_URL", "SANDBOX_INTERNAL_TOKEN", "SANDBOX_INTERNAL_TOKEN_FILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SANDBOX_DATA_DIR", d.data_dir)
    assert os.path.exists(os.path.join(d.data_dir, "endpoint"))
    c = sandloom.Client()
    with c.sandbox(unique("sdk")) as sb:
        assert sb.scope == "default"
        assert sb.exec("echo ok").stdout == "ok\n"
