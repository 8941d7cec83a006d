# SPDX-License-Identifier: MIT
"""Sandbox: one connected sandbox. It keeps the generation (the fencing token) and sends it with every
call; on STALE_SANDBOX_GENERATION it re-resolves once — but only within the same lifecycle: a sandbox
that was released meanwhile raises SandboxReleased instead of carrying on in a fresh, empty one."""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import math
import secrets
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from ._http import RequestTimeout, StreamResponse, quote_segment
from .client import API, Client
from .errors import (ConnectionError, ExecNotFound, ExecWaitTimeout, SandboxNotFound, SandboxReleased,
                     SandloomError, StaleGeneration, make_error, status_of)
from .files import Files
from .models import AuditEvent, ExecEvent, ExecResult, SandboxInfo

__all__ = ["Sandbox", "ExecHandle", "Command"]

T = TypeVar("T")
Command = Union[str, Sequence[str]]
_WAIT_SECONDS_MAX = 300
# How often in a row a broken event stream is re-attached without receiving anything new.
_MAX_STREAM_RESUMES = 5
# An event stream silent this long counts as dropped (and is re-attached): 3 keep-alive periods of the
# daemon (X-Sandloom-Keepalive-Seconds), or _STALL_DEFAULT seconds when it sends none.
_STALL_PERIODS = 3
_STALL_DEFAULT = 60.0


def new_exec_id() -> str:
    return "sdk-" + secrets.token_hex(12)


class Sandbox:
    """A sandbox resolved and connected by Client.sandbox(). Thread-safe."""

    def __init__(self, client: Client, sandbox_id: str, scope: str, *, profile: Optional[str] = None,
                 limits: Optional[Mapping[str, Any]] = None, keep: bool = False):
        self.client = client
        self.sandbox_id = sandbox_id
        self.scope = scope
        self.profile = profile
        self.limits = dict(limits) if limits is not None else None
        self.keep = keep
        self._t = client._transport
        self._lock = threading.Lock()
        self._info: Optional[SandboxInfo] = None
        self._released = False
        self.files = Files(self)

    def __repr__(self) -> str:
        gen = self._info.generation if self._info else None
        return f"<sandloom.Sandbox {self.sandbox_id!r} scope={self.scope!r} generation={gen}>"

    # --- state ---
    @property
    def info(self) -> SandboxInfo:
        """The record as last seen (resolve/connect/re-resolve); refresh() fetches it anew."""
        if self._info is None:
            raise SandloomError("SANDLOOM_NOT_CONNECTED", 0, "the sandbox is not connected yet (call open())")
        return self._info

    @property
    def generation(self) -> int:
        return self.info.generation

    @property
    def lifecycle_id(self) -> Optional[str]:
        return self.info.lifecycle_id

    @property
    def path(self) -> str:
        return f"{API}/{quote_segment(self.sandbox_id)}"

    # --- lifecycle ---
    def open(self) -> SandboxInfo:
        """Resolve + connect. Called by Client.sandbox(); calling it again is harmless while live."""
        body: Dict[str, Any] = {"sandbox_id": self.sandbox_id, "workspace_scope_id": self.scope}
        if self.profile is not None:
            body["profile"] = self.profile
        if self.limits is not None:
            body["limits"] = self.limits
        rec = SandboxInfo.from_json(self._t.request("POST", f"{API}/resolve", json_body=body).json())
        info = self._connect(rec.generation)
        with self._lock:
            self._info = info
            self._released = False
        return info

    def _connect(self, generation: int) -> SandboxInfo:
        r = self._t.request("POST", self.path, json_body={"generation": generation})
        return SandboxInfo.from_json(r.json())

    def refresh(self) -> SandboxInfo:
        """GET the record (with disk usage). Does not change the generation this object uses."""
        return self.client.get(self.sandbox_id)

    def audit(self) -> List[AuditEvent]:
        return self.client.audit(self.sandbox_id)

    def release(self, *, reason: Optional[str] = None) -> None:
        """Releases the sandbox: its execs are cancelled and its workspace deleted."""
        self.client.release(self.sandbox_id, reason=reason)
        self._released = True

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.keep or self._released:
            return
        if exc_type is None:
            self.release(reason="sdk context exit")
            return
        # The block failed: release anyway, but never hide its exception behind a failed release.
        try:
            self.release(reason="sdk context exit")
        except SandloomError:
            pass

    def _lifecycle_key(self, info: SandboxInfo) -> Optional[str]:
        return info.lifecycle_id or info.created_at

    def _released_since(self, known: SandboxInfo) -> bool:
        """Without lifecycle ids (an older server): did the audit record a release at or after our generation?"""
        for ev in self.client.audit(self.sandbox_id):
            if ev.event in ("releasing", "released") and (ev.generation is None or ev.generation >= known.generation):
                return True
        return False

    def _reresolve(self, seen_generation: int) -> None:
        """The daemon said SEEN_GENERATION is stale: adopt the current generation if the sandbox is still
        in our lifecycle (e.g. the worker restarted and re-owned it), else raise SandboxReleased."""
        with self._lock:
            known = self.info
            if known.generation != seen_generation:
                return      # another thread has already re-resolved
            try:
                rec = self.client.get(self.sandbox_id)
            except SandboxNotFound:
                raise SandboxReleased("SANDBOX_RELEASED", 409,
                                      f"sandbox {self.sandbox_id!r} no longer exists") from None
            mine = self._lifecycle_key(known)
            if not rec.live or (mine is not None and self._lifecycle_key(rec) != mine) or \
                    (mine is None and self._released_since(known)):
                raise SandboxReleased("SANDBOX_RELEASED", 409,
                                      f"sandbox {self.sandbox_id!r} was released (generation {known.generation}"
                                      f" is gone; it is now {rec.status} at generation {rec.generation}); "
                                      "open a new Sandbox to start a fresh lifecycle")
            if rec.generation == known.generation:
                return
            info = self._connect(rec.generation)     # idempotent once READY; READY again after a re-own
            if mine is not None and self._lifecycle_key(info) != mine:
                raise SandboxReleased("SANDBOX_RELEASED", 409,
                                      f"sandbox {self.sandbox_id!r} was released while re-resolving")
            self._info = info

    def _check_released(self) -> None:
        """After a 404 SANDBOX_NOT_FOUND: raise SandboxReleased if that is why."""
        try:
            rec = self.client.get(self.sandbox_id)
        except SandboxNotFound:
            raise SandboxReleased("SANDBOX_RELEASED", 409, f"sandbox {self.sandbox_id!r} no longer exists") from None
        mine = self._lifecycle_key(self.info)
        if not rec.live or (mine is not None and self._lifecycle_key(rec) != mine):
            raise SandboxReleased("SANDBOX_RELEASED", 409, f"sandbox {self.sandbox_id!r} was released "
                                  f"(now {rec.status} at generation {rec.generation})")

    def call(self, fn: Callable[[int], T]) -> T:
        """Runs FN(generation); on a stale generation re-resolves once (same lifecycle) and runs it again."""
        gen = self.generation
        try:
            return fn(gen)
        except StaleGeneration:
            self._reresolve(gen)
        except SandboxNotFound:
            self._check_released()
            raise
        try:
            return fn(self.generation)
        except SandboxNotFound:
            self._check_released()
            raise

    # --- exec ---
    def _exec_body(self, command: Command, cwd: Optional[str], env: Optional[Mapping[str, str]],
                   timeout: Optional[float], stdin: Union[str, bytes, None], exec_id: Optional[str],
                   scope: Optional[str], output_encoding: str, background: bool) -> Dict[str, Any]:
        if isinstance(command, str):
            argv: List[str] = ["/bin/sh", "-c", command]
        elif isinstance(command, (bytes, bytearray)):
            raise TypeError("command must be a str (run by /bin/sh -c) or a sequence of str (argv)")
        else:
            argv = list(command)
            if not all(isinstance(a, str) for a in argv):
                raise TypeError("every argv element must be a str")
        if output_encoding not in ("text", "base64"):
            raise ValueError("output_encoding must be 'text' or 'base64'")
        body: Dict[str, Any] = {"argv": argv, "exec_id": exec_id or new_exec_id(),
                                "output_encoding": output_encoding}
        if cwd is not None:
            body["cwd"] = cwd
        if env is not None:
            body["env"] = dict(env)
        if timeout is not None:
            body["timeout_seconds"] = max(1, int(math.ceil(timeout)))
        if isinstance(stdin, str):
            body["stdin"] = stdin
        elif stdin is not None:
            body["stdin_base64"] = base64.b64encode(bytes(stdin)).decode("ascii")
        if scope is not None:
            body["exec_scope"] = scope
        if background:
            body["background"] = True
        return body

    def _post_exec(self, body: Dict[str, Any], timeout: float) -> ExecResult:
        def post(gen: int) -> ExecResult:
            b = dict(body, generation=gen)
            # Retried on connection failures with the same exec_id: the daemon attaches to the running
            # exec (or answers the stored record), so a retry never runs the command twice.
            r = self._t.request("POST", f"{self.path}/exec", json_body=b, timeout=timeout, idempotent=True)
            return ExecResult.from_json(r.json())
        return self.call(post)

    def exec(self, command: Command, *, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
             timeout: Optional[float] = None, stdin: Union[str, bytes, None] = None, exec_id: Optional[str] = None,
             scope: Optional[str] = None, output_encoding: str = "base64") -> ExecResult:
        """Runs COMMAND (a str runs via /bin/sh -c, a list is the argv) in a fresh isolated process and
        returns its record once it has ended. TIMEOUT (seconds) is the exec's own limit (the daemon then
        kills it: TIMED_OUT). STDIN (str or bytes) is its standard input. SCOPE is the exec scope: execs
        in different scopes run in parallel. EXEC_ID is the idempotency key (made up when not given).

        A non-zero exit is not an exception: check result.ok / result.exit_code."""
        body = self._exec_body(command, cwd, env, timeout, stdin, exec_id, scope, output_encoding, False)
        handle = ExecHandle(self, body["exec_id"], output_encoding, _body=body)
        try:
            rec: Optional[ExecResult] = self._post_exec(body, self.client.long_poll_seconds)
        except RequestTimeout:
            rec = None      # still running: the exec does not stop when we hang up; wait for it below
        if rec is not None and rec.done:
            return rec
        return handle.wait()

    def exec_background(self, command: Command, *, cwd: Optional[str] = None,
                        env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
                        stdin: Union[str, bytes, None] = None, exec_id: Optional[str] = None,
                        scope: Optional[str] = None, output_encoding: str = "base64") -> "ExecHandle":
        """Starts COMMAND and returns at once with a handle (status(), wait(), cancel(), output()). The
        process tree lives until it exits, is cancelled, times out or the sandbox is released."""
        body = self._exec_body(command, cwd, env, timeout, stdin, exec_id, scope, output_encoding, True)
        try:
            rec: Optional[ExecResult] = self._post_exec(body, self.client.long_poll_seconds)
        except RequestTimeout:
            rec = None      # e.g. a long admission queue; the handle asks again (same exec_id)
        return ExecHandle(self, body["exec_id"], output_encoding, _body=body, _last=rec)

    def exec_stream(self, command: Command, *, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                    timeout: Optional[float] = None, stdin: Union[str, bytes, None] = None,
                    exec_id: Optional[str] = None, scope: Optional[str] = None,
                    output_encoding: str = "base64") -> Iterator[ExecEvent]:
        """Runs COMMAND (as exec()) and yields its events as they happen: start, stdout/stderr chunks,
        end (with the final ExecResult). If the stream breaks it is re-attached from the last offsets
        received, so every byte is yielded once, in order. Closing the generator early leaves the exec
        running (cancel it with sandbox.cancel(exec_id) if needed)."""
        body = self._exec_body(command, cwd, env, timeout, stdin, exec_id, scope, output_encoding, False)

        def open_post(gen: int) -> StreamResponse:
            return self._t.stream("POST", f"{self.path}/exec", json_body=dict(body, generation=gen),
                                  headers={"Accept": "text/event-stream"}, timeout=self.client.long_poll_seconds,
                                  idempotent=True)
        handle = ExecHandle(self, body["exec_id"], output_encoding, _body=body)
        return handle._follow(lambda: self.call(open_post), 0, 0)

    def exec_handle(self, exec_id: str, *, output_encoding: str = "base64") -> "ExecHandle":
        """A handle on an exec started earlier (by any client) in this lifecycle."""
        return ExecHandle(self, exec_id, output_encoding)

    def get_exec(self, exec_id: str, *, wait_seconds: int = 0, output_encoding: str = "base64") -> ExecResult:
        """The exec's record; WAIT_SECONDS (0-300) long-polls until it ends or the time is up."""
        wait_seconds = max(0, min(_WAIT_SECONDS_MAX, int(wait_seconds)))

        def get(gen: int) -> ExecResult:
            r = self._t.request("GET", f"{self.path}/exec/{quote_segment(exec_id)}",
                                query={"generation": gen, "wait_seconds": wait_seconds or None,
                                       "output_encoding": output_encoding},
                                timeout=wait_seconds + self.client.timeout)
            return ExecResult.from_json(r.json())
        return self.call(get)

    def cancel(self, exec_id: str) -> bool:
        """Cancels the exec (SIGTERM to its tree, SIGKILL after the grace period). True if it was
        running (it ends CANCELLED), False if it had already ended."""
        def post(gen: int) -> bool:
            r = self._t.request("POST", f"{self.path}/exec/{quote_segment(exec_id)}/cancel",
                                json_body={"generation": gen})
            doc = r.json()
            return isinstance(doc, dict) and doc.get("cancelled") is True
        return self.call(post)


class ExecHandle:
    """An exec of a sandbox, by id: poll it, wait for it, cancel it, read or stream its output."""

    def __init__(self, sandbox: Sandbox, exec_id: str, output_encoding: str = "base64", *,
                 _body: Optional[Dict[str, Any]] = None, _last: Optional[ExecResult] = None):
        self.sandbox = sandbox
        self.exec_id = exec_id
        self.output_encoding = output_encoding
        self._body = _body
        self.last: Optional[ExecResult] = _last

    def __repr__(self) -> str:
        return f"<sandloom.ExecHandle {self.exec_id!r} of {self.sandbox.sandbox_id!r}>"

    def status(self) -> ExecResult:
        """The record now (RUNNING with the output so far, or final)."""
        try:
            self.last = self.sandbox.get_exec(self.exec_id, output_encoding=self.output_encoding)
        except ExecNotFound:
            if self._body is None:
                raise
            self.last = self._repost()      # our start request never arrived: send it again
        return self.last

    def wait(self, timeout: Optional[float] = None) -> ExecResult:
        """Waits (long-polls) until the exec ends and returns its final record. With TIMEOUT (seconds)
        raises ExecWaitTimeout (its .result is the record then) if it is still running by then."""
        deadline = None if timeout is None else time.monotonic() + timeout
        poll = max(1, int(self.sandbox.client.long_poll_seconds))
        while True:
            left = poll if deadline is None else int(max(0.0, min(poll, deadline - time.monotonic())))
            try:
                rec = self.sandbox.get_exec(self.exec_id, wait_seconds=left, output_encoding=self.output_encoding)
            except ExecNotFound:
                if self._body is None:
                    raise
                # Our POST never reached the daemon (it broke before): send it again, same exec_id.
                rec = self._repost()
            except RequestTimeout:
                if deadline is not None and time.monotonic() >= deadline:
                    rec = self.last or self.status()
                else:
                    continue
            self.last = rec
            if rec.done:
                return rec
            if deadline is not None and time.monotonic() >= deadline:
                e = ExecWaitTimeout("SANDLOOM_WAIT_TIMEOUT", 0,
                                    f"exec {self.exec_id!r} still {rec.status} after {timeout} s")
                e.result = rec
                raise e

    def _repost(self) -> ExecResult:
        assert self._body is not None
        try:
            return self.sandbox._post_exec(self._body, self.sandbox.client.long_poll_seconds)
        except RequestTimeout:
            return self.sandbox.get_exec(self.exec_id, output_encoding=self.output_encoding)

    def cancel(self) -> bool:
        """True if it was running (it ends CANCELLED), False if it had already ended."""
        return self.sandbox.cancel(self.exec_id)

    def output(self, stream: str = "stdout", *, offset: int = 0, limit: Optional[int] = None) -> bytes:
        """Raw bytes of STREAM ("stdout" or "stderr") from OFFSET (up to the output cap), also while it runs."""
        sb = self.sandbox

        def get(gen: int) -> bytes:
            r = sb._t.request("GET", f"{sb.path}/exec/{quote_segment(self.exec_id)}/output",
                              query={"generation": gen, "stream": stream, "offset": offset, "limit": limit})
            return r.body
        return sb.call(get)

    def events(self, *, stdout_offset: int = 0, stderr_offset: int = 0) -> Iterator[ExecEvent]:
        """The exec's events (start, output from the offsets, end), as exec_stream() yields them."""
        return self._follow(None, stdout_offset, stderr_offset)

    def _attach(self, out_off: int, err_off: int) -> StreamResponse:
        sb = self.sandbox

        def get(gen: int) -> StreamResponse:
            return sb._t.stream("GET", f"{sb.path}/exec/{quote_segment(self.exec_id)}/events",
                                query={"generation": gen, "stdout_offset": out_off, "stderr_offset": err_off,
                                       "output_encoding": self.output_encoding},
                                headers={"Accept": "text/event-stream"}, timeout=sb.client.long_poll_seconds)
        return sb.call(get)

    def _follow(self, first: Optional[Callable[[], StreamResponse]], out_off: int,
                err_off: int) -> Iterator[ExecEvent]:
        offsets = {"stdout": out_off, "stderr": err_off}
        decoders = {k: codecs.getincrementaldecoder("utf-8")("replace") for k in offsets}
        started = False
        fruitless = 0
        opener: Callable[[], StreamResponse] = first or (lambda: self._attach(offsets["stdout"], offsets["stderr"]))
        while True:
            progressed = False
            keepalive = 0
            opened = False
            try:
                with opener() as resp:
                    opened = True
                    keepalive = _keepalive_seconds(resp)
                    resp.set_read_timeout(keepalive * _STALL_PERIODS if keepalive else _STALL_DEFAULT)
                    for name, data in _sse_events(resp):
                        doc = _json(data)
                        if name == "start":
                            if not started:
                                started = True
                                progressed = True
                                yield ExecEvent("start", record=doc)
                        elif name in ("stdout", "stderr"):
                            ev = self._chunk(name, doc, offsets, decoders)
                            if ev is not None:
                                progressed = True
                                yield ev
                        elif name == "end":
                            result = ExecResult.from_json(doc)
                            self.last = result
                            for k in ("stdout", "stderr"):
                                rest = decoders[k].decode(b"", final=True)
                                if rest:
                                    yield ExecEvent(k, offset=offsets[k], text=rest)
                            yield ExecEvent("end", result=result, record=doc)
                            return
                        elif name == "error":
                            detail = doc.get("detail")
                            if not isinstance(detail, dict):
                                detail = {}
                            code = str(detail.get("code") or "SANDBOX_INTERNAL_ERROR")
                            raise make_error(code, status_of(code),
                                             str(detail.get("message") or "the exec could not start"))
            except RequestTimeout:
                # Without keep-alives a quiet command is silent too: re-attach, like a long-poll.
                # With them (or with no answer at all), silence means the stream or the daemon is
                # gone: fruitless unless events came.
                if opened and not keepalive:
                    progressed = True
            except ConnectionError:
                pass
            fruitless = 0 if progressed else fruitless + 1
            if fruitless > _MAX_STREAM_RESUMES:
                raise ConnectionError("SANDLOOM_CONNECTION_ERROR", 0,
                                      f"the event stream of exec {self.exec_id!r} kept breaking")
            if fruitless > 1:
                time.sleep(min(2.0, 0.1 * (2 ** fruitless)))
            if first is None or started:
                opener = lambda: self._attach(offsets["stdout"], offsets["stderr"])  # noqa: E731
            # else: nothing came back yet, so our POST may never have arrived: send it again (same
            # exec_id: the daemon attaches if it did arrive).

    def _chunk(self, name: str, doc: Dict[str, Any], offsets: Dict[str, int],
               decoders: Dict[str, "codecs.IncrementalDecoder"]) -> Optional[ExecEvent]:
        off = doc.get("offset")
        if not isinstance(off, int):
            raise SandloomError("SANDLOOM_BAD_RESPONSE", 200, "an output event without an offset")
        b64 = doc.get("data_base64")
        if isinstance(b64, str):
            try:
                data = base64.b64decode(b64, validate=True)
            except (binascii.Error, ValueError) as e:
                raise SandloomError("SANDLOOM_BAD_RESPONSE", 200, "output event data is not base64") from e
            end = off + len(data)
            if end <= offsets[name]:
                return None                       # already seen before a re-attach
            if off < offsets[name]:
                data = data[offsets[name] - off:]
                off = offsets[name]
            offsets[name] = end
            return ExecEvent(name, offset=off, data=data, text=decoders[name].decode(data))
        text = doc.get("data")
        if not isinstance(text, str):
            raise SandloomError("SANDLOOM_BAD_RESPONSE", 200, "an output event without data")
        if off < offsets[name]:
            return None
        # Text chunks: the raw length is known exactly only without replacement characters.
        raw = text.encode("utf-8")
        offsets[name] = off + len(raw)
        return ExecEvent(name, offset=off, data=raw, text=text)


def _keepalive_seconds(resp: StreamResponse) -> int:
    """The daemon's keep-alive period for this stream, or 0 (none, or an older daemon)."""
    try:
        n = int(resp.headers.get("x-sandloom-keepalive-seconds", "0"))
    except ValueError:
        return 0
    return n if 0 < n <= 3600 else 0


def _json(data: str) -> Dict[str, Any]:
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise SandloomError("SANDLOOM_BAD_RESPONSE", 200, "an event's data is not JSON") from e
    if not isinstance(doc, dict):
        raise SandloomError("SANDLOOM_BAD_RESPONSE", 200, "an event's data is not a JSON object")
    return doc


def _sse_events(resp: StreamResponse) -> Iterator[Tuple[str, str]]:
    """(event name, data) pairs of a text/event-stream body, until it ends."""
    name = "message"
    data: List[str] = []
    while True:
        line = resp.readline()
        if not line:
            return      # the stream ended (cleanly or not): the caller decides by what it has seen
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        if not text:
            if data:
                yield name, "\n".join(data)
            name, data = "message", []
            continue
        if text.startswith(":"):
            continue
        key, _, value = text.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if key == "event":
            name = value
        elif key == "data":
            data.append(value)

