#!/usr/bin/env python3
"""Two loadgen binaries against one target, alternating (A B A B ...), for a before/after check
of a change on the request loop.

  scripts/bench/ab.py A_BIN B_BIN SERVER_PID PAIRS -- URL [loadgen run args...]

Each run is `BIN run URL ARGS --format json -o FILE -q`. Per run: QPS (the result's), client CPU
per request (user+sys of the loadgen process, from wait4), and the server's CPU per request
(utime+stime of SERVER_PID and its threads, from /proc, over the run). Prints every run, then the
median of the per-pair ratios B/A for QPS and both CPUs per request.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def server_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime, stime, cutime, cstime (fields 14-17): children cover forked server processes
    return sum(int(x) for x in fields[11:15]) / TICK


def one(binary, pid, url, args):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        before = server_cpu_s(pid)
        cmd = [binary, "run", url, *args, "--format", "json", "-o", out.name, "-q"]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        time.sleep(0.3)  # PostgreSQL backends exit and are reaped into the postmaster's cutime
        server = server_cpu_s(pid) - before
        if status != 0:
            sys.exit(f"{binary} exited with {status}")
        run = json.load(open(out.name))["runs"][0]
    html = out.name[: -len(".json")] + ".html"
    if os.path.exists(html):
        os.unlink(html)
    n = run["requests"]
    return {
        "qps": run["qps"],
        "client_us": (usage.ru_utime + usage.ru_stime) / n * 1e6,
        "server_us": server / n * 1e6,
    }


def main():
    if len(sys.argv) < 7 or sys.argv[5] != "--":
        sys.exit(__doc__)
    a, b, pid, pairs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    url, args = sys.argv[6], sys.argv[7:]
    ratios = {"qps": [], "client_us": [], "server_us": []}
    print("pair  run  qps        client µs/req  server µs/req")
    for i in range(pairs):
        ra = one(a, pid, url, args)
        rb = one(b, pid, url, args)
        for name, r in (("A", ra), ("B", rb)):
            print(f"{i + 1:<5} {name:<4} {r['qps']:<10.0f} {r['client_us']:<14.2f} {r['server_us']:.2f}")
        for k in ratios:
            ratios[k].append(rb[k] / ra[k] if ra[k] else float("nan"))
    print("median B/A: " + ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in ratios.items()))


if __name__ == "__main__":
    main()
