#!/usr/bin/env python3
"""Helpers for scripts/bench.sh: parse one run of a tool into a TSV record, print tables.

  benchlib.py record TSV CELLS ROLE PAIR KIND OUT TIMEFILE [FACTOR] [PGLOG_PREFIX]
      Append one record per cell in CELLS (comma-separated) for the run whose stdout is OUT
      (stderr in OUT.err) and whose `/usr/bin/time -f '%U %S %M'` line is in TIMEFILE.
      ROLE: lg | peer.  KIND: loadgen | pgbench | sysbench | memaslap | memaslap-mix (gets
      and sets) | redis-benchmark.
      FACTOR: lookups per pgbench transaction (pipelined script: 10); redis-benchmark: its -n.
  benchlib.py pairs TSV TITLE LG_NAME PEER_NAME [GOAL [FIRST_COLUMN]]   loadgen-vs-peer table
  benchlib.py solo TSV TITLE {embedded|rss} [goal text]        single-tool table
  benchlib.py soak RSS_SAMPLES RESULT_JSON TITLE               RSS over a long run
  benchlib.py srvcpu PID                                       CPU seconds of PID and its live
      descendants, plus its reaped children (PostgreSQL's postmaster reaps its backends)
  benchlib.py seed TITLE NAME=SWEEP_JSON...                    inserts/s and time per 10,000
      inserts per connection count, per sweep; sweeps in pairs (durable, then not), the second
      of each pair with its ratio to the first

Record fields: cell role pair qps p99_us cpu_ms_per_1k lookups errors rss_kib worker_us srv_us note.
CPU is user+sys of the whole client process (GNU time) over every lookup it completed;
ms per 1,000 lookups is numerically the same as µs per lookup. srv_us is the server's CPU
per lookup (OUT.srv: `srvcpu` before and after the run; nan without).
"""
import glob
import json
import math
import re
import statistics
import sys

NAN = float("nan")
FIELDS = ["cell", "role", "pair", "qps", "p99", "cpu", "lookups", "errors", "rss", "worker", "srv", "note"]


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def last_line(text):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1][:120] if lines else "no output"


def pct(values, q):
    """Nearest-rank percentile."""
    if not values:
        return NAN
    values = sorted(values)
    return values[max(0, math.ceil(q * len(values)) - 1)]


def srvcpu(pid):
    """utime+stime of PID and every live descendant, plus PID's reaped children, in seconds."""
    tick = float(__import__("os").sysconf("SC_CLK_TCK"))
    procs = {}
    for d in glob.glob("/proc/[0-9]*/stat"):
        try:
            f = read(d).rsplit(")", 1)[1].split()
            procs[int(d.split("/")[2])] = (int(f[1]), int(f[11]) + int(f[12]), int(f[13]) + int(f[14]))
        except (IndexError, ValueError):
            pass  # exited while being read
    if pid not in procs:
        sys.exit(1)
    total, todo = procs[pid][1] + procs[pid][2], [pid]
    while todo:
        parent = todo.pop()
        for child, (ppid, own, _) in procs.items():
            if ppid == parent:
                total += own
                todo.append(child)
    print(f"{total / tick:.2f}")


def parse_loadgen(out, err):
    r = json.loads(out)["runs"][0]
    lookups = r["requests"] + r["warmup_requests"]
    worker = r["client_cpu"]["worker_s"] * 1e6 / lookups if lookups else NAN
    keys = r.get("keys")
    if keys:
        # --batch: rates and CPU per key (a request holds keys["batch"] of them).
        return (keys["keys_per_s"], r["latency_us"]["p99"], lookups * keys["batch"],
                r["error_total"], worker / keys["batch"], "")
    return r["qps"], r["latency_us"]["p99"], lookups, r["error_total"], worker, ""


def parse_pgbench(out, err, factor, logprefix):
    n = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
    # Its tps without its initial connection time, as loadgen's qps leaves out its connect phase.
    tps = float(re.search(r"tps = ([\d.]+)", out).group(1))
    failed = re.search(r"number of failed transactions: (\d+)", out)
    lat = []
    for path in glob.glob(logprefix + ".*"):  # one file per pgbench thread
        for line in read(path).splitlines():
            f = line.split()
            if len(f) >= 3 and f[2].isdigit():
                lat.append(int(f[2]))  # latency of the whole transaction, µs
    return tps * factor, pct(lat, 0.99), n * factor, int(failed.group(1)) if failed else 0, NAN, ""


def parse_sysbench(out, err):
    n = int(re.search(r"transactions:\s+(\d+)", out).group(1))
    qps = float(re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", out).group(1))
    p99 = float(re.search(r"99th percentile:\s+([\d.]+)", out).group(1)) * 1000
    errs = int(re.search(r"ignored errors:\s+(\d+)", out).group(1))
    return qps, p99, n, errs, NAN, ""


def parse_memaslap(out, err, mixed=False):
    text = out + err
    m = re.search(r"Run time: ([\d.]+)s Ops: (\d+) TPS: (\d+)", text)
    secs, ops = float(m.group(1)), int(m.group(2))
    misses = int(re.search(r"get_misses: (\d+)", text).group(1))
    # Lookups/s are its gets: its TPS also counts the C x window preload sets, which are not
    # lookups. CPU per lookup stays over all its ops (the sets cost it CPU too). A mix counts
    # the timed gets and sets of its final "Total Statistics" (no preload then).
    gets = int(re.search(r"cmd_get: (\d+)", text).group(1))
    tps = gets / secs
    if mixed:
        ops = int(re.findall(r"Total Statistics \((\d+) events\)", text)[-1])
        tps = ops / secs
    # "Log2 Dist" of the final "Get Statistics" (a mix: "Total Statistics"): rows "E: c(E)
    # c(E+1) ...", bucket E holds latencies in (2^(E-1), 2^E] µs, so the p99 is known only up
    # to that power of two.
    if mixed:
        block = text.split("Total Statistics (")[-1]
    else:
        block = text.split("Get Statistics (")[-1].split("Total Statistics")[0]
    buckets = []
    for row in re.findall(r"^\s+(\d+):((?:\s+\d+)+)\s*$", block, re.M):
        for i, c in enumerate(row[1].split()):
            buckets.append((int(row[0]) + i, int(c)))
    total, seen, p99 = sum(c for _, c in buckets), 0, NAN
    for e, c in buckets:
        seen += c
        if total and seen >= 0.99 * total:
            p99 = 2.0 ** e
            break
    return tps, p99, ops, misses, NAN, "<="


def parse_redis_benchmark(out, err, n):
    # --csv: a header, then "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
    # "p95_latency_ms","p99_latency_ms","max_latency_ms". It counts no errors of its own.
    row = [f.strip('"') for f in out.strip().splitlines()[-1].split('","')]
    return float(row[1]), float(row[6]) * 1000, n, 0, NAN, ""


def record(args):
    tsv, cells, role, pair, kind, out_path, time_path = args[:7]
    factor = int(args[7]) if len(args) > 7 and args[7] else 1
    logprefix = args[8] if len(args) > 8 else ""
    out, err = read(out_path), read(out_path + ".err")
    t = read(time_path).split()
    try:
        # GNU time puts "Command exited with non-zero status N" first when the client failed.
        user, sys_, rss = float(t[-3]), float(t[-2]), int(t[-1])
        if kind == "loadgen":
            qps, p99, lookups, errors, worker, note = parse_loadgen(out, err)
        elif kind == "pgbench":
            qps, p99, lookups, errors, worker, note = parse_pgbench(out, err, factor, logprefix)
        elif kind == "sysbench":
            qps, p99, lookups, errors, worker, note = parse_sysbench(out, err)
        elif kind == "redis-benchmark":
            qps, p99, lookups, errors, worker, note = parse_redis_benchmark(out, err, factor)
        else:
            qps, p99, lookups, errors, worker, note = parse_memaslap(out, err, kind == "memaslap-mix")
        cpu = (user + sys_) * 1e6 / lookups if lookups else NAN  # µs per lookup = ms per 1k
        s0, s1 = (list(map(float, read(out_path + ".srv").split())) or [NAN, NAN])[:2]
        srv = (s1 - s0) * 1e6 / lookups if lookups else NAN
    except Exception:  # a failed run: keep the reason, show "fail" in the table
        qps = p99 = cpu = worker = srv = NAN
        lookups, errors, rss = 0, -1, 0
        note = "fail: " + last_line(err or out)
    with open(tsv, "a") as f:
        for cell in cells.split(","):
            f.write("\t".join(str(v) for v in
                              [cell, role, pair, qps, p99, cpu, lookups, errors, rss, worker, srv, note]) + "\n")


def load(tsv):
    rows = []
    for line in read(tsv).splitlines():
        r = dict(zip(FIELDS, line.split("\t")))
        for k in ("qps", "p99", "cpu", "worker", "srv"):
            r[k] = float(r[k])
        for k in ("pair", "lookups", "errors", "rss"):
            r[k] = int(r[k])
        rows.append(r)
    return rows


def med(values):
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else NAN


def fmt(v, digits=0, prefix=""):
    if math.isnan(v):
        return "fail"
    return prefix + (f"{v:,.{digits}f}" if digits or abs(v) >= 1000 else f"{v:.0f}")


def show(title, goal, header, lines, notes):
    widths = [max(len(str(r[i])) for r in [header] + lines) for i in range(len(header))]
    print(f"\n== {title}")
    if goal:
        print(f"   goal: {goal}")
    for r in [header] + lines:
        print("  " + "  ".join(str(c).rjust(w) for c, w in zip(r, widths)))
    for n in notes:
        print(f"   note: {n}")


def problems(rows):
    notes = []
    for r in rows:
        if r["note"].startswith("fail"):
            notes.append(f"{r['cell']} {r['role']} pair {r['pair']}: {r['note']}")
        elif r["errors"] > 0:
            notes.append(f"{r['cell']} {r['role']} pair {r['pair']}: {r['errors']} errors/misses")
    return sorted(set(notes))


def pairs_table(tsv, title, lg_name, peer_name, goal="", first="conns"):
    rows = load(tsv)
    cells = list(dict.fromkeys(r["cell"] for r in rows))
    server = any(not math.isnan(r["srv"]) for r in rows)
    lines = []
    for cell in cells:
        lg = {r["pair"]: r for r in rows if r["cell"] == cell and r["role"] == "lg"}
        peer = {r["pair"]: r for r in rows if r["cell"] == cell and r["role"] == "peer"}
        ratios = [lg[p]["qps"] / peer[p]["qps"] for p in lg if p in peer and peer[p]["qps"] > 0]
        srv_ratios = [lg[p]["srv"] / peer[p]["srv"] for p in lg if p in peer and peer[p]["srv"] > 0]
        pnote = next((r["note"] for r in peer.values() if r["note"] == "<="), "")
        lines.append([cell,
                      fmt(med([r["qps"] for r in lg.values()])),
                      fmt(med([r["qps"] for r in peer.values()])),
                      fmt(med(ratios), 2) + f" (n={len(ratios)})",
                      fmt(med([r["p99"] for r in lg.values()])),
                      fmt(med([r["p99"] for r in peer.values()]), prefix=pnote),
                      fmt(med([r["cpu"] for r in lg.values()]), 1),
                      fmt(med([r["cpu"] for r in peer.values()]), 1)]
                     + ([fmt(med([r["srv"] for r in lg.values()]), 1),
                         fmt(med([r["srv"] for r in peer.values()]), 1),
                         fmt(med(srv_ratios), 2)] if server else []))
    header = [first, f"{lg_name} qps", f"{peer_name} qps", "ratio", f"{lg_name} p99 µs",
              f"{peer_name} p99 µs", f"{lg_name} CPU ms/1k", f"{peer_name} CPU ms/1k"]
    if server:
        header += [f"server µs/op ({lg_name})", f"server µs/op ({peer_name})", "server ratio"]
    show(title, goal, header, lines, problems(rows))


def solo_table(tsv, title, kind, goal=""):
    rows = load(tsv)
    lines = []
    for cell in dict.fromkeys(r["cell"] for r in rows):
        rs = [r for r in rows if r["cell"] == cell]
        if kind == "rss":
            rss = [r["rss"] / 1024 for r in rs if r["rss"]]
            lines.append([cell, fmt(med([r["qps"] for r in rs])), str(sum(max(r["errors"], 0) for r in rs)),
                          fmt(med(rss), 1), fmt(max(rss) if rss else NAN, 1)])
        else:
            lines.append([cell, fmt(med([r["qps"] for r in rs])), fmt(med([r["p99"] for r in rs])),
                          fmt(med([r["worker"] for r in rs]), 2), fmt(med([r["cpu"] for r in rs]), 2)])
    header = (["conns", "qps", "errors", "peak RSS MiB (median)", "max"] if kind == "rss" else
              ["conns", "qps", "p99 µs", "worker CPU µs/lookup", "process CPU µs/lookup"])
    show(title, goal, header, lines, problems(rows))


def soak(samples_path, result_path, title):
    """RSS at the first sample after warm-up (60 s), then per minute, and the growth."""
    samples = [tuple(map(int, l.split())) for l in read(samples_path).splitlines() if l.strip()]
    try:
        run = json.loads(read(result_path))["runs"][0]
        summary = (f"{run['requests']:,} lookups, {run['error_total']} errors, "
                   f"{run['qps']:,.0f}/s, p99 {run['latency_us']['p99']:,.0f} µs")
    except Exception:
        summary = "no result (see the error above)"
    lines = [[str(t), fmt(kib / 1024, 1)] for t, kib in samples if t % 60 == 0 or t == samples[-1][0]]
    show(title, "RSS flat after warm-up (bounded memory)", ["second", "RSS MiB"], lines, [summary])
    if not samples:
        print("   no RSS samples")
        return
    base = next((kib for t, kib in samples if t >= 60), samples[0][1])
    last, peak = samples[-1][1], max(kib for _, kib in samples)
    print(f"   RSS at 60 s {base / 1024:.1f} MiB, at the end {last / 1024:.1f} MiB "
          f"(growth {(last - base) / 1024:+.1f} MiB), peak {peak / 1024:.1f} MiB")


def seed_table(title, *sweeps):
    """The 2010 blogs' table: per connection count, inserts/s and the time 10,000 take, per sweep."""
    names, steps, notes = [], [], []
    for arg in sweeps:
        name, path = arg.split("=", 1)
        names.append(name)
        try:
            sw = json.loads(read(path))["sweeps"][0]
            steps.append({st["connections"]: st for st in sw["steps"]})
            dur = sw.get("durability", {})
            notes.append(f"{name}: " + (", ".join(f"{k}={v}" for k, v in sorted(dur.items())) or "no settings reported"))
            errs = sum(st["errors"] for st in sw["steps"])
            if errs:
                notes.append(f"{name}: {errs} errors")
        except Exception:
            steps.append({})
            notes.append(f"{name}: fail: " + last_line(read(path.replace(".json", ".err"))))
    # Sweeps come in pairs (durable, then not): the second of each pair gets its ratio to the first.
    counts = sorted({c for s in steps for c in s})
    header = ["conns"]
    for i, n in enumerate(names):
        header += [f"{n} inserts/s", "10k inserts"] + ([f"x {names[i - 1]}"] if i % 2 else [])
    lines = []
    for c in counts:
        row = [str(c)]
        rates = [s[c]["ops"].get("insert", NAN) if c in s else NAN for s in steps]
        for i, q in enumerate(rates):
            row += [fmt(q), f"{10000 / q:.2f} s" if q > 0 else "fail"]
            if i % 2:
                ratio = q / rates[i - 1] if rates[i - 1] > 0 else NAN
                row.append(fmt(ratio, 2) + ("" if math.isnan(ratio) else "x"))
        lines.append(row)
    show(title, "", header, lines, notes)


if __name__ == "__main__":
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "record":
        record(rest)
    elif cmd == "pairs":
        pairs_table(*rest)
    elif cmd == "solo":
        solo_table(*rest)
    elif cmd == "soak":
        soak(*rest)
    elif cmd == "srvcpu":
        srvcpu(int(rest[0]))
    elif cmd == "seed":
        seed_table(*rest)
    else:
        sys.exit(__doc__)
