# SPDX-License-Identifier: MIT
"""The package itself: standard library only, Python 3.9 syntax, typed (py.typed, annotations
everywhere, mypy --strict clean where mypy is installed), installable with pip, and the quickstart
example runs against a real daemon."""

import ast
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from conftest import PYTHON_DIR, REPO, clean_env

PKG = os.path.join(PYTHON_DIR, "sandloom")
SOURCES = sorted(os.path.join(PKG, f) for f in os.listdir(PKG) if f.endswith(".py"))


def _skip(reason):
    print(f"SKIP: {reason}")
    pytest.skip(reason)


def test_python_3_9_syntax():
    for path in SOURCES:
        with open(path, encoding="utf-8") as f:
            ast.parse(f.read(), path, feature_version=(3, 9))


def test_standard_library_only():
    stdlib = set(sys.stdlib_module_names)
    for path in SOURCES:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for n in names:
                assert n.split(".")[0] in stdlib, f"{path} imports {n}, which is not in the standard library"


def test_every_function_is_annotated():
    for path in SOURCES:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                for a in args:
                    if a.arg in ("self", "cls"):
                        continue
                    assert a.annotation is not None, f"{path}:{node.lineno} {node.name}({a.arg}) has no annotation"
                assert node.returns is not None or node.name == "__init__", \
                    f"{path}:{node.lineno} {node.name} has no return annotation"


def test_py_typed_and_pyproject():
    assert os.path.isfile(os.path.join(PKG, "py.typed"))
    with open(os.path.join(PYTHON_DIR, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    assert 'build-backend = "setuptools.build_meta"' in text
    assert "dependencies = []" in text and 'requires-python = ">=3.9"' in text
    import tomllib
    doc = tomllib.loads(text)
    assert doc["project"]["name"] == "sandloom" and doc["project"]["dependencies"] == []
    import sandloom
    assert doc["project"]["version"] == sandloom.__version__


def _interpreter(version):
    """An interpreter of VERSION ("3.9") on this machine that really runs, or None."""
    exe = f"python{version}"
    candidates = [shutil.which(exe), f"/usr/bin/{exe}"]
    pyenv = os.path.expanduser("~/.pyenv/versions")
    if os.path.isdir(pyenv):
        candidates += [os.path.join(pyenv, d, "bin", exe) for d in sorted(os.listdir(pyenv))
                       if d.startswith(version + ".")]
    for c in candidates:
        if c and os.access(c, os.X_OK) and subprocess.run([c, "-c", "pass"], capture_output=True).returncode == 0:
            return c
    return None


END_TO_END = r"""
import os, sys, tempfile
import sandloom
c = sandloom.Client()
with c.sandbox("e2e-" + os.urandom(4).hex()) as sb:
    sb.files.write("d/a.txt", "héllo", make_parents=True)
    assert sb.files.read_text("d/a.txt") == "héllo"
    r = sb.exec(["sh", "-c", "cat d/a.txt; printf '\\377'"])
    assert r.ok and r.stdout_raw == "héllo".encode() + b"\xff", r
    text = "".join(e.text for e in sb.exec_stream("echo one; echo two") if e.kind == "stdout")
    assert text == "one\ntwo\n", text
    h = sb.exec_background("sleep 30")
    assert h.cancel() and h.wait().status == "CANCELLED"
    src = tempfile.mkdtemp()
    os.makedirs(os.path.join(src, "p", "q"))
    with open(os.path.join(src, "p", "q", "f"), "w") as f:
        f.write("tree")
    os.symlink("q/f", os.path.join(src, "p", "l"))
    sb.files.upload_dir(src, "/workspace/up")
    dst = tempfile.mkdtemp()
    names = sb.files.download_dir("/workspace/up", dst)
    assert sorted(names) == ["p", "p/l", "p/q", "p/q/f"], names
    assert open(os.path.join(dst, "p", "l")).read() == "tree"
    try:
        sb.files.read("/etc/passwd")
    except sandloom.PathOutsideWorkspace as e:
        assert e.status == 400
    else:
        raise AssertionError("no PathOutsideWorkspace")
print("ok", sys.version_info[:2])
"""


@pytest.mark.parametrize("version", ["3.9", "3.12", "3.13"])
def test_end_to_end_on_other_pythons(daemon_factory, version):
    """The main features against a real daemon on other interpreters, where this machine has them
    (3.9 is the oldest supported; newer ones changed tarfile and http.client)."""
    py = _interpreter(version)
    if py is None:
        _skip(f"no Python {version} interpreter on this machine")
    d = daemon_factory()
    env = dict(clean_env(), PYTHONPATH=PYTHON_DIR, SANDBOX_BASE_URL=d.url, SANDBOX_INTERNAL_TOKEN=d.token)
    r = subprocess.run([py, "-c", END_TO_END], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr


def test_runs_on_the_oldest_supported_python_if_present():
    """Imports the package (and builds a few records) on a Python 3.9 interpreter when one is installed."""
    candidates = [shutil.which("python3.9"), "/usr/bin/python3.9", os.path.expanduser("~/.pyenv/versions/3.9.18/bin/python3.9")]
    py39 = next((c for c in candidates if c and os.access(c, os.X_OK) and
                 subprocess.run([c, "-c", "pass"], capture_output=True).returncode == 0), None)
    if py39 is None:
        _skip("no Python 3.9 interpreter on this machine (the syntax check above still covers 3.9)")
    code = ("import sandloom, sys; assert sys.version_info[:2] == (3, 9); "
            "r = sandloom.ExecResult.from_json({'exec_id': 'e', 'sandbox_id': 's', 'status': 'SUCCEEDED', "
            "'exit_code': 0, 'stdout_base64': 'aGk='}); assert r.ok and r.stdout == 'hi'; "
            "sandloom.errors.error_from_response(404, b'{}')")
    r = subprocess.run([py39, "-c", code], cwd=PYTHON_DIR, capture_output=True, text=True,
                       env=dict(clean_env(), PYTHONPATH=PYTHON_DIR))
    assert r.returncode == 0, r.stderr


def test_mypy_strict():
    if importlib.util.find_spec("mypy") is None:
        _skip("mypy is not installed (Debian package `mypy`)")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--python-version", "3.9", "--no-incremental",
                        "--cache-dir", "/dev/null", "-p", "sandloom"], cwd=PYTHON_DIR, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_pip_install(tmp_path):
    # setuptools first: importing pip before it trips setuptools' distutils shim.
    probe = subprocess.run([sys.executable, "-c", "import setuptools, wheel, pip"], capture_output=True)
    if probe.returncode != 0:
        _skip("pip, setuptools or wheel missing for this interpreter (Debian python3-pip, python3-setuptools, "
              "python3-wheel)")
    src = tmp_path / "src"
    shutil.copytree(PYTHON_DIR, src, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    target = tmp_path / "site"
    # No index, no build isolation: everything comes from this machine (no registry is reached).
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                        "--disable-pip-version-check", "--target", str(target), str(src)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (target / "sandloom" / "py.typed").is_file()
    r = subprocess.run([sys.executable, "-c", "import sandloom; print(sandloom.__file__)"], capture_output=True,
                       text=True, cwd=tmp_path, env=dict(clean_env(), PYTHONPATH=str(target)))
    assert r.returncode == 0 and r.stdout.startswith(str(target)), r.stderr


@pytest.mark.parametrize("how", ["environment", "data-dir"])
def test_quickstart_example(daemon_factory, tmp_path, how):
    """examples/quickstart.py as a user runs it next to `make run`: from the environment, or from the
    data directory's endpoint and token files (the daemon generated its token)."""
    d = daemon_factory(token=None)
    env = clean_env()
    env.pop("PYTHONPATH", None)
    if how == "environment":
        env.update(SANDBOX_BASE_URL=d.url, SANDBOX_INTERNAL_TOKEN=d.token)
        cwd = tmp_path
    else:
        # `make run` keeps the data in ./data of the repository; here the data dir is elsewhere, so
        # the example is run from a directory where ./data is a link to it.
        cwd = tmp_path / "work"
        cwd.mkdir()
        os.symlink(d.data_dir, cwd / "data")
    r = subprocess.run([sys.executable, os.path.join(REPO, "examples", "quickstart.py")], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"stdout: {r.stdout}\nstderr: {r.stderr}"
    assert "sum of 1..10 computed in the sandbox: 55" in r.stdout
    assert "stream: tick 3" in r.stdout and "released" in r.stdout
    assert d.token not in r.stdout + r.stderr
    import sandloom
    c = sandloom.Client(d.url, d.token)
    assert c.get("quickstart-demo").status == "RELEASED"
