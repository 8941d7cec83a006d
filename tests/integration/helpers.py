# SPDX-License-Identifier: MIT
"""HTTP client, sandbox helper and small utilities for the integration suite.

Standard library only: http.client for full control over what goes on the wire
(Content-Length without a body, chunked bodies, raw streams)."""

import base64
import ctypes
import ctypes.util
import hashlib
import http.client
import io
import json
import os
import secrets
import tarfile
import time
import urllib.parse

API = "/api/v1/sandboxes"

_NOTHING = object()


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers          # lower-case name -> value
        self.body = body                # bytes
        self._json = _NOTHING

    def json(self):
        if self._json is _NOTHING:
            try:
                self._json = json.loads(self.body)
            except ValueError as e:
                raise AssertionError(f"response ({self.status}) is not JSON: {self.body[:300]!r}") from e
        return self._json

    def __repr__(self):
        return f"<Response {self.status} {self.body[:400]!r}>"


def quote(s):
    return urllib.parse.quote(s, safe="")


def build_url(path, query=None):
    if not query:
        return path
    return path + "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)


class Client:
    """URL may be a callable: a client of a Daemon follows it across restarts (new port each time)."""

    def __init__(self, url, token):
        self._url = url
        self.token = token

    @property
    def url(self):
        return self._url() if callable(self._url) else self._url

    @property
    def host(self):
        return urllib.parse.urlsplit(self.url).hostname

    @property
    def port(self):
        return urllib.parse.urlsplit(self.url).port

    def connection(self, timeout=60):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def auth_headers(self, token=None):
        return {"Authorization": f"Bearer {token if token is not None else self.token}"}

    def request(self, method, path, query=None, json_body=_NOTHING, body=None, headers=None, auth=True,
                timeout=60):
        h = {}
        if auth:
            h.update(self.auth_headers())
        if json_body is not _NOTHING:
            body = json.dumps(json_body).encode()
            h["Content-Type"] = "application/json"
        if headers:
            h.update(headers)
        conn = self.connection(timeout)
        try:
            conn.request(method, build_url(path, query), body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
        finally:
            conn.close()

    def get(self, path, query=None, **kw):
        return self.request("GET", path, query=query, **kw)

    def post(self, path, body=_NOTHING, **kw):
        return self.request("POST", path, json_body=body, **kw)

    def put(self, path, body=_NOTHING, **kw):
        return self.request("PUT", path, json_body=body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def health_ok(self, timeout=10):
        try:
            r = self.request("GET", "/health", auth=False, timeout=timeout)
        except OSError:
            return False
        return r.status == 200 and r.body.strip() == b"ok"


def assert_error(resp, status, code, *, forbidden=()):
    """The error contract: status, {"detail": {"code", "message"}}, 422 adds errors[] (<= 20,
    each {loc, type, msg}); nothing in FORBIDDEN (submitted values) is echoed."""
    assert resp.status == status and _code(resp) == code, \
        f"expected {status} {code}, got {resp.status} {resp.body[:500]!r}"
    ctype = resp.headers.get("content-type", "")
    assert ctype.startswith("application/json"), f"error content-type is {ctype!r}"
    d = resp.json()
    assert isinstance(d.get("detail"), dict), f"no detail object: {d!r}"
    assert isinstance(d["detail"].get("message"), str) and d["detail"]["message"], f"no message: {d!r}"
    if status == 422:
        errors = d["detail"].get("errors", d.get("errors"))
        assert isinstance(errors, list) and 1 <= len(errors) <= 20, f"422 without a valid errors list: {d!r}"
        for e in errors:
            assert isinstance(e, dict) and {"loc", "type", "msg"} <= set(e), f"bad errors entry {e!r}"
    for value in forbidden:
        needle = value.encode() if isinstance(value, str) else value
        assert needle not in resp.body, f"error body echoes a submitted value {value!r}: {resp.body[:500]!r}"
    return d["detail"]


def _code(resp):
    try:
        d = json.loads(resp.body)
        return d["detail"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def error_code(resp):
    return _code(resp)


def assert_ok(resp, status=200):
    assert resp.status == status, f"expected {status}, got {resp.status} {resp.body[:500]!r}"
    return resp.json() if resp.body and resp.headers.get("content-type", "").startswith("application/json") \
        else resp.body


def unique_id(prefix="sbx"):
    return f"{prefix}-{secrets.token_hex(6)}"


def normalized(path):
    """What the API should answer for PATH (relative = under /workspace)."""
    return path if path.startswith("/") else "/workspace/" + path


class Sandbox:
    """One sandbox seen through the API; GENERATION is the one the client last learnt."""

    def __init__(self, client, sandbox_id=None, scope=None):
        self.client = client
        self.id = sandbox_id or unique_id()
        self.scope = scope or unique_id("scope")
        self.generation = None
        self.uid = None
        self.record = None

    @property
    def base(self):
        return f"{API}/{quote(self.id)}"

    @classmethod
    def create(cls, client, sandbox_id=None, scope=None):
        s = cls(client, sandbox_id, scope)
        assert_ok(s.resolve())
        assert_ok(s.connect())
        return s

    # --- lifecycle ---
    def resolve(self, **extra):
        body = {"sandbox_id": self.id, "workspace_scope_id": self.scope}
        body.update(extra)
        r = self.client.post(f"{API}/resolve", body)
        if r.status == 200:
            self.record = r.json()
            self.generation = self.record["generation"]
            self.uid = self.record["sandbox_uid"]
        return r

    def connect(self, generation=None):
        return self.client.post(self.base, {"generation": self.gen(generation)})

    def get(self):
        return self.client.get(self.base)

    def release(self):
        return self.client.delete(self.base)

    def audit(self):
        return self.client.get(f"{self.base}/audit")

    def gen(self, generation=None):
        return self.generation if generation is None else generation

    # --- files ---
    def files_put(self, path, data, generation=None, **kw):
        return self.client.put(f"{self.base}/files", {"generation": self.gen(generation), "path": path,
                                                       "content_base64": base64.b64encode(data).decode()}, **kw)

    def files_get(self, path, generation=None, **kw):
        return self.client.get(f"{self.base}/files", {"path": path, "generation": self.gen(generation)}, **kw)

    def write(self, path, data):
        if isinstance(data, str):
            data = data.encode()
        assert_ok(self.files_put(path, data))

    def read(self, path):
        r = self.files_get(path)
        d = assert_ok(r)
        return base64.b64decode(d["content_base64"], validate=True)

    def raw_put(self, path, data, generation=None, headers=None, **kw):
        return self.client.request("PUT", f"{self.base}/files/raw", query={"path": path,
                                   "generation": self.gen(generation)}, body=data, headers=headers, **kw)

    def raw_get(self, path, generation=None, **kw):
        return self.client.get(f"{self.base}/files/raw", {"path": path, "generation": self.gen(generation)}, **kw)

    def list(self, path, generation=None, **q):
        query = {"path": path, "generation": self.gen(generation)}
        query.update(q)
        return self.client.get(f"{self.base}/files/list", query)

    def stat(self, path, generation=None):
        return self.client.get(f"{self.base}/files/stat", {"path": path, "generation": self.gen(generation)})

    def mkdir(self, path, parents=False, generation=None):
        return self.client.post(f"{self.base}/files/mkdir", {"generation": self.gen(generation), "path": path,
                                                              "parents": parents})

    def delete(self, path, recursive=False, generation=None, **kw):
        return self.client.post(f"{self.base}/files/delete", {"generation": self.gen(generation), "path": path,
                                                               "recursive": recursive}, **kw)

    def move(self, source, destination, overwrite=False, generation=None):
        return self.client.post(f"{self.base}/files/move", {"generation": self.gen(generation), "source": source,
                                                             "destination": destination, "overwrite": overwrite})

    def archive_get(self, path, generation=None, **kw):
        return self.client.get(f"{self.base}/files/archive", {"path": path, "generation": self.gen(generation)},
                               **kw)

    def archive_put(self, path, data, generation=None, **kw):
        return self.client.request("PUT", f"{self.base}/files/archive",
                                   query={"path": path, "generation": self.gen(generation)}, body=data,
                                   headers={"Content-Type": "application/x-tar"}, **kw)


# --- host-side views of the data directory (the test process runs as root) ---

def sandbox_fs_dir(data_dir, uid):
    """DATA/sandboxes/<internal_id>/fs of the sandbox whose workspace belongs to UID, or None."""
    root = os.path.join(data_dir, "sandboxes")
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return None
    for name in names:
        fs = os.path.join(root, name, "fs")
        try:
            st = os.lstat(os.path.join(fs, "workspace"))
        except OSError:
            continue
        if st.st_uid == uid:
            return fs
    return None


def tree(path):
    """Relative names of everything below PATH (no symlinks followed), as a sorted list."""
    out = []
    for dirpath, dirnames, filenames in os.walk(path):
        rel = os.path.relpath(dirpath, path)
        for n in dirnames + filenames:
            out.append(os.path.normpath(os.path.join(rel, n)))
    return sorted(out)


def snapshot(path):
    """{relative name: (type, content sha256 or link target)} for a directory tree."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for n in dirnames + filenames:
            full = os.path.join(dirpath, n)
            rel = os.path.relpath(full, path)
            st = os.lstat(full)
            if os.path.islink(full):
                snap[rel] = ("link", os.readlink(full))
            elif os.path.isdir(full):
                snap[rel] = ("dir", None)
            else:
                with open(full, "rb") as f:
                    snap[rel] = ("file", hashlib.sha256(f.read()).hexdigest(), st.st_mode & 0o7777)
    return snap


def wait_until(predicate, timeout=10.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            return v
        time.sleep(interval)


# --- tar building (names are written verbatim: tarfile only sanitises on extraction) ---

def make_tar(members, compression=""):
    """MEMBERS: list of dicts {name, type ('file'|'dir'|'symlink'|'hardlink'|'chr'|'fifo'), data, linkname,
    mode, size (for a file whose data is zeros, without building it in memory)}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:" + compression, format=tarfile.GNU_FORMAT) as tf:
        for m in members:
            ti = tarfile.TarInfo(m["name"])
            ti.mode = m.get("mode", 0o644)
            ti.mtime = int(time.time())
            kind = m.get("type", "file")
            fileobj = None
            if kind == "file":
                if "size" in m:
                    ti.size = m["size"]
                    fileobj = _Zeros(m["size"])
                else:
                    data = m.get("data", b"")
                    ti.size = len(data)
                    fileobj = io.BytesIO(data)
            elif kind == "dir":
                ti.type = tarfile.DIRTYPE
                ti.mode = m.get("mode", 0o755)
            elif kind == "symlink":
                ti.type = tarfile.SYMTYPE
                ti.linkname = m["linkname"]
            elif kind == "hardlink":
                ti.type = tarfile.LNKTYPE
                ti.linkname = m["linkname"]
            elif kind == "chr":
                ti.type = tarfile.CHRTYPE
                ti.devmajor, ti.devminor = m.get("dev", (1, 3))
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
            else:
                raise ValueError(kind)
            tf.addfile(ti, fileobj)
    return buf.getvalue()


class _Zeros(io.RawIOBase):
    def __init__(self, n):
        self.left = n

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


def read_tar(data):
    """{name: bytes for files, 'DIR' for dirs, ('LINK', target) for links}."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
        for m in tf.getmembers():
            name = m.name.rstrip("/")
            if m.isdir():
                out[name] = "DIR"
            elif m.issym() or m.islnk():
                out[name] = ("LINK", m.linkname)
            elif m.isfile():
                out[name] = tf.extractfile(m).read()
            else:
                out[name] = ("OTHER", m.type)
    return out


# --- renameat2(RENAME_EXCHANGE): an atomic swap of two names, for the symlink race ---

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def rename_exchange(a, b):
    r = _libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


def many_entries_tar_gz(n):
    """A gzip'd ustar archive of N empty regular files, built directly (tarfile is slow for 100k)."""
    import gzip

    def header(name):
        h = bytearray(512)
        h[0:len(name)] = name
        h[100:108] = b"0000644\0"
        h[108:116] = b"0000000\0"
        h[116:124] = b"0000000\0"
        h[124:136] = b"00000000000\0"
        h[136:148] = b"14000000000\0"
        h[148:156] = b" " * 8
        h[156:157] = b"0"
        h[257:265] = b"ustar\x0000"
        chk = sum(h)
        h[148:156] = b"%06o\0 " % chk
        return bytes(h)
    raw = b"".join(header(b"f%07d" % i) for i in range(n)) + bytes(1024)
    return gzip.compress(raw, compresslevel=6)
