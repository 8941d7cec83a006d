# SPDX-License-Identifier: MIT
"""Starts the real daemon (env SANDLOOM_BINARY, default build/sandloom) on 127.0.0.1:0 with a temp
data directory. A module-scoped daemon serves most tests; `daemon_factory` starts extra ones for
tests that restart, kill or reconfigure it. Every daemon is stopped by its pid (SIGTERM, then
SIGKILL), and its stderr is checked: no token, no sanitizer report."""

import atexit
import os
import re
import secrets
import shutil
import tempfile
import signal
import subprocess
import time

import pytest

from helpers import Client, Sandbox

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.path.abspath(os.environ.get("SANDLOOM_BINARY", os.path.join(REPO, "build", "sandloom")))

LISTEN_RE = re.compile(r"sandloom listening on (http://\S+)")
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer", "ERROR: UndefinedBehavior")
START_TIMEOUT = float(os.environ.get("SANDLOOM_TEST_START_TIMEOUT", "10"))
STOP_TIMEOUT = 30.0


def clean_env(extra=None):
    """The test process's environment without any SANDBOX_* setting, plus EXTRA."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_")}
    env.update(extra or {})
    return env


class DaemonError(Exception):
    pass


# Every daemon process this session started, so none outlives it: on SIGTERM (e.g. the `timeout`
# around pytest in scripts/test) pytest unwinds as on Ctrl-C and runs the fixture teardowns, and
# whatever is still running at exit is killed by its pid.
_LIVE = set()


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt("SIGTERM")


def _kill_leftovers():
    for proc in list(_LIVE):
        if proc.poll() is None:
            proc.kill()
            proc.wait()


signal.signal(signal.SIGTERM, _on_sigterm)
atexit.register(_kill_leftovers)


class Daemon:
    _counter = 0

    def __init__(self, data_dir, log_dir, env=None, token="generate-random", args=(), listen="127.0.0.1:0"):
        Daemon._counter += 1
        self.n = Daemon._counter
        self.data_dir = str(data_dir)
        self.log_dir = str(log_dir)
        self.env = dict(env or {})
        # token: a string = SANDBOX_INTERNAL_TOKEN; None = unset (the daemon generates/reuses DATA/token).
        self.token_env = secrets.token_hex(24) if token == "generate-random" else token
        self.token = self.token_env
        self.args = list(args)
        self.listen = listen
        self.proc = None
        self.url = None
        self.starts = 0
        self.stdout_path = self.stderr_path = None
        self.logs = []          # every (stdout, stderr) pair this object produced
        self.returncodes = []   # (how it was stopped, rc)

    # --- process control ---
    def command(self):
        return [BINARY, "serve", "--listen", self.listen, "--data-dir", self.data_dir, *self.args]

    def start(self):
        assert self.proc is None or self.proc.poll() is not None, "daemon already running"
        if not os.access(BINARY, os.X_OK):
            raise DaemonError(f"no daemon binary at {BINARY} (set SANDLOOM_BINARY or run `make build`)")
        self.starts += 1
        tag = f"daemon-{self.n}-{self.starts}"
        self.stdout_path = os.path.join(self.log_dir, tag + ".stdout")
        self.stderr_path = os.path.join(self.log_dir, tag + ".stderr")
        self.logs.append((self.stdout_path, self.stderr_path))
        env = clean_env(self.env)
        if self.token_env is not None:
            env["SANDBOX_INTERNAL_TOKEN"] = self.token_env
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                         start_new_session=True)
        _LIVE.add(self.proc)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            m = LISTEN_RE.search(self.stdout())
            if m:
                self.url = m.group(1).rstrip("/")
                break
            if self.proc.poll() is not None:
                raise DaemonError(f"daemon exited with {self.proc.returncode} before listening; "
                                  f"stderr: {self.stderr()[-2000:]!r} stdout: {self.stdout()[-1000:]!r}")
            if time.monotonic() > deadline:
                self.kill9()
                raise DaemonError(f"daemon printed no 'sandloom listening on' line within {START_TIMEOUT}s; "
                                  f"stderr: {self.stderr()[-2000:]!r}")
            time.sleep(0.02)
        if self.token_env is None:
            try:
                with open(os.path.join(self.data_dir, "token")) as f:
                    self.token = f.read().strip()
            except FileNotFoundError:
                pass    # e.g. SANDBOX_INTERNAL_TOKEN_FILE: the test sets .token itself
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            os.kill(self.proc.pid, sig)

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM, then SIGKILL after TIMEOUT. Returns the exit code (negative = killed by a signal)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            rc = self.wait(timeout)
            if rc is None:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                self.returncodes.append(("SIGTERM timed out, SIGKILLed", self.proc.returncode))
                return self.proc.returncode
            self.returncodes.append(("SIGTERM", rc))
        return self.proc.returncode

    def kill9(self):
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.returncodes.append(("SIGKILL", self.proc.returncode))
        return self.proc.returncode

    # --- output ---
    def stdout(self):
        return _read(self.stdout_path)

    def stderr(self):
        return _read(self.stderr_path)

    def all_stderr(self):
        return "".join(_read(e) for _, e in self.logs)

    def log_problems(self):
        """What is wrong in everything this daemon wrote to stderr: a token, a sanitizer report."""
        problems = []
        for _, path in self.logs:
            text = _read(path)
            if self.token and self.token in text:
                problems.append(f"{path}: stderr contains the token")
            for marker in SANITIZER_MARKERS:
                if marker in text:
                    i = text.index(marker)
                    problems.append(f"{path}: sanitizer report: {text[max(0, i - 200):i + 3000]}")
                    break
        return problems

    def client(self, token=None):
        assert self.url, "daemon not started"
        return Client(lambda: self.url, self.token if token is None else token)


def _read(path):
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def _finish(daemons, require_clean_exit=True):
    """Stops DAEMONS and returns a list of problems (not raised, so every daemon is stopped)."""
    problems = []
    for d in daemons:
        was_alive = d.alive()
        rc = d.stop()
        if was_alive and require_clean_exit and rc != 0:
            problems.append(f"daemon {d.n} exited with {rc} after SIGTERM (expected 0); "
                            f"stderr tail: {d.stderr()[-1500:]!r}")
        problems.extend(d.log_problems())
    return problems


@pytest.fixture
def daemon_factory(tmp_path):
    """start(env=..., token=..., data_dir=..., args=...) -> a running Daemon; stopped at teardown."""
    started = []

    def start(env=None, token="generate-random", data_dir=None, args=(), run=True):
        if data_dir is None:
            data_dir = tmp_path / f"data-{len(started) + 1}"
        d = Daemon(data_dir, tmp_path, env=env, token=token, args=args)
        started.append(d)
        return d.start() if run else d

    yield start
    problems = _finish(started)
    for d in started:
        shutil.rmtree(d.data_dir, ignore_errors=True)
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def daemon(request, tmp_path_factory):
    """One daemon per test module; a module sets DAEMON_ENV = {...} to configure it."""
    base = tmp_path_factory.mktemp(request.module.__name__.replace("test_", "d-"))
    d = Daemon(base / "data", base, env=getattr(request.module, "DAEMON_ENV", {}))
    d.start()
    yield d
    problems = _finish([d])
    shutil.rmtree(d.data_dir, ignore_errors=True)
    assert not problems, "\n".join(problems)


@pytest.fixture
def client(daemon):
    yield daemon.client()
    # Whatever the test did, the daemon must still be alive and answering.
    assert daemon.alive(), f"daemon died (rc {daemon.proc.returncode}); stderr tail: {daemon.stderr()[-3000:]!r}"
    assert daemon.client().health_ok(), "daemon no longer answers GET /health"


@pytest.fixture
def sandbox(client):
    """A fresh READY sandbox on the module daemon."""
    s = Sandbox.create(client)
    yield s
    try:
        s.release()
    except OSError:
        pass


@pytest.fixture
def decoy():
    """A directory OUTSIDE the data dir (fresh mkdtemp under /tmp, never a system path) full of
    canary files, world-writable so a resolver that followed a link to it under the sandbox's fsuid
    would really reach it. Yields (path, marker); every canary contains CANARY-<marker>."""
    marker = os.urandom(12).hex()
    path = tempfile.mkdtemp(prefix="sandloom-decoy-", dir="/tmp")
    canary = f"CANARY-{marker}".encode()
    # Same names as the victim's, so a followed link finds a file where the API looks.
    layout = {"file.txt": canary + b" file", "moved.txt": canary + b" moved", "sub/inner.txt": canary + b" inner",
              "sub/deep/x.txt": canary + b" deep", f"canary-{marker}.txt": canary}
    for rel, data in layout.items():
        full = os.path.join(path, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        os.chmod(full, 0o666)
    for dirpath, dirnames, _ in os.walk(path):
        os.chmod(dirpath, 0o777)
    try:
        yield path, marker
    finally:
        shutil.rmtree(path, ignore_errors=True)
