# SPDX-License-Identifier: MIT
"""Daemons at a given isolation level for the escape suite. tests/integration is put on sys.path
and its conftest's Daemon class and fixtures are reused (loaded under another module name), never
copied.

Levels: SANDLOOM_TEST_LEVELS (default "basic,standard,strict"); runtimes: SANDLOOM_TEST_RUNTIMES
(default "native"; "bwrap" selects SANDBOX_RUNTIME=bwrap). A level whose daemon refuses to start is
skipped locally, but under CI=true it FAILS: a level this host supports must run, never skip."""

import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
INTEGRATION = os.path.join(os.path.dirname(HERE), "integration")
if INTEGRATION not in sys.path:
    sys.path.insert(0, INTEGRATION)

_spec = importlib.util.spec_from_file_location("sandloom_integration_conftest", os.path.join(INTEGRATION, "conftest.py"))
_ic = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ic)

Daemon = _ic.Daemon
DaemonError = _ic.DaemonError
finish_daemons = _ic._finish          # stops daemons, returns the problems found in their logs

from helpers import Sandbox, assert_ok  # noqa: E402

LEVELS = [x for x in os.environ.get("SANDLOOM_TEST_LEVELS", "basic,standard,strict").split(",") if x]
RUNTIMES = [x for x in os.environ.get("SANDLOOM_TEST_RUNTIMES", "native").split(",") if x]
LEVEL_RANK = {"basic": 1, "standard": 2, "strict": 3}
IN_CI = os.environ.get("CI", "").lower() == "true"


def level_env(runtime, level, **extra):
    env = {"SANDBOX_ISOLATION_LEVEL": level, "SANDBOX_NETWORK_MODE": "none"}
    if runtime != "native":
        env["SANDBOX_RUNTIME"] = runtime
    env.update(extra)
    return env


def unavailable(msg):
    if IN_CI:
        pytest.fail(f"{msg} (CI=true: a supported level must run, never skip)")
    pytest.skip(msg)


class Iso:
    """One daemon at one level. sandbox() makes a fresh READY sandbox on it."""

    def __init__(self, daemon, runtime, level, health):
        self.daemon = daemon
        self.runtime = runtime
        self.level = level
        self.rank = LEVEL_RANK[level]
        self.health = health
        self.client = daemon.client()
        self.created = []

    @property
    def data_dir(self):
        return self.daemon.data_dir

    def sandbox(self):
        s = Sandbox.create(self.client)
        self.created.append(s)
        return s

    def __repr__(self):
        return f"<{self.runtime}/{self.level}>"


def start_level_daemon(base, runtime, level, **extra):
    """Starts a daemon at LEVEL and checks /healthz reports it in force. Returns (Daemon, healthz)."""
    os.makedirs(base, exist_ok=True)
    d = Daemon(os.path.join(base, "data"), base, env=level_env(runtime, level, **extra), token=None)
    try:
        d.start()
    except DaemonError as e:
        unavailable(f"the daemon refuses to start at {runtime}/{level}: {e}")
    hz = assert_ok(d.client().get("/healthz"))
    iso = hz.get("isolation")
    if not isinstance(iso, dict) or iso.get("level") != level:
        d.stop()
        pytest.fail(f"/healthz does not report level {level} in force at {runtime}/{level}: {iso!r}")
    # The runtime must be reported as in force too, or a "bwrap" run could silently be native.
    if iso.get("runtime", "native") != runtime:
        d.stop()
        pytest.fail(f"/healthz isolation.runtime is {iso.get('runtime')!r}, not {runtime!r}: {iso!r}")
    return d, hz


