# SPDX-License-Identifier: MIT
"""The records the API answers with, as dataclasses. Each keeps the JSON it came from in `raw`, so a
field this SDK does not know yet is still reachable. Unknown or missing fields never fail parsing."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from .errors import SandloomError

__all__ = ["SandboxInfo", "AuditEvent", "FileEntry", "ExecResult", "ExecEvent", "UploadResult",
           "FINAL_EXEC_STATUSES"]

FINAL_EXEC_STATUSES = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELLED", "WORKER_LOST"})


def _int(d: Mapping[str, Any], key: str, default: int = 0) -> int:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _opt_int(d: Mapping[str, Any], key: str) -> Optional[int]:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(d: Mapping[str, Any], key: str, default: str = "") -> str:
    v = d.get(key)
    return v if isinstance(v, str) else default


def _opt_str(d: Mapping[str, Any], key: str) -> Optional[str]:
    v = d.get(key)
    return v if isinstance(v, str) else None


def _b64(d: Mapping[str, Any], key: str) -> Optional[bytes]:
    v = d.get(key)
    if not isinstance(v, str):
        return None
    try:
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError) as e:
        raise SandloomError("SANDLOOM_BAD_RESPONSE", 200, f"{key} is not valid base64") from e


def _obj(doc: Any, what: str) -> Dict[str, Any]:
    if not isinstance(doc, dict):
        raise SandloomError("SANDLOOM_BAD_RESPONSE", 200, f"expected a JSON object for {what}")
    return doc


@dataclass
class SandboxInfo:
    """A sandbox record (resolve, connect, get, list)."""

    sandbox_id: str
    status: str
    generation: int
    workspace_scope_id: str = ""
    profile: str = ""
    sandbox_uid: Optional[int] = None
    lifecycle_id: Optional[str] = None
    lifecycle_count: Optional[int] = None
    content_version: Optional[int] = None
    worker_id: Optional[str] = None
    worker_epoch: Optional[str] = None
    worker_endpoint: Optional[str] = None
    storage_mode: Optional[str] = None
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    connected_at: Optional[str] = None
    released_at: Optional[str] = None
    limits: Optional[Dict[str, Any]] = None
    disk: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def live(self) -> bool:
        return self.status not in ("RELEASED", "RELEASING")

    @classmethod
    def from_json(cls, doc: Any) -> "SandboxInfo":
        d = _obj(doc, "a sandbox record")
        disk = d.get("disk")
        limits = d.get("limits")
        return cls(sandbox_id=_str(d, "sandbox_id"), status=_str(d, "status"), generation=_int(d, "generation"),
                   workspace_scope_id=_str(d, "workspace_scope_id"), profile=_str(d, "profile"),
                   sandbox_uid=_opt_int(d, "sandbox_uid"), lifecycle_id=_opt_str(d, "lifecycle_id"),
                   lifecycle_count=_opt_int(d, "lifecycle_count"), content_version=_opt_int(d, "content_version"),
                   worker_id=_opt_str(d, "worker_id"), worker_epoch=_opt_str(d, "worker_epoch"),
                   worker_endpoint=_opt_str(d, "worker_endpoint"), storage_mode=_opt_str(d, "storage_mode"),
                   created_at=_opt_str(d, "created_at"), updated_at=_opt_str(d, "updated_at"),
                   connected_at=_opt_str(d, "connected_at"), released_at=_opt_str(d, "released_at"),
                   limits=limits if isinstance(limits, dict) else None,
                   disk=disk if isinstance(disk, dict) else None, raw=d)


@dataclass
class AuditEvent:
    """One entry of a sandbox's lifecycle history."""

    seq: int
    event: str
    lifecycle_id: Optional[str]
    generation: Optional[int]
    principal: Optional[str] = None
    reason: Optional[str] = None
    worker_id: Optional[str] = None
    at: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, doc: Any) -> "AuditEvent":
        d = _obj(doc, "an audit event")
        return cls(seq=_int(d, "seq"), event=_str(d, "event"), lifecycle_id=_opt_str(d, "lifecycle_id"),
                   generation=_opt_int(d, "generation"), principal=_opt_str(d, "principal"),
                   reason=_opt_str(d, "reason"), worker_id=_opt_str(d, "worker_id"), at=_opt_str(d, "at"), raw=d)


@dataclass
class FileEntry:
    """A file or directory as list/stat report it (a symlink is reported, not followed)."""

    name: str
    path: str
    type: str                   # "file", "directory", "symlink" or "other"
    size_bytes: int = 0
    modified_at: Optional[str] = None
    mode: Optional[str] = None  # octal text, e.g. "0644"
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_dir(self) -> bool:
        return self.type == "directory"

    @property
    def is_file(self) -> bool:
        return self.type == "file"

    @property
    def is_symlink(self) -> bool:
        return self.type == "symlink"

    @classmethod
    def from_json(cls, doc: Any) -> "FileEntry":
        d = _obj(doc, "a file entry")
        return cls(name=_str(d, "name"), path=_str(d, "path"), type=_str(d, "type"), size_bytes=_int(d, "size_bytes"),
                   modified_at=_opt_str(d, "modified_at"), mode=_opt_str(d, "mode"), raw=d)


@dataclass
class ExecResult:
    """An exec record. `stdout`/`stderr` are text; when the output came as base64 (the SDK's default)
    `stdout_raw`/`stderr_raw` hold the exact bytes and the text is their UTF-8 decoding (invalid bytes
    become U+FFFD, as the daemon's text encoding does). `stdout_bytes`/`stderr_bytes` count the bytes
    the command produced, also past the output cap (`truncated`)."""

    exec_id: str
    sandbox_id: str
    status: str
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    stdout: str = ""
    stderr: str = ""
    stdout_raw: Optional[bytes] = field(default=None, repr=False)
    stderr_raw: Optional[bytes] = field(default=None, repr=False)
    truncated: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    duration_ms: int = 0
    cpu_ms: Optional[int] = None
    max_rss_bytes: Optional[int] = None
    oom_killed: bool = False
    generation: Optional[int] = None
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    exec_scope: Optional[str] = None
    background: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def done(self) -> bool:
        """The exec has ended (any status but RUNNING)."""
        return self.status in FINAL_EXEC_STATUSES

    @property
    def ok(self) -> bool:
        """The command ran and exited 0."""
        return self.status == "SUCCEEDED" and self.exit_code == 0

    @classmethod
    def from_json(cls, doc: Any) -> "ExecResult":
        d = _obj(doc, "an exec record")
        out_raw = _b64(d, "stdout_base64")
        err_raw = _b64(d, "stderr_base64")
        out = out_raw.decode("utf-8", "replace") if out_raw is not None else _str(d, "stdout")
        err = err_raw.decode("utf-8", "replace") if err_raw is not None else _str(d, "stderr")
        return cls(exec_id=_str(d, "exec_id"), sandbox_id=_str(d, "sandbox_id"), status=_str(d, "status"),
                   exit_code=_opt_int(d, "exit_code"), signal=_opt_int(d, "signal"), stdout=out, stderr=err,
                   stdout_raw=out_raw, stderr_raw=err_raw, truncated=d.get("truncated") is True,
                   stdout_bytes=_int(d, "stdout_bytes"), stderr_bytes=_int(d, "stderr_bytes"),
                   duration_ms=_int(d, "duration_ms"), cpu_ms=_opt_int(d, "cpu_ms"),
                   max_rss_bytes=_opt_int(d, "max_rss_bytes"), oom_killed=d.get("oom_killed") is True,
                   generation=_opt_int(d, "generation"), started_at=_opt_str(d, "started_at"),
                   finished_at=_opt_str(d, "finished_at"), exec_scope=_opt_str(d, "exec_scope"),
                   background=d.get("background") is True, raw=d)


@dataclass
class ExecEvent:
    """One event of exec_stream():

    - kind "start": the exec runs (`record` is the start event's JSON);
    - kind "stdout"/"stderr": a chunk at byte `offset` of that stream; `data` is the bytes (with base64
      output) and `text` the text (decoded incrementally, so a UTF-8 sequence is never split);
    - kind "end": `result` is the final ExecResult.
    """

    kind: str
    offset: int = 0
    data: bytes = b""
    text: str = ""
    result: Optional[ExecResult] = None
    record: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class UploadResult:
    """What upload_dir sent: the target PATH, the number of ENTRIES the daemon unpacked, and the local
    paths it SKIPPED (sockets, FIFOs, devices: a tar cannot carry them into a sandbox)."""

    path: str
    entries: int
    skipped: List[str] = field(default_factory=list)
