# SPDX-License-Identifier: MIT
"""A client written for the Sandloom v0.2.0 API works unchanged: resolve -> connect -> mkdir ->
write -> list -> read -> move -> delete -> release, with urllib as such a client would use it."""

import base64
import json
import urllib.error
import urllib.parse
import urllib.request

from helpers import unique_id


class SandloomV02Client:
    """Only what the v0.2.0 API defines: JSON bodies, generation in the body of POST/PUT and in
    the query of GET, the route from resolve (worker_endpoint) used for every later call."""

    def __init__(self, base_url, token):
        self.base = base_url.rstrip("/")
        self.token = token

    def call(self, method, url, body=None, query=None):
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"null")

    def resolve(self, sandbox_id, scope):
        return self.call("POST", f"{self.base}/api/v1/sandboxes/resolve",
                         {"sandbox_id": sandbox_id, "workspace_scope_id": scope})


def test_sandloom_v020_client_flow_works_unchanged(daemon):
    api = SandloomV02Client(daemon.url, daemon.token)
    sid = unique_id("agent-session")
    route = api.resolve(sid, "conversation-42")
    assert route["status"] == "ASSIGNED"
    worker = route["worker_endpoint"].rstrip("/")
    gen = route["generation"]
    sb = f"{worker}/api/v1/sandboxes/{sid}"

    ready = api.call("POST", sb, {"generation": gen})
    assert ready["status"] == "READY"

    api.call("POST", f"{sb}/files/mkdir", {"generation": gen, "path": "/workspace/src", "parents": True})
    content = "print('hello from the agent')\n".encode()
    put = api.call("PUT", f"{sb}/files", {"generation": gen, "path": "/workspace/src/main.py",
                                          "content_base64": base64.b64encode(content).decode()})
    assert put["status"] == "ok"

    listing = api.call("GET", f"{sb}/files/list", query={"path": "/workspace/src", "generation": gen})
    assert [e["name"] for e in listing["entries"]] == ["main.py"]
    assert listing["entries"][0]["type"] == "file"
    assert listing["entries"][0]["size_bytes"] == len(content)

    got = api.call("GET", f"{sb}/files", query={"path": "/workspace/src/main.py", "generation": gen})
    assert base64.b64decode(got["content_base64"]) == content

    api.call("POST", f"{sb}/files/move", {"generation": gen, "source": "/workspace/src/main.py",
                                          "destination": "/workspace/src/app.py", "overwrite": False})
    listing = api.call("GET", f"{sb}/files/list", query={"path": "/workspace/src", "generation": gen})
    assert [e["name"] for e in listing["entries"]] == ["app.py"]

    api.call("POST", f"{sb}/files/delete", {"generation": gen, "path": "/workspace/src", "recursive": True})
    listing = api.call("GET", f"{sb}/files/list", query={"path": "/workspace", "generation": gen})
    assert "src" not in [e["name"] for e in listing["entries"]]

    released = api.call("DELETE", sb)
    assert released["status"] == "RELEASED"

    # An error is an HTTPError whose JSON body carries the code (also in a bare-string reading).
    try:
        api.call("GET", f"{sb}/files", query={"path": "/workspace/x", "generation": gen})
        raise AssertionError("file call on a released sandbox succeeded")
    except urllib.error.HTTPError as e:
        assert e.code in (404, 409)
        detail = json.loads(e.read())["detail"]
        assert isinstance(detail["code"], str) and detail["code"].isupper()
