# SPDX-License-Identifier: MIT
"""Configuration: a bad SANDBOX_* value (or flag) refuses start-up with a sentence naming the
setting; `serve --help` lists every setting of the table; docs/CONFIGURATION.md is exactly what
`sandloom config-doc` prints, so the docs cannot drift from the code."""

import os
import re
import subprocess

import pytest

from conftest import BINARY, REPO, clean_env


def settings_table():
    """(env, flag or None) for each row of the one config table in src/core/config.c."""
    with open(os.path.join(REPO, "src", "core", "config.c")) as f:
        src = f.read()
    rows = re.findall(r'\{\s*"(SANDBOX_[A-Z0-9_]+)",\s*(NULL|"(--[a-z0-9-]+)")', src)
    assert len(rows) >= 10, "could not read the settings table from src/core/config.c"
    return [(env, flag or None) for env, _, flag in rows]


def run(args, env=None, timeout=15, tmp_path=None):
    e = clean_env(env)
    e.setdefault("SANDBOX_INTERNAL_TOKEN", "t" * 32)
    return subprocess.run([BINARY, *args], env=e, capture_output=True, text=True, timeout=timeout,
                          cwd=str(tmp_path) if tmp_path else None)


BAD_ENV = [
    ("SANDBOX_MAX_FILE_API_BYTES", "lots"),
    ("SANDBOX_MAX_FILE_API_BYTES", "12"),            # below its minimum
    ("SANDBOX_MAX_UPLOAD_BYTES", "-1"),
    ("SANDBOX_UID_START", "10"),
    ("SANDBOX_UID_END", "99999999999"),
    ("SANDBOX_LOG_LEVEL", "chatty"),
    ("SANDBOX_HTTP_THREADS", "many"),
    ("SANDBOX_MAX_ARCHIVE_ENTRIES", "0"),
    ("SANDBOX_LISTEN", "nonsense"),
    ("SANDBOX_WORKER_ID", "bad id with spaces"),
    ("SANDBOX_SHUTDOWN_GRACE_SECONDS", "1.5"),
]


@pytest.mark.parametrize("name,value", BAD_ENV, ids=[f"{n}={v}" for n, v in BAD_ENV])
def test_bad_environment_value_refuses_start_naming_the_setting(tmp_path, name, value):
    listen = [] if name == "SANDBOX_LISTEN" else ["--listen", "127.0.0.1:0"]    # a flag would win
    r = run(["serve", *listen, "--data-dir", str(tmp_path / "data")], env={name: value})
    out = r.stdout + r.stderr
    assert r.returncode != 0, f"started with {name}={value!r}: {out[-500:]}"
    assert name in out, f"the refusal does not name {name}: {out[-500:]!r}"
    assert "listening" not in r.stdout


def test_uid_start_after_uid_end_refuses_start(tmp_path):
    r = run(["serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d")],
            env={"SANDBOX_UID_START": "1950000010", "SANDBOX_UID_END": "1950000000"})
    assert r.returncode != 0
    assert "SANDBOX_UID_START" in r.stdout + r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--max-upload-bytes", "12Q"], "SANDBOX_MAX_UPLOAD_BYTES"),
    (["--uid-start=5"], "SANDBOX_UID_START"),
    (["--log-level", "loud"], "SANDBOX_LOG_LEVEL"),
    (["--no-such-flag"], "--no-such-flag"),
    (["--max-list-limit"], "--max-list-limit"),
])
def test_bad_flag_refuses_start(tmp_path, args, needle):
    r = run(["serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"), *args])
    assert r.returncode != 0
    assert needle in r.stdout + r.stderr, (r.stdout + r.stderr)[-500:]


def test_token_is_never_accepted_as_a_flag(tmp_path):
    secret = "flag-token-0123456789abcdef"
    r = run(["serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"), f"--internal-token={secret}"])
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "SANDBOX_INTERNAL_TOKEN" in out
    assert secret not in out


def test_missing_token_file_refuses_start(tmp_path):
    e = {"SANDBOX_INTERNAL_TOKEN_FILE": str(tmp_path / "no-such-token-file")}
    r = subprocess.run([BINARY, "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d")],
                       env=clean_env(e), capture_output=True, text=True, timeout=15)
    assert r.returncode != 0
    assert "SANDBOX_INTERNAL_TOKEN_FILE" in r.stdout + r.stderr


def test_serve_help_lists_every_setting():
    r = run(["serve", "--help"])
    assert r.returncode == 0, r.stderr
    text = r.stdout
    for env, flag in settings_table():
        assert env in text, f"serve --help does not mention {env}"
        if flag:
            assert flag in text, f"serve --help does not mention {flag}"


def test_help_never_shows_a_token_value():
    r = run(["serve", "--help"], env={"SANDBOX_INTERNAL_TOKEN": "help-secret-value-1234567890"})
    assert "help-secret-value-1234567890" not in r.stdout + r.stderr


def test_configuration_doc_is_generated_from_the_table():
    r = run(["config-doc"])
    assert r.returncode == 0, r.stderr
    with open(os.path.join(REPO, "docs", "CONFIGURATION.md")) as f:
        doc = f.read()
    assert doc == r.stdout, "docs/CONFIGURATION.md differs from `sandloom config-doc` (run `make docs`)"
    for env, _ in settings_table():
        assert env in doc


def test_flag_overrides_environment(daemon_factory):
    d = daemon_factory(env={"SANDBOX_WORKER_ID": "from-env"}, args=["--worker-id", "from-flag"])
    from helpers import assert_ok
    assert assert_ok(d.client().get("/healthz"))["worker_id"] == "from-flag"


def test_unknown_subcommand_fails():
    r = run(["no-such-subcommand"])
    assert r.returncode != 0
