# SPDX-License-Identifier: MIT
"""Every files-API route and its error codes, and what the files look like on the host."""

import base64
import os
import stat
import time
from datetime import datetime

import pytest

from helpers import (API, assert_error, assert_ok, normalized, read_tar, make_tar, sandbox_fs_dir, snapshot, tree)

DAEMON_ENV = {"SANDBOX_MAX_FILE_API_BYTES": "65536", "SANDBOX_MAX_LIST_LIMIT": "10000"}
MAX_FILE = 65536


def host(daemon, sandbox, path):
    fs = sandbox_fs_dir(daemon.data_dir, sandbox.uid)
    assert fs, "sandbox fs dir not found"
    return os.path.join(fs, normalized(path).lstrip("/"))


# --- write / read ---

def test_write_then_read_round_trips_bytes(sandbox):
    data = bytes(range(256)) * 10
    r = sandbox.files_put("bin.dat", data)
    d = assert_ok(r)
    assert d["status"] == "ok"
    assert d["path"] in ("bin.dat", "/workspace/bin.dat")
    assert sandbox.read("bin.dat") == data
    assert sandbox.read("/workspace/bin.dat") == data


def test_read_answers_path_and_base64(sandbox):
    sandbox.write("/workspace/x.txt", b"hello")
    d = assert_ok(sandbox.files_get("/workspace/x.txt"))
    assert d["path"] in ("/workspace/x.txt",)
    assert base64.b64decode(d["content_base64"]) == b"hello"


def test_written_file_is_owned_by_sandbox_uid_mode_0644(sandbox, daemon):
    sandbox.write("owned.txt", b"x")
    st = os.lstat(host(daemon, sandbox, "owned.txt"))
    assert (st.st_uid, st.st_gid) == (sandbox.uid, sandbox.uid)
    assert stat.S_IMODE(st.st_mode) == 0o644


def test_overwrite_replaces_content_and_keeps_mode(sandbox, daemon):
    sandbox.write("m.sh", b"one")
    os.chmod(host(daemon, sandbox, "m.sh"), 0o755)
    sandbox.write("m.sh", b"two")
    assert sandbox.read("m.sh") == b"two"
    assert stat.S_IMODE(os.lstat(host(daemon, sandbox, "m.sh")).st_mode) == 0o755


def test_empty_file_round_trips(sandbox):
    sandbox.write("empty", b"")
    assert sandbox.read("empty") == b""


@pytest.mark.parametrize("root", ["/home/sandbox", "/cache", "/envs"])
def test_every_root_is_writable_and_owned_by_uid(sandbox, daemon, root):
    sandbox.write(f"{root}/f.txt", b"in " + root.encode())
    assert sandbox.read(f"{root}/f.txt") == b"in " + root.encode()
    st = os.lstat(host(daemon, sandbox, f"{root}/f.txt"))
    assert st.st_uid == sandbox.uid


def test_read_missing_file_gets_404(sandbox):
    assert_error(sandbox.files_get("missing.txt"), 404, "SANDBOX_FILE_NOT_FOUND")
    assert_error(sandbox.raw_get("missing.txt"), 404, "SANDBOX_FILE_NOT_FOUND")


def test_read_directory_gets_400_not_a_regular_file(sandbox):
    assert_ok(sandbox.mkdir("adir"))
    assert_error(sandbox.files_get("adir"), 400, "SANDBOX_NOT_A_REGULAR_FILE")
    assert_error(sandbox.raw_get("adir"), 400, "SANDBOX_NOT_A_REGULAR_FILE")


def test_write_into_missing_directory_is_refused_or_creates_it(sandbox):
    r = sandbox.files_put("no/such/dir/f.txt", b"x")
    if r.status == 200:
        assert sandbox.read("no/such/dir/f.txt") == b"x"
    else:
        assert_error(r, 404, "SANDBOX_FILE_NOT_FOUND")


def test_write_over_a_directory_is_refused(sandbox):
    assert_ok(sandbox.mkdir("dir-not-file"))
    sandbox.write("dir-not-file/keep", b"k")
    r = sandbox.files_put("dir-not-file", b"x")
    assert r.status in (400, 409), r
    assert sandbox.read("dir-not-file/keep") == b"k"


def test_file_content_over_max_file_api_bytes_gets_413(sandbox):
    r = sandbox.files_put("big.bin", b"a" * (MAX_FILE + 1))
    assert_error(r, 413, "SANDBOX_FILE_TOO_LARGE")
    assert_error(sandbox.files_get("big.bin"), 404, "SANDBOX_FILE_NOT_FOUND")


def test_reading_file_over_max_file_api_bytes_as_json_gets_413_but_raw_works(sandbox):
    data = os.urandom(MAX_FILE * 2)
    assert_ok(sandbox.raw_put("bigger.bin", data))
    assert_error(sandbox.files_get("bigger.bin"), 413, "SANDBOX_FILE_TOO_LARGE")
    r = sandbox.raw_get("bigger.bin")
    assert r.status == 200 and r.body == data


def test_bad_base64_gets_422(sandbox):
    for bad in ("!!!not base64!!!", "abc", "ab=c", "YQ==YQ==", "\u00e9\u00e9\u00e9\u00e9"):
        r = sandbox.client.put(f"{sandbox.base}/files", {"generation": sandbox.generation, "path": "b64.txt",
                                                         "content_base64": bad})
        assert_error(r, 422, "SANDBOX_INVALID_REQUEST")
    assert_error(sandbox.files_get("b64.txt"), 404, "SANDBOX_FILE_NOT_FOUND")


@pytest.mark.parametrize("body", [
    {"path": "a.txt", "content_base64": ""},
    {"generation": 1, "content_base64": ""},
    {"generation": 1, "path": "a.txt"},
    {"generation": "1", "path": "a.txt", "content_base64": ""},
    {"generation": 1, "path": 5, "content_base64": ""},
    {"generation": 1, "path": "a.txt", "content_base64": 5},
], ids=["no-generation", "no-path", "no-content", "string-generation", "int-path", "int-content"])
def test_put_with_missing_or_mistyped_fields_gets_422(sandbox, body):
    if body.get("generation") == 1:
        body["generation"] = sandbox.generation
    assert_error(sandbox.client.put(f"{sandbox.base}/files", body), 422, "SANDBOX_INVALID_REQUEST")


def test_get_without_path_or_generation_gets_422(sandbox):
    c = sandbox.client
    for route in ("files", "files/raw", "files/list", "files/stat", "files/archive"):
        r = c.get(f"{sandbox.base}/{route}", {"generation": sandbox.generation})
        if route in ("files/list", "files/archive") and r.status == 200:
            pass        # a directory call may default to /workspace
        else:
            assert_error(r, 422, "SANDBOX_INVALID_REQUEST")
        assert_error(c.get(f"{sandbox.base}/{route}", {"path": "x"}), 422, "SANDBOX_INVALID_REQUEST")
        assert_error(c.get(f"{sandbox.base}/{route}", {"path": "x", "generation": "abc"}), 422,
                     "SANDBOX_INVALID_REQUEST")


# --- paths ---

OUTSIDE = ["/etc/passwd", "/workspace/../etc/passwd", "/", "/tmp/x", "../x", "../../etc/passwd",
           "/workspacefoo/x", "/home", "/home/other", "/home/sandbox/../other", "/proc/self/environ",
           "/cache/../../etc/shadow", "/envs/../workspace/../../x"]


@pytest.mark.parametrize("path", OUTSIDE)
def test_path_outside_the_roots_gets_400(sandbox, path):
    assert_error(sandbox.files_get(path), 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE")
    assert_error(sandbox.files_put(path, b"x"), 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE")
    assert_error(sandbox.raw_put(path, b"x"), 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE")
    assert_error(sandbox.mkdir(path, parents=True), 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE")


def test_outside_path_in_list_stat_delete_move_archive_gets_400(sandbox):
    sandbox.write("inside.txt", b"x")
    for r in (sandbox.list("/etc"), sandbox.stat("/etc/passwd"), sandbox.delete("/etc/hostname"),
              sandbox.move("inside.txt", "/tmp/stolen"), sandbox.move("/etc/passwd", "pw"),
              sandbox.archive_get("/etc"), sandbox.archive_put("/tmp", make_tar([{"name": "a", "data": b"a"}]))):
        assert_error(r, 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE")
    assert sandbox.read("inside.txt") == b"x"


def test_dot_segments_inside_the_workspace_are_normalised(sandbox):
    assert_ok(sandbox.mkdir("n1"))
    sandbox.write("n1/./../n1//f.txt", b"norm")
    assert sandbox.read("/workspace/n1/f.txt") == b"norm"


def test_path_with_nul_gets_422(sandbox):
    assert_error(sandbox.files_put("a\u0000b", b"x"), 422, "SANDBOX_INVALID_REQUEST")
    assert_error(sandbox.files_get("a\u0000b"), 422, "SANDBOX_INVALID_REQUEST")
    assert_error(sandbox.mkdir("d\u0000"), 422, "SANDBOX_INVALID_REQUEST")
    assert_error(sandbox.list("\u0000"), 422, "SANDBOX_INVALID_REQUEST")
    assert_error(sandbox.raw_put("r\u0000", b"x"), 422, "SANDBOX_INVALID_REQUEST")


def test_over_long_path_gets_422(sandbox):
    long_path = "/workspace/" + "a" * 5000
    assert_error(sandbox.files_put(long_path, b"x"), 422, "SANDBOX_INVALID_REQUEST")
    assert_error(sandbox.files_get(long_path), 422, "SANDBOX_INVALID_REQUEST")
    many = "/workspace/" + "/".join(["d"] * 2500)
    assert_error(sandbox.files_get(many), 422, "SANDBOX_INVALID_REQUEST")
    assert_error(sandbox.mkdir(many, parents=True), 422, "SANDBOX_INVALID_REQUEST")


def test_over_long_component_is_refused(sandbox):
    r = sandbox.files_put("c" * 300, b"x")
    assert r.status in (400, 422), r


def test_symlink_is_resolved_inside_the_sandbox_root(sandbox, daemon):
    """A symlink means to the API what it means inside the sandbox."""
    assert_ok(sandbox.mkdir("real"))
    sandbox.write("real/f.txt", b"through link")
    ws = host(daemon, sandbox, "/workspace")
    os.symlink("/workspace/real", os.path.join(ws, "abs-link"))
    os.symlink("real", os.path.join(ws, "rel-link"))
    os.symlink("/cache", os.path.join(ws, "to-cache"))
    assert sandbox.read("abs-link/f.txt") == b"through link"
    assert sandbox.read("rel-link/f.txt") == b"through link"
    sandbox.write("/cache/c.txt", b"cache")
    assert sandbox.read("to-cache/c.txt") == b"cache"


def test_symlink_to_host_path_never_reaches_the_host(sandbox, daemon):
    ws = host(daemon, sandbox, "/workspace")
    os.symlink("/etc", os.path.join(ws, "etc-link"))
    os.symlink("../../../../../../../../../../etc/passwd", os.path.join(ws, "dotdot-link"))
    for path in ("etc-link/passwd", "dotdot-link"):
        r = sandbox.files_get(path)
        assert r.status in (400, 404), r
        assert b"root:" not in r.body and b"cm9vd" not in r.body
        assert error_code_in(r, {"SANDBOX_FILE_NOT_FOUND", "SANDBOX_PATH_OUTSIDE_WORKSPACE"})
        r = sandbox.raw_get(path)
        assert r.status in (400, 404) and b"root:" not in r.body, r
    # Listing through the link never shows the host's /etc.
    r = sandbox.list("etc-link")
    assert r.status in (400, 404), r
    assert b"passwd" not in r.body


def error_code_in(resp, codes):
    import json
    try:
        return json.loads(resp.body)["detail"]["code"] in codes
    except (ValueError, KeyError, TypeError):
        return False


def test_write_through_symlink_to_host_stays_inside(sandbox, daemon, decoy):
    decoy_path, marker = decoy
    before = snapshot(decoy_path)
    ws = host(daemon, sandbox, "/workspace")
    os.symlink(decoy_path, os.path.join(ws, "out-link"))
    for r in (sandbox.files_put("out-link/planted.txt", b"x"), sandbox.files_put("out-link/file.txt", b"x"),
              sandbox.raw_put("out-link/raw.txt", b"x"), sandbox.mkdir("out-link/newdir"),
              sandbox.delete("out-link/sub", recursive=True), sandbox.move("out-link/file.txt", "stolen.txt")):
        assert r.status in (200, 400, 404), r
        assert marker.encode() not in r.body
    assert snapshot(decoy_path) == before, "a call followed a symlink out of the sandbox"
    assert_error(sandbox.files_get("stolen.txt"), 404, "SANDBOX_FILE_NOT_FOUND")


# --- list / stat ---

def test_list_is_sorted_and_describes_each_entry(sandbox):
    assert_ok(sandbox.mkdir("ls"))
    for name in ("b.txt", "a.txt", "C.txt", "z"):
        sandbox.write(f"ls/{name}", name.encode() * 3)
    assert_ok(sandbox.mkdir("ls/dir"))
    d = assert_ok(sandbox.list("ls"))
    assert d["path"] == "/workspace/ls"
    names = [e["name"] for e in d["entries"]]
    assert names == sorted(names) == sorted(["a.txt", "b.txt", "C.txt", "z", "dir"])
    assert d["total"] == 5 and d["has_more"] is False
    by = {e["name"]: e for e in d["entries"]}
    a = by["a.txt"]
    assert a["path"] == "/workspace/ls/a.txt"
    assert a["type"] == "file" and a["size_bytes"] == 15 and a["mode"] == "0644"
    datetime.fromisoformat(a["modified_at"].replace("Z", "+00:00"))
    assert by["dir"]["type"] == "directory"


def test_list_pages_with_limit_and_offset(sandbox):
    assert_ok(sandbox.mkdir("pg"))
    for i in range(7):
        sandbox.write(f"pg/f{i}", b"x")
    got = []
    for offset in range(0, 7, 3):
        d = assert_ok(sandbox.list("pg", limit=3, offset=offset))
        assert d["total"] == 7
        assert d["has_more"] == (offset + 3 < 7)
        got += [e["name"] for e in d["entries"]]
    assert got == [f"f{i}" for i in range(7)]
    d = assert_ok(sandbox.list("pg", limit=3, offset=100))
    assert d["entries"] == [] and d["has_more"] is False


def test_list_reports_symlinks_without_following(sandbox, daemon):
    assert_ok(sandbox.mkdir("sl"))
    os.symlink("/etc", os.path.join(host(daemon, sandbox, "sl"), "link"))
    d = assert_ok(sandbox.list("sl"))
    assert [(e["name"], e["type"]) for e in d["entries"]] == [("link", "symlink")]
    st = assert_ok(sandbox.stat("sl/link"))
    assert st["type"] == "symlink"


@pytest.mark.parametrize("q", [{"limit": "0"}, {"limit": "10001"}, {"limit": "x"}, {"offset": "-1"}])
def test_list_with_bad_limit_gets_422(sandbox, q):
    assert_error(sandbox.list("/workspace", **q), 422, "SANDBOX_INVALID_REQUEST")


def test_list_of_a_file_gets_400_not_a_directory(sandbox):
    sandbox.write("plain.txt", b"x")
    assert_error(sandbox.list("plain.txt"), 400, "SANDBOX_NOT_A_DIRECTORY")


def test_list_of_missing_directory_gets_404(sandbox):
    assert_error(sandbox.list("nowhere"), 404, "SANDBOX_FILE_NOT_FOUND")


def test_list_of_each_root_works(sandbox):
    for root in ("/workspace", "/home/sandbox", "/cache", "/envs"):
        d = assert_ok(sandbox.list(root))
        assert d["path"] == root


def test_stat_describes_file_and_directory(sandbox):
    sandbox.write("st.txt", b"12345")
    d = assert_ok(sandbox.stat("st.txt"))
    assert d["name"] == "st.txt" and d["path"] == "/workspace/st.txt"
    assert d["type"] == "file" and d["size_bytes"] == 5 and d["mode"] == "0644"
    d = assert_ok(sandbox.stat("/workspace"))
    assert d["type"] == "directory"
    assert_error(sandbox.stat("nope"), 404, "SANDBOX_FILE_NOT_FOUND")


# --- mkdir ---

def test_mkdir_creates_directory_owned_by_uid(sandbox, daemon):
    assert_ok(sandbox.mkdir("newdir"))
    st = os.lstat(host(daemon, sandbox, "newdir"))
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == sandbox.uid
    assert assert_ok(sandbox.stat("newdir"))["type"] == "directory"


def test_mkdir_without_parents_needs_the_parent(sandbox):
    assert_error(sandbox.mkdir("p1/p2/p3"), 404, "SANDBOX_FILE_NOT_FOUND")
    assert_ok(sandbox.mkdir("p1/p2/p3", parents=True))
    assert assert_ok(sandbox.stat("p1/p2/p3"))["type"] == "directory"


def test_mkdir_existing_gets_409_unless_parents(sandbox):
    assert_ok(sandbox.mkdir("exists"))
    assert_error(sandbox.mkdir("exists"), 409, "SANDBOX_FILE_EXISTS")
    assert_ok(sandbox.mkdir("exists", parents=True))


def test_mkdir_over_a_file_is_refused(sandbox):
    sandbox.write("isfile", b"x")
    assert_error(sandbox.mkdir("isfile"), 409, "SANDBOX_FILE_EXISTS")
    r = sandbox.mkdir("isfile/sub", parents=True)
    assert r.status in (400, 409), r
    assert sandbox.read("isfile") == b"x"


def test_mkdir_of_a_root_is_harmless(sandbox):
    r = sandbox.mkdir("/workspace", parents=True)
    assert r.status in (200, 400, 409), r


# --- delete ---

def test_delete_file(sandbox):
    sandbox.write("del.txt", b"x")
    assert_ok(sandbox.delete("del.txt"))
    assert_error(sandbox.files_get("del.txt"), 404, "SANDBOX_FILE_NOT_FOUND")


def test_delete_missing_gets_404(sandbox):
    assert_error(sandbox.delete("never-was"), 404, "SANDBOX_FILE_NOT_FOUND")


def test_delete_nonempty_directory_needs_recursive(sandbox):
    assert_ok(sandbox.mkdir("tree/a/b", parents=True))
    sandbox.write("tree/a/b/f", b"x")
    sandbox.write("tree/top", b"y")
    assert_error(sandbox.delete("tree"), 409, "SANDBOX_DIRECTORY_NOT_EMPTY")
    assert sandbox.read("tree/a/b/f") == b"x"
    assert_ok(sandbox.delete("tree", recursive=True))
    assert_error(sandbox.stat("tree"), 404, "SANDBOX_FILE_NOT_FOUND")


def test_delete_empty_directory_without_recursive(sandbox):
    assert_ok(sandbox.mkdir("emptydir"))
    assert_ok(sandbox.delete("emptydir"))
    assert_error(sandbox.stat("emptydir"), 404, "SANDBOX_FILE_NOT_FOUND")


@pytest.mark.parametrize("root", ["/workspace", "/home/sandbox", "/cache", "/envs", "", ".", "/workspace/"])
def test_delete_of_a_root_gets_400_path_is_root(sandbox, root):
    sandbox.write("/workspace/survivor", b"alive")
    r = sandbox.delete(root, recursive=True)
    if root == "":
        assert r.status in (400, 422), r
    else:
        assert_error(r, 400, "SANDBOX_PATH_IS_ROOT")
    assert sandbox.read("/workspace/survivor") == b"alive"


def test_recursive_delete_removes_symlink_not_its_target(sandbox, daemon):
    assert_ok(sandbox.mkdir("keep"))
    sandbox.write("keep/precious", b"p")
    ws = host(daemon, sandbox, "/workspace")
    os.symlink("/workspace/keep", os.path.join(ws, "lnk"))
    assert_ok(sandbox.mkdir("holder"))
    os.symlink("/workspace/keep", os.path.join(ws, "holder", "inner-link"))
    assert_ok(sandbox.delete("lnk", recursive=True))
    assert_ok(sandbox.delete("holder", recursive=True))
    assert sandbox.read("keep/precious") == b"p"
    assert not os.path.lexists(os.path.join(ws, "lnk"))


def test_recursive_delete_of_large_tree(sandbox, daemon):
    base = host(daemon, sandbox, "big-tree")
    os.makedirs(base)
    for i in range(40):
        d = os.path.join(base, f"d{i}", "x", "y")
        os.makedirs(d)
        for j in range(10):
            with open(os.path.join(d, f"f{j}"), "w") as f:
                f.write("z")
    for dirpath, dirnames, filenames in os.walk(base):
        for n in dirnames + filenames:
            os.lchown(os.path.join(dirpath, n), sandbox.uid, sandbox.uid)
    os.lchown(base, sandbox.uid, sandbox.uid)
    assert_ok(sandbox.delete("big-tree", recursive=True))
    assert not os.path.exists(base)


# --- move ---

def test_move_renames_a_file(sandbox):
    sandbox.write("mv-src", b"m")
    assert_ok(sandbox.move("mv-src", "mv-dst"))
    assert sandbox.read("mv-dst") == b"m"
    assert_error(sandbox.files_get("mv-src"), 404, "SANDBOX_FILE_NOT_FOUND")


def test_move_onto_existing_needs_overwrite(sandbox):
    sandbox.write("mv-a", b"a")
    sandbox.write("mv-b", b"b")
    assert_error(sandbox.move("mv-a", "mv-b"), 409, "SANDBOX_FILE_EXISTS")
    assert sandbox.read("mv-b") == b"b"
    assert_ok(sandbox.move("mv-a", "mv-b", overwrite=True))
    assert sandbox.read("mv-b") == b"a"


def test_move_directory_and_across_roots(sandbox):
    assert_ok(sandbox.mkdir("mvdir"))
    sandbox.write("mvdir/f", b"f")
    assert_ok(sandbox.move("mvdir", "/cache/mvdir"))
    assert sandbox.read("/cache/mvdir/f") == b"f"


def test_move_missing_source_gets_404(sandbox):
    assert_error(sandbox.move("no-src", "dst"), 404, "SANDBOX_FILE_NOT_FOUND")


def test_move_of_or_onto_a_root_gets_400(sandbox):
    sandbox.write("r.txt", b"r")
    assert_error(sandbox.move("/workspace", "/cache/ws"), 400, "SANDBOX_PATH_IS_ROOT")
    r = sandbox.move("r.txt", "/cache", overwrite=True)
    assert r.status in (400, 409), r
    assert sandbox.read("r.txt") == b"r"


def test_move_with_missing_fields_gets_422(sandbox):
    assert_error(sandbox.client.post(f"{sandbox.base}/files/move", {"generation": sandbox.generation,
                                                                    "source": "a"}), 422, "SANDBOX_INVALID_REQUEST")
    assert_error(sandbox.client.post(f"{sandbox.base}/files/move", {"generation": sandbox.generation,
                                     "source": "a", "destination": "b", "overwrite": "yes"}), 422,
                 "SANDBOX_INVALID_REQUEST")


# --- raw ---

def test_raw_put_answers_size_and_get_streams_bytes(sandbox, daemon):
    data = os.urandom(200000)
    d = assert_ok(sandbox.raw_put("raw.bin", data))
    assert d["status"] == "ok" and d["size_bytes"] == len(data)
    assert d["path"] in ("raw.bin", "/workspace/raw.bin")
    r = sandbox.raw_get("raw.bin")
    assert r.status == 200 and r.body == data
    assert int(r.headers["content-length"]) == len(data)
    assert os.lstat(host(daemon, sandbox, "raw.bin")).st_uid == sandbox.uid


def test_raw_put_empty_body_makes_empty_file(sandbox):
    assert_ok(sandbox.raw_put("raw-empty", b""))
    assert sandbox.raw_get("raw-empty").body == b""


def test_raw_put_chunked_body_works(sandbox):
    chunks = [os.urandom(10000) for _ in range(5)]
    conn = sandbox.client.connection()
    try:
        from helpers import build_url
        conn.putrequest("PUT", build_url(f"{sandbox.base}/files/raw", {"path": "chunked.bin",
                                                                         "generation": sandbox.generation}))
        conn.putheader("Authorization", f"Bearer {sandbox.client.token}")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        for c in chunks:
            conn.send(b"%x\r\n%s\r\n" % (len(c), c))
        conn.send(b"0\r\n\r\n")
        r = conn.getresponse()
        body = r.read()
        assert r.status == 200, body
    finally:
        conn.close()
    assert sandbox.raw_get("chunked.bin").body == b"".join(chunks)


# --- archive ---

def test_archive_download_contains_the_tree(sandbox):
    assert_ok(sandbox.mkdir("arch/sub", parents=True))
    sandbox.write("arch/a.txt", b"A")
    sandbox.write("arch/sub/b.txt", b"B")
    r = sandbox.archive_get("arch")
    assert r.status == 200, r
    t = read_tar(r.body)
    names = {n.lstrip("./") for n in t}
    assert {"a.txt", "sub", "sub/b.txt"} <= names, names
    files = {n.lstrip("./"): v for n, v in t.items()}
    assert files["a.txt"] == b"A" and files["sub/b.txt"] == b"B"
    assert not any(n.startswith("/") or ".." in n.split("/") for n in t)


def test_archive_upload_extracts_owned_by_uid(sandbox, daemon):
    assert_ok(sandbox.mkdir("up"))
    tar = make_tar([{"name": "d", "type": "dir"}, {"name": "d/x.txt", "data": b"X"},
                    {"name": "y.txt", "data": b"Y", "mode": 0o600}, {"name": "lnk", "type": "symlink",
                                                                      "linkname": "y.txt"}])
    d = assert_ok(sandbox.archive_put("up", tar))
    assert d["status"] == "ok" and d["entries"] == 4
    assert sandbox.read("up/d/x.txt") == b"X"
    assert sandbox.read("up/lnk") == b"Y"
    for name in ("d", "d/x.txt", "y.txt", "lnk"):
        st = os.lstat(host(daemon, sandbox, f"up/{name}"))
        assert st.st_uid == sandbox.uid, name


def test_archive_round_trip(sandbox):
    assert_ok(sandbox.mkdir("rt/a/b", parents=True))
    sandbox.write("rt/a/b/deep.bin", os.urandom(3000))
    sandbox.write("rt/top", b"top")
    tar = sandbox.archive_get("rt").body
    assert_ok(sandbox.mkdir("rt2"))
    assert_ok(sandbox.archive_put("rt2", tar))
    assert sandbox.read("rt2/a/b/deep.bin") == sandbox.read("rt/a/b/deep.bin")
    assert sandbox.read("rt2/top") == b"top"


def test_archive_gzip_upload_works(sandbox):
    assert_ok(sandbox.mkdir("gz"))
    tar = make_tar([{"name": "g.txt", "data": b"gzipped"}], compression="gz")
    assert_ok(sandbox.archive_put("gz", tar))
    assert sandbox.read("gz/g.txt") == b"gzipped"


def test_archive_of_a_file_gets_400_not_a_directory(sandbox):
    sandbox.write("notdir", b"x")
    assert_error(sandbox.archive_get("notdir"), 400, "SANDBOX_NOT_A_DIRECTORY")


def test_archive_of_missing_directory_gets_404(sandbox):
    assert_error(sandbox.archive_get("nodir"), 404, "SANDBOX_FILE_NOT_FOUND")


def test_archive_download_does_not_follow_symlinks_out(sandbox, daemon):
    assert_ok(sandbox.mkdir("arl"))
    os.symlink("/etc", os.path.join(host(daemon, sandbox, "arl"), "etc"))
    r = sandbox.archive_get("arl")
    assert r.status == 200, r
    t = read_tar(r.body)
    assert t.get("etc", t.get("./etc")) == ("LINK", "/etc")
    assert b"root:x:0:0" not in r.body
