# SPDX-License-Identifier: MIT
"""Liveness, the public/private /healthz report, authentication, unknown routes and methods."""

import json

import pytest

from helpers import API, Sandbox, assert_error, assert_ok, unique_id


def test_health_answers_ok_without_token(client):
    r = client.get("/health", auth=False)
    assert r.status == 200
    assert r.body.strip() == b"ok"


def test_healthz_without_token_tells_status_and_version_only(client):
    r = client.get("/healthz", auth=False)
    d = assert_ok(r)
    assert isinstance(d, dict) and "status" in d and "version" in d, d
    for private in ("worker_id", "worker_epoch", "store", "disk", "config"):
        assert private not in d, f"unauthenticated /healthz reveals {private}: {d}"


def test_healthz_with_wrong_token_tells_no_more_than_without(client):
    r = client.get("/healthz", auth=False, headers={"Authorization": "Bearer not-the-token"})
    assert r.status in (200, 401), r
    if r.status == 200:
        for private in ("worker_id", "worker_epoch", "store", "disk", "config"):
            assert private not in r.json(), f"/healthz with a wrong token reveals {private}"
    else:
        assert_error(r, 401, "SANDBOX_UNAUTHORIZED")


def test_healthz_with_token_reports_worker_store_disk_config_without_secrets(client, daemon):
    r = client.get("/healthz")
    d = assert_ok(r)
    for key in ("status", "version", "worker_id", "worker_epoch", "store", "disk", "config"):
        assert key in d, f"/healthz with the token lacks {key}: {d}"
    assert daemon.token not in r.body.decode(), "/healthz shows the token"
    text = json.dumps(d["config"])
    assert "SANDBOX_INTERNAL_TOKEN\": \"" + daemon.token not in text


def test_healthz_worker_identity_matches_resolve(client):
    hz = assert_ok(client.get("/healthz"))
    s = Sandbox(client)
    rec = assert_ok(s.resolve())
    assert rec["worker_id"] == hz["worker_id"]
    assert rec["worker_epoch"] == hz["worker_epoch"]


@pytest.mark.parametrize("headers", [
    {},
    {"Authorization": "Bearer wrong-token"},
    {"Authorization": ""},
    {"Authorization": "Bearer "},
    {"Authorization": "Bearer"},
], ids=["no-header", "wrong-token", "empty-header", "empty-bearer", "bare-scheme"])
def test_request_without_valid_token_gets_401(client, headers):
    r = client.get(API, auth=False, headers=headers)
    assert_error(r, 401, "SANDBOX_UNAUTHORIZED")


def test_token_with_wrong_scheme_gets_401(client, daemon):
    for value in (f"Basic {daemon.token}", f"Token {daemon.token}", daemon.token):
        r = client.get(API, auth=False, headers={"Authorization": value})
        assert_error(r, 401, "SANDBOX_UNAUTHORIZED")


def test_token_prefix_or_suffix_gets_401(client, daemon):
    # (Trailing whitespace is not a variant: HTTP strips it from header values.)
    for value in (daemon.token[:-1], daemon.token + "x", "x" + daemon.token, daemon.token + daemon.token):
        r = client.get(API, auth=False, headers={"Authorization": f"Bearer {value}"})
        assert r.status == 401, f"token variant accepted: {value!r} -> {r}"


def test_token_in_query_string_is_ignored(client, daemon):
    for name in ("token", "access_token", "api_key", "authorization"):
        r = client.get(API, {name: daemon.token}, auth=False)
        assert_error(r, 401, "SANDBOX_UNAUTHORIZED")
        assert daemon.token.encode() not in r.body


def test_401_covers_every_private_route(client):
    sid = unique_id()
    calls = [
        ("POST", f"{API}/resolve"), ("GET", API), ("GET", f"{API}/{sid}"), ("POST", f"{API}/{sid}"),
        ("DELETE", f"{API}/{sid}"), ("GET", f"{API}/{sid}/audit"), ("PUT", f"{API}/{sid}/files"),
        ("GET", f"{API}/{sid}/files"), ("GET", f"{API}/{sid}/files/raw"), ("PUT", f"{API}/{sid}/files/raw"),
        ("GET", f"{API}/{sid}/files/list"), ("GET", f"{API}/{sid}/files/stat"),
        ("POST", f"{API}/{sid}/files/mkdir"), ("POST", f"{API}/{sid}/files/delete"),
        ("POST", f"{API}/{sid}/files/move"), ("GET", f"{API}/{sid}/files/archive"),
        ("PUT", f"{API}/{sid}/files/archive"),
    ]
    for method, path in calls:
        r = client.request(method, path, auth=False, body=b"{}" if method in ("POST", "PUT") else None)
        assert_error(r, 401, "SANDBOX_UNAUTHORIZED")


def test_unauthenticated_release_does_not_release(client, sandbox):
    r = client.delete(sandbox.base, auth=False)
    assert_error(r, 401, "SANDBOX_UNAUTHORIZED")
    assert assert_ok(sandbox.get())["status"] == "READY"


@pytest.mark.parametrize("path", ["/api/v1/nope", "/api/v2/sandboxes", "/", "/api/v1/sandboxes/x1y/files/unknown",
                                  "/api/v1/sandboxes/abc/audit/extra"])
def test_unknown_route_gets_404_route_not_found(client, path):
    assert_error(client.get(path), 404, "SANDBOX_ROUTE_NOT_FOUND")


@pytest.mark.parametrize("method,path", [
    ("POST", "/health"),
    ("PUT", f"{API}/resolve"),
    ("PATCH", f"{API}/abc"),
    ("DELETE", f"{API}/abc/files"),
    ("POST", f"{API}/abc/files/list"),
    ("DELETE", API),
])
def test_known_route_with_wrong_method_gets_405(client, method, path):
    r = client.request(method, path, body=b"{}" if method in ("POST", "PUT", "PATCH") else None)
    assert_error(r, 405, "SANDBOX_METHOD_NOT_ALLOWED")


def test_keep_alive_serves_several_requests_on_one_connection(client):
    conn = client.connection()
    try:
        for _ in range(5):
            conn.request("GET", "/health")
            r = conn.getresponse()
            assert r.status == 200 and r.read().strip() == b"ok"
    finally:
        conn.close()
