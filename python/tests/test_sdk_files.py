# SPDX-License-Identifier: MIT
"""Sandbox.files against the real daemon, and the safety of directory download (hostile archives)."""

import io
import os
import stat
import tarfile
import time

import pytest

import sandloom
from sandloom.files import build_tar, safe_extract
from helpers import make_tar


def test_write_read_text_and_bytes(sb):
    sb.files.write("hello.txt", "héllo\n")
    assert sb.files.read("hello.txt") == "héllo\n".encode()
    assert sb.files.read_text("/workspace/hello.txt") == "héllo\n"
    blob = bytes(range(256)) * 4
    sb.files.write("/home/sandbox/blob.bin", blob)
    assert sb.files.read("/home/sandbox/blob.bin") == blob
    sb.files.write("latin.txt", "é", encoding="latin-1")
    assert sb.files.read("latin.txt") == b"\xe9"
    # The process inside sees the same file, owned by the sandbox.
    r = sb.exec("cat hello.txt; stat -c %U hello.txt")
    assert r.stdout == "héllo\nsandbox\n"


def test_large_content_uses_the_raw_endpoint(sb, daemon):
    big = os.urandom(3 * 1024 * 1024 + 17)
    assert len(big) > sb.files.json_write_limit
    sb.files.write("big.bin", big)
    assert sb.files.read("big.bin") == big
    assert sb.files.stat("big.bin").size_bytes == len(big)


def test_write_make_parents(sb):
    with pytest.raises(sandloom.FileNotFound):
        sb.files.write("a/b/c.txt", "x")
    sb.files.write("a/b/c.txt", "x", make_parents=True)
    sb.files.write("r/s/t.bin", os.urandom(2 << 20), make_parents=True)      # raw path too
    assert sb.files.stat("a/b").is_dir and sb.files.stat("r/s/t.bin").size_bytes == 2 << 20


def test_upload_and_download_file(sb, tmp_path):
    src = tmp_path / "src.bin"
    data = os.urandom(1_500_000)
    src.write_bytes(data)
    assert sb.files.upload_file(str(src), "up/src.bin", make_parents=True) == len(data)
    dst = tmp_path / "dst.bin"
    assert sb.files.download_file("up/src.bin", str(dst)) == len(data)
    assert dst.read_bytes() == data
    with pytest.raises(sandloom.FileNotFound):
        sb.files.download_file("missing.bin", str(tmp_path / "never"))
    assert not (tmp_path / "never").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".sandloom-")] == []


def test_list_stat_exists(sb):
    sb.files.mkdir("dir")
    for i in range(7):
        sb.files.write(f"dir/f{i}", str(i))
    sb.exec("ln -s f0 dir/link")
    entries = sb.files.list("dir", page_size=3)
    assert [e.name for e in entries] == ["f0", "f1", "f2", "f3", "f4", "f5", "f6", "link"]
    assert entries[0].path == "/workspace/dir/f0" and entries[0].is_file and entries[0].size_bytes == 1
    assert entries[-1].is_symlink
    assert [e.name for e in sb.files.list("dir", limit=2)] == ["f0", "f1"]
    st = sb.files.stat("dir")
    assert st.is_dir and st.mode and st.modified_at
    assert sb.files.stat("dir/link").type == "symlink"
    assert sb.files.exists("dir/f3") and not sb.files.exists("dir/nope")
    assert [e.name for e in sb.files.list()] == ["dir"]        # default: /workspace


def test_mkdir_delete_move(sb):
    sb.files.mkdir("m/n/o", parents=True)
    with pytest.raises(sandloom.FileExists) as ei:
        sb.files.mkdir("m")
    assert ei.value.code == "SANDBOX_FILE_EXISTS" and ei.value.status == 409
    sb.files.mkdir("m", exist_ok=True)
    sb.files.write("m/file", "f")
    with pytest.raises(sandloom.FileExists):
        sb.files.mkdir("m/file", exist_ok=True)        # exists, but not as a directory
    with pytest.raises(sandloom.FileNotFound):
        sb.files.mkdir("x/y")
    with pytest.raises(sandloom.DirectoryNotEmpty) as ei:
        sb.files.delete("m")
    assert ei.value.code == "SANDBOX_DIRECTORY_NOT_EMPTY"
    sb.files.move("m/file", "moved")
    assert sb.files.read("moved") == b"f" and not sb.files.exists("m/file")
    sb.files.write("other", "o")
    with pytest.raises(sandloom.FileExists):
        sb.files.move("other", "moved")
    sb.files.move("other", "moved", overwrite=True)
    assert sb.files.read("moved") == b"o"
    sb.files.delete("m", recursive=True)
    assert not sb.files.exists("m")
    with pytest.raises(sandloom.FileNotFound):
        sb.files.delete("m")
    sb.files.delete("m", missing_ok=True)
    with pytest.raises(sandloom.PathIsRoot):
        sb.files.delete("/workspace", recursive=True)


def test_path_errors_map_to_classes(sb):
    with pytest.raises(sandloom.PathOutsideWorkspace) as ei:
        sb.files.read("/etc/passwd")
    assert ei.value.status == 400 and isinstance(ei.value, sandloom.InvalidRequest)
    with pytest.raises(sandloom.PathOutsideWorkspace):
        sb.files.write("../../etc/x", "no")
    sb.files.mkdir("d")
    with pytest.raises(sandloom.NotARegularFile):
        sb.files.read("d")
    sb.files.write("plain", "p")
    with pytest.raises(sandloom.NotADirectory):
        sb.files.list("plain")


def test_permission_denied_is_an_auth_error(sb):
    sb.exec("mkdir ro && chmod 0500 ro")
    with pytest.raises(sandloom.PermissionDenied) as ei:
        sb.files.write("ro/f", "x")
    assert ei.value.status == 403 and ei.value.code == "SANDBOX_PERMISSION_DENIED"


# --- directories ---

def _local_tree(tmp_path):
    src = tmp_path / "src"
    (src / "pkg" / "sub").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "sub" / "data.bin").write_bytes(os.urandom(70000))
    (src / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(src / "run.sh", 0o755)
    (src / "empty").mkdir()
    os.symlink("pkg/sub/data.bin", src / "link-to-data")
    return src


def test_upload_dir_then_download_dir_round_trip(sb, tmp_path):
    src = _local_tree(tmp_path)
    os.mkfifo(src / "a-fifo")
    res = sb.files.upload_dir(str(src), "/workspace/proj")
    assert res.path == "/workspace/proj" and res.entries >= 7
    assert res.skipped == [str(src / "a-fifo")]
    assert sb.exec("./run.sh", cwd="proj").stdout == "run\n"
    assert sb.files.stat("proj/link-to-data").is_symlink
    assert sb.files.read("proj/link-to-data") == (src / "pkg/sub/data.bin").read_bytes()

    out = tmp_path / "out"
    names = sb.files.download_dir("/workspace/proj", str(out))
    assert "pkg/sub/data.bin" in names and "empty" in names
    assert (out / "pkg/sub/data.bin").read_bytes() == (src / "pkg/sub/data.bin").read_bytes()
    assert os.readlink(out / "link-to-data") == "pkg/sub/data.bin"
    assert os.stat(out / "run.sh").st_mode & 0o777 == 0o755
    assert (out / "empty").is_dir()
    assert os.stat(out / "run.sh").st_uid == os.getuid(), "ownership of the sandbox must not be kept"


def test_upload_dir_refuses_a_link_pointing_out(sb, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "ok").write_text("ok")
    os.symlink("/etc/passwd", src / "abs")
    with pytest.raises(sandloom.InvalidArchive) as ei:
        sb.files.upload_dir(str(src), "/workspace/x")
    assert "abs" in ei.value.message and ei.value.status == 0
    os.unlink(src / "abs")
    os.symlink("../../outside", src / "rel")
    with pytest.raises(sandloom.InvalidArchive):
        sb.files.upload_dir(str(src), "/workspace/x")
    assert not sb.files.exists("x"), "nothing was sent"


def test_daemon_refuses_a_hostile_upload(sb):
    # Past the SDK's own builder: the daemon's refusal maps to InvalidArchive with status 400.
    bad = make_tar([{"name": "../escape.txt", "data": b"x"}])
    with pytest.raises(sandloom.InvalidArchive) as ei:
        sb._t.request("PUT", f"{sb.path}/files/archive", query={"path": "/workspace/h", "generation": sb.generation},
                      body=bad, headers={"Content-Type": "application/x-tar"})
    assert ei.value.status == 400 and ei.value.code == "SANDBOX_INVALID_ARCHIVE"


def test_download_dir_of_a_hostile_workspace(sb, tmp_path):
    """Links made inside the sandbox that would lead outside the local target are refused."""
    sb.exec("mkdir -p evil && echo inside > evil/ok && ln -s /etc/passwd evil/abs")
    out = tmp_path / "o1"
    with pytest.raises(sandloom.InvalidArchive) as ei:
        sb.files.download_dir("evil", str(out))
    assert "absolute" in ei.value.message
    assert not (out / "ok").exists(), "the archive is refused before anything is written"

    sb.exec("rm evil/abs && ln -s ../../../../../../etc evil/up")
    with pytest.raises(sandloom.InvalidArchive):
        sb.files.download_dir("evil", str(tmp_path / "o2"))

    # Chained: b -> a/.. is harmless while a does not exist; a -> . then makes b lead out.
    sb.exec("rm evil/up && ln -s a/.. evil/b && ln -s . evil/a")
    out3 = tmp_path / "o3"
    with pytest.raises(sandloom.InvalidArchive) as ei:
        sb.files.download_dir("evil", str(out3))
    assert not os.path.lexists(out3 / "b"), "the link leading out was left behind"
    assert (out3 / "ok").read_text() == "inside\n"

    # A link that stays inside is fine.
    sb.exec("rm evil/b evil/a && ln -s ok evil/good")
    out4 = tmp_path / "o4"
    sb.files.download_dir("evil", str(out4))
    assert (out4 / "good").read_text() == "inside\n"


# --- safe_extract on crafted archives (what a hostile or broken server could send) ---

def _extract(tmp_path, members, name="t"):
    dest = tmp_path / name
    return dest, safe_extract(io.BytesIO(make_tar(members)), str(dest))


@pytest.mark.parametrize("member", [
    {"name": "/abs.txt", "data": b"x"},
    {"name": "../up.txt", "data": b"x"},
    {"name": "a/../../up.txt", "data": b"x"},
    {"name": "dev", "type": "chr"},
    {"name": "fifo", "type": "fifo"},
    {"name": "l", "type": "symlink", "linkname": "/etc"},
    {"name": "l", "type": "symlink", "linkname": "../.."},
    {"name": "h", "type": "hardlink", "linkname": "/etc/passwd"},
    {"name": "h", "type": "hardlink", "linkname": "../x"},
    {"name": "h", "type": "hardlink", "linkname": "not-in-archive"},
], ids=["absolute", "dotdot", "nested-dotdot", "device", "fifo", "abs-symlink", "up-symlink", "abs-hardlink",
        "up-hardlink", "dangling-hardlink"])
def test_safe_extract_refuses(tmp_path, member):
    dest = tmp_path / "t"
    with pytest.raises(sandloom.InvalidArchive):
        safe_extract(io.BytesIO(make_tar([{"name": "first.txt", "data": b"1"}, member])), str(dest))
    assert not (dest / "first.txt").exists(), "a refused archive wrote something"
    assert not (tmp_path / "up.txt").exists()


def test_safe_extract_never_writes_through_a_local_symlink(tmp_path):
    dest = tmp_path / "t"
    outside = tmp_path / "outside"
    outside.mkdir()
    dest.mkdir()
    os.symlink(str(outside), dest / "sub")            # planted before the download
    with pytest.raises(sandloom.InvalidArchive):
        safe_extract(io.BytesIO(make_tar([{"name": "sub/pwned", "data": b"x"}])), str(dest))
    assert os.listdir(outside) == []
    os.symlink(str(outside / "target"), dest / "file")
    with pytest.raises(sandloom.InvalidArchive):
        safe_extract(io.BytesIO(make_tar([{"name": "file", "data": b"x"}])), str(dest))
    assert not (outside / "target").exists()


def test_safe_extract_of_a_good_archive(tmp_path):
    dest, names = _extract(tmp_path, [
        {"name": "./", "type": "dir"},
        {"name": "./d/", "type": "dir", "mode": 0o750},
        {"name": "./d/f", "data": b"hello", "mode": 0o4755},
        {"name": "./d/hl", "type": "hardlink", "linkname": "./d/f"},
        {"name": "./d/sl", "type": "symlink", "linkname": "f"},
        {"name": "./top", "type": "symlink", "linkname": "d/../d/f"},
    ])
    assert set(names) == {"d", "d/f", "d/hl", "d/sl", "top"}
    assert (dest / "d/f").read_bytes() == b"hello" and (dest / "d/hl").read_bytes() == b"hello"
    assert os.stat(dest / "d/f").st_mode & 0o7777 == 0o755, "set-id bits must be dropped"
    assert os.stat(dest / "d").st_mode & 0o777 == 0o750
    assert (dest / "top").read_bytes() == b"hello" and os.readlink(dest / "d/sl") == "f"


def test_safe_extract_of_garbage(tmp_path):
    with pytest.raises(sandloom.InvalidArchive):
        safe_extract(io.BytesIO(b"this is not a tar archive" * 50), str(tmp_path / "g"))


def test_build_tar_contents(tmp_path):
    src = _local_tree(tmp_path)
    buf = io.BytesIO()
    assert build_tar(str(src), buf) == []
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tf:
        members = {m.name: m for m in tf.getmembers()}
    assert set(members) == {"pkg", "pkg/__init__.py", "pkg/sub", "pkg/sub/data.bin", "run.sh", "empty",
                            "link-to-data"}
    assert members["link-to-data"].issym() and members["link-to-data"].linkname == "pkg/sub/data.bin"
    assert members["run.sh"].mode == 0o755 and members["run.sh"].uid == 0 and members["run.sh"].uname == ""
    assert all(not m.name.startswith(("/", "..")) for m in members.values())
    assert stat.S_IMODE(members["pkg"].mode) == stat.S_IMODE(os.stat(src / "pkg").st_mode)
    assert abs(members["run.sh"].mtime - time.time()) < 3600
