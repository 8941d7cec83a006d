# SPDX-License-Identifier: MIT
"""Raw upload and download of a ~50 MB file, streamed both ways; uploads over
SANDBOX_MAX_UPLOAD_BYTES are refused with 413."""

import hashlib
import http.client
import os

from helpers import Sandbox, assert_ok, build_url, error_code, sandbox_fs_dir

SIZE = 50 * 1024 * 1024 + 12345
CHUNK = 1024 * 1024


def _stream_upload(client, sandbox, path, size, seed):
    """Sends SIZE pseudo-random bytes with Content-Length, a chunk at a time; returns (response, sha256)."""
    h = hashlib.sha256()
    block = hashlib.sha256(seed).digest() * (CHUNK // 32)
    conn = client.connection(timeout=120)
    try:
        conn.putrequest("PUT", build_url(f"{sandbox.base}/files/raw", {"path": path,
                                                                        "generation": sandbox.generation}))
        conn.putheader("Authorization", f"Bearer {client.token}")
        conn.putheader("Content-Type", "application/octet-stream")
        conn.putheader("Content-Length", str(size))
        conn.endheaders()
        left = size
        i = 0
        while left:
            part = (block[i % 32:] + block[:i % 32])[:min(CHUNK, left)]    # vary chunks a little
            conn.send(part)
            h.update(part)
            left -= len(part)
            i += 1
        r = conn.getresponse()
        body = r.read()
        return r.status, body, h.hexdigest()
    finally:
        conn.close()


def test_50mb_raw_upload_and_download_are_streamed_intact(client, sandbox, daemon):
    assert_ok(sandbox.mkdir("big"))
    status, body, digest = _stream_upload(client, sandbox, "big/blob.bin", SIZE, b"seed")
    assert status == 200, body
    conn = client.connection(timeout=120)
    try:
        conn.request("GET", build_url(f"{sandbox.base}/files/raw", {"path": "big/blob.bin",
                                                                     "generation": sandbox.generation}),
                     headers=client.auth_headers())
        r = conn.getresponse()
        assert r.status == 200
        assert int(r.getheader("Content-Length")) == SIZE
        h = hashlib.sha256()
        n = 0
        while True:
            part = r.read(CHUNK)
            if not part:
                break
            h.update(part)
            n += len(part)
    finally:
        conn.close()
    assert n == SIZE
    assert h.hexdigest() == digest
    st = assert_ok(sandbox.stat("big/blob.bin"))
    assert st["size_bytes"] == SIZE
    host = os.path.join(sandbox_fs_dir(daemon.data_dir, sandbox.uid), "workspace", "big", "blob.bin")
    assert os.stat(host).st_uid == sandbox.uid
    assert_ok(sandbox.delete("big", recursive=True))


def test_raw_upload_over_max_upload_bytes_gets_413(daemon_factory):
    limit = 1024 * 1024
    d = daemon_factory(env={"SANDBOX_MAX_UPLOAD_BYTES": str(limit)})
    c = d.client()
    s = Sandbox.create(c)
    # Declared too large: refused from the headers.
    conn = c.connection(timeout=15)
    try:
        conn.putrequest("PUT", build_url(f"{s.base}/files/raw", {"path": "over.bin", "generation": s.generation}))
        conn.putheader("Authorization", f"Bearer {c.token}")
        conn.putheader("Content-Length", str(limit + 1))
        conn.endheaders()
        r = conn.getresponse()
        body = r.read()
    finally:
        conn.close()
    assert r.status == 413, body
    # At the limit: accepted (positive control).
    assert_ok(s.raw_put("at.bin", b"a" * limit))
    # Over the limit with the length unknown in advance (chunked): refused while streaming.
    conn = c.connection(timeout=15)
    status = None
    try:
        conn.putrequest("PUT", build_url(f"{s.base}/files/raw", {"path": "over2.bin", "generation": s.generation}))
        conn.putheader("Authorization", f"Bearer {c.token}")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        chunk = b"b" * 65536
        try:
            for _ in range(3 * limit // len(chunk)):
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            r = conn.getresponse()
            status, body = r.status, r.read()
        except (OSError, http.client.HTTPException):
            pass
    finally:
        conn.close()
    assert status in (None, 413), (status, body)
    assert s.raw_get("over.bin").status == 404
    assert s.raw_get("over2.bin").status == 404
    assert c.health_ok()
