# SPDX-License-Identifier: MIT
"""Bad input of every kind: each gets a 4xx with the JSON error contract (never a 500, a crash or
a hang), bodies over the limit are refused before they are read, and nothing half-written stays."""

import json
import os
import random
import socket
import time

import pytest

from helpers import API, Sandbox, assert_error, assert_ok, build_url, error_code, sandbox_fs_dir, tree

MAX_FILE = 65536
MAX_UPLOAD = 2 * 1024 * 1024
JSON_LIMIT = MAX_FILE + 1024 * 1024
DAEMON_ENV = {"SANDBOX_MAX_FILE_API_BYTES": str(MAX_FILE), "SANDBOX_MAX_UPLOAD_BYTES": str(MAX_UPLOAD)}


@pytest.fixture
def ws_snapshot(daemon, sandbox):
    """Asserts, after the test, that the workspace holds exactly what it held before."""
    fs = sandbox_fs_dir(daemon.data_dir, sandbox.uid)
    sandbox.write("keep.txt", b"kept")
    before = tree(fs)
    yield
    assert tree(fs) == before, f"workspace changed: {sorted(set(tree(fs)) ^ set(before))}"


@pytest.mark.parametrize("body", [
    b"{", b"}", b"not json", b"[]", b"\"a string\"", b"42", b"null", b"", b"{\"generation\": }",
    b"{\"a\":1,}", b"\xff\xfe{}", b"{\"path\": \"\xff\xfe\"}", b"{\"generation\": 1} trailing",
    b"{\"generation\": NaN}", b"{\"generation\": 1e999}",
], ids=lambda b: repr(b)[:30])
def test_malformed_json_gets_422(client, sandbox, ws_snapshot, body):
    for method, route in (("POST", f"{API}/resolve"), ("PUT", f"{sandbox.base}/files"),
                          ("POST", f"{sandbox.base}/files/mkdir"), ("POST", sandbox.base)):
        r = client.request(method, route, body=body, headers={"Content-Type": "application/json"})
        assert_error(r, 422, "SANDBOX_INVALID_REQUEST")


def test_deeply_nested_json_gets_422(client, sandbox, ws_snapshot):
    for depth in (10000, 100000):
        body = b"[" * depth + b"]" * depth
        assert_error(client.request("POST", f"{API}/resolve", body=body), 422, "SANDBOX_INVALID_REQUEST")
        body = b'{"generation": 1, "path": "x", "content_base64": ' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"
        assert_error(client.request("PUT", f"{sandbox.base}/files", body=body), 422, "SANDBOX_INVALID_REQUEST")


@pytest.mark.parametrize("field,value", [
    ("generation", "1"), ("generation", [1]), ("generation", {"n": 1}), ("generation", -3), ("generation", 0.5),
    ("generation", None), ("path", None), ("path", 123), ("path", ["a"]), ("content_base64", None),
    ("content_base64", 1), ("content_base64", {"x": 1}),
])
def test_wrong_types_in_put_get_422(client, sandbox, ws_snapshot, field, value):
    body = {"generation": sandbox.generation, "path": "typed.txt", "content_base64": "eA=="}
    body[field] = value
    assert_error(client.put(f"{sandbox.base}/files", body), 422, "SANDBOX_INVALID_REQUEST")


@pytest.mark.parametrize("route,body", [
    ("files/mkdir", {"path": "d", "parents": "true"}),
    ("files/mkdir", {"path": "d", "parents": 1}),
    ("files/delete", {"path": "keep.txt", "recursive": "no"}),
    ("files/move", {"source": "keep.txt", "destination": 7}),
])
def test_wrong_types_in_post_get_422(client, sandbox, ws_snapshot, route, body):
    body["generation"] = sandbox.generation
    assert_error(client.post(f"{sandbox.base}/{route}", body), 422, "SANDBOX_INVALID_REQUEST")


def test_many_invalid_fields_report_at_most_20_errors(client):
    body = {f"field{i}": i for i in range(100)}
    body.update({"sandbox_id": ["x"] * 50, "workspace_scope_id": {"a": 1}, "profile": 3})
    assert_error(client.post(f"{API}/resolve", body), 422, "SANDBOX_INVALID_REQUEST")


def _send_headers_only(client, method, url, length, extra=None):
    conn = client.connection(timeout=15)
    conn.putrequest(method, url)
    conn.putheader("Authorization", f"Bearer {client.token}")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(length))
    for k, v in (extra or {}).items():
        conn.putheader(k, v)
    conn.endheaders()
    return conn


def _response(conn):
    from helpers import Response
    r = conn.getresponse()
    data = r.read()
    return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)


@pytest.mark.parametrize("expect", [False, True], ids=["plain", "expect-100-continue"])
def test_huge_content_length_gets_413_before_the_body_is_sent(client, sandbox, ws_snapshot, expect):
    extra = {"Expect": "100-continue"} if expect else {}
    for length in (JSON_LIMIT + 1, 10**12):
        conn = _send_headers_only(client, "PUT", f"{sandbox.base}/files", length, extra)
        try:
            t0 = time.monotonic()
            r = _response(conn)     # no body byte was sent: a 413 must come anyway
            assert time.monotonic() - t0 < 10
        finally:
            conn.close()
        assert_error(r, 413, "SANDBOX_REQUEST_TOO_LARGE")


def test_json_body_just_under_the_limit_is_read(client, sandbox, ws_snapshot):
    """Positive control for the 413: a body under the limit is parsed (and refused for its content)."""
    body = json.dumps({"generation": sandbox.generation, "path": "under.txt",
                       "content_base64": "A" * (JSON_LIMIT - 200)}).encode()
    assert len(body) < JSON_LIMIT
    r = client.request("PUT", f"{sandbox.base}/files", body=body)
    assert r.status in (413, 422), r
    assert error_code(r) in ("SANDBOX_FILE_TOO_LARGE", "SANDBOX_INVALID_REQUEST")


def test_huge_content_length_on_resolve_gets_413(client):
    conn = _send_headers_only(client, "POST", f"{API}/resolve", 5 * 10**9)
    try:
        r = _response(conn)
    finally:
        conn.close()
    assert_error(r, 413, "SANDBOX_REQUEST_TOO_LARGE")


def _chunked_until_refused(client, method, url, chunk, max_total, content_type="application/json"):
    """Sends a chunked body until the server answers or closes. Returns (response or None, bytes sent)."""
    conn = client.connection(timeout=15)
    sent = 0
    resp = None
    try:
        conn.putrequest(method, url)
        conn.putheader("Authorization", f"Bearer {client.token}")
        conn.putheader("Content-Type", content_type)
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        try:
            while sent < max_total:
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
            conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            resp = _response(conn)
        except (ConnectionResetError, BrokenPipeError) + http_client_errors():
            resp = None
    finally:
        conn.close()
    return resp, sent


def http_client_errors():
    import http.client
    return (http.client.RemoteDisconnected, http.client.BadStatusLine, socket.timeout)


def test_chunked_json_body_growing_past_the_limit_gets_413(client, sandbox, ws_snapshot):
    prefix = b'{"generation": %d, "path": "chunked.txt", "content_base64": "' % sandbox.generation
    url = f"{sandbox.base}/files"
    conn = client.connection(timeout=15)
    resp = None
    try:
        conn.putrequest("PUT", url)
        conn.putheader("Authorization", f"Bearer {client.token}")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        chunk = b"QUFB" * 16384
        try:
            conn.send(b"%x\r\n%s\r\n" % (len(prefix), prefix))
            for _ in range((3 * JSON_LIMIT) // len(chunk)):
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            conn.send(b'3\r\n"}\n\r\n0\r\n\r\n')
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            resp = _response(conn)
        except http_client_errors() + (ConnectionResetError,):
            resp = None
    finally:
        conn.close()
    if resp is not None:
        assert_error(resp, 413, "SANDBOX_REQUEST_TOO_LARGE")
    assert client.health_ok()
    assert_error(sandbox.files_get("chunked.txt"), 404, "SANDBOX_FILE_NOT_FOUND")


def test_raw_upload_content_length_over_max_upload_gets_413(client, sandbox, ws_snapshot):
    conn = _send_headers_only(client, "PUT", build_url(f"{sandbox.base}/files/raw",
                              {"path": "too-big.bin", "generation": sandbox.generation}), MAX_UPLOAD + 1)
    try:
        r = _response(conn)
    finally:
        conn.close()
    assert r.status == 413, r
    assert error_code(r) in ("SANDBOX_REQUEST_TOO_LARGE", "SANDBOX_FILE_TOO_LARGE"), r


def test_chunked_raw_upload_over_max_upload_is_refused_and_leaves_nothing(client, sandbox, ws_snapshot):
    url = build_url(f"{sandbox.base}/files/raw", {"path": "grow.bin", "generation": sandbox.generation})
    resp, sent = _chunked_until_refused(client, "PUT", url, b"z" * 65536, MAX_UPLOAD * 3,
                                        content_type="application/octet-stream")
    if resp is not None:
        assert resp.status == 413, resp
        assert error_code(resp) in ("SANDBOX_REQUEST_TOO_LARGE", "SANDBOX_FILE_TOO_LARGE"), resp
    assert client.health_ok()
    assert_error(sandbox.raw_get("grow.bin"), 404, "SANDBOX_FILE_NOT_FOUND")


def test_raw_upload_at_the_limit_is_accepted(client, sandbox):
    """Positive control for the two tests above."""
    data = os.urandom(MAX_UPLOAD)
    d = assert_ok(sandbox.raw_put("exact.bin", data))
    assert d["size_bytes"] == MAX_UPLOAD
    assert sandbox.raw_get("exact.bin").body == data


def test_client_disconnect_mid_upload_leaves_nothing(client, daemon, sandbox):
    """A client that dies mid-upload: its temp file goes and its path hold is freed (the next
    call on the path is not SANDBOX_BUSY)."""
    fs = sandbox_fs_dir(daemon.data_dir, sandbox.uid)
    before = tree(fs)
    conn = _send_headers_only(client, "PUT", build_url(f"{sandbox.base}/files/raw",
                              {"path": "half.bin", "generation": sandbox.generation}), 1024 * 1024)
    conn.send(b"x" * 300000)
    time.sleep(0.5)             # let the daemon start the upload (temp file, hold) before the client dies
    conn.close()
    assert client.health_ok()
    from helpers import wait_until
    assert wait_until(lambda: tree(fs) == before, timeout=10), \
        f"leftovers of the aborted upload: {sorted(set(tree(fs)) ^ set(before))}"
    r = sandbox.raw_put("half.bin", b"next writer", timeout=20)
    assert r.status == 200, f"path still held after the client went away: {r}"


def test_garbage_request_lines_do_not_hurt(client, daemon):
    for raw in (b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"\x00\x01\x02\r\n\r\n",
                b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"a" * 200000 + b"\r\n\r\n",
                b"POST /api/v1/sandboxes/resolve HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
                b"POST /api/v1/sandboxes/resolve HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999999999999999999\r\n\r\n",
                b"PUT /api/v1/sandboxes/abc/files HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
        s = socket.create_connection((client.host, client.port), timeout=1)
        try:
            s.sendall(raw)
            try:
                s.recv(4096)
            except (socket.timeout, ConnectionResetError):
                pass
        finally:
            s.close()
    assert client.health_ok()


def test_slow_idle_connections_do_not_block_others(client):
    socks = []
    try:
        for _ in range(30):
            s = socket.create_connection((client.host, client.port), timeout=5)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")      # never finished
            socks.append(s)
        t0 = time.monotonic()
        assert client.health_ok(timeout=5)
        assert time.monotonic() - t0 < 5
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("query", [
    {"path": "%zz"}, {"path": "a%00b"}, {"path": ""}, {"generation": "1e3"}, {"generation": "0x10"},
    {"generation": "%201"}, {"generation": "18446744073709551616"}, {"limit": "1.5"},
])
def test_odd_query_values_never_give_500(client, sandbox, query):
    q = {"path": "keep.txt", "generation": str(sandbox.generation)}
    q.update(query)
    for route in ("files", "files/raw", "files/list", "files/stat", "files/archive"):
        url = f"{sandbox.base}/{route}?" + "&".join(f"{k}={v}" for k, v in q.items())
        r = client.request("GET", url)
        assert 400 <= r.status < 500 or r.status == 200, r
        if r.status >= 400:
            assert error_code(r), r


def test_random_bodies_never_give_500(client, sandbox):
    rng = random.Random(42)
    routes = [("POST", f"{API}/resolve"), ("POST", sandbox.base), ("PUT", f"{sandbox.base}/files"),
              ("POST", f"{sandbox.base}/files/mkdir"), ("POST", f"{sandbox.base}/files/delete"),
              ("POST", f"{sandbox.base}/files/move")]
    values = [None, True, False, 0, -1, 2**63, 2**64, 1.5, "", "a", "/", "/etc/passwd", "..", "/workspace",
              "\u0000", "x" * 5000, [], {}, [1, 2], {"a": {"b": 1}}, sandbox.generation, "keep.txt", "eA=="]
    fields = ["sandbox_id", "workspace_scope_id", "profile", "generation", "path", "content_base64", "parents",
              "recursive", "source", "destination", "overwrite"]
    for i in range(150):
        method, route = rng.choice(routes)
        body = {f: rng.choice(values) for f in rng.sample(fields, rng.randint(0, len(fields)))}
        r = client.request(method, route, body=json.dumps(body).encode())
        assert r.status < 500, f"{method} {route} {json.dumps(body)[:300]} -> {r}"
        if r.status >= 400:
            assert error_code(r), r
    assert client.health_ok()
