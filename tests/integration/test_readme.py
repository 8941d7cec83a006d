"""The README's CLI quickstart runs as written.

The block is taken from README.md itself and run with bash in a directory that looks like the
repository after `make run`: `build/` holds the binaries under test and `./data` is the running
daemon's data directory (the CLI finds the URL and token there)."""
import os
import re
import subprocess

import pytest

from conftest import BINARY, clean_env

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def cli_quickstart():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"## Quickstart with the CLI\n.*?```sh\n(.*?)```", text, re.S)
    assert m, "README.md has no '## Quickstart with the CLI' section with a sh block"
    return m.group(1)


def test_the_cli_quickstart_runs_as_written(daemon_factory, tmp_path):
    work = tmp_path / "repo"
    work.mkdir()
    os.symlink(os.path.dirname(BINARY), work / "build")
    d = daemon_factory(data_dir=work / "data", token=None)
    script = cli_quickstart()
    env = clean_env()
    for k in ("SANDBOX_BASE_URL", "SANDBOX_INTERNAL_TOKEN", "SANDBOX_INTERNAL_TOKEN_FILE", "SANDBOX_DATA_DIR"):
        env.pop(k, None)
    p = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, (p.stdout, p.stderr)
    lines = p.stdout.splitlines()
    assert lines[0] == "demo 1", p.stdout                   # sandbox create
    assert "hello, sandbox" in lines and "sandbox" in lines, p.stdout   # exec: cat + id -un
    assert "hello.txt" in lines, p.stdout                   # fs ls
    assert d.alive()
