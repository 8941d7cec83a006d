# SPDX-License-Identifier: MIT
"""Client: where the daemon is, its token, and the calls that are not about one connected sandbox."""

from __future__ import annotations

import os
import ssl
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from ._http import Transport, quote_segment
from .errors import AuthError, SandloomError
from .models import AuditEvent, SandboxInfo

if TYPE_CHECKING:
    from .sandbox import Sandbox

__all__ = ["Client", "DEFAULT_URL", "DEFAULT_SCOPE", "API"]

API = "/api/v1/sandboxes"
DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_SCOPE = "default"
_MAX_SMALL_FILE = 64 * 1024


def _read_small(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_SMALL_FILE)
    except OSError:
        return None
    text = data.decode("utf-8", "replace").strip()
    return text or None


def _first(*values: Optional[str]) -> Optional[str]:
    for v in values:
        if v:
            return v
    return None


class Client:
    """A connection to one sandloom daemon.

    Where it is and how to authenticate, in this order (as the `sandloom` CLI does):

    - base_url: the argument, $SANDBOX_BASE_URL, DATA_DIR/endpoint (written by a running daemon),
      http://127.0.0.1:8080;
    - token: the argument, $SANDBOX_INTERNAL_TOKEN, the file named by $SANDBOX_INTERNAL_TOKEN_FILE,
      DATA_DIR/token;
    - data_dir: the argument, $SANDBOX_DATA_DIR, ./data.

    TIMEOUT is the socket timeout of ordinary calls (seconds). RETRIES extra attempts follow a
    connection failure (see docs/SDK.md for which calls are retried when). LONG_POLL_SECONDS is how long
    one waiting request (a foreground exec, a long-poll for an exec's end) may stay open before the SDK
    polls again. Each thread keeps one keep-alive connection; a Client may be shared between threads.
    """

    def __init__(self, base_url: Optional[str] = None, token: Optional[str] = None, *, timeout: float = 60.0,
                 data_dir: Optional[str] = None, retries: int = 3, backoff: float = 0.2,
                 long_poll_seconds: float = 55.0, ssl_context: Optional[ssl.SSLContext] = None):
        ddir = _first(data_dir, os.environ.get("SANDBOX_DATA_DIR")) or "./data"
        url = _first(base_url, os.environ.get("SANDBOX_BASE_URL")) or _read_small(os.path.join(ddir, "endpoint")) \
            or DEFAULT_URL
        tok = _first(token, os.environ.get("SANDBOX_INTERNAL_TOKEN"))
        if tok is None:
            tok_file = os.environ.get("SANDBOX_INTERNAL_TOKEN_FILE")
            if tok_file:
                tok = _read_small(tok_file)
                if tok is None:
                    raise AuthError("SANDLOOM_NO_TOKEN", 0,
                                    "cannot read the token file named by SANDBOX_INTERNAL_TOKEN_FILE")
            else:
                tok = _read_small(os.path.join(ddir, "token"))
        if tok is None:
            raise AuthError("SANDLOOM_NO_TOKEN", 0,
                            "no token: pass token=, set SANDBOX_INTERNAL_TOKEN, or point data_dir= (or "
                            f"SANDBOX_DATA_DIR) at the daemon's data directory ({os.path.join(ddir, 'token')} "
                            "is not readable)")
        if long_poll_seconds <= 0:
            raise ValueError("long_poll_seconds must be positive")
        self._transport = Transport(url, tok, timeout=timeout, retries=retries, backoff=backoff,
                                    ssl_context=ssl_context)
        self.long_poll_seconds = float(long_poll_seconds)

    def __repr__(self) -> str:
        return f"<sandloom.Client {self.base_url}>"

    @property
    def base_url(self) -> str:
        return self._transport.base_url

    @property
    def timeout(self) -> float:
        return self._transport.timeout

    def close(self) -> None:
        """Closes the calling thread's kept-alive connection. The Client stays usable."""
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- health ---
    def health(self) -> bool:
        """True if GET /health answers "ok"."""
        try:
            r = self._transport.request("GET", "/health", retries=0)
        except SandloomError:
            return False
        return r.body.strip() == b"ok"

    def healthz(self) -> Dict[str, Any]:
        """The daemon's full health report (worker, store, disk, isolation, execs)."""
        doc = self._transport.request("GET", "/healthz").json()
        if not isinstance(doc, dict):
            raise SandloomError("SANDLOOM_BAD_RESPONSE", 200, "the health report is not a JSON object")
        return doc

    # --- sandboxes ---
    def sandbox(self, sandbox_id: str, scope: Optional[str] = None, *, profile: Optional[str] = None,
                limits: Optional[Mapping[str, Any]] = None, keep: bool = False) -> "Sandbox":
        """Resolves SANDBOX_ID in the workspace scope SCOPE (default "default"), creating it if needed,
        connects it (its workspace exists afterwards) and returns it. LIMITS ({"memory_bytes",
        "max_processes", "cpu_quota", "disk_quota_bytes"}) are the new lifecycle's own limits. Use it as a
        context manager to release it at the end of the block, unless KEEP (or sandbox.keep = True)."""
        from .sandbox import Sandbox

        sb = Sandbox(self, sandbox_id, scope or DEFAULT_SCOPE, profile=profile, limits=limits, keep=keep)
        sb.open()
        return sb

    def resolve(self, sandbox_id: str, scope: Optional[str] = None, *, profile: Optional[str] = None,
                limits: Optional[Mapping[str, Any]] = None) -> SandboxInfo:
        """POST /resolve alone: finds or creates the sandbox (ASSIGNED) without connecting it."""
        body: Dict[str, Any] = {"sandbox_id": sandbox_id, "workspace_scope_id": scope or DEFAULT_SCOPE}
        if profile is not None:
            body["profile"] = profile
        if limits is not None:
            body["limits"] = dict(limits)
        return SandboxInfo.from_json(self._transport.request("POST", f"{API}/resolve", json_body=body).json())

    def get(self, sandbox_id: str) -> SandboxInfo:
        """The sandbox's record (a released one shows status RELEASED); NotFound if it never existed."""
        return SandboxInfo.from_json(self._transport.request("GET", f"{API}/{quote_segment(sandbox_id)}").json())

    def list(self, scope: Optional[str] = None, *, status: str = "live", limit: Optional[int] = None,
             page_size: int = 100) -> List[SandboxInfo]:
        """Sandboxes ordered by id: STATUS is a status name, "live" (all but RELEASED) or "any"; SCOPE
        filters by workspace scope; LIMIT caps the number returned (default all, fetched in pages)."""
        out: List[SandboxInfo] = []
        offset = 0
        while limit is None or len(out) < limit:
            n = page_size if limit is None else min(page_size, limit - len(out))
            doc = self._transport.request("GET", API, query={"workspace_scope_id": scope, "status": status,
                                                              "limit": n, "offset": offset}).json()
            page = doc.get("sandboxes") if isinstance(doc, dict) else None
            if not isinstance(page, list):
                raise SandloomError("SANDLOOM_BAD_RESPONSE", 200, "the list answer has no sandboxes array")
            out.extend(SandboxInfo.from_json(x) for x in page)
            offset += len(page)
            if not page or not doc.get("has_more"):
                break
        return out

    def release(self, sandbox_id: str, *, reason: Optional[str] = None) -> None:
        """Releases the sandbox (cancels its execs, deletes its workspace). Succeeds for an unknown id."""
        self._transport.request("DELETE", f"{API}/{quote_segment(sandbox_id)}", query={"reason": reason})

    def audit(self, sandbox_id: str, *, page_size: int = 100) -> List[AuditEvent]:
        """The sandbox's lifecycle history, oldest first (created, connected, releasing, released, reowned)."""
        out: List[AuditEvent] = []
        while True:
            doc = self._transport.request("GET", f"{API}/{quote_segment(sandbox_id)}/audit",
                                          query={"limit": page_size, "offset": len(out)}).json()
            events = doc.get("events") if isinstance(doc, dict) else None
            if not isinstance(events, list):
                raise SandloomError("SANDLOOM_BAD_RESPONSE", 200, "the audit answer has no events array")
            out.extend(AuditEvent.from_json(e) for e in events)
            total = doc.get("total")
            if not events or not isinstance(total, int) or len(out) >= total:
                return out

