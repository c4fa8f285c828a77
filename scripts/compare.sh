#!/usr/bin/env bash
# The 2010 table, reproduced: SQL vs HandlerSocket vs memcached (and Redis) on one machine, same key stream.
# Brings up every local server (scripts/servers.sh), loads the usr rows, runs one comparison
# (PostgreSQL prepared, PostgreSQL pipelined, MariaDB SQL, HandlerSocket, memcached, Redis,
# embedded HTTP) and writes results/compare-<time>.json plus the bar chart (.svg) and the HTML report
# (.html) beside it.
# Usage: scripts/compare.sh [seconds per target, default 10] [output json]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
out=${2:-results/compare-$(date -u +%Y%m%d-%H%M%S).json}

bash scripts/servers.sh up
eval "$(bash scripts/servers.sh env)"
cargo build --release --quiet
lg=${LOADGEN_BIN:-target/release/loadgen}

rows=1000000
[ "$(psql "$LOADGEN_PG_URL" -XAtqc 'SELECT count(*) FROM usr' 2>/dev/null || echo 0)" = "$rows" ] || $lg prepare "$LOADGEN_PG_URL" --rows $rows
[ "$(mariadb --protocol=tcp -h 127.0.0.1 -P "$LOADGEN_MY_PORT" -u loadgen -N -e 'SELECT count(*) FROM loadgen.usr' 2>/dev/null || echo 0)" = "$rows" ] \
  || $lg prepare "$LOADGEN_MY_URL" --rows $rows
$lg prepare "$LOADGEN_MC_URL" --rows $rows
$lg prepare "$LOADGEN_REDIS_URL" --rows $rows

# Every target runs with the same settings and seed, so each sees the same keys per connection.
# Pipelined targets say so in their URL-independent settings: -p applies to the whole run, so
# the pipelined rows are separate runs written into the same table by `loadgen merge`-free means:
# one run for the 1-in-flight targets, one for the pipelined ones.
# `-o -`: each run's JSON on stdout (kept in a temp file, merged below), its report on stderr.
tmp=$(mktemp -d)
# Plain connections, as the 2010 table and as memcached, Redis and HandlerSocket have no TLS here:
# the SQL servers run with TLS on, and their clients would otherwise encrypt by default.
pg="$LOADGEN_PG_URL?sslmode=disable" my="$LOADGEN_MY_URL?ssl-mode=DISABLED"
trap 'rm -rf "$tmp"' EXIT
$lg run "$my" "$pg" "$LOADGEN_MC_URL" "$LOADGEN_REDIS_URL" embedded \
  -c 16 -p 1 -d "${secs}s" --warmup 2s -q -o - >"$tmp/flat.json"
$lg run "$LOADGEN_HS_URL?mysql=$LOADGEN_MY_URL" "$pg" "$my" "$LOADGEN_MC_URL" "$LOADGEN_REDIS_URL" \
  -c 2 -p 16 -d "${secs}s" --warmup 2s -q -o - >"$tmp/pipe.json"

python3 - "$tmp/flat.json" "$tmp/pipe.json" "$out" <<'PY'
import json, sys
flat, pipe, out = (json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3])
names = {"mysql": "MariaDB SQL (prepared, 16 conns)", "postgres": "PostgreSQL prepared (16 conns)",
         "memcache": "memcached (16 conns)", "redis": "Redis (16 conns)",
         "embedded": "embedded HTTP (16 conns)"}
pnames = {"hs": "HandlerSocket (2 conns x 16)", "postgres": "PostgreSQL pipelined (2 x 16)",
          "mysql": "MariaDB SQL pipelined (2 x 16)",
          "memcache": "memcached pipelined (2 x 16)", "redis": "Redis pipelined (2 x 16)"}
doc = dict(flat)
doc["runs"] = []
for r in flat["runs"]:
    r["label"] = names.get(r["kind"], r["kind"]); doc["runs"].append(r)
for r in pipe["runs"]:
    r["label"] = pnames.get(r["kind"], r["kind"]); r["settings_note"] = "-c 2 -p 16"; doc["runs"].append(r)
doc["comparison_note"] = (f"runs 1-{len(flat['runs'])}: -c 16 -p 1; runs {len(flat['runs']) + 1}-"
                          f"{len(doc['runs'])}: -c 2 -p 16; same seed and key range")
json.dump(doc, open(out, "w"), indent=2)
base = doc["runs"][0]["qps"]
print(f"{'target':<36} {'qps':>10} {'p50 µs':>9} {'p99 µs':>9} {'p99.9 µs':>9} {'errors':>7} {'vs SQL':>7} {'server saw':>11}")
for r in doc["runs"]:
    so = r.get("server_observed") or {}
    seen = "match" if so.get("matches") else ("-" if not so else "DIFF")
    print(f"{r['label']:<36} {r['qps']:>10,.0f} {r['latency_us']['p50']:>9.0f} {r['latency_us']['p99']:>9.0f} "
          f"{r['latency_us']['p999']:>9.0f} {r['error_total']:>7} {r['qps']/base:>6.2f}x {seen:>11}")
# the bar chart: each label without its parenthesis, "pipelined" added where the label lacks it
def short(r):
    s = r["label"].split(" (")[0]
    return s + " pipelined" if r.get("settings_note") and "pipelined" not in s else s
bars = [(short(r), r["qps"]) for r in doc["runs"]]
W, H, L, B = 900, 440, 90, 110
mx = max(v for _, v in bars) * 1.1
slot = (W - L - 20) / len(bars)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       '<rect width="100%" height="100%" fill="white"/>',
       f'<text x="{W/2}" y="24" text-anchor="middle" font-size="16">Point lookups per second (1M-row usr table, same keys)</text>']
colors = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
          "#9c755f", "#bab0ac"]
for i, (label, v) in enumerate(bars):
    h = (H - 50 - B) * v / mx; x = L + slot * i + slot * 0.15; y = H - B - h
    svg.append(f'<rect x="{x:.0f}" y="{y:.0f}" width="{slot*0.7:.0f}" height="{h:.0f}" fill="{colors[i % len(colors)]}"/>')
    svg.append(f'<text x="{x + slot*0.35:.0f}" y="{y-5:.0f}" text-anchor="middle">{v:,.0f}</text>')
    svg.append(f'<text x="{x + slot*0.35:.0f}" y="{H-B+16}" text-anchor="end" transform="rotate(-30 {x + slot*0.35:.0f} {H-B+16})">{label}</text>')
svg.append("</svg>")
open(out.rsplit(".", 1)[0] + ".svg", "w").write("\n".join(svg))
print(f"\nresult written to {out} (chart: {out.rsplit('.', 1)[0]}.svg)")
PY
# The HTML report beside it (the labels above name the runs).
$lg report "$out"
