# SPDX-License-Identifier: MIT
"""The HTTP transport: one keep-alive http.client connection per thread, a fresh connection for each
streamed response, retries on connection failures, and the daemon's error bodies turned into
SandloomError. Nothing from http.client, socket or ssl escapes: every failure becomes a SandloomError."""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
import ssl
import threading
import time
import urllib.parse
from typing import IO, Any, Dict, Mapping, Optional, Tuple, Union

from ._version import __version__
from .errors import CONNECTION_ERROR, ConnectionError, SandloomError, error_from_response

__all__ = ["Transport", "Response", "StreamResponse", "RequestTimeout", "encode_query"]

QueryValue = Union[str, int, float, bool, None]
Body = Union[bytes, IO[bytes], None]


class RequestTimeout(ConnectionError):
    """No answer within the socket timeout (code SANDLOOM_CONNECTION_ERROR)."""


class Response:
    """A complete answer: STATUS, HEADERS (lower-case names) and the BODY bytes."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Dict[str, str], body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise SandloomError("SANDLOOM_BAD_RESPONSE", self.status,
                                f"the daemon's answer is not JSON: {self.body[:120]!r}") from e


class StreamResponse:
    """A successful answer whose body is read as it arrives, on its own connection (closed by close()
    or at the end of a `with` block). read()/readline() raise ConnectionError when the connection
    breaks (RequestTimeout on a socket timeout)."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse):
        self._conn = conn
        self._resp = resp
        self.status = resp.status
        self.headers = {k.lower(): v for k, v in resp.getheaders()}

    def read(self, n: int = -1) -> bytes:
        try:
            return self._resp.read(n) if n >= 0 else self._resp.read()
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise _wrap(e, "reading a streamed answer") from e

    def readline(self, limit: int = 1 << 20) -> bytes:
        try:
            return self._resp.readline(limit)
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise _wrap(e, "reading a streamed answer") from e

    def set_read_timeout(self, seconds: float) -> None:
        """From now on a read that waits longer than SECONDS for any byte raises RequestTimeout."""
        sock = self._conn.sock
        if sock is None:    # http.client let go of it (Connection: close): the reader's own socket
            sock = getattr(getattr(self._resp.fp, "raw", None), "_sock", None)
        if sock is not None:
            sock.settimeout(seconds)

    def close(self) -> None:
        try:
            self._resp.close()
        finally:
            self._conn.close()

    def __enter__(self) -> "StreamResponse":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _wrap(e: BaseException, what: str) -> ConnectionError:
    if isinstance(e, (socket.timeout, TimeoutError)):
        return RequestTimeout(CONNECTION_ERROR, 0, f"timed out {what}")
    text = str(e) or type(e).__name__
    return ConnectionError(CONNECTION_ERROR, 0, f"{what}: {type(e).__name__}: {text}")


def encode_query(query: Optional[Mapping[str, QueryValue]]) -> str:
    """?a=b&c=d from QUERY; None values are left out, booleans are true/false."""
    if not query:
        return ""
    items = []
    for k, v in query.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        items.append((k, str(v)))
    if not items:
        return ""
    return "?" + urllib.parse.urlencode(items, quote_via=urllib.parse.quote)


def quote_segment(s: str) -> str:
    return urllib.parse.quote(s, safe="")


class _Local(threading.local):
    conn: Optional[http.client.HTTPConnection] = None
    pid: int = 0
    last_used: float = 0.0


# A request that must not be repeated is sent on a kept-alive connection only if that connection was
# used this recently: the daemon closes idle connections after SANDBOX_HTTP_IDLE_TIMEOUT_SECONDS (at
# least 5), and a close racing with our request would leave us unable to tell whether it arrived.
_FRESH_ENOUGH = 2.0


class Transport:
    """Requests against BASE_URL with TOKEN. RETRIES extra attempts are made after a connection
    failure (exponential backoff from BACKOFF seconds): always when the request cannot have reached
    the daemon (no connection, or a kept-alive connection that was already closed), and for
    IDEMPOTENT requests also when it may have (the connection broke before the answer)."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 60.0, retries: int = 3,
                 backoff: float = 0.2, ssl_context: Optional[ssl.SSLContext] = None):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise SandloomError("SANDLOOM_INVALID_URL", 0, "the base URL must be http://HOST[:PORT] or https://...")
        self.base_url = base_url.rstrip("/")
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")
        self._token = token
        self.timeout = timeout
        self.retries = max(0, retries)
        self.backoff = backoff
        self._ssl = ssl_context
        self._local = _Local()
        self._user_agent = f"sandloom-python/{__version__}"

    # --- connections ---
    def _new_conn(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._scheme == "https":
            ctx = self._ssl or ssl.create_default_context()
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=ctx)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _take_conn(self, timeout: Optional[float], idempotent: bool) -> Tuple[http.client.HTTPConnection, bool]:
        """The thread's kept-alive connection (reused=True) unless the daemon has closed it (or, for a
        request that must not be repeated, it has been idle long enough to be closing), else a new one."""
        loc = self._local
        conn = loc.conn
        loc.conn = None
        recent = idempotent or time.monotonic() - loc.last_used < _FRESH_ENOUGH
        if conn is not None and loc.pid == os.getpid() and conn.sock is not None and recent and \
                not _dropped(conn.sock):
            conn.timeout = timeout
            conn.sock.settimeout(timeout)
            return conn, True
        if conn is not None and loc.pid == os.getpid():
            conn.close()
        return self._new_conn(timeout), False

    def _keep_conn(self, conn: http.client.HTTPConnection) -> None:
        old = self._local.conn
        if old is not None and old is not conn:
            old.close()
        self._local.conn = conn
        self._local.pid = os.getpid()
        self._local.last_used = time.monotonic()

    def close(self) -> None:
        """Closes this thread's kept-alive connection (others close when their thread ends)."""
        conn = self._local.conn
        self._local.conn = None
        if conn is not None:
            conn.close()

    def _headers(self, extra: Optional[Mapping[str, str]]) -> Dict[str, str]:
        h = {"Authorization": f"Bearer {self._token}", "User-Agent": self._user_agent}
        if extra:
            h.update(extra)
        return h

    # --- requests ---
    def request(self, method: str, path: str, *, query: Optional[Mapping[str, QueryValue]] = None,
                json_body: Any = None, body: Body = None, body_size: Optional[int] = None,
                headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
                idempotent: bool = True, retries: Optional[int] = None) -> Response:
        """Sends the request and returns the answer; an HTTP error status raises its SandloomError."""
        resp = self._perform(method, path, query, json_body, body, body_size, headers, timeout, idempotent,
                             retries, stream=False)
        assert isinstance(resp, Response)
        return resp

    def stream(self, method: str, path: str, *, query: Optional[Mapping[str, QueryValue]] = None,
               json_body: Any = None, headers: Optional[Mapping[str, str]] = None,
               timeout: Optional[float] = None, idempotent: bool = True,
               retries: Optional[int] = None) -> StreamResponse:
        """Like request(), but the body of a successful answer is left to read from the result."""
        resp = self._perform(method, path, query, json_body, None, None, headers, timeout, idempotent, retries,
                             stream=True)
        assert isinstance(resp, StreamResponse)
        return resp

    def _perform(self, method: str, path: str, query: Optional[Mapping[str, QueryValue]], json_body: Any,
                 body: Body, body_size: Optional[int], headers: Optional[Mapping[str, str]],
                 timeout: Optional[float], idempotent: bool, retries: Optional[int],
                 stream: bool) -> Union[Response, StreamResponse]:
        url = self._prefix + path + encode_query(query)
        h = self._headers(headers)
        data: Body = body
        if json_body is not None:
            data = json.dumps(json_body, separators=(",", ":")).encode("utf-8")
            h["Content-Type"] = "application/json"
        if isinstance(data, (bytes, bytearray)):
            h["Content-Length"] = str(len(data))
        elif data is not None:
            if body_size is None:
                raise ValueError("body_size is required with a file body")
            h["Content-Length"] = str(body_size)
        else:
            if method in ("POST", "PUT"):
                h["Content-Length"] = "0"
        start_pos = data.tell() if data is not None and not isinstance(data, (bytes, bytearray)) else 0
        tmo = self.timeout if timeout is None else timeout
        budget = self.retries if retries is None else retries
        attempt = 0
        stale_retried = False
        while True:
            if stream:
                conn, reused = self._new_conn(tmo), False
            else:
                conn, reused = self._take_conn(tmo, idempotent)
            phase = "connecting to"
            try:
                if conn.sock is None:
                    conn.connect()
                phase = "sending a request to"
                if data is not None and not isinstance(data, (bytes, bytearray)):
                    data.seek(start_pos)
                try:
                    conn.request(method, url, body=data, headers=h)
                except (BrokenPipeError, ConnectionResetError):
                    # The daemon may refuse a body it will not read (413 before the body) and close:
                    # its answer is then already on the way.
                    early = _early_answer(conn)
                    if early is None:
                        raise
                    resp = early
                else:
                    phase = "waiting for the answer of"
                    resp = conn.getresponse()
                if stream and 200 <= resp.status < 300:
                    return StreamResponse(conn, resp)
                phase = "reading the answer of"
                payload = resp.read()
                status = resp.status
                rheaders = {k.lower(): v for k, v in resp.getheaders()}
                reason = resp.reason
                if stream or resp.will_close:
                    conn.close()
                else:
                    self._keep_conn(conn)
            except (OSError, http.client.HTTPException, ValueError) as e:
                conn.close()
                sent = phase != "connecting to"
                timed_out = isinstance(e, (socket.timeout, TimeoutError))
                # A kept-alive connection closed by the daemon as we sent (an idle close racing with
                # us): retried at once, without counting as an attempt, when a repeat is harmless.
                if reused and idempotent and not stale_retried and not timed_out and isinstance(
                        e, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)):
                    stale_retried = True
                    continue
                retry_ok = (not sent and not timed_out) or (idempotent and not timed_out)
                if retry_ok and attempt < budget:
                    time.sleep(self.backoff * (2 ** attempt))
                    attempt += 1
                    continue
                where = f"{phase} {self.base_url} ({method} {path})"
                if attempt:
                    where += f" after {attempt + 1} attempts"
                raise _wrap(e, where) from e
            if status >= 400:
                raise error_from_response(status, payload, reason)
            return Response(status, rheaders, payload)


def _early_answer(conn: http.client.HTTPConnection) -> Optional[http.client.HTTPResponse]:
    """The error answer the daemon sent before it stopped reading our request, if there is one."""
    sock = conn.sock
    if sock is None:
        return None
    try:
        sock.settimeout(2.0)
        resp = conn.getresponse()
    except (OSError, http.client.HTTPException, ValueError):
        return None
    return resp if resp.status >= 400 else None


def _dropped(sock: socket.socket) -> bool:
    """True if the peer closed (or sent something unexpected on) an idle kept-alive connection."""
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)
