# SPDX-License-Identifier: MIT
"""The exceptions of the SDK: one base class, SandloomError(code, status, message), and a class per
kind of failure. Every error code the daemon documents (docs/API.md) maps to a class; a code this
SDK does not know yet falls back to the class of its HTTP status."""

from __future__ import annotations

import builtins
from typing import Any, Dict, List, Optional, Tuple, Type

__all__ = [
    "SandloomError", "ConnectionError", "SandloomConnectionError", "InvalidRequest", "PathOutsideWorkspace",
    "NotARegularFile", "NotADirectory", "PathIsRoot", "InvalidArchive", "InvalidCwd", "LimitExceedsMaximum", "AuthError", "Unauthorized",
    "PermissionDenied", "NotFound", "SandboxNotFound", "FileNotFound", "ExecNotFound", "Conflict", "StaleGeneration",
    "SandboxReleased", "ScopeMismatch", "LimitsMismatch", "NotReady", "SandboxBusy", "ExecIdConflict", "ScopeBusy", "Suspended",
    "FileExists", "DirectoryNotEmpty", "LimitExceeded", "Unavailable", "InternalError", "ExecWaitTimeout",
    "error_class", "error_from_response", "make_error",
]

CONNECTION_ERROR = "SANDLOOM_CONNECTION_ERROR"
SANDBOX_RELEASED = "SANDBOX_RELEASED"
WAIT_TIMEOUT = "SANDLOOM_WAIT_TIMEOUT"


class SandloomError(Exception):
    """A failed call. CODE is the daemon's stable error code (e.g. "STALE_SANDBOX_GENERATION") or one of
    the SDK's own (SANDLOOM_CONNECTION_ERROR, SANDBOX_RELEASED, SANDLOOM_WAIT_TIMEOUT); STATUS is the HTTP
    status (0 when no HTTP answer is involved); MESSAGE is the daemon's sentence. ERRORS holds the
    field-level entries of a 422 answer ({"loc", "type", "msg"})."""

    def __init__(self, code: str, status: int, message: str, *, errors: Optional[List[Dict[str, Any]]] = None):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.status = status
        self.message = message
        self.errors: List[Dict[str, Any]] = list(errors or [])

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.code, self.status, self.message, self.errors))


def _rebuild(cls: Type[SandloomError], code: str, status: int, message: str,
             errors: List[Dict[str, Any]]) -> SandloomError:
    return cls(code, status, message, errors=errors)


class ConnectionError(SandloomError):  # noqa: A001 - the name the SDK documents; also SandloomConnectionError
    """The daemon could not be reached, or the connection broke and could not be retried safely
    (code SANDLOOM_CONNECTION_ERROR, status 0). The original exception is its __cause__."""



SandloomConnectionError = ConnectionError
# The builtin, for code in this package that needs it next to ours.
BuiltinConnectionError = builtins.ConnectionError


# --- 400 / 405 / 422 ----------------------------------------------------------------------------
class InvalidRequest(SandloomError):
    """The request was refused as malformed or not applicable (400, 405, 422)."""


class PathOutsideWorkspace(InvalidRequest):
    pass


class NotARegularFile(InvalidRequest):
    pass


class NotADirectory(InvalidRequest):
    pass


class PathIsRoot(InvalidRequest):
    pass


class InvalidArchive(InvalidRequest):
    """The daemon refused an uploaded tar, or download_dir refused an entry of a downloaded one."""


class InvalidCwd(InvalidRequest):
    pass


class LimitExceedsMaximum(InvalidRequest):
    """SANDBOX_LIMIT_EXCEEDS_MAXIMUM: a resolve asked for limits above the worker's maximum."""


# --- 401 / 403 ----------------------------------------------------------------------------------
class AuthError(SandloomError):
    """401 (no or wrong token) or 403 (the sandbox's uid may not do this)."""


class Unauthorized(AuthError):
    pass


class PermissionDenied(AuthError):
    pass


# --- 404 ----------------------------------------------------------------------------------------
class NotFound(SandloomError):
    pass


class SandboxNotFound(NotFound):
    pass


class FileNotFound(NotFound):
    pass


class ExecNotFound(NotFound):
    pass


# --- 409 ----------------------------------------------------------------------------------------
class Conflict(SandloomError):
    pass


class StaleGeneration(Conflict):
    """STALE_SANDBOX_GENERATION or STALE_SANDBOX_ROUTE: the generation used is not current. A Sandbox
    object handles it itself (re-resolve once within the same lifecycle); it reaches you only when that
    did not help."""


class SandboxReleased(Conflict):
    """The sandbox this object was connected to was released (and possibly resolved again as a new,
    empty lifecycle). Raised instead of silently continuing in the new one. Code SANDBOX_RELEASED."""


class ScopeMismatch(Conflict):
    pass


class LimitsMismatch(Conflict):
    """SANDBOX_LIMITS_MISMATCH: a live sandbox resolved with other limits than its own."""


class NotReady(Conflict):
    pass


class SandboxBusy(Conflict):
    pass


class ExecIdConflict(Conflict):
    pass


class ScopeBusy(Conflict):
    """SANDBOX_EXEC_SCOPE_BUSY: another exec holds the exec scope (or the whole sandbox)."""


class Suspended(Conflict):
    pass


class FileExists(Conflict):
    pass


class DirectoryNotEmpty(Conflict):
    pass


# --- 413 / 429 / 507 ----------------------------------------------------------------------------
class LimitExceeded(SandloomError):
    """A size, count or quota limit (413, 429, 507)."""


# --- 503 / 500 ----------------------------------------------------------------------------------
class Unavailable(SandloomError):
    """The daemon cannot do this now (503): busy, shutting down, disk pressure, no isolation, ..."""


class InternalError(SandloomError):
    pass


class ExecWaitTimeout(SandloomError):
    """ExecHandle.wait(timeout) ran out before the exec ended; RESULT is the record as it was then."""

    result: Any = None


# Every code of docs/API.md (and the few the daemon emits beyond it, and the SDK's own): its class and
# the HTTP status it comes with.
_CODES: Dict[str, Tuple[Type[SandloomError], int]] = {
    "SANDBOX_INVALID_REQUEST": (InvalidRequest, 422),
    "SANDBOX_METHOD_NOT_ALLOWED": (InvalidRequest, 405),
    "SANDBOX_PATH_OUTSIDE_WORKSPACE": (PathOutsideWorkspace, 400),
    "SANDBOX_NOT_A_REGULAR_FILE": (NotARegularFile, 400),
    "SANDBOX_NOT_A_DIRECTORY": (NotADirectory, 400),
    "SANDBOX_PATH_IS_ROOT": (PathIsRoot, 400),
    "SANDBOX_INVALID_ARCHIVE": (InvalidArchive, 400),
    "SANDBOX_INVALID_CWD": (InvalidCwd, 400),
    "SANDBOX_LIMIT_EXCEEDS_MAXIMUM": (LimitExceedsMaximum, 422),
    "SANDBOX_SENSITIVE_ENV_UNSUPPORTED": (InvalidRequest, 400),
    "SANDBOX_UNAUTHORIZED": (Unauthorized, 401),
    "SANDBOX_PERMISSION_DENIED": (PermissionDenied, 403),
    "SANDBOX_MCP_HOST_NOT_ALLOWED": (AuthError, 403),
    "SANDBOX_MCP_ORIGIN_NOT_ALLOWED": (AuthError, 403),
    "SANDBOX_NOT_FOUND": (SandboxNotFound, 404),
    "SANDBOX_FILE_NOT_FOUND": (FileNotFound, 404),
    "EXEC_NOT_FOUND": (ExecNotFound, 404),
    "SANDBOX_ROUTE_NOT_FOUND": (NotFound, 404),
    "STALE_SANDBOX_ROUTE": (StaleGeneration, 409),
    "STALE_SANDBOX_GENERATION": (StaleGeneration, 409),
    "SANDBOX_SCOPE_MISMATCH": (ScopeMismatch, 409),
    "SANDBOX_LIMITS_MISMATCH": (LimitsMismatch, 409),
    "SANDBOX_NOT_READY": (NotReady, 409),
    "SANDBOX_BUSY": (SandboxBusy, 409),
    "EXEC_ID_CONFLICT": (ExecIdConflict, 409),
    "SANDBOX_EXEC_SCOPE_BUSY": (ScopeBusy, 409),
    "SANDBOX_SUSPENDED": (Suspended, 409),
    "SANDBOX_FILE_EXISTS": (FileExists, 409),
    "SANDBOX_DIRECTORY_NOT_EMPTY": (DirectoryNotEmpty, 409),
    "SANDBOX_REQUEST_TOO_LARGE": (LimitExceeded, 413),
    "SANDBOX_FILE_TOO_LARGE": (LimitExceeded, 413),
    "SANDBOX_ARCHIVE_TOO_LARGE": (LimitExceeded, 413),
    "SANDBOX_PARALLEL_EXEC_LIMIT": (LimitExceeded, 429),
    "SANDBOX_DISK_QUOTA_EXCEEDED": (LimitExceeded, 507),
    "SANDBOX_STORAGE_FULL": (LimitExceeded, 507),
    "SANDBOX_INTERNAL_ERROR": (InternalError, 500),
    "SANDBOX_UID_EXHAUSTED": (Unavailable, 503),
    "SANDBOX_WORKER_BUSY": (Unavailable, 503),
    "SANDBOX_LAUNCH_FAILED": (Unavailable, 503),
    "SANDBOX_ISOLATION_UNAVAILABLE": (Unavailable, 503),
    "SANDBOX_WORKER_DISK_PRESSURE": (Unavailable, 503),
    "SANDBOX_STORE_UNAVAILABLE": (Unavailable, 503),
    "SANDBOX_SHUTTING_DOWN": (Unavailable, 503),
    "SANDBOX_UNAVAILABLE": (Unavailable, 503),
    SANDBOX_RELEASED: (SandboxReleased, 409),
    CONNECTION_ERROR: (ConnectionError, 0),
    WAIT_TIMEOUT: (ExecWaitTimeout, 0),
}
_BY_CODE: Dict[str, Type[SandloomError]] = {k: v[0] for k, v in _CODES.items()}


_BY_STATUS: Dict[int, Type[SandloomError]] = {
    400: InvalidRequest, 405: InvalidRequest, 422: InvalidRequest, 401: Unauthorized, 403: PermissionDenied,
    404: NotFound, 409: Conflict, 413: LimitExceeded, 429: LimitExceeded, 507: LimitExceeded, 503: Unavailable,
    500: InternalError,
}


def error_class(code: str, status: int) -> Type[SandloomError]:
    """The class for CODE, else for STATUS (4xx unknown: InvalidRequest; 5xx unknown: Unavailable)."""
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls
    cls = _BY_STATUS.get(status)
    if cls is not None:
        return cls
    if 400 <= status < 500:
        return InvalidRequest
    if status >= 500:
        return Unavailable
    return SandloomError


def status_of(code: str) -> int:
    """The HTTP status the daemon answers CODE with (0 if unknown): for errors met without one, e.g. an
    `error` event of an exec's event stream."""
    entry = _CODES.get(code)
    return entry[1] if entry else 0


def make_error(code: str, status: int, message: str,
               errors: Optional[List[Dict[str, Any]]] = None) -> SandloomError:
    return error_class(code, status)(code, status, message, errors=errors)


def error_from_response(status: int, body: bytes, reason: str = "") -> SandloomError:
    """The exception for an HTTP error answer. Understands {"detail": {"code", "message", "errors"}},
    Sandloom's bare {"detail": "CODE"} and non-JSON bodies (e.g. a proxy's page)."""
    import json

    code = ""
    message = ""
    errors: List[Dict[str, Any]] = []
    try:
        doc = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        doc = None
    if isinstance(doc, dict):
        detail = doc.get("detail")
        if isinstance(detail, dict):
            code = str(detail.get("code") or "")
            message = str(detail.get("message") or "")
            errs = detail.get("errors", doc.get("errors"))
            if isinstance(errs, list):
                errors = [e for e in errs if isinstance(e, dict)]
        elif isinstance(detail, str):
            if detail.replace("_", "").isalnum() and detail.upper() == detail:
                code = detail
            else:
                message = detail
    if not code:
        code = f"HTTP_{status}"
    if not message:
        text = body[:200].decode("utf-8", "replace").strip() if body and doc is None else ""
        message = text or reason or f"HTTP status {status}"
    return make_error(code, status, message, errors)
