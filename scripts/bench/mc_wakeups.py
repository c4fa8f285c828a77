#!/usr/bin/env python3
"""How a client's requests reach memcached: runs CLIENT... and prints, per op memcached counted
(cmd_get + cmd_set): ops/s, memcached's own CPU (/proc/PID/stat), the voluntary and involuntary
context switches of all its threads (its wake-ups), the client's CPU (GNU time), and with
--syscalls the syscalls of memcached (3 s in the middle of the run) and of the client
(`perf stat -e syscalls:sys_enter_*`, root or perf_event_paranoid <= 1).

    LOADGEN_MC_PORT=PORT scripts/bench/mc_wakeups.py PID SECS [--syscalls] -- CLIENT...

PID is memcached's (scripts/servers.sh: $LOADGEN_STATE/run/memcached.pid). docs/benchmarks.md,
"Closed loop: writes after reads", has the runs this was made for.
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

CALLS = ["epoll_wait", "epoll_pwait", "read", "recvfrom", "sendto", "sendmsg", "write"]
EVENTS = ",".join(f"syscalls:sys_enter_{n}" for n in CALLS)


def ops(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"stats\r\n")
    b = b""
    while not b.endswith(b"END\r\n"):
        b += s.recv(65536)
    s.close()
    d = dict(line.split()[1:3] for line in b.decode().splitlines() if line.startswith("STAT"))
    return int(d["cmd_get"]) + int(d["cmd_set"])


def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def switches(pid):
    v = n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        for line in open(f"/proc/{pid}/task/{t}/status"):
            if line.startswith("voluntary_ctxt_switches"):
                v += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches"):
                n += int(line.split()[1])
    return v, n


def counts(path):
    c = {}
    for line in open(path):
        f = line.strip().split(",")
        if len(f) > 2 and f[0].isdigit() and int(f[0]) > 0:
            c[f[2].split("sys_enter_")[1]] = int(f[0])
    return c


def main():
    args = sys.argv[1:]
    if "--" not in args or len(args) < 4:
        sys.exit(__doc__)
    cut = args.index("--")
    pid, secs, syscalls, client = int(args[0]), float(args[1]), "--syscalls" in args[:cut], args[cut + 1 :]
    port = int(os.environ["LOADGEN_MC_PORT"])
    tmp = tempfile.mkdtemp(prefix="mc-wakeups.")
    perf = ["perf", "stat", "-x,", "-o", f"{tmp}/client", "-e", EVENTS] if syscalls else []
    o0, c0, (v0, n0), t0 = ops(port), cpu(pid), switches(pid), time.time()
    p = subprocess.Popen(["/usr/bin/time", "-f", "%U %S", "-o", f"{tmp}/time"] + perf + client,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if syscalls:
        time.sleep(max(secs / 2 - 1.5, 0))
        s0 = ops(port)
        subprocess.run(["timeout", "-s", "INT", "3", "perf", "stat", "-x,", "-o", f"{tmp}/server",
                        "-e", EVENTS, "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        s1 = ops(port)
    p.wait()
    o1, c1, (v1, n1), t1 = ops(port), cpu(pid), switches(pid), time.time()
    u, s = map(float, open(f"{tmp}/time").read().split()[-2:])
    n = max(o1 - o0, 1)
    print(f"ops/s {n / (t1 - t0):9.0f}  server_cpu_us/op {(c1 - c0) / n * 1e6:6.2f}  "
          f"client_cpu_us/op {(u + s) / n * 1e6:6.2f}  server_vcsw/op {(v1 - v0) / n:5.3f}  "
          f"server_ivcsw/op {(n1 - n0) / n:5.3f}")
    if syscalls:
        per = lambda c, k: " ".join(f"{a}={b / k:.3f}" for a, b in sorted(c.items()))
        print("    server/op: " + per(counts(f"{tmp}/server"), max(s1 - s0, 1)))
        print("    client/op: " + per(counts(f"{tmp}/client"), n))


if __name__ == "__main__":
    main()
