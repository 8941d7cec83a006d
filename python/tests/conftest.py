# SPDX-License-Identifier: MIT
"""The SDK's tests run against the real daemon, started by the fixtures of tests/integration/conftest.py
(loaded here under another module name, so the two conftest files do not clash). The SDK is imported
from python/ (this tree), not from an installed copy."""

import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)
INTEGRATION = os.path.join(REPO, "tests", "integration")

for p in (PYTHON_DIR, INTEGRATION, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

_spec = importlib.util.spec_from_file_location("sandloom_integration_conftest", os.path.join(INTEGRATION, "conftest.py"))
assert _spec is not None and _spec.loader is not None
_ic = importlib.util.module_from_spec(_spec)
sys.modules["sandloom_integration_conftest"] = _ic
_spec.loader.exec_module(_ic)

# The integration suite's fixtures, used as they are: `daemon` (one per test module, DAEMON_ENV
# configures it), `daemon_factory` (extra daemons: restarts, other settings).
daemon = _ic.daemon
daemon_factory = _ic.daemon_factory
Daemon = _ic.Daemon
clean_env = _ic.clean_env

import sandloom  # noqa: E402
from sdk_helpers import unique  # noqa: E402


@pytest.fixture
def client(daemon):
    """A sandloom.Client of the module's daemon; afterwards the daemon must still be alive."""
    c = sandloom.Client(daemon.url, daemon.token, timeout=30)
    yield c
    c.close()
    assert daemon.alive(), f"daemon died (rc {daemon.proc.returncode}); stderr tail: {daemon.stderr()[-3000:]!r}"
    assert c.health(), "daemon no longer answers GET /health"


@pytest.fixture
def sb(client):
    """A fresh connected sandbox; released afterwards."""
    s = client.sandbox(unique("sdk"), unique("scope"))
    yield s
    client.release(s.sandbox_id)
