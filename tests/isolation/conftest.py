# SPDX-License-Identifier: MIT
"""The escape suite's fixtures: one real daemon per (runtime, isolation level), shared by every
escape test of that level (see level_daemon.py for the level selection and the CI rule)."""

import shutil
import tempfile

import pytest

import level_daemon
from level_daemon import LEVELS, RUNTIMES, Iso, finish_daemons, start_level_daemon

decoy = level_daemon._ic.decoy                     # the integration suite's canary directory fixture
daemon_factory = level_daemon._ic.daemon_factory   # and its extra-daemon fixture


@pytest.fixture(scope="session", params=[(r, lv) for r in RUNTIMES for lv in LEVELS],
                ids=[f"{r}-{lv}" for r in RUNTIMES for lv in LEVELS])
def iso(request):
    runtime, level = request.param
    base = tempfile.mkdtemp(prefix=f"sandloom-escape-{runtime}-{level}-")
    try:
        d, hz = start_level_daemon(base, runtime, level)
    except BaseException:                   # skipped or failed: leave nothing behind
        shutil.rmtree(base, ignore_errors=True)
        raise
    it = Iso(d, runtime, level, hz)
    yield it
    problems = finish_daemons([d])
    shutil.rmtree(base, ignore_errors=True)
    assert not problems, "\n".join(problems)


@pytest.fixture
def lvl(iso):
    """Releases what a test created on the shared level daemon."""
    yield iso
    for s in iso.created:
        try:
            s.release()
        except OSError:
            pass
    iso.created.clear()
