"""The launch helper program (sandloom-spawner) is run only when it can be trusted.

The daemon forks a helper that every sandbox is cloned from and that runs as root. It execs
`sandloom-spawner` found beside its own binary only when that file is a regular file owned by root
(or the daemon's user) and writable by no one else; otherwise it runs the same helper code in a
forked copy of itself and says so on stderr. Each case runs a command to show the daemon still works."""
import os
import shutil

import pytest

from conftest import BINARY, Daemon
from helpers import Sandbox
from exec_helpers import run

WARNING = "sandloom-spawner was not found beside this binary"


@pytest.fixture
def bindir(tmp_path):
    src_dir = os.path.dirname(BINARY)
    helper = os.path.join(src_dir, "sandloom-spawner")
    if not os.path.exists(helper):
        pytest.skip(f"no sandloom-spawner beside {BINARY}")
    d = tmp_path / "bin"
    d.mkdir()
    shutil.copy2(BINARY, d / "sandloom")
    shutil.copy2(helper, d / "sandloom-spawner")
    os.chmod(d / "sandloom", 0o755)
    os.chmod(d / "sandloom-spawner", 0o755)
    return d


def start_from(bindir, tmp_path, factory_list):
    d = Daemon(tmp_path / f"data-{len(factory_list) + 1}", tmp_path)
    binary = str(bindir / "sandloom")
    orig = d.command
    d.command = lambda: [binary, *orig()[1:]]
    factory_list.append(d)
    return d.start()


@pytest.fixture
def started(tmp_path):
    daemons = []
    yield daemons
    for d in daemons:
        d.stop()
    for d in daemons:
        shutil.rmtree(d.data_dir, ignore_errors=True)


def works(d):
    s = Sandbox.create(d.client())
    rec = run(s, ["/bin/sh", "-c", "echo ok"])
    assert rec["status"] == "SUCCEEDED" and rec["stdout"] == "ok\n", rec


def test_a_root_owned_helper_is_used(bindir, tmp_path, started):
    d = start_from(bindir, tmp_path, started)
    works(d)
    assert WARNING not in d.stderr(), d.stderr()[-2000:]


@pytest.mark.parametrize("mode", [0o775, 0o757], ids=["group-writable", "world-writable"])
def test_a_helper_writable_by_others_is_not_run(bindir, tmp_path, started, mode):
    os.chmod(bindir / "sandloom-spawner", mode)
    d = start_from(bindir, tmp_path, started)
    works(d)
    assert WARNING in d.stderr(), d.stderr()[-2000:]


def test_a_helper_owned_by_another_user_is_not_run(bindir, tmp_path, started):
    os.chown(bindir / "sandloom-spawner", 65534, 65534)
    d = start_from(bindir, tmp_path, started)
    works(d)
    assert WARNING in d.stderr(), d.stderr()[-2000:]


def test_a_helper_that_is_not_a_regular_file_is_not_run(bindir, tmp_path, started):
    os.unlink(bindir / "sandloom-spawner")
    os.mkfifo(bindir / "sandloom-spawner", 0o755)
    d = start_from(bindir, tmp_path, started)
    works(d)
    assert WARNING in d.stderr(), d.stderr()[-2000:]
