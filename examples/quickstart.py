#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sandloom quickstart: create a sandbox, write a file, run it, read the result, release.

Run against a local daemon (`make run` in another terminal), from the repository root:

    python3 examples/quickstart.py

It finds the daemon like the `sandloom` CLI does: SANDBOX_BASE_URL and SANDBOX_INTERNAL_TOKEN if set,
else the `endpoint` and `token` files of the data directory (SANDBOX_DATA_DIR, default ./data).
"""

import os
import sys

try:
    import sandloom
except ImportError:     # not installed (`pip install ./python`): use the copy in this repository
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import sandloom


def main() -> int:
    client = sandloom.Client()
    print(f"daemon: {client.base_url}")

    # resolve + connect; released at the end of the block
    with client.sandbox("quickstart-demo", scope="examples") as sb:
        print(f"sandbox {sb.sandbox_id} generation {sb.generation}")

        sb.files.write("hello.py", "import sys\nprint('hello from', sys.platform, 'as', __import__('getpass').getuser())\n")
        sb.files.write("data/numbers.txt", "\n".join(str(i) for i in range(1, 11)) + "\n", make_parents=True)

        # A list is the argv; python3 may be missing from a minimal host, so fall back to sh.
        r = sb.exec(["sh", "-c", "command -v python3 >/dev/null && python3 hello.py || echo hello from sh"])
        print(f"exec: {r.status} exit {r.exit_code} in {r.duration_ms} ms: {r.stdout.strip()}")

        # A string runs via /bin/sh -c; the result is written to a file and read back.
        r = sb.exec("awk '{ s += $1 } END { print s }' data/numbers.txt > data/sum.txt")
        if not r.ok:
            print(f"awk failed: {r.stderr}", file=sys.stderr)
            return 1
        total = sb.files.read_text("data/sum.txt").strip()
        print(f"sum of 1..10 computed in the sandbox: {total}")

        # Output as it is produced.
        for ev in sb.exec_stream("for i in 1 2 3; do echo tick $i; sleep 0.1; done"):
            if ev.kind == "stdout":
                print(f"  stream: {ev.text.rstrip()}")
            elif ev.kind == "end" and ev.result is not None:
                print(f"  stream ended: {ev.result.status}")

        print("files:", ", ".join(e.name for e in sb.files.list("/workspace")))
    print("released")
    return 0 if total == "55" else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except sandloom.SandloomError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
