# SPDX-License-Identifier: MIT
"""Sandbox lifecycle: resolve, connect, get, release, list, audit, generation fencing, the
workspace on disk, uid allocation."""

import os
import re
import stat
from datetime import datetime

import pytest

from helpers import API, Sandbox, assert_error, assert_ok, sandbox_fs_dir, unique_id, wait_until

UID_MIN, UID_MAX = 1900000000, 1999999999


def test_resolve_returns_the_route_record(client, daemon):
    s = Sandbox(client)
    d = assert_ok(s.resolve())
    assert d["sandbox_id"] == s.id
    assert d["status"] == "ASSIGNED"
    assert d["storage_mode"] == "local"
    assert isinstance(d["generation"], int) and d["generation"] >= 1
    assert isinstance(d["sandbox_uid"], int) and UID_MIN <= d["sandbox_uid"] <= UID_MAX
    for key in ("worker_id", "worker_epoch", "worker_endpoint", "lifecycle_id"):
        assert isinstance(d.get(key), str) and d[key], f"resolve lacks {key}: {d}"
    assert s.id not in d["lifecycle_id"]


def test_worker_endpoint_is_the_real_listening_url(client, daemon):
    s = Sandbox(client)
    d = assert_ok(s.resolve())
    assert d["worker_endpoint"].rstrip("/") == daemon.url, \
        f"worker_endpoint {d['worker_endpoint']!r} is not where the daemon listens ({daemon.url})"


def test_resolve_is_idempotent_within_a_scope(client):
    s = Sandbox(client)
    first = assert_ok(s.resolve())
    second = assert_ok(s.resolve())
    for key in ("generation", "sandbox_uid", "lifecycle_id", "worker_id", "worker_epoch"):
        assert first[key] == second[key], key
    assert_ok(s.connect())
    third = assert_ok(s.resolve())
    assert third["generation"] == first["generation"]
    assert third["status"] == "READY"


def test_resolve_with_profile_is_accepted(client):
    s = Sandbox(client)
    assert_ok(s.resolve(profile="default"))


def test_resolve_from_another_scope_gets_409_scope_mismatch(client):
    s = Sandbox(client)
    assert_ok(s.resolve())
    other = Sandbox(client, s.id, unique_id("other-scope"))
    assert_error(other.resolve(), 409, "SANDBOX_SCOPE_MISMATCH")


def test_connect_makes_it_ready_and_returns_uid(client):
    s = Sandbox(client)
    rec = assert_ok(s.resolve())
    d = assert_ok(s.connect())
    assert d["sandbox_id"] == s.id
    assert d["generation"] == rec["generation"]
    assert d["status"] == "READY"
    assert d["uid"] == rec["sandbox_uid"]
    assert assert_ok(s.get())["status"] == "READY"


def test_connect_twice_is_idempotent(client):
    s = Sandbox.create(client)
    d = assert_ok(s.connect())
    assert d["status"] == "READY"


@pytest.mark.parametrize("delta", [1, -1, 1000])
def test_connect_with_wrong_generation_gets_409_stale_route(client, delta):
    s = Sandbox(client)
    assert_ok(s.resolve())
    assert_error(s.connect(s.generation + delta), 409, "STALE_SANDBOX_ROUTE")
    assert assert_ok(s.get())["status"] == "ASSIGNED"


def test_connect_unknown_sandbox_gets_404(client):
    s = Sandbox(client)
    assert_error(s.connect(1), 404, "SANDBOX_NOT_FOUND")


def test_get_returns_the_record(client, sandbox):
    d = assert_ok(sandbox.get())
    assert d["sandbox_id"] == sandbox.id
    assert d["generation"] == sandbox.generation
    assert d["sandbox_uid"] == sandbox.uid
    assert d["status"] == "READY"


def test_get_unknown_sandbox_gets_404(client):
    assert_error(client.get(f"{API}/{unique_id()}"), 404, "SANDBOX_NOT_FOUND")


def test_release_answers_released(client, sandbox):
    d = assert_ok(sandbox.release())
    assert d["sandbox_id"] == sandbox.id
    assert d["status"] == "RELEASED"


def test_release_of_unknown_sandbox_answers_released(client):
    sid = unique_id()
    d = assert_ok(client.delete(f"{API}/{sid}"))
    assert d == {**d, "sandbox_id": sid, "status": "RELEASED"}


def test_release_twice_answers_released_both_times(client, sandbox):
    assert assert_ok(sandbox.release())["status"] == "RELEASED"
    assert assert_ok(sandbox.release())["status"] == "RELEASED"


def test_resolve_after_release_starts_new_lifecycle_and_generation(client):
    s = Sandbox.create(client)
    old = dict(s.record)
    assert_ok(s.release())
    new = assert_ok(s.resolve())
    assert new["generation"] == old["generation"] + 1
    assert new["lifecycle_id"] != old["lifecycle_id"]
    assert new["status"] == "ASSIGNED"
    # The old uid is quarantined (300 s by default): it must not come straight back.
    assert new["sandbox_uid"] != old["sandbox_uid"]
    assert_ok(s.connect())


def test_release_deletes_the_workspace(client, sandbox, daemon):
    marker = unique_id("released-marker")
    sandbox.write(marker, b"bye")
    fs = sandbox_fs_dir(daemon.data_dir, sandbox.uid)
    assert fs and os.path.exists(os.path.join(fs, "workspace", marker))
    assert_ok(sandbox.release())

    def gone():
        for root in ("sandboxes", "trash"):
            for dirpath, dirnames, filenames in os.walk(os.path.join(daemon.data_dir, root)):
                if marker in filenames:
                    return False
        return True
    assert wait_until(gone, timeout=15), "released workspace still on disk after 15 s"
    assert not os.path.exists(fs)


def test_old_generation_after_release_and_resolve_is_stale(client):
    s = Sandbox.create(client)
    s.write("f.txt", b"x")
    old_gen = s.generation
    assert_ok(s.release())
    assert_ok(s.resolve())
    assert_ok(s.connect())
    assert_error(s.files_get("f.txt", generation=old_gen), 409, "STALE_SANDBOX_GENERATION")
    # New lifecycle, new empty workspace.
    assert_error(s.files_get("f.txt"), 404, "SANDBOX_FILE_NOT_FOUND")


def test_connect_creates_workspace_layout_owned_by_sandbox_uid(client, sandbox, daemon):
    st = os.stat(daemon.data_dir)
    assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o711, \
        f"data dir is {oct(stat.S_IMODE(st.st_mode))} owned by {st.st_uid}"
    fs = sandbox_fs_dir(daemon.data_dir, sandbox.uid)
    assert fs, "no DATA/sandboxes/*/fs whose workspace belongs to the sandbox uid"
    sandbox_dir = os.path.dirname(fs)
    assert sandbox.id not in os.path.basename(sandbox_dir), "on-disk name uses the client's sandbox_id"
    assert stat.S_IMODE(os.stat(sandbox_dir).st_mode) == 0o700
    for sub in ("workspace", "home/sandbox", "cache", "envs"):
        st = os.lstat(os.path.join(fs, sub))
        assert stat.S_ISDIR(st.st_mode), sub
        assert (st.st_uid, st.st_gid) == (sandbox.uid, sandbox.uid), f"{sub} owned by {st.st_uid}:{st.st_gid}"


def test_resolve_does_not_create_a_workspace_before_connect(client, daemon):
    s = Sandbox(client)
    assert_ok(s.resolve())
    assert sandbox_fs_dir(daemon.data_dir, s.uid) is None


def test_live_sandboxes_get_distinct_uids(client):
    uids = {Sandbox.create(client).uid for _ in range(8)}
    assert len(uids) == 8


@pytest.mark.parametrize("sandbox_id", ["ab", "x" * 129, "has space", "slash/inside", "ünïcode", "", "semi;colon",
                                        "nul\u0000byte"])
def test_resolve_with_invalid_sandbox_id_gets_422(client, sandbox_id):
    r = client.post(f"{API}/resolve", {"sandbox_id": sandbox_id, "workspace_scope_id": "scope"})
    assert_error(r, 422, "SANDBOX_INVALID_REQUEST", forbidden=[sandbox_id] if len(sandbox_id) > 3 else [])


def test_resolve_accepts_every_allowed_character(client):
    s = Sandbox(client, "Az09_.:-" + unique_id())
    assert_ok(s.resolve())
    assert_ok(s.connect())
    assert assert_ok(s.get())["sandbox_id"] == s.id


@pytest.mark.parametrize("body", [
    {"workspace_scope_id": "s"},
    {"sandbox_id": "abc-def"},
    {"sandbox_id": "abc-def", "workspace_scope_id": ""},
    {"sandbox_id": "abc-def", "workspace_scope_id": "s" * 192},
    {"sandbox_id": 12345, "workspace_scope_id": "s"},
    {"sandbox_id": "abc-def", "workspace_scope_id": ["s"]},
    {"sandbox_id": "abc-def", "workspace_scope_id": "s", "profile": 7},
], ids=["no-id", "no-scope", "empty-scope", "long-scope", "int-id", "list-scope", "int-profile"])
def test_resolve_with_invalid_fields_gets_422(client, body):
    assert_error(client.post(f"{API}/resolve", body), 422, "SANDBOX_INVALID_REQUEST")


def test_validation_never_echoes_submitted_values(client):
    secret = "S3CRET-" + unique_id()
    r = client.post(f"{API}/resolve", {"sandbox_id": secret + " !", "workspace_scope_id": 17, "profile": [secret]})
    assert_error(r, 422, "SANDBOX_INVALID_REQUEST", forbidden=[secret])


@pytest.mark.parametrize("generation", ["1", -1, 1.5, None, True, 2**70])
def test_connect_with_bad_generation_type_gets_422(client, generation):
    s = Sandbox(client)
    assert_ok(s.resolve())
    r = client.post(s.base, {"generation": generation})
    assert_error(r, 422, "SANDBOX_INVALID_REQUEST")


def test_path_parameter_with_invalid_sandbox_id_is_refused(client):
    for sid in ("a", "x" * 200, "bad%20id"):
        r = client.get(f"{API}/{sid}")
        assert r.status in (404, 422), r
        assert r.status < 500


# --- list ---

def _make_scope(client, n_ready, n_assigned):
    scope = unique_id("list-scope")
    ready, assigned = [], []
    for _ in range(n_ready):
        ready.append(Sandbox.create(client, scope=scope))
    for _ in range(n_assigned):
        s = Sandbox(client, scope=scope)
        assert_ok(s.resolve())
        assigned.append(s)
    return scope, ready, assigned


def test_list_filters_by_scope_and_status(client):
    scope, ready, assigned = _make_scope(client, 2, 1)
    d = assert_ok(client.get(API, {"workspace_scope_id": scope}))
    assert d["total"] == 3
    assert {x["sandbox_id"] for x in d["sandboxes"]} == {s.id for s in ready + assigned}
    d = assert_ok(client.get(API, {"workspace_scope_id": scope, "status": "READY"}))
    assert {x["sandbox_id"] for x in d["sandboxes"]} == {s.id for s in ready}
    assert d["total"] == 2
    d = assert_ok(client.get(API, {"workspace_scope_id": scope, "status": "ASSIGNED"}))
    assert [x["sandbox_id"] for x in d["sandboxes"]] == [assigned[0].id]


def test_list_pages_with_limit_and_offset(client):
    scope, ready, assigned = _make_scope(client, 3, 2)
    seen = []
    offset = 0
    while True:
        d = assert_ok(client.get(API, {"workspace_scope_id": scope, "limit": 2, "offset": offset}))
        assert d["limit"] == 2 and d["offset"] == offset and d["total"] == 5
        assert len(d["sandboxes"]) <= 2
        seen += [x["sandbox_id"] for x in d["sandboxes"]]
        offset += 2
        if not d["has_more"]:
            break
        assert offset < 10, "has_more never became false"
    assert sorted(seen) == sorted(s.id for s in ready + assigned)


def test_list_after_release_no_longer_shows_it_as_ready(client):
    scope, ready, _ = _make_scope(client, 2, 0)
    assert_ok(ready[0].release())
    d = assert_ok(client.get(API, {"workspace_scope_id": scope, "status": "READY"}))
    assert [x["sandbox_id"] for x in d["sandboxes"]] == [ready[1].id]


@pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "abc"}, {"limit": "-1"}, {"offset": "-5"},
                                   {"status": "SLEEPY"}, {"limit": "99999999999999999999999"}])
def test_list_with_bad_query_gets_422(client, query):
    assert_error(client.get(API, query), 422, "SANDBOX_INVALID_REQUEST")


# --- audit ---

def test_audit_records_each_lifecycle(client):
    s = Sandbox.create(client)
    first_lifecycle = s.record["lifecycle_id"]
    assert_ok(s.release())
    assert_ok(s.resolve())
    second_lifecycle = s.record["lifecycle_id"]
    d = assert_ok(s.audit())
    assert d["sandbox_id"] == s.id
    events = d["events"]
    assert d["total"] >= len(events) >= 3
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f"seq not increasing: {seqs}"
    for e in events:
        for key in ("seq", "lifecycle_id", "generation", "event", "principal", "reason", "worker_id", "at"):
            assert key in e, f"audit event lacks {key}: {e}"
        assert isinstance(e["principal"], str) and e["principal"]
        datetime.fromisoformat(e["at"].replace("Z", "+00:00"))
    lifecycles = {e["lifecycle_id"] for e in events}
    assert {first_lifecycle, second_lifecycle} <= lifecycles
    released = [e for e in events if re.search("releas", e["event"], re.I)]
    assert released and released[0]["lifecycle_id"] == first_lifecycle, f"no release event: {events}"


def test_audit_of_unknown_sandbox_gets_404(client):
    assert_error(client.get(f"{API}/{unique_id()}/audit"), 404, "SANDBOX_NOT_FOUND")


# --- fencing on the files API ---

def test_file_call_before_connect_gets_409_not_ready(client):
    s = Sandbox(client)
    assert_ok(s.resolve())
    assert_error(s.files_put("a.txt", b"x"), 409, "SANDBOX_NOT_READY")
    assert_error(s.files_get("a.txt"), 409, "SANDBOX_NOT_READY")
    assert_error(s.list("/workspace"), 409, "SANDBOX_NOT_READY")


@pytest.mark.parametrize("delta", [1, 5])
def test_file_calls_with_stale_generation_get_409(client, sandbox, delta):
    g = sandbox.generation + delta
    sandbox.write("a.txt", b"x")
    for r in (sandbox.files_get("a.txt", generation=g), sandbox.files_put("a.txt", b"y", generation=g),
              sandbox.raw_get("a.txt", generation=g), sandbox.raw_put("a.txt", b"y", generation=g),
              sandbox.list("/workspace", generation=g), sandbox.stat("a.txt", generation=g),
              sandbox.mkdir("d", generation=g), sandbox.delete("a.txt", generation=g),
              sandbox.move("a.txt", "b.txt", generation=g), sandbox.archive_get("/workspace", generation=g),
              sandbox.archive_put("/workspace", b"", generation=g)):
        assert_error(r, 409, "STALE_SANDBOX_GENERATION")
    assert sandbox.read("a.txt") == b"x"


def test_file_call_on_unknown_sandbox_gets_404(client):
    s = Sandbox(client)
    s.generation = 1
    assert_error(s.files_get("a.txt"), 404, "SANDBOX_NOT_FOUND")
    assert_error(s.files_put("a.txt", b"x"), 404, "SANDBOX_NOT_FOUND")


def test_file_call_on_released_sandbox_is_refused(client, sandbox):
    assert_ok(sandbox.release())
    r = sandbox.files_get("a.txt")
    assert r.status in (404, 409), r


def test_uid_exhaustion_gets_503_and_quarantine_keeps_released_uids(daemon_factory):
    d = daemon_factory(env={"SANDBOX_UID_START": "1950000000", "SANDBOX_UID_END": "1950000001"})
    c = d.client()
    a, b = Sandbox.create(c), Sandbox.create(c)
    assert {a.uid, b.uid} == {1950000000, 1950000001}
    third = Sandbox(c)
    assert_error(third.resolve(), 503, "SANDBOX_UID_EXHAUSTED")
    # A released uid is quarantined: still exhausted right after a release.
    assert_ok(a.release())
    assert_error(third.resolve(), 503, "SANDBOX_UID_EXHAUSTED")
    # Resolving a live sandbox again does not need a new uid.
    assert_ok(b.resolve())
