# SPDX-License-Identifier: MIT
"""Helper process for test_symlink_race.py (not a test): inside one workspace directory WS on the
host, keeps swapping WS/victim (a real directory) with WS/.alt-N (symlinks that point at a decoy
outside the data directory) by renameat2(RENAME_EXCHANGE), so `victim` is always either the
directory or a symlink. Runs in its own process so it neither holds the test's GIL nor slows the
HTTP client. On SIGTERM it puts the directory back, prints the number of swaps and exits.

Only names directly inside WS are ever renamed."""

import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from helpers import rename_exchange  # noqa: E402

stop = False


def on_term(signum, frame):
    global stop
    stop = True


def main():
    ws = sys.argv[1]
    alts = [os.path.join(ws, a) for a in sys.argv[2:]]
    victim = os.path.join(ws, "victim")
    signal.signal(signal.SIGTERM, on_term)
    rng = random.Random(1234)
    swaps = 0
    i = 0
    print("ready", flush=True)
    while not stop:
        alt = alts[i % len(alts)]
        i += 1
        for _ in range(2):          # victim becomes the symlink, then the directory again
            try:
                rename_exchange(victim, alt)
            except OSError:
                continue
            swaps += 1
            if rng.random() < 0.5:
                # Hold this state for a moment (up to 1 ms) so whole requests see it, not just windows.
                time.sleep(rng.uniform(0, 0.001))
    # Leave the real directory at `victim`.
    if os.path.islink(victim):
        for alt in alts:
            if not os.path.islink(alt):
                rename_exchange(victim, alt)
                break
    print(f"swaps {swaps}", flush=True)


if __name__ == "__main__":
    main()
