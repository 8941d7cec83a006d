# SPDX-License-Identifier: MIT
"""Error mapping: every code of docs/API.md has its class (of the right family for its status), the
body shapes the SDK may meet are understood, and live errors from the daemon arrive as those classes."""

import os
import pickle
import re
import signal
import time

import pytest

import sandloom
from sandloom import errors as E
from sdk_helpers import unique

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FAMILY = {400: E.InvalidRequest, 405: E.InvalidRequest, 422: E.InvalidRequest, 401: E.AuthError,
          403: E.AuthError, 404: E.NotFound, 409: E.Conflict, 413: E.LimitExceeded, 429: E.LimitExceeded,
          507: E.LimitExceeded, 500: E.InternalError, 503: E.Unavailable}


def documented_codes():
    """(status, code) for every row of the error table in docs/API.md."""
    with open(os.path.join(REPO, "docs", "API.md"), encoding="utf-8") as f:
        text = f.read()
    rows = []
    for line in text.splitlines():
        m = re.match(r"^\|\s*(\d{3})\s*\|([^|]*)\|", line)
        if not m:
            continue
        for code in re.findall(r"`([A-Z][A-Z0-9_]+)`", m.group(2)):
            rows.append((int(m.group(1)), code))
    return rows


def test_the_error_table_was_found():
    codes = documented_codes()
    assert len(codes) >= 40, codes
    assert (409, "STALE_SANDBOX_GENERATION") in codes and (503, "SANDBOX_WORKER_BUSY") in codes


@pytest.mark.parametrize("status,code", documented_codes(), ids=lambda v: str(v))
def test_every_documented_code_has_a_class_of_its_family(status, code):
    assert code in E._BY_CODE, f"{code} ({status}) is not mapped"
    assert E.status_of(code) == status, f"{code}: the SDK expects status {E.status_of(code)}, the docs say {status}"
    cls = E.error_class(code, status)
    assert issubclass(cls, FAMILY[status]), f"{code} ({status}) maps to {cls.__name__}"
    e = E.error_from_response(status, ('{"detail":{"code":"%s","message":"m"}}' % code).encode())
    assert type(e) is cls and e.code == code and e.status == status and e.message == "m"


def test_specific_classes():
    assert E.error_class("STALE_SANDBOX_GENERATION", 409) is sandloom.StaleGeneration
    assert E.error_class("STALE_SANDBOX_ROUTE", 409) is sandloom.StaleGeneration
    assert E.error_class("SANDBOX_EXEC_SCOPE_BUSY", 409) is sandloom.ScopeBusy
    assert E.error_class("SANDBOX_PARALLEL_EXEC_LIMIT", 429) is sandloom.LimitExceeded
    assert E.error_class("SANDBOX_DISK_QUOTA_EXCEEDED", 507) is sandloom.LimitExceeded
    assert E.error_class("SANDBOX_WORKER_BUSY", 503) is sandloom.Unavailable
    assert issubclass(sandloom.SandboxReleased, sandloom.Conflict)
    assert not issubclass(sandloom.SandboxReleased, sandloom.StaleGeneration), \
        "code that re-resolves on StaleGeneration must not swallow SandboxReleased"
    assert issubclass(sandloom.ConnectionError, sandloom.SandloomError)
    assert not issubclass(sandloom.ConnectionError, OSError)


def test_other_body_shapes():
    # Sandloom's bare string detail.
    e = E.error_from_response(404, b'{"detail": "SANDBOX_NOT_FOUND"}')
    assert type(e) is sandloom.SandboxNotFound and e.code == "SANDBOX_NOT_FOUND"
    # Plain text (a proxy, libmicrohttpd's own 431).
    e = E.error_from_response(431, b"Request Header Fields Too Large", "Too Large")
    assert isinstance(e, sandloom.InvalidRequest) and e.code == "HTTP_431" and "Too Large" in e.message
    e = E.error_from_response(502, b"<html>bad gateway</html>")
    assert isinstance(e, sandloom.Unavailable) and e.code == "HTTP_502"
    # An unknown code keeps its text and gets its status's class.
    e = E.error_from_response(409, b'{"detail":{"code":"SANDBOX_SOMETHING_NEW","message":"x"}}')
    assert type(e) is sandloom.Conflict and e.code == "SANDBOX_SOMETHING_NEW"
    # 422 field errors.
    e = E.error_from_response(422, b'{"detail":{"code":"SANDBOX_INVALID_REQUEST","message":"bad",'
                                   b'"errors":[{"loc":["body","x"],"type":"t","msg":"m"}]}}')
    assert e.errors == [{"loc": ["body", "x"], "type": "t", "msg": "m"}]
    # Errors survive pickling (multiprocessing, concurrent.futures).
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is type(e) and (e2.code, e2.status, e2.message, e2.errors) == (e.code, e.status, e.message, e.errors)
    assert str(e) == "SANDBOX_INVALID_REQUEST: bad"


# --- live errors of each family ---

DAEMON_ENV = {"SANDBOX_MAX_FILE_API_BYTES": "4096", "SANDBOX_MAX_PARALLEL_EXECS_PER_SANDBOX": "2",
              "SANDBOX_MAX_ARCHIVE_ENTRIES": "5", "SANDBOX_MAX_UPLOAD_BYTES": "65536"}


def test_live_limits(sb, tmp_path):
    # 413: JSON content over SANDBOX_MAX_FILE_API_BYTES (the SDK's JSON path, forced).
    sb.files.json_write_limit = 1 << 20
    with pytest.raises(sandloom.LimitExceeded) as ei:
        sb.files.write("big", b"x" * 8192)
    assert ei.value.status == 413 and ei.value.code == "SANDBOX_FILE_TOO_LARGE"
    sb.files.json_write_limit = 1024
    sb.files.write("big", b"x" * 8192)             # the raw endpoint has no such limit
    assert sb.files.stat("big").size_bytes == 8192
    # 413 for a raw body over SANDBOX_MAX_UPLOAD_BYTES, answered before the body is read: the SDK
    # still reports the daemon's answer, not a broken connection.
    for size in (70000, 8 << 20):
        with pytest.raises(sandloom.LimitExceeded) as ei:
            sb.files.write("huge", os.urandom(size))
        assert ei.value.status == 413, ei.value
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(8 << 20))
    with pytest.raises(sandloom.LimitExceeded):
        sb.files.upload_file(str(big), "huge")
    big.unlink()
    assert not sb.files.exists("huge")
    # 413: an archive with more entries than SANDBOX_MAX_ARCHIVE_ENTRIES.
    for i in range(8):
        (tmp_path / f"f{i}").write_text("x")
    with pytest.raises(sandloom.LimitExceeded) as ei:
        sb.files.upload_dir(str(tmp_path), "/workspace/many")
    assert ei.value.code == "SANDBOX_ARCHIVE_TOO_LARGE"
    # 429: more parallel execs than SANDBOX_MAX_PARALLEL_EXECS_PER_SANDBOX.
    hs = [sb.exec_background("sleep 30", scope=f"s{i}") for i in range(2)]
    try:
        with pytest.raises(sandloom.LimitExceeded) as ei:
            sb.exec_background("sleep 30", scope="s3")
        assert ei.value.status == 429 and ei.value.code == "SANDBOX_PARALLEL_EXEC_LIMIT"
    finally:
        for h in hs:
            h.cancel()


def test_live_conflicts_and_not_found(sb, client):
    with pytest.raises(sandloom.NotFound) as ei:
        client._transport.request("GET", "/api/v1/no-such-route")
    assert ei.value.code == "SANDBOX_ROUTE_NOT_FOUND"
    with pytest.raises(sandloom.InvalidRequest) as ei:
        client._transport.request("PATCH", "/api/v1/sandboxes")
    assert ei.value.status == 405
    # NotReady: a sandbox resolved but never connected.
    sid = unique("nr")
    info = client.resolve(sid, "nr")
    try:
        with pytest.raises(sandloom.NotReady) as ei:
            client._transport.request("GET", f"/api/v1/sandboxes/{sid}/files/list",
                                      query={"generation": info.generation})
        assert ei.value.code == "SANDBOX_NOT_READY"
    finally:
        client.release(sid)
    with pytest.raises(sandloom.InvalidRequest) as ei:
        client.sandbox("x")                          # too short an id: 422 with field errors
    assert ei.value.status == 422 and ei.value.errors[0]["loc"][-1] == "sandbox_id"
    with pytest.raises(sandloom.InvalidRequest) as ei:
        sb.exec("true", timeout=10 ** 6)
    assert ei.value.status == 422


def test_live_unavailable_while_shutting_down(daemon_factory):
    d = daemon_factory(env={"SANDBOX_SHUTDOWN_GRACE_SECONDS": "3"})
    c = sandloom.Client(d.url, d.token, retries=0)
    sb = c.sandbox(unique("sd"), "sd")
    h = sb.exec_background("sleep 30", scope="a")
    assert h.last.status == "RUNNING"
    d.signal(signal.SIGTERM)
    deadline = time.monotonic() + 5
    err = None
    while time.monotonic() < deadline:
        try:
            sb.exec("true", scope="b")
        except sandloom.Unavailable as e:
            err = e
            break
        except sandloom.ConnectionError:
            break
        time.sleep(0.05)
    assert err is not None, "no 503 while the daemon was draining"
    assert err.status == 503 and err.code == "SANDBOX_SHUTTING_DOWN"
    # The daemon ends the running exec after the grace period and exits by itself.
    assert d.wait(30) == 0
