#!/usr/bin/env python3
"""Writes a synthetic trace in the Twitter cache-trace format, for `loadgen trace-bench` and tests.

Usage: scripts/trace_gen.py LINES SECONDS [KEYS] > trace.csv   (pipe through `zstd` for .zst)
Lines are spread evenly over SECONDS whole-second timestamps; ops roughly as a read-heavy cache
(get 80%, set 15%, delete 5%); keys `usr:<id>` for id in 1..KEYS (default 1000000).
"""
import random
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    lines, secs = int(sys.argv[1]), int(sys.argv[2])
    keys = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
    rnd = random.Random(1)
    out = sys.stdout
    chunk = []
    for i in range(lines):
        r = rnd.random()
        op = "get" if r < 0.8 else ("set" if r < 0.95 else "delete")
        key = "usr:%d" % rnd.randint(1, keys)
        size = 100 if op == "set" else 0
        chunk.append("%d,%s,%d,%d,%d,%s,0\n" % (i * secs // lines, key, len(key), size, i % 64, op))
        if len(chunk) == 65536:
            out.write("".join(chunk))
            chunk = []
    out.write("".join(chunk))


if __name__ == "__main__":
    main()
