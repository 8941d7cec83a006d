# SPDX-License-Identifier: MIT
"""Sandbox.files: the files API, and directory upload/download through tar archives (built and
unpacked here with care: a downloaded archive can never write outside the target directory)."""

from __future__ import annotations

import base64
import os
import shutil
import stat
import tarfile
import tempfile
from typing import IO, TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple, Union

from ._http import Response, StreamResponse
from .errors import FileExists, FileNotFound, InvalidArchive, SandloomError
from .models import FileEntry, UploadResult

if TYPE_CHECKING:
    from .sandbox import Sandbox

__all__ = ["Files", "safe_extract", "build_tar"]

_COPY_CHUNK = 1 << 20


class Files:
    """Paths are what the sandbox sees: /workspace/..., /home/sandbox/..., /cache/..., /envs/...; a
    relative path is relative to /workspace."""

    # Content up to this size goes in a JSON call (content_base64); larger content uses the raw endpoint.
    json_write_limit = 1 << 20

    def __init__(self, sandbox: "Sandbox"):
        self._sb = sandbox

    def _url(self, suffix: str) -> str:
        return f"{self._sb.path}/files{suffix}"

    # --- whole files ---
    def read(self, path: str) -> bytes:
        """The file's bytes (raw endpoint: no base64, no size limit of the JSON API)."""
        t = self._sb._t
        return self._sb.call(lambda gen: t.request("GET", self._url("/raw"), query={"path": path, "generation": gen},
                                                   timeout=max(t.timeout, 300.0)).body)

    def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.read(path).decode(encoding, errors)

    def write(self, path: str, data: Union[bytes, bytearray, memoryview, str], *, make_parents: bool = False,
              encoding: str = "utf-8") -> None:
        """Writes the file atomically (readers see the old or the new content, never a part). A str is
        encoded with ENCODING. MAKE_PARENTS creates missing directories."""
        blob = data.encode(encoding) if isinstance(data, str) else bytes(data)
        t = self._sb._t
        if len(blob) <= self.json_write_limit:
            content = base64.b64encode(blob).decode("ascii")

            def put_json(gen: int) -> None:
                body: Dict[str, Any] = {"generation": gen, "path": path, "content_base64": content}
                if make_parents:
                    body["make_parents"] = True
                t.request("PUT", self._url(""), json_body=body)
            self._sb.call(put_json)
            return

        def put_raw(gen: int) -> None:
            t.request("PUT", self._url("/raw"), query={"path": path, "generation": gen,
                                                       "make_parents": True if make_parents else None},
                      body=blob, headers={"Content-Type": "application/octet-stream"}, timeout=max(t.timeout, 300.0))
        self._sb.call(put_raw)

    def upload_file(self, local_path: str, path: str, *, make_parents: bool = False) -> int:
        """Streams a local file into the sandbox (raw endpoint). Returns its size."""
        t = self._sb._t
        try:
            f = open(local_path, "rb")
        except OSError as e:
            raise SandloomError("SANDLOOM_LOCAL_ERROR", 0, f"cannot open {local_path}: {e.strerror}") from e
        with f:
            size = os.fstat(f.fileno()).st_size
            self._sb.call(lambda gen: t.request(
                "PUT", self._url("/raw"), query={"path": path, "generation": gen,
                                                 "make_parents": True if make_parents else None},
                body=f, body_size=size, headers={"Content-Type": "application/octet-stream"},
                timeout=max(t.timeout, 300.0)))
        return size

    def download_file(self, path: str, local_path: str) -> int:
        """Streams a sandbox file to LOCAL_PATH (written to a temporary name, then renamed). Returns its size."""
        t = self._sb._t
        resp = self._sb.call(lambda gen: t.stream("GET", self._url("/raw"), query={"path": path, "generation": gen},
                                                  timeout=max(t.timeout, 300.0)))
        with resp:
            return _stream_to_file(resp, local_path)

    # --- metadata and tree operations ---
    def list(self, path: str = "/workspace", *, limit: Optional[int] = None, page_size: int = 200) -> List[FileEntry]:
        """The entries of a directory, sorted by name (all of them, fetched in pages, or the first LIMIT)."""
        t = self._sb._t
        out: List[FileEntry] = []
        while limit is None or len(out) < limit:
            n = page_size if limit is None else min(page_size, limit - len(out))
            off = len(out)
            doc = self._sb.call(lambda gen: _object(t.request("GET", self._url("/list"), query={
                "path": path, "generation": gen, "limit": n, "offset": off})))
            entries = doc.get("entries")
            if not isinstance(entries, list):
                raise SandloomError("SANDLOOM_BAD_RESPONSE", 200, "the list answer has no entries array")
            out.extend(FileEntry.from_json(e) for e in entries)
            if not entries or not doc.get("has_more"):
                break
        return out

    def stat(self, path: str) -> FileEntry:
        """One entry (lstat: a symlink is reported as such)."""
        t = self._sb._t
        doc = self._sb.call(lambda gen: _object(t.request("GET", self._url("/stat"),
                                                          query={"path": path, "generation": gen})))
        return FileEntry.from_json(doc)

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
        except FileNotFound:
            return False
        return True

    def mkdir(self, path: str, *, parents: bool = False, exist_ok: bool = False) -> None:
        """Creates a directory (PARENTS: and missing parents). An existing one raises FileExists unless
        EXIST_OK and it is a directory."""
        t = self._sb._t
        try:
            # Not retried after the request may have arrived, unless a repeat is harmless (exist_ok).
            self._sb.call(lambda gen: t.request("POST", self._url("/mkdir"),
                                                json_body={"generation": gen, "path": path, "parents": parents},
                                                idempotent=exist_ok))
        except FileExists:
            if not exist_ok or not self.stat(path).is_dir:
                raise

    def delete(self, path: str, *, recursive: bool = False, missing_ok: bool = False) -> None:
        """Deletes a file, link or empty directory (RECURSIVE: a whole tree; links are never followed)."""
        t = self._sb._t
        try:
            self._sb.call(lambda gen: t.request("POST", self._url("/delete"),
                                                json_body={"generation": gen, "path": path, "recursive": recursive},
                                                idempotent=missing_ok, timeout=max(t.timeout, 300.0)))
        except FileNotFound:
            if not missing_ok:
                raise

    def move(self, source: str, destination: str, *, overwrite: bool = False) -> None:
        """Renames SOURCE to DESTINATION; an existing destination raises FileExists unless OVERWRITE."""
        t = self._sb._t
        self._sb.call(lambda gen: t.request("POST", self._url("/move"), json_body={
            "generation": gen, "source": source, "destination": destination, "overwrite": overwrite},
            idempotent=False))

    # --- directories as tar archives ---
    def upload_dir(self, local_dir: str, remote_dir: str = "/workspace") -> UploadResult:
        """Packs LOCAL_DIR (regular files, directories, symlinks that stay inside it) into a tar and unpacks
        it at REMOTE_DIR (created if missing) in one atomic step. Sockets, FIFOs and devices are skipped
        (listed in the result); a symlink pointing outside LOCAL_DIR raises InvalidArchive (code
        SANDBOX_INVALID_ARCHIVE, status 0) before anything is sent."""
        t = self._sb._t
        with tempfile.TemporaryFile(prefix="sandloom-upload-") as tmp:
            skipped = build_tar(local_dir, tmp)
            size = tmp.tell()
            tmp.seek(0)
            doc = self._sb.call(lambda gen: _object(t.request(
                "PUT", self._url("/archive"), query={"path": remote_dir, "generation": gen}, body=tmp,
                body_size=size, headers={"Content-Type": "application/x-tar"}, timeout=max(t.timeout, 600.0))))
        entries = doc.get("entries")
        path = doc.get("path")
        return UploadResult(path=path if isinstance(path, str) else remote_dir,
                            entries=entries if isinstance(entries, int) else 0, skipped=skipped)

    def download_dir(self, remote_dir: str, local_dir: str) -> List[str]:
        """Downloads REMOTE_DIR as a tar and unpacks it into LOCAL_DIR (created if missing). Refuses (with
        InvalidArchive, before writing anything) absolute names, `..`, devices and FIFOs, and hard links
        to outside the archive; never writes through a symlink; symlinks whose target would resolve outside
        LOCAL_DIR are removed and refused. Modes are kept without set-id bits; ownership is not.
        Returns the relative names written."""
        t = self._sb._t
        resp = self._sb.call(lambda gen: t.stream("GET", self._url("/archive"),
                                                  query={"path": remote_dir, "generation": gen},
                                                  timeout=max(t.timeout, 600.0)))
        with tempfile.TemporaryFile(prefix="sandloom-download-") as tmp:
            with resp:
                _copy_stream(resp, tmp)
            tmp.seek(0)
            return safe_extract(tmp, local_dir)


def _object(resp: Response) -> Dict[str, Any]:
    doc = resp.json()
    if not isinstance(doc, dict):
        raise SandloomError("SANDLOOM_BAD_RESPONSE", resp.status, "the answer is not a JSON object")
    return doc


def _copy_stream(resp: StreamResponse, out: IO[bytes]) -> int:
    n = 0
    while True:
        chunk = resp.read(_COPY_CHUNK)
        if not chunk:
            return n
        out.write(chunk)
        n += len(chunk)


def _stream_to_file(resp: StreamResponse, local_path: str) -> int:
    d = os.path.dirname(os.path.abspath(local_path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".sandloom-", dir=d)
    except OSError as e:
        raise SandloomError("SANDLOOM_LOCAL_ERROR", 0, f"cannot write into {d}: {e.strerror}") from e
    try:
        with os.fdopen(fd, "wb") as f:
            n = _copy_stream(resp, f)
        os.replace(tmp, local_path)
        return n
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise SandloomError("SANDLOOM_LOCAL_ERROR", 0, f"cannot write {local_path}: {e.strerror}") from e
        raise


# --- building an upload ------------------------------------------------------------------------------
def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def build_tar(local_dir: str, out: IO[bytes]) -> List[str]:
    """Writes LOCAL_DIR's tree as a tar (names relative, no ownership) to OUT; returns the skipped paths."""
    root = os.path.realpath(local_dir)
    if not os.path.isdir(root):
        raise SandloomError("SANDLOOM_LOCAL_ERROR", 0, f"{local_dir} is not a directory")
    skipped: List[str] = []
    try:
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
                dirnames.sort()
                rel_dir = os.path.relpath(dirpath, root)
                for name in sorted(dirnames) + sorted(filenames):
                    full = os.path.join(dirpath, name)
                    rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                    st = os.lstat(full)
                    ti = tarfile.TarInfo(rel)
                    ti.mtime = int(st.st_mtime)
                    ti.mode = stat.S_IMODE(st.st_mode) & 0o777
                    if stat.S_ISLNK(st.st_mode):
                        target = os.readlink(full)
                        resolved = os.path.realpath(os.path.join(dirpath, target))
                        if os.path.isabs(target) or not _inside(root, resolved):
                            raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0,
                                                 f"{rel} is a symlink pointing outside {local_dir}")
                        ti.type = tarfile.SYMTYPE
                        ti.linkname = target
                        tf.addfile(ti)
                    elif stat.S_ISDIR(st.st_mode):
                        ti.type = tarfile.DIRTYPE
                        tf.addfile(ti)
                    elif stat.S_ISREG(st.st_mode):
                        ti.size = st.st_size
                        with open(full, "rb") as f:
                            tf.addfile(ti, f)
                    else:
                        skipped.append(full)
            # os.walk does not descend into symlinked directories; their contents travel as the link.
    except OSError as e:
        raise SandloomError("SANDLOOM_LOCAL_ERROR", 0, f"cannot read {local_dir}: {e}") from e
    return skipped


# --- unpacking a download ----------------------------------------------------------------------------
def _parts(name: str, what: str) -> List[str]:
    if name.startswith("/") or (len(name) > 1 and name[1] == ":" and name[0].isalpha()):
        raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0, f"{what} {name!r} is an absolute path")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0, f"{what} {name!r} contains '..'")
    if any("\0" in p for p in parts):
        raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0, f"{what} {name!r} contains a NUL byte")
    return parts


def _check_parents(dest: str, parts: List[str]) -> None:
    """Every existing parent of dest/PARTS must be a real directory (never a symlink)."""
    cur = dest
    for p in parts[:-1]:
        cur = os.path.join(cur, p)
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0,
                                 f"{os.path.relpath(cur, dest)} is a symlink: refusing to write through it")
        if not stat.S_ISDIR(st.st_mode):
            raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0, f"{os.path.relpath(cur, dest)} is not a directory")


def _makedirs(dest: str, parts: List[str]) -> None:
    cur = dest
    for p in parts:
        cur = os.path.join(cur, p)
        try:
            os.mkdir(cur, 0o700)
        except FileExistsError:
            st = os.lstat(cur)
            if not stat.S_ISDIR(st.st_mode):
                raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0,
                                     f"{os.path.relpath(cur, dest)} exists and is not a directory") from None


def safe_extract(fileobj: IO[bytes], local_dir: str) -> List[str]:
    """Unpacks the tar in FILEOBJ (seekable) into LOCAL_DIR. See Files.download_dir for the rules."""
    try:
        os.makedirs(local_dir, exist_ok=True)
    except OSError as e:
        raise SandloomError("SANDLOOM_LOCAL_ERROR", 0, f"cannot create {local_dir}: {e.strerror}") from e
    dest = os.path.realpath(local_dir)
    try:
        tf = tarfile.open(fileobj=fileobj, mode="r:*")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0, f"the archive cannot be read: {e}") from e
    written: List[str] = []
    try:
        with tf:
            members = tf.getmembers()
            # Pass 1: refuse the whole archive before writing anything.
            files: Set[str] = set()
            plan: List[Tuple[tarfile.TarInfo, List[str]]] = []
            for m in members:
                parts = _parts(m.name, "entry")
                if not parts:
                    if m.isdir():
                        continue
                    raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0, f"entry {m.name!r} has no name")
                if m.issym():
                    if m.linkname.startswith("/"):
                        raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0,
                                             f"symlink {m.name!r} points to the absolute path {m.linkname!r}")
                    target = os.path.normpath(os.path.join(dest, *parts[:-1], m.linkname))
                    if not _inside(dest, target):
                        raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0, f"symlink {m.name!r} points outside")
                elif m.islnk():
                    lparts = _parts(m.linkname, "hard link target of")
                    if "/".join(lparts) not in files:
                        raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0,
                                             f"hard link {m.name!r} does not point to a file of the archive")
                elif m.isfile():
                    files.add("/".join(parts))
                elif not m.isdir():
                    raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0,
                                         f"entry {m.name!r} is a device, FIFO or other special file")
                plan.append((m, parts))
            # Pass 2: directories and files (no symlink exists yet that came from the archive; existing
            # ones on the local side are never written through).
            dir_modes: List[Tuple[str, int, int]] = []
            for m, parts in plan:
                rel = "/".join(parts)
                path = os.path.join(dest, *parts)
                if m.issym() or m.islnk():
                    continue
                _check_parents(dest, parts)
                _makedirs(dest, parts[:-1])
                if m.isdir():
                    _makedirs(dest, parts)
                    dir_modes.append((path, m.mode & 0o777, int(m.mtime)))
                else:
                    _write_member(tf, m, path, rel)
                written.append(rel)
            # Pass 3: hard links (to files of this archive, before any archive symlink exists), then symlinks.
            links: List[Tuple[str, str]] = []
            for kind in ("hard", "sym"):
                for m, parts in plan:
                    if not (m.islnk() if kind == "hard" else m.issym()):
                        continue
                    rel = "/".join(parts)
                    path = os.path.join(dest, *parts)
                    _check_parents(dest, parts)
                    _makedirs(dest, parts[:-1])
                    if os.path.lexists(path):
                        if os.path.isdir(path) and not os.path.islink(path):
                            raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0, f"{rel} exists as a directory")
                        os.unlink(path)
                    if kind == "hard":
                        lparts = _parts(m.linkname, "hard link target of")
                        _check_parents(dest, lparts)
                        os.link(os.path.join(dest, *lparts), path, follow_symlinks=False)
                    else:
                        os.symlink(m.linkname, path)
                        links.append((path, rel))
                    written.append(rel)
            # A later link can change where an earlier one leads (b -> a/.., then a -> .): check them all
            # in their final state.
            bad = [rel for path, rel in links if not _inside(dest, os.path.realpath(path))]
            if bad:
                for path, rel in links:
                    if rel in bad:
                        os.unlink(path)
                raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0,
                                     f"symlink(s) resolving outside the target were removed: {', '.join(bad[:5])}")
            for path, mode, mtime in reversed(dir_modes):
                os.chmod(path, mode | 0o700)
                os.utime(path, (mtime, mtime))
    except (tarfile.TarError, EOFError) as e:
        raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0, f"the archive is damaged: {e}") from e
    except OSError as e:
        raise SandloomError("SANDLOOM_LOCAL_ERROR", 0, f"cannot unpack into {local_dir}: {e}") from e
    return written


def _write_member(tf: tarfile.TarFile, m: tarfile.TarInfo, path: str, rel: str) -> None:
    if os.path.islink(path):
        raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0, f"{rel} exists as a symlink: refusing to write through it")
    src = tf.extractfile(m)
    if src is None:
        raise InvalidArchive("SANDBOX_INVALID_ARCHIVE", 0, f"entry {rel!r} has no content")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as out, src:
        shutil.copyfileobj(src, out, _COPY_CHUNK)
        os.fchmod(out.fileno(), m.mode & 0o777)
    os.utime(path, (int(m.mtime), int(m.mtime)), follow_symlinks=False)

