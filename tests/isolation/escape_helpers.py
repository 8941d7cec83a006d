# SPDX-License-Identifier: MIT
"""Running attacks inside a sandbox and reading their results.

An attack is a python3 -c script (python3 is the host's, mounted read-only inside) that prints one
`name=result` line per attempt, result being `ok`, `errno=ENAME` or a value. attack() runs it
through the real exec API and returns {name: result}; the tests compare that with the exact
failure each level must produce, next to a positive control of the same primitive."""

from exec_helpers import PRELUDE, brief, run


def attack(s, code, *args, expect_exit=0, **kw):
    rec = run(s, ["python3", "-c", PRELUDE + code, *[str(a) for a in args]], timeout_seconds=60, **kw)
    assert rec["status"] in ("SUCCEEDED", "FAILED"), brief(rec)
    assert rec["exit_code"] == expect_exit, f"attack script failed: {brief(rec)}"
    out = {}
    for line in rec["stdout"].splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out, rec


def expect(results, want, rec=None):
    """Every key of WANT has exactly that result; one message listing every difference."""
    bad = {k: (results.get(k, "<missing>"), v) for k, v in want.items() if results.get(k) != v}
    assert not bad, "unexpected results (got, want): " + repr(bad) + \
        (f"\nstdout: {rec['stdout'][:2000]!r}\nstderr: {rec['stderr'][:2000]!r}" if rec else "")
