# SPDX-License-Identifier: MIT
"""A FIFO, a socket or a device node planted in the workspace (as a process inside the sandbox
could) gets 400 from the files API, quickly, and never hangs or crashes the daemon."""

import os
import socket
import stat
import tempfile
import time

import pytest

from helpers import assert_error, assert_ok, sandbox_fs_dir

TIMEOUT = 10


def plant(daemon, sandbox, kind, name):
    ws = os.path.join(sandbox_fs_dir(daemon.data_dir, sandbox.uid), "workspace")
    path = os.path.join(ws, name)
    if kind == "fifo":
        os.mkfifo(path, 0o666)
    elif kind == "socket":
        # sun_path is short: bind in a short directory on the same filesystem, then move it in.
        short = tempfile.mkdtemp(dir=os.path.dirname(os.path.dirname(daemon.data_dir)))
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(os.path.join(short, "s"))
            s.close()
            os.rename(os.path.join(short, "s"), path)
        finally:
            os.rmdir(short)
    elif kind == "device":
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))   # like /dev/null
    os.lchown(path, sandbox.uid, sandbox.uid)
    return path


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_reading_special_file_gets_400_quickly(client, sandbox, daemon, kind):
    plant(daemon, sandbox, kind, "special")
    t0 = time.monotonic()
    assert_error(sandbox.files_get("special", timeout=TIMEOUT), 400, "SANDBOX_NOT_A_REGULAR_FILE")
    assert_error(sandbox.raw_get("special", timeout=TIMEOUT), 400, "SANDBOX_NOT_A_REGULAR_FILE")
    assert time.monotonic() - t0 < TIMEOUT
    assert client.health_ok()


def test_fifo_with_a_writer_waiting_still_gets_400(client, sandbox, daemon):
    """Even a FIFO that a reader open would complete (a writer holds it) is refused, not read."""
    path = plant(daemon, sandbox, "fifo", "busy-fifo")
    wfd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(wfd, b"secret-from-fifo")
        r = sandbox.files_get("busy-fifo", timeout=TIMEOUT)
        assert_error(r, 400, "SANDBOX_NOT_A_REGULAR_FILE")
        assert b"secret-from-fifo" not in r.body
    finally:
        os.close(wfd)


def test_special_file_is_listed_as_other(client, sandbox, daemon):
    plant(daemon, sandbox, "fifo", "pipe")
    d = assert_ok(sandbox.list("/workspace"))
    by = {e["name"]: e for e in d["entries"]}
    assert by["pipe"]["type"] == "other"
    assert assert_ok(sandbox.stat("pipe"))["type"] == "other"


def test_archive_download_with_fifo_inside_does_not_hang(client, sandbox, daemon):
    assert_ok(sandbox.mkdir("withfifo"))
    sandbox.write("withfifo/ok.txt", b"fine")
    ws = os.path.join(sandbox_fs_dir(daemon.data_dir, sandbox.uid), "workspace")
    os.mkfifo(os.path.join(ws, "withfifo", "pipe"))
    r = sandbox.archive_get("withfifo", timeout=TIMEOUT)
    assert r.status in (200, 400), r


def test_write_over_a_fifo_does_not_hang(client, sandbox, daemon):
    plant(daemon, sandbox, "fifo", "wfifo")
    r = sandbox.files_put("wfifo", b"data", timeout=TIMEOUT)
    assert r.status in (200, 400), r
    r = sandbox.raw_put("wfifo", b"data", timeout=TIMEOUT)
    assert r.status in (200, 400), r


def test_delete_and_move_of_a_fifo_work(client, sandbox, daemon):
    plant(daemon, sandbox, "fifo", "mfifo")
    assert_ok(sandbox.move("mfifo", "mfifo2"))
    assert_ok(sandbox.delete("mfifo2"))
    assert_error(sandbox.stat("mfifo2"), 404, "SANDBOX_FILE_NOT_FOUND")
