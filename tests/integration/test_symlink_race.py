# SPDX-License-Identifier: MIT
"""The symlink-swap race over HTTP. A decoy directory full of canary files lives OUTSIDE the data
directory (a fresh mkdtemp under /tmp, world-writable so that a resolver that follows the link would
really reach it even under the sandbox's fsuid). A separate process keeps swapping the workspace
directory `victim` with symlinks to the decoy (absolute host path, and a relative ../.. path) while
the API reads, writes, lists, moves, deletes recursively and downloads archives through
/workspace/victim/... No canary may ever be read, changed or deleted, and nothing may appear in
the decoy. The decoy is never a system path: a broken build can only hit this temp directory."""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from helpers import Sandbox, assert_ok, make_tar, sandbox_fs_dir, snapshot, wait_until

ROUNDS = 150
# Names that exist in the decoy: an extraction that followed the link would overwrite canaries.
OVERWRITE_TAR = make_tar([{"name": "file.txt", "data": b"overwritten"}, {"name": "inner.txt", "data": b"over"}])
HERE = os.path.dirname(os.path.abspath(__file__))


def reachable_by(uid, path):
    """Positive control: the sandbox uid itself can read a canary by its host path, so a resolver
    that followed the symlink under the sandbox's fsuid would really read it."""
    r = subprocess.run(["/bin/cat", path], user=uid, group=uid, extra_groups=[], capture_output=True, timeout=10)
    return r.returncode == 0


def test_symlink_swap_race_never_touches_the_decoy(client, daemon, decoy):
    decoy_path, marker = decoy
    s = Sandbox.create(client)
    fs = sandbox_fs_dir(daemon.data_dir, s.uid)
    ws = os.path.join(fs, "workspace")
    assert reachable_by(s.uid, os.path.join(decoy_path, "file.txt")), "positive control: uid cannot reach decoy"

    assert_ok(s.mkdir("victim/sub", parents=True))
    s.write("victim/file.txt", b"real file")
    s.write("victim/sub/inner.txt", b"real inner")
    depth = ws.count("/") + 2
    os.symlink(decoy_path, os.path.join(ws, ".alt-abs"))
    os.symlink("../" * depth + decoy_path.lstrip("/"), os.path.join(ws, ".alt-rel"))
    assert os.path.realpath(os.path.join(ws, ".alt-rel")) == os.path.realpath(decoy_path), "relative link is wrong"
    before = snapshot(decoy_path)

    swapper = subprocess.Popen([sys.executable, os.path.join(HERE, "swapper.py"), ws, ".alt-abs", ".alt-rel"],
                               stdout=subprocess.PIPE, text=True)
    problems = []
    statuses = {}

    def check(what, resp):
        statuses[resp.status] = statuses.get(resp.status, 0) + 1
        body = resp.body
        if resp.status >= 500:
            problems.append(f"{what}: {resp.status} {body[:200]!r}")
        if marker.encode() in body or b"canary-" in body:
            problems.append(f"{what}: response contains canary data: {body[:200]!r}")
        if resp.status == 200 and resp.headers.get("content-type", "").startswith("application/json"):
            d = json.loads(body)
            if isinstance(d, dict) and "content_base64" in d:
                if marker.encode() in base64.b64decode(d["content_base64"]):
                    problems.append(f"{what}: decoded content is a canary")

    try:
        assert swapper.stdout.readline().strip() == "ready"
        for i in range(ROUNDS):
            check("read", s.files_get("victim/file.txt"))
            check("raw read", s.raw_get("victim/sub/inner.txt"))
            check("stat", s.stat("victim/file.txt"))
            check("write", s.files_put("victim/file.txt", b"api write %d" % i))
            check("raw write", s.raw_put(f"victim/sub/new-{i}.txt", b"raw write"))
            check("list", s.list("victim"))
            check("list sub", s.list("victim/sub"))
            check("move", s.move("victim/file.txt", "victim/moved.txt", overwrite=True))
            check("move back", s.move("victim/moved.txt", "victim/file.txt", overwrite=True))
            check("delete", s.delete("victim/sub", recursive=True))
            check("mkdir", s.mkdir("victim/sub"))
            check("write inner", s.files_put("victim/sub/inner.txt", b"real inner"))
            if i % 4 == 0:
                check("archive", s.archive_get("victim"))
                check("archive sub", s.archive_get("victim/sub"))
                check("archive upload", s.archive_put("victim/sub", OVERWRITE_TAR))
    finally:
        swapper.send_signal(signal.SIGTERM)
        out, _ = swapper.communicate(timeout=20)
    swaps = int(out.split()[-1])
    after = snapshot(decoy_path)
    assert before == after, f"decoy changed: before {before} after {after}"
    assert not problems, "\n".join(problems[:20])
    assert swaps >= 20, f"the swapper only swapped {swaps} times: the race did not really run"
    assert client.health_ok()
    # Sanity: the API did real work on the directory some of the time.
    assert statuses.get(200, 0) > ROUNDS, statuses

    # Releasing the sandbox with the links in place must not delete through them either.
    os.rename(os.path.join(ws, "victim"), os.path.join(ws, "victim-dir"))
    os.symlink(decoy_path, os.path.join(ws, "victim"))
    assert_ok(s.release())
    assert wait_until(lambda: not os.path.exists(fs), timeout=15), "released workspace not deleted"
    assert snapshot(decoy_path) == before, "releasing the sandbox deleted or changed decoy files"


def test_static_symlinks_to_decoy_are_refused_for_every_operation(client, daemon, decoy):
    """The same operations with the link permanently in place (no race): each is refused or stays
    inside, and the decoy is untouched — the deterministic half of the race test."""
    decoy_path, marker = decoy
    s = Sandbox.create(client)
    ws = os.path.join(sandbox_fs_dir(daemon.data_dir, s.uid), "workspace")
    os.symlink(decoy_path, os.path.join(ws, "victim"))
    before = snapshot(decoy_path)
    for r in (s.files_get("victim/file.txt"), s.raw_get("victim/sub/inner.txt"), s.list("victim"),
              s.list("victim/sub"), s.stat("victim/file.txt"), s.archive_get("victim"),
              s.files_put("victim/file.txt", b"x"), s.raw_put("victim/new.txt", b"x"),
              s.delete("victim/sub", recursive=True), s.delete("victim/file.txt"),
              s.move("victim/file.txt", "stolen.txt"), s.mkdir("victim/sub/newdir"),
              s.move("victim/moved.txt", "victim/file.txt", overwrite=True),
              s.archive_put("victim", OVERWRITE_TAR), s.archive_put("victim/sub", OVERWRITE_TAR)):
        assert r.status < 500, r
        assert marker.encode() not in r.body and b"canary-" not in r.body, r
    assert snapshot(decoy_path) == before
    assert not os.path.exists(os.path.join(ws, "stolen.txt"))


def test_race_harness_catches_a_naive_resolver(tmp_path, decoy):
    """Positive control for the race test: the same swapper and canary check, aimed at a resolver
    that simply opens root/path (following symlinks), catches it reading a canary. So the race
    test above is able to fail."""
    decoy_path, marker = decoy
    ws = tmp_path / "ws"
    (ws / "victim").mkdir(parents=True)
    (ws / "victim" / "file.txt").write_bytes(b"real file")
    os.symlink(decoy_path, ws / ".alt-abs")
    os.symlink(decoy_path, ws / ".alt-rel")
    swapper = subprocess.Popen([sys.executable, os.path.join(HERE, "swapper.py"), str(ws), ".alt-abs", ".alt-rel"],
                               stdout=subprocess.PIPE, text=True)
    caught = False
    try:
        assert swapper.stdout.readline().strip() == "ready"
        for _ in range(20000):
            try:
                with open(os.path.join(ws, "victim/file.txt"), "rb") as f:     # the naive resolver
                    if marker.encode() in f.read():
                        caught = True
                        break
            except OSError:
                pass
    finally:
        swapper.send_signal(signal.SIGTERM)
        swapper.communicate(timeout=20)
    assert caught, "the swapper never exposed the decoy to a naive resolver"
