# SPDX-License-Identifier: MIT
"""The access log: one JSON line per request on stderr with method, route pattern, status and
duration — never the token, query values, request bodies or file contents."""

import base64
import json
import time

from helpers import API, Sandbox, assert_ok, wait_until


def _lines(text):
    out = []
    for line in text.splitlines():
        if line.strip():
            out.append(line)
    return out


def test_access_log_is_json_and_leaks_nothing(daemon_factory):
    d = daemon_factory()
    c = d.client()
    content_marker = "CONTENT-" + "c0ffee" * 4
    query_marker = "QUERYVAL-" + "beef" * 4

    s = Sandbox(c)
    assert_ok(s.resolve())
    assert_ok(s.connect())
    s.write("log.txt", content_marker.encode())
    assert s.read("log.txt") == content_marker.encode()
    assert_ok(s.raw_put("raw.txt", content_marker.encode()))
    s.files_get(query_marker + ".txt")
    s.list("/workspace", offset=0)
    c.get(API, {"workspace_scope_id": query_marker})
    c.get(API, auth=False, headers={"Authorization": "Bearer " + query_marker})   # a wrong token, logged as 401
    c.get(API, {"token": d.token}, auth=False)
    c.get("/api/v1/no-such-route", {"q": query_marker})
    n_requests = 11

    def access_lines():
        return [json.loads(line) for line in _lines(d.stderr())
                if line.startswith("{") and "method" in json.loads(line)]
    wait_until(lambda: len(access_lines()) >= n_requests, timeout=5)
    text = d.stderr()

    for line in _lines(text):
        try:
            obj = json.loads(line)
        except ValueError:
            raise AssertionError(f"stderr line is not JSON: {line[:200]!r}")
        assert isinstance(obj, dict), line[:200]

    entries = access_lines()
    assert len(entries) >= n_requests, f"only {len(entries)} access log lines for {n_requests} requests"
    for e in entries:
        assert isinstance(e.get("method"), str)
        assert isinstance(e.get("status"), int), e
        assert any(k.startswith("duration") for k in e), f"no duration in {e}"
        assert "route" in e, f"no route pattern in {e}"
        assert isinstance(e["route"], str) or (e["route"] is None and e["status"] == 404), e
    routes = {(e["method"], e["route"], e["status"]) for e in entries}
    assert ("PUT", f"{API}/{{id}}/files", 200) in routes, routes
    assert ("GET", f"{API}/{{id}}/files", 404) in routes, routes
    assert ("GET", API, 401) in routes, routes

    for secret, what in ((d.token, "the token"), (query_marker, "a query value"), (content_marker, "file content"),
                         (base64.b64encode(content_marker.encode()).decode(), "base64 file content")):
        assert secret not in text, f"stderr contains {what}"


def test_access_log_duration_is_plausible(daemon_factory):
    d = daemon_factory()
    c = d.client()
    t0 = time.monotonic()
    assert c.health_ok()
    elapsed_ms = (time.monotonic() - t0) * 1000
    wait_until(lambda: '"/health"' in d.stderr(), timeout=5)
    entries = [json.loads(line) for line in _lines(d.stderr()) if '"method"' in line]
    health = [e for e in entries if e.get("route") == "/health"]
    assert health, entries
    key = next(k for k in health[-1] if k.startswith("duration"))
    value = health[-1][key]
    assert isinstance(value, (int, float)) and value >= 0
    if key == "duration_ms":
        assert value <= elapsed_ms + 50
