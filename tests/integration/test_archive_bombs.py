# SPDX-License-Identifier: MIT
"""Hostile archive uploads: too many entries, a member bigger than the byte limit, ../ and
absolute names, links pointing out (and files written through them), hardlinks to host files,
device nodes. Each is refused with its code, nothing half-written stays in the workspace, nothing
outside changes, and the daemon stays healthy. Targets outside are only ever the test's decoy
directory (plus a read-only look at /etc/passwd's metadata)."""

import os

import pytest

from helpers import (Response, assert_error, assert_ok, build_url, error_code, make_tar, many_entries_tar_gz, sandbox_fs_dir, snapshot, tree)

MAX_ENTRIES = 100
MAX_UPLOAD = 8 * 1024 * 1024
DAEMON_ENV = {"SANDBOX_MAX_ARCHIVE_ENTRIES": str(MAX_ENTRIES), "SANDBOX_MAX_UPLOAD_BYTES": str(MAX_UPLOAD)}


@pytest.fixture
def target(client, daemon, sandbox):
    """An existing directory /workspace/target with one file; checks afterwards that the whole
    sandbox tree is exactly as before and the daemon is healthy."""
    assert_ok(sandbox.mkdir("target"))
    sandbox.write("target/existing.txt", b"existing")
    fs = sandbox_fs_dir(daemon.data_dir, sandbox.uid)
    before = tree(fs)
    yield sandbox
    assert client.health_ok()
    after = tree(fs)
    assert after == before, f"half-written leftovers: {sorted(set(after) ^ set(before))}"
    assert sandbox.read("target/existing.txt") == b"existing"


def test_too_many_entries_gets_413(target):
    assert_error(target.archive_put("target", many_entries_tar_gz(100000)), 413, "SANDBOX_ARCHIVE_TOO_LARGE")


def test_entries_over_the_limit_by_one_gets_413_and_nothing_stays(target):
    assert_error(target.archive_put("target", many_entries_tar_gz(MAX_ENTRIES + 1)), 413,
                 "SANDBOX_ARCHIVE_TOO_LARGE")


def test_entries_at_the_limit_are_accepted(client, sandbox):
    """Positive control for the entry limit."""
    assert_ok(sandbox.mkdir("at-limit"))
    d = assert_ok(sandbox.archive_put("at-limit", many_entries_tar_gz(MAX_ENTRIES)))
    assert d["entries"] == MAX_ENTRIES
    assert assert_ok(sandbox.list("at-limit", limit=1000))["total"] == MAX_ENTRIES


def test_member_bigger_than_the_byte_limit_gets_413(target):
    bomb = make_tar([{"name": "small.txt", "data": b"s"}, {"name": "zeros", "size": 64 * 1024 * 1024}],
                    compression="gz")
    assert len(bomb) < MAX_UPLOAD
    assert_error(target.archive_put("target", bomb), 413, "SANDBOX_ARCHIVE_TOO_LARGE")


def test_many_members_together_over_the_byte_limit_get_413(target):
    bomb = make_tar([{"name": f"z{i}", "size": 4 * 1024 * 1024} for i in range(16)], compression="gz")
    assert_error(target.archive_put("target", bomb), 413, "SANDBOX_ARCHIVE_TOO_LARGE")


@pytest.mark.parametrize("name", ["../escape.txt", "a/../../escape.txt", "..", "sub/../../../../escape.txt",
                                  "./../escape.txt"])
def test_dotdot_member_gets_400_invalid_archive(target, daemon, name):
    tar = make_tar([{"name": "ok-before.txt", "data": b"ok"}, {"name": name, "data": b"evil"}])
    assert_error(target.archive_put("target", tar), 400, "SANDBOX_INVALID_ARCHIVE")


def test_absolute_member_gets_400_invalid_archive(target, decoy):
    decoy_path, _ = decoy
    before = snapshot(decoy_path)
    for name in (f"{decoy_path}/abs.txt", "/workspace/abs.txt", "/abs.txt"):
        tar = make_tar([{"name": "ok-before.txt", "data": b"ok"}, {"name": name, "data": b"evil"}])
        assert_error(target.archive_put("target", tar), 400, "SANDBOX_INVALID_ARCHIVE")
    assert snapshot(decoy_path) == before


@pytest.mark.parametrize("kind", ["absolute", "relative", "sandbox-absolute-out"])
def test_symlink_out_then_file_through_it_gets_400(target, decoy, kind):
    decoy_path, marker = decoy
    before = snapshot(decoy_path)
    linkname = {"absolute": decoy_path, "relative": "../" * 40 + decoy_path.lstrip("/"),
                "sandbox-absolute-out": "/etc"}[kind]
    tar = make_tar([{"name": "ok-before.txt", "data": b"ok"},
                    {"name": "link", "type": "symlink", "linkname": linkname},
                    {"name": "link/file.txt", "data": b"written through the link"},
                    {"name": "link/new-file.txt", "data": b"new through the link"}])
    assert_error(target.archive_put("target", tar), 400, "SANDBOX_INVALID_ARCHIVE")
    assert snapshot(decoy_path) == before


def test_symlink_pointing_out_alone_gets_400(target):
    tar = make_tar([{"name": "escape", "type": "symlink", "linkname": "../../../../../../etc/passwd"}])
    assert_error(target.archive_put("target", tar), 400, "SANDBOX_INVALID_ARCHIVE")


def test_symlink_pointing_inside_is_accepted(client, sandbox):
    """Positive control: links that stay inside the target are fine."""
    assert_ok(sandbox.mkdir("links-ok"))
    tar = make_tar([{"name": "d", "type": "dir"}, {"name": "d/f.txt", "data": b"inside"},
                    {"name": "rel", "type": "symlink", "linkname": "d/f.txt"},
                    {"name": "d/up", "type": "symlink", "linkname": "../d/f.txt"}])
    assert_ok(sandbox.archive_put("links-ok", tar))
    assert sandbox.read("links-ok/rel") == b"inside"
    assert sandbox.read("links-ok/d/up") == b"inside"


def test_hardlink_to_etc_passwd_gets_400(target):
    """A lone hardlink member carries no data, so even a broken extractor cannot change the file's
    content; should it change owner or mode (an extractor that chowns what it made), they are put
    back at once and the test fails."""
    st = os.stat("/etc/passwd")
    try:
        tar = make_tar([{"name": "pw", "type": "hardlink", "linkname": "/etc/passwd"}])
        r1 = target.archive_put("target", tar)
        tar = make_tar([{"name": "pw", "type": "hardlink", "linkname": "../../../../../../../../etc/passwd"}])
        r2 = target.archive_put("target", tar)
    finally:
        after = os.stat("/etc/passwd")
        if (after.st_uid, after.st_gid, after.st_mode) != (st.st_uid, st.st_gid, st.st_mode):
            os.chown("/etc/passwd", st.st_uid, st.st_gid)
            os.chmod("/etc/passwd", st.st_mode & 0o7777)
    assert (after.st_uid, after.st_gid, after.st_mode, after.st_size, after.st_mtime_ns) == \
        (st.st_uid, st.st_gid, st.st_mode, st.st_size, st.st_mtime_ns), "/etc/passwd metadata changed"
    assert after.st_nlink == st.st_nlink, "a hardlink to /etc/passwd was left behind"
    assert_error(r1, 400, "SANDBOX_INVALID_ARCHIVE")
    assert_error(r2, 400, "SANDBOX_INVALID_ARCHIVE")


def test_hardlink_to_decoy_then_write_gets_400_and_decoy_unchanged(target, decoy):
    decoy_path, _ = decoy
    before = snapshot(decoy_path)
    tar = make_tar([{"name": "hl", "type": "hardlink", "linkname": os.path.join(decoy_path, "file.txt")},
                    {"name": "hl", "data": b"overwrite the decoy"}])
    assert_error(target.archive_put("target", tar), 400, "SANDBOX_INVALID_ARCHIVE")
    assert snapshot(decoy_path) == before


def test_hardlink_to_earlier_member_is_accepted_or_refused_cleanly(client, sandbox):
    assert_ok(sandbox.mkdir("hl-ok"))
    tar = make_tar([{"name": "a.txt", "data": b"shared"}, {"name": "b.txt", "type": "hardlink",
                                                            "linkname": "a.txt"}])
    r = sandbox.archive_put("hl-ok", tar)
    if r.status == 200:
        assert sandbox.read("hl-ok/b.txt") == b"shared"
    else:
        assert_error(r, 400, "SANDBOX_INVALID_ARCHIVE")


@pytest.mark.parametrize("member", [{"name": "null", "type": "chr", "dev": (1, 3)},
                                    {"name": "zero", "type": "chr", "dev": (1, 5)},
                                    {"name": "fifo", "type": "fifo"}], ids=["dev-null", "dev-zero", "fifo"])
def test_device_and_fifo_members_get_400(target, member):
    tar = make_tar([{"name": "ok-before.txt", "data": b"ok"}, member])
    assert_error(target.archive_put("target", tar), 400, "SANDBOX_INVALID_ARCHIVE")


@pytest.mark.parametrize("data", [b"this is not a tar archive at all" * 40, b"\x1f\x8b\x08garbage-gzip",
                                  make_tar([{"name": "cut.txt", "data": b"c" * 5000}])[:1500]],
                         ids=["text", "bad-gzip", "truncated"])
def test_garbage_archive_gets_400(target, data):
    assert_error(target.archive_put("target", data), 400, "SANDBOX_INVALID_ARCHIVE")


def test_failure_late_in_archive_removes_what_was_extracted(target):
    """Good members first, a bad one last: the good ones must not stay."""
    tar = make_tar([{"name": "good-dir", "type": "dir"}, {"name": "good-dir/g.txt", "data": b"g" * 1000},
                    {"name": "good.txt", "data": b"good"}, {"name": "../late-escape.txt", "data": b"x"}])
    assert_error(target.archive_put("target", tar), 400, "SANDBOX_INVALID_ARCHIVE")


def test_archive_upload_over_max_upload_bytes_gets_413(target):
    """Declared too large: answered from the headers, before any body byte is sent."""
    conn = target.client.connection(timeout=15)
    try:
        conn.putrequest("PUT", build_url(f"{target.base}/files/archive", {"path": "target",
                                                                          "generation": target.generation}))
        conn.putheader("Authorization", f"Bearer {target.client.token}")
        conn.putheader("Content-Length", str(MAX_UPLOAD + 1))
        conn.endheaders()
        r = conn.getresponse()
        body = r.read()
    finally:
        conn.close()
    assert r.status == 413, body
    assert error_code(Response(r.status, {}, body)) in ("SANDBOX_REQUEST_TOO_LARGE", "SANDBOX_ARCHIVE_TOO_LARGE")


def test_archive_member_overwriting_a_directory_is_refused_cleanly(client, sandbox):
    assert_ok(sandbox.mkdir("ow/d", parents=True))
    sandbox.write("ow/d/inner.txt", b"inner")
    tar = make_tar([{"name": "d", "data": b"file replacing a directory"}])
    r = sandbox.archive_put("ow", tar)
    assert r.status in (200, 400, 409), r
    if r.status != 200:
        assert sandbox.read("ow/d/inner.txt") == b"inner"
