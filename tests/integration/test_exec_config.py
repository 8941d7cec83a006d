# SPDX-License-Identifier: MIT
"""The exec settings really apply (issue 3): SANDBOX_MAX_OUTPUT_BYTES, SANDBOX_DEFAULT_TIMEOUT_SECONDS,
SANDBOX_TERMINATE_GRACE_SECONDS; SANDBOX_ISOLATION_LEVEL / SANDBOX_NETWORK_MODE are validated at
start-up and reported by /healthz."""

import time

import pytest

from helpers import Sandbox, assert_ok
from exec_helpers import denv, assert_no_uid_processes, brief, run, sh

DAEMON_ENV = denv()


def test_output_cap_default_timeout_and_grace_are_configurable(daemon_factory):
    d = daemon_factory(env=denv({"SANDBOX_MAX_OUTPUT_BYTES": "4096", "SANDBOX_DEFAULT_TIMEOUT_SECONDS": "1",
                            "SANDBOX_TERMINATE_GRACE_SECONDS": "1"}))
    s = Sandbox.create(d.client())
    rec = sh(s, "head -c 10000 /dev/zero | tr '\\0' x; echo tail >&2", timeout_seconds=30)
    assert rec["truncated"] is True and rec["stdout"] == "x" * 4096 and rec["stdout_bytes"] == 10000, brief(rec)
    assert rec["stderr"] == "tail\n"
    # No timeout_seconds in the request: SANDBOX_DEFAULT_TIMEOUT_SECONDS (1 s) applies. The tree ignores
    # SIGTERM, so it ends after the 1 s grace, not the default 5 s.
    t0 = time.monotonic()
    rec = sh(s, "trap '' TERM; sleep 100")
    elapsed = time.monotonic() - t0
    assert rec["status"] == "TIMED_OUT", brief(rec)
    assert elapsed < 1 + 1 + 3, f"TIMED_OUT after {elapsed:.1f}s with timeout 1 s and grace 1 s"
    assert_no_uid_processes(s.uid, 5)


@pytest.mark.parametrize("env", [{"SANDBOX_ISOLATION_LEVEL": "paranoid"}, {"SANDBOX_NETWORK_MODE": "bridge"},
                                 {"SANDBOX_MAX_RUNNING_EXECS": "0"}, {"SANDBOX_TERMINATE_GRACE_SECONDS": "-1"}])
def test_bad_exec_settings_refuse_start_up(daemon_factory, env):
    d = daemon_factory(env=denv(env), run=False)
    with pytest.raises(Exception) as e:           # conftest.DaemonError: it exited before listening
        d.start()
    assert type(e.value).__name__ == "DaemonError", repr(e.value)
    name = next(iter(env))
    assert name in str(e.value), f"the refusal does not name {name}: {e.value}"


@pytest.mark.parametrize("level", ["basic", "standard", "strict"])
def test_explicit_level_is_reported_in_force(daemon_factory, level):
    d = daemon_factory(env=denv({"SANDBOX_ISOLATION_LEVEL": level, "SANDBOX_NETWORK_MODE": "isolated"}))
    iso = assert_ok(d.client().get("/healthz"))["isolation"]
    assert iso["level"] == level and iso.get("network_mode") == "none", iso
    s = Sandbox.create(d.client())
    assert run(s, ["/bin/echo", "ok"])["stdout"] == "ok\n"
