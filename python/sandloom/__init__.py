# SPDX-License-Identifier: MIT
"""sandloom: the Python SDK of the sandloom execution sandbox service (standard library only).

    from sandloom import Client

    client = Client()                       # SANDBOX_BASE_URL / SANDBOX_INTERNAL_TOKEN, or ./data
    with client.sandbox("demo") as sb:      # resolve + connect; released at the end of the block
        sb.files.write("hello.py", "print('hi')\\n")
        r = sb.exec(["python3", "hello.py"])
        print(r.exit_code, r.stdout)

See docs/SDK.md.
"""

from ._version import __version__
from .client import DEFAULT_SCOPE, Client
from .errors import (AuthError, Conflict, ConnectionError, DirectoryNotEmpty, ExecIdConflict, ExecNotFound,
                     ExecWaitTimeout, FileExists, FileNotFound, InternalError, InvalidArchive, InvalidCwd,
                     InvalidRequest, LimitExceeded, LimitExceedsMaximum, LimitsMismatch, NotADirectory, NotARegularFile, NotFound, NotReady,
                     PathIsRoot, PathOutsideWorkspace, PermissionDenied, SandboxBusy, SandboxNotFound,
                     SandboxReleased, SandloomConnectionError, SandloomError, ScopeBusy, ScopeMismatch,
                     StaleGeneration, Suspended, Unauthorized, Unavailable)
from ._http import RequestTimeout
from .files import Files
from .models import AuditEvent, ExecEvent, ExecResult, FileEntry, SandboxInfo, UploadResult
from .sandbox import ExecHandle, Sandbox

__all__ = [
    "__version__", "Client", "Sandbox", "Files", "ExecHandle", "DEFAULT_SCOPE",
    "SandboxInfo", "AuditEvent", "FileEntry", "ExecResult", "ExecEvent", "UploadResult",
    "SandloomError", "ConnectionError", "SandloomConnectionError", "RequestTimeout", "InvalidRequest",
    "PathOutsideWorkspace", "NotARegularFile", "NotADirectory", "PathIsRoot", "InvalidArchive", "InvalidCwd",
    "LimitExceedsMaximum", "LimitsMismatch",
    "AuthError", "Unauthorized", "PermissionDenied", "NotFound", "SandboxNotFound", "FileNotFound",
    "ExecNotFound", "Conflict", "StaleGeneration", "SandboxReleased", "ScopeMismatch", "NotReady", "SandboxBusy",
    "ExecIdConflict", "ScopeBusy", "Suspended", "FileExists", "DirectoryNotEmpty", "LimitExceeded",
    "Unavailable", "InternalError", "ExecWaitTimeout",
]
