#!/usr/bin/env bash
# loadgen against the usual peer tools, on the local servers of scripts/servers.sh.
#
#   scripts/bench.sh [pg|mysql|hs|memcache|redis|unix|tls|embedded|rss|mget|proxy|all|soak|writes]...   (default: all)
#
#   BENCH_PAIRS=3     runs per cell and tool; loadgen and the peer alternate (A B, B A, A B, ...)
#   BENCH_SECONDS=10  length of every measured run
#   LOADGEN_BIN       use this binary instead of `cargo build --release` + target/release/loadgen
#   BENCH_SOAK_SECONDS=600  length of the soak run (not part of `all`: it takes ten minutes)
#   BENCH_SEED_N=20000  inserts per step of the writes section's seed table (`writes` is not part
#                       of `all`: about 6 minutes here, more on a disk with slower fsync)
#   BENCH_WRITES="pg_update memcache mysql_insert seed"  the writes section's parts, in order
#   BENCH_SEED_SERVERS="postgres mariadb"  the servers of the seed table
#
# Every run is closed-loop with no warm-up on either side (loadgen gets --warmup 0: the peers
# have none), and the client's CPU is user+sys of its whole process from GNU time, divided by the
# lookups it completed; the server's CPU per lookup (its process tree, from /proc) sits next to
# it. Tables show medians over the pairs; "ratio" is the median of the per-pair ratios
# loadgen/peer. The machine is shared and noisy: compare ratios, not absolute numbers.
# Method and caveats: docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

PAIRS=${BENCH_PAIRS:-3}
SECS=${BENCH_SECONDS:-10}
B=scripts/bench
LIB="python3 $B/benchlib.py"
ALL=(pg mysql hs memcache redis unix tls embedded rss mget proxy)

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
[[ $PAIRS =~ ^[1-9][0-9]*$ && $SECS =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_PAIRS and BENCH_SECONDS: positive integers" >&2; exit 2; }
SECTIONS=("$@")
[[ ${#SECTIONS[@]} -eq 0 || ${SECTIONS[0]} == all ]] && SECTIONS=("${ALL[@]}")
for s in "${SECTIONS[@]}"; do
  case $s in
    pg | mysql | hs | memcache | redis | unix | tls | embedded | rss | mget | proxy | soak | writes) ;;
    -h | --help) usage ;;
    *) echo "bench: unknown section: $s" >&2; usage 2 >&2 ;;
  esac
done

have() { command -v "$1" >/dev/null 2>&1; }
skip() { printf '\n== %s\n   skipped: %s\n' "$1" "$2"; }
for t in python3 /usr/bin/time; do have "$t" || { echo "bench: $t is required" >&2; exit 1; }; done

# Only the servers the sections use: `up` restarts a server whose setup changed, and a section
# that does not need it should not cost it its data.
servers=()
for s in "${SECTIONS[@]}"; do
  case $s in
    pg | rss | tls) servers+=(postgres) ;;
    mysql | hs) servers+=(mariadb) ;;
    memcache | soak | proxy) servers+=(memcached) ;;
    redis) servers+=(redis) ;;
    mget) servers+=(memcached redis postgres mariadb) ;;
    unix) servers+=(postgres mariadb) ;;
    writes) servers+=(postgres mariadb memcached) ;;
  esac
done
((${#servers[@]} == 0)) || scripts/servers.sh up "${servers[@]}" >&2
eval "$(scripts/servers.sh env)"
if [[ -z ${LOADGEN_BIN:-} ]]; then
  cargo build --release --quiet >&2
  LOADGEN_BIN=target/release/loadgen
fi
WORK=$(mktemp -d /tmp/loadgen-bench.XXXXXX)
# What a section changed on a server, undone when it ends (`undo`) or, if the script stops
# first, by the EXIT trap: commands run last first.
UNDO=()
undo() { local i; for ((i = ${#UNDO[@]} - 1; i >= 0; i--)); do eval "${UNDO[i]}" || true; done; UNDO=(); }
trap 'undo; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

echo "loadgen benchmarks  $(date -u '+%Y-%m-%d %H:%M:%S UTC')  ($("$LOADGEN_BIN" --version 2>/dev/null || echo loadgen))"
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "pairs per cell: $PAIRS, seconds per run: $SECS, no warm-up on either side"

# ---------------------------------------------------------------- running one client
N=0 # run counter: unique file names

# timed OUT -- CMD...: stdout to OUT, stderr to OUT.err, "user sys maxrss" to OUT.time.
# Never fails: a client that fails shows up as "fail" in its table, with its last stderr line.
# With SERVER_PID set (each section sets its server's), OUT.srv gets the CPU seconds that
# server's process tree spent meanwhile: how a client's requests arrive changes what each one
# costs the server, so tables show it per lookup next to the client's.
timed() {
  local out=$1 s0
  shift 2
  s0=$(server_cpu)
  /usr/bin/time -f '%U %S %M' -o "$out.time" "$@" >"$out" 2>"$out.err" </dev/null || true
  [[ -z $s0 ]] || echo "$s0 $(server_cpu)" >"$out.srv"
}
server_cpu() { [[ -z ${SERVER_PID:-} ]] || $LIB srvcpu "$SERVER_PID" || true; }
# uses NAME: the section's server, whose CPU per lookup the tables show.
uses() { SERVER_PID=$(scripts/servers.sh pid "$1" 2>/dev/null) || SERVER_PID=""; }

# lg TSV CELLS ROLE PAIR URL ARGS...: one loadgen run (URL "" = embedded server).
lg() {
  local tsv=$1 cells=$2 role=$3 pair=$4 url=$5 out=$WORK/run$((++N))
  shift 5
  timed "$out" -- "$LOADGEN_BIN" run ${url:+"$url"} -d "${LG_DURATION:-${SECS}s}" --warmup 0 -q --format json -o - "$@"
  $LIB record "$tsv" "$cells" "$role" "$pair" loadgen "$out" "$out.time"
}

# pgb TSV CELLS PAIR SCRIPT LOOKUPS_PER_TX CONNS: one pgbench run; 10% of transactions logged for p99.
# PGB_HOST: where it connects (a directory: the Unix socket in it, as libpq does); 127.0.0.1 by default.
pgb() {
  local tsv=$1 cells=$2 pair=$3 script=$4 factor=$5 c=$6 out=$WORK/run$((++N))
  mkdir "$out.log"
  timed "$out" -- pgbench -n -M prepared -f "$script" -c "$c" -j 2 -T "$SECS" \
    -l --sampling-rate=0.1 --log-prefix="$out.log/pg" -h "${PGB_HOST:-127.0.0.1}" -p "$LOADGEN_PG_PORT" -U loadgen loadgen
  $LIB record "$tsv" "$cells" peer "$pair" pgbench "$out" "$out.time" "$factor" "$out.log/pg"
}

sysb() { # sysb TSV CELL PAIR CONNS
  local out=$WORK/run$((++N))
  timed "$out" -- sysbench $B/sysbench-point-select.lua --db-driver=mysql --mysql-host=127.0.0.1 \
    --mysql-port="$LOADGEN_MY_PORT" --mysql-user=loadgen --mysql-password="${MYSQL_PWD:-}" \
    --mysql-db=loadgen --threads="$4" --time="$SECS" --percentile=99 run
  $LIB record "$1" "$2" peer "$3" sysbench "$out" "$out.time"
}

memas() { # memas TSV CELL PAIR CONNS [CFG KIND]: gets only, or the mix in CFG (KIND memaslap-mix)
  local out=$WORK/run$((++N))
  timed "$out" -- memcaslap -s "127.0.0.1:$LOADGEN_MC_PORT" -T 2 -c "$4" -t "${SECS}s" -w 1k \
    -S "$((SECS + 3600))s" -F "${5:-$B/memaslap-get.cfg}" ${MEMAS_DIV:+--division="$MEMAS_DIV"}
  $LIB record "$1" "$2" peer "$3" "${6:-memaslap}" "$out" "$out.time"
}

sysb_insert() { # sysb_insert TSV CELL PAIR CONNS: sysbench oltp_insert into its own sbtest1
  local out=$WORK/run$((++N))
  timed "$out" -- sysbench oltp_insert "${SB_ARGS[@]}" --threads="$4" --time="$SECS" --percentile=99 run
  $LIB record "$1" "$2" peer "$3" sysbench "$out" "$out.time"
}

# rb TSV CELL PAIR CONNS DEPTH N: one redis-benchmark run of N GETs of the padded keys in RB_DB.
rb() {
  local out=$WORK/run$((++N))
  timed "$out" -- redis-benchmark -h 127.0.0.1 -p "$LOADGEN_REDIS_PORT" --user loadgen -a loadgen \
    --dbnum "$RB_DB" -c "$4" --threads 2 -P "$5" -n "$6" -r 1000000 --csv GET 'usr:__rand_int__'
  $LIB record "$1" "$2" peer "$3" redis-benchmark "$out" "$out.time" "$6"
}

# rotate PAIR CMD...: eval the command strings in an order rotated by the pair number,
# so with two tools the order alternates: A B, B A, A B, ...
rotate() {
  local pair=$1 i n
  shift
  n=$#
  local cmds=("$@")
  for ((i = 0; i < n; i++)); do eval "${cmds[(pair - 1 + i) % n]}"; done
}

# ---------------------------------------------------------------- sections
bench_pg() {
  uses postgres
  have pgbench || { skip "pg" "pgbench not installed"; return; }
  local tsv=$WORK/pg.tsv c p wire="" url=$LOADGEN_PG_URL
  # Plain TCP on both sides, as before TLS: the server has ssl=on, and libpq's default (prefer)
  # would encrypt. The tls section measures TLS.
  local -x PGSSLMODE=disable
  # Rows for both PostgreSQL drivers: tokio-postgres (driver=tokio) and the default wire driver.
  if "$LOADGEN_BIN" run "$url?driver=wire" -n 10 -q -o - >/dev/null 2>&1; then
    if "$LOADGEN_BIN" run "$url?driver=no-such-driver" -n 10 -q -o - >/dev/null 2>&1; then
      WIRE_NOTE="?driver= is not interpreted by this build (an unknown driver is accepted): wire rows skipped"
    else wire=1; fi
  else WIRE_NOTE="loadgen run '$url?driver=wire' -n 10 failed: wire rows skipped"; fi
  for c in 4 16 64; do
    for ((p = 1; p <= PAIRS; p++)); do
      local cmds=("lg $tsv '$c tokio' lg $p '$url?driver=tokio' -c $c -t 2"
        "pgb $tsv '$c tokio${wire:+,$c wire}' $p $B/pg-select.sql 1 $c")
      [[ -n $wire ]] && cmds+=("lg $tsv '$c wire' lg $p '$url?driver=wire' -c $c -t 2")
      rotate "$p" "${cmds[@]}"
    done
  done
  for ((p = 1; p <= PAIRS; p++)); do
    local cmds=("lg $tsv '4x16 pipe tokio' lg $p '$url?driver=tokio' -c 4 -p 16 -t 2"
      "pgb $tsv '4x16 pipe tokio${wire:+,4x16 pipe wire}' $p $B/pg-select-pipeline10.sql 10 4")
    [[ -n $wire ]] && cmds+=("lg $tsv '4x16 pipe wire' lg $p '$url?driver=wire' -c 4 -p 16 -t 2")
    rotate "$p" "${cmds[@]}"
  done
  $LIB pairs "$tsv" "pg: loadgen -t 2 vs pgbench -M prepared -j 2 (tokio: ?driver=tokio, tokio-postgres via deadpool; wire: the default lean driver; pipe: loadgen -p 16 vs pgbench pipeline of 10, lookups/s = tps x 10)" loadgen pgbench
  [[ -n $wire ]] || echo "   note: $WIRE_NOTE"
}

bench_mysql() {
  uses mariadb
  have sysbench || { skip "mysql" "sysbench not installed"; return; }
  # Plain TCP, as sysbench connects (--mysql-ssl=off): the server has TLS, and loadgen's
  # default (PREFERRED, as the mysql client) would take it.
  local tsv=$WORK/mysql.tsv c p url="$LOADGEN_MY_URL?ssl-mode=DISABLED"
  # Rows for both MySQL drivers: the default wire driver and mysql_async (?driver=mysql_async).
  for c in 4 16 64; do
    for ((p = 1; p <= PAIRS; p++)); do
      rotate "$p" "lg $tsv '$c wire' lg $p '$url&driver=wire' -c $c -t 2" \
        "sysb $tsv '$c wire,$c mysql_async' $p $c" \
        "lg $tsv '$c mysql_async' lg $p '$url&driver=mysql_async' -c $c -t 2"
    done
  done
  $LIB pairs "$tsv" "mysql: loadgen -t 2 vs sysbench point-select (prepared, same table and query; wire: the default lean driver; mysql_async: ?driver=mysql_async)" loadgen sysbench
}

bench_hs() {
  uses mariadb
  local tsv=$WORK/hs.tsv cfg p
  for cfg in "2 1" "2 16" "16 1"; do
    set -- $cfg
    for ((p = 1; p <= PAIRS; p++)); do
      rotate "$p" "lg $tsv 'c$1 p$2' lg $p '$LOADGEN_HS_URL' -c $1 -p $2 -t 2" \
        "lg $tsv 'c$1 p$2' peer $p '$LOADGEN_MY_URL?ssl-mode=DISABLED' -c 16 -t 2"
    done
  done
  $LIB pairs "$tsv" "hs: loadgen HandlerSocket vs loadgen MariaDB SQL -c 16 (ratio = HS/SQL; CPU ms/1k = µs/lookup)" \
    hs sql-c16 "HS c2 p16 >= 7x SQL c16; client CPU per pipelined lookup <= 2 µs" "hs config"
}

bench_memcache() {
  uses memcached
  have memcaslap || { skip "memcache" "memcaslap (libmemcached-tools) not installed"; return; }
  local tsv=$WORK/mc.tsv c p
  for c in 4 16 64; do
    for ((p = 1; p <= PAIRS; p++)); do
      # memaslap reads its own C x 1000 keys (-w 1k): loadgen reads as many, so both have the
      # same working set in the server's caches (over 1,000,000 keys every get misses them).
      rotate "$p" "lg $tsv $c lg $p '$LOADGEN_MC_URL' -c $c -t 2 --keys 1-$((c * 1000))" "memas $tsv $c $p $c"
    done
  done
  $LIB pairs "$tsv" "memcache: loadgen -t 2 --keys 1-C000 vs memaslap -T 2 -w 1k, gets of the same C x 1000 keys (memaslap: gets/s = cmd_get / run time, its C x 1000 preload sets not counted as lookups; CPU over all its ops; p99 = log2 bucket upper bound)" loadgen memaslap
}

# redis-benchmark asks for usr:<id zero-padded to 12 digits> (its __rand_int__) and runs a
# number of requests, not a time: the same rows are stored under its key names in database
# RB_DB (dropped afterwards), and its -n is set from a short calibration run to last SECS.
bench_redis() {
  uses redis
  have redis-benchmark || { skip "redis" "redis-benchmark (redis-tools) not installed"; return; }
  local tsv=$WORK/redis.tsv cfg p n rps cli=(redis-cli -h 127.0.0.1 -p "$LOADGEN_REDIS_PORT" --user loadgen --no-auth-warning)
  RB_DB=15
  export REDISCLI_AUTH=loadgen
  python3 $B/redis-benchmark-keys.py 1000000 | "${cli[@]}" -n "$RB_DB" --pipe >"$WORK/rb-load" 2>&1 ||
    { skip "redis" "loading redis-benchmark's keys failed: $(tail -n 1 "$WORK/rb-load")"; return; }
  for cfg in "16 1" "16 16"; do
    set -- $cfg
    rps=$(redis-benchmark -h 127.0.0.1 -p "$LOADGEN_REDIS_PORT" --user loadgen -a loadgen --dbnum "$RB_DB" \
      -c "$1" --threads 2 -P "$2" -n $((50000 * $2)) -r 1000000 --csv GET 'usr:__rand_int__' 2>/dev/null |
      tail -n 1 | cut -d, -f2 | tr -d '"')
    n=$(python3 -c "print(max(10000, int(float('${rps:-0}') * $SECS)))")
    for ((p = 1; p <= PAIRS; p++)); do
      rotate "$p" "lg $tsv 'c$1 P$2' lg $p '$LOADGEN_REDIS_URL' -c $1 -p $2 -t 2" "rb $tsv 'c$1 P$2' $p $1 $2 $n"
    done
  done
  "${cli[@]}" -n "$RB_DB" FLUSHDB >/dev/null
  unset REDISCLI_AUTH
  $LIB pairs "$tsv" "redis: loadgen -t 2 -p D vs redis-benchmark --threads 2 -P D, GET of 1,000,000 stored rows (loadgen usr:<id>, redis-benchmark usr:<12-digit id>, same rows; redis-benchmark runs -n requests calibrated to ${SECS}s)" \
    loadgen redis-benchmark "ratio >= 1.0 at -P 1 and -P 16; client CPU per GET <= redis-benchmark's" "conns/depth"
}

# Multi-gets: keys/s at --batch 1, 10, 100 on every target with one (memcached `get k1 ... kN`,
# Redis MGET), and memcached against memaslap --division N (its multi-get) in alternating pairs.
# Keys/s: loadgen's keys.keys_per_s (qps at N = 1), memaslap's cmd_get (one per key) / run time.
bench_mget() {
  SERVER_PID=""
  local tsv=$WORK/mget.tsv all=$WORK/mget-all.tsv n p
  for n in 1 10 100; do
    for ((p = 1; p <= PAIRS; p++)); do
      rotate "$p" "lg $all 'redis N=$n' lg $p '$LOADGEN_REDIS_URL' -c 16 -t 2 --batch $n" \
        "lg $all 'hs N=$n' lg $p '$LOADGEN_HS_URL' -c 16 -t 2 --batch $n" \
        "lg $all 'pg N=$n' lg $p '$LOADGEN_PG_URL' -c 16 -t 2 --batch $n" \
        "lg $all 'mysql N=$n' lg $p '$LOADGEN_MY_URL' -c 16 -t 2 --batch $n" \
        "lg $all 'embedded N=$n' lg $p '' -c 16 -t 2 --batch $n"
      # memaslap reads its own 16 x 1,000 keys: loadgen reads as many.
      if have memcaslap; then
        rotate "$p" "lg $tsv 'N=$n' lg $p '$LOADGEN_MC_URL' -c 16 -t 2 --keys 1-16000 --batch $n" \
          "MEMAS_DIV=$n memas $tsv 'N=$n' $p 16"
      else
        lg "$tsv" "N=$n" lg "$p" "$LOADGEN_MC_URL" -c 16 -t 2 --keys 1-16000 --batch "$n"
      fi
    done
  done
  $LIB pairs "$tsv" "multi-get: memcached keys/s, loadgen --batch N -c 16 -t 2 vs memaslap --division N -c 16 -T 2 (qps columns are keys/s; p99 is per request for loadgen, per get for memaslap; CPU ms per 1k keys)" \
    loadgen memaslap "median ratio >= 1.0 at every N" "keys/req"
  $LIB solo "$all" "multi-get: keys/s of Redis MGET, HandlerSocket IN, PostgreSQL = ANY(\$1), MariaDB IN (?, ...) and the embedded server's GET /usr?ids=, loadgen --batch N -c 16 -t 2 over 1,000,000 keys (qps column is keys/s; p99 per request)" cells
}

# A proxy against the set it fronts: three memcached of our own, read directly as a pool
# (loadgen's ketama) and through twemproxy (Debian's nutcracker, ketama over md5, the same
# placement: `prepare` loads the pool, and every get through the proxy must hit), alternating.
bench_proxy() {
  SERVER_PID=""
  have nutcracker || { skip "proxy" "nutcracker (twemproxy) not installed"; return; }
  local tsv=$WORK/proxy.tsv base=$((20000 + LOADGEN_MC_PORT % 10000 + 51)) p c i names=() addrs=()
  for i in 0 1 2; do names+=("memcached_$((base + i))"); addrs+=("127.0.0.1:$((base + i))"); done
  scripts/servers.sh up "${names[@]}" >&2
  UNDO+=("scripts/servers.sh down ${names[*]} >&2")
  local pool="memcache://$(IFS=,; echo "${addrs[*]}")" proxy="127.0.0.1:$((base + 3))"
  printf 'pool:\n  listen: %s\n  hash: md5\n  distribution: ketama\n  timeout: 2000\n  servers:\n' "$proxy" >"$WORK/nc.yml"
  for i in "${addrs[@]}"; do printf '   - %s:1\n' "$i" >>"$WORK/nc.yml"; done
  nutcracker -c "$WORK/nc.yml" -d -p "$WORK/nc.pid" -o "$WORK/nc.log" -s $((base + 4)) -a 127.0.0.1 ||
    { skip "proxy" "nutcracker did not start: $(tail -n 1 "$WORK/nc.log")"; undo; return; }
  sleep 0.5
  UNDO+=("kill $(cat "$WORK/nc.pid")")
  "$LOADGEN_BIN" prepare "$pool" --rows 100000 >/dev/null 2>&1 || { skip "proxy" "prepare $pool failed"; undo; return; }
  for c in 4 16; do
    for ((p = 1; p <= PAIRS; p++)); do
      rotate "$p" "lg $tsv 'c$c' lg $p '$pool' -c $c -t 2 --keys 1-100000 --verify" \
        "lg $tsv 'c$c' peer $p 'memcache://$proxy' -c $c -t 2 --keys 1-100000 --verify"
    done
  done
  for n in 10 100; do
    for ((p = 1; p <= PAIRS; p++)); do
      rotate "$p" "lg $tsv 'c16 N=$n' lg $p '$pool' -c 16 -t 2 --keys 1-100000 --batch $n --verify" \
        "lg $tsv 'c16 N=$n' peer $p 'memcache://$proxy' -c 16 -t 2 --keys 1-100000 --batch $n --verify"
    done
  done
  undo
  $LIB pairs "$tsv" "proxy: three memcached, loadgen -t 2 straight to the pool (ketama in the client) vs through twemproxy (ketama in the proxy); every get verified and a hit on both sides (N=n: --batch n, qps columns are keys/s and CPU is per key; ratio = direct/proxy)" \
    direct twemproxy "" "conns"
}

# Unix sockets at 16 connections: loadgen over each SQL server's socket vs over TCP, per driver
# (ratio = socket/TCP), then loadgen vs pgbench over the same PostgreSQL socket.
bench_unix() {
  SERVER_PID=""
  [[ -n ${LOADGEN_PG_SOCKET_URL:-} && -n ${LOADGEN_MY_SOCKET_URL:-} ]] ||
    { skip "unix" "scripts/servers.sh env names no sockets (LOADGEN_PG_SOCKET_URL, LOADGEN_MY_SOCKET_URL)"; return; }
  local tsv=$WORK/unix.tsv peer=$WORK/unix-pgbench.tsv p d
  local -x PGSSLMODE=disable   # the TCP side plain, as the socket is
  for ((p = 1; p <= PAIRS; p++)); do
    for d in wire tokio; do
      rotate "$p" "lg $tsv 'pg $d' lg $p '$LOADGEN_PG_SOCKET_URL&driver=$d' -c 16 -t 2" \
        "lg $tsv 'pg $d' peer $p '$LOADGEN_PG_URL?driver=$d' -c 16 -t 2"
    done
    for d in wire mysql_async; do
      rotate "$p" "lg $tsv 'mysql $d' lg $p '$LOADGEN_MY_SOCKET_URL&driver=$d' -c 16 -t 2" \
        "lg $tsv 'mysql $d' peer $p '$LOADGEN_MY_URL?ssl-mode=DISABLED&driver=$d' -c 16 -t 2"
    done
  done
  $LIB pairs "$tsv" "unix: loadgen -c 16 -t 2 over the Unix socket vs over TCP, same server and driver (ratio = socket/TCP; CPU ms/1k = client µs/lookup)" \
    socket tcp "" "target"
  have pgbench || { skip "unix vs pgbench" "pgbench not installed"; return; }
  for ((p = 1; p <= PAIRS; p++)); do
    rotate "$p" "lg $peer wire lg $p '$LOADGEN_PG_SOCKET_URL&driver=wire' -c 16 -t 2" \
      "PGB_HOST='$LOADGEN_PG_SOCKET_DIR' pgb $peer wire,tokio $p $B/pg-select.sql 1 16" \
      "lg $peer tokio lg $p '$LOADGEN_PG_SOCKET_URL&driver=tokio' -c 16 -t 2"
  done
  $LIB pairs "$peer" "unix: loadgen -c 16 -t 2 vs pgbench -M prepared -c 16 -j 2 over the same PostgreSQL socket (pg-select.sql: the same lookup; wire: the default driver, tokio: ?driver=tokio)" \
    loadgen pgbench "ratio >= 1.0" "driver"
}

# PostgreSQL over TLS (sslmode=require: encrypted, no certificate check, as pgbench gets it from
# PGSSLMODE), 16 connections: loadgen vs pgbench, then loadgen over TLS vs plain (sslmode=disable)
# on the same server and driver, whose CPU columns give TLS's client cost per lookup.
bench_tls() {
  uses postgres
  have pgbench || { skip "tls" "pgbench not installed"; return; }
  local peer=$WORK/tls-pgbench.tsv tsv=$WORK/tls.tsv p d url=$LOADGEN_PG_URL
  for ((p = 1; p <= PAIRS; p++)); do
    rotate "$p" "lg $peer wire lg $p '$url?sslmode=require&driver=wire' -c 16 -t 2" \
      "PGSSLMODE=require pgb $peer wire,tokio $p $B/pg-select.sql 1 16" \
      "lg $peer tokio lg $p '$url?sslmode=require&driver=tokio' -c 16 -t 2"
  done
  $LIB pairs "$peer" "tls: loadgen -c 16 -t 2 vs pgbench -M prepared -c 16 -j 2, both sslmode=require (TLS 1.3) on the same PostgreSQL (wire: the default driver, tokio: ?driver=tokio)" \
    loadgen pgbench "ratio >= 1.0" "driver"
  for ((p = 1; p <= PAIRS; p++)); do
    for d in wire tokio; do
      rotate "$p" "lg $tsv 'pg $d' lg $p '$url?sslmode=require&driver=$d' -c 16 -t 2" \
        "lg $tsv 'pg $d' peer $p '$url?sslmode=disable&driver=$d' -c 16 -t 2"
    done
  done
  $LIB pairs "$tsv" "tls: loadgen -c 16 -t 2 with sslmode=require vs sslmode=disable, same server and driver (ratio = TLS/plain; CPU ms/1k = client µs/lookup: TLS minus plain is TLS's cost)" \
    tls plain "client CPU per lookup, TLS minus plain <= 2 µs" "target"
}

bench_embedded() {
  SERVER_PID=""
  local tsv=$WORK/emb.tsv c p
  for c in 4 16 64; do
    for ((p = 1; p <= PAIRS; p++)); do lg "$tsv" "$c" lg "$p" "" -c "$c"; done
  done
  $LIB solo "$tsv" "embedded: loadgen against its own embedded HTTP server (the generator's ceiling; process CPU includes the server)" embedded
}

bench_rss() {
  uses postgres
  local tsv=$WORK/rss.tsv c p
  for c in 16 256 1000; do
    for ((p = 1; p <= PAIRS; p++)); do
      # 1000 backends fork slowly here: allow connects 15s instead of --timeout's 5s.
      LG_DURATION=5s lg "$tsv" "$c" lg "$p" "$LOADGEN_PG_URL" -c "$c" -t 2 --timeout 15s
    done
  done
  $LIB solo "$tsv" "rss: peak RSS of loadgen against PostgreSQL, -t 2 -d 5s" rss "< 64 MiB at 1000 connections"
}

# Bounded memory over a long run: 256 connections x 4 in flight at a paced 20,000/s (timers,
# pacer, reconnect-free steady state) with the metrics endpoint on, RSS sampled every 10 s.
bench_soak() {
  SERVER_PID=""
  local secs=${BENCH_SOAK_SECONDS:-600} out=$WORK/soak pid t=0 port
  [[ $secs =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_SOAK_SECONDS: a positive integer" >&2; exit 2; }
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$LOADGEN_BIN" run "$LOADGEN_MC_URL" -c 256 -p 4 -t 2 -R 20000 -d "${secs}s" --warmup 0 -q \
    --metrics "127.0.0.1:$port" --format json -o "$out.json" >/dev/null 2>"$out.err" &
  pid=$!
  : >"$out.rss"
  while kill -0 "$pid" 2>/dev/null; do
    awk -v t="$t" '/^VmRSS/ {print t, $2}' "/proc/$pid/status" >>"$out.rss" 2>/dev/null || true
    curl -sf "http://127.0.0.1:$port/metrics" >/dev/null 2>&1 || true # scraped as Prometheus would
    sleep 10
    t=$((t + 10))
  done
  wait "$pid" || echo "   loadgen failed: $(tail -1 "$out.err")"
  $LIB soak "$out.rss" "$out.json" "soak: loadgen memcache -c 256 -p 4 -R 20000 for ${secs}s with --metrics, RSS every 10 s"
}

# ---------------------------------------------------------------- writes
# Writes against the peers that write: PostgreSQL updates vs pgbench, memcached 90/10 get/set
# vs memaslap, MariaDB inserts vs sysbench oltp_insert, and the seed table (inserts at 2..40
# connections with commits synced and not). Everything a section writes is undone when it ends,
# or when the script exits early (the EXIT trap), so a later --verify read of ids 1..1000000
# passes: see docs/benchmarks.md "writes".
psql_as() { psql -X -qAt -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$LOADGEN_PG_PORT" -U loadgen loadgen "$@"; }
my_root() { env -u MYSQL_PWD mariadb --no-defaults -S "$LOADGEN_MY_SOCKET" -u root -N "$@"; }

# Whether loadgen can run an insert-only mix on URL (it refuses one in preflight, exit 2).
can_write() { "$LOADGEN_BIN" run "$1" --mix insert=100 -n 1 -q -o - >"$WORK/can-write" 2>&1 || return 1; }

bench_writes() {
  SERVER_PID=""
  local -x PGSSLMODE=disable # plain TCP on both sides, as the pg section
  local part
  for part in ${BENCH_WRITES:-pg_update memcache mysql_insert seed}; do
    case $part in
      pg_update | memcache | mysql_insert | seed) "writes_$part" ;;
      *) echo "BENCH_WRITES: unknown part: $part (pg_update, memcache, mysql_insert, seed)" >&2; exit 2 ;;
    esac
  done
}

# PostgreSQL UPDATE at 16 connections. Both write the same column of the same table, over ids
# 9,000,001..10,000,000: a copy of the data set's rows made here and deleted afterwards, so the
# loaded ids 1..1000000 keep their values.
writes_pg_update() {
  have pgbench || { skip "writes: pg update" "pgbench not installed"; return; }
  local tsv=$WORK/pg-update.tsv p
  UNDO+=("psql_as -c 'DELETE FROM usr WHERE user_id > 1000000' -c 'VACUUM usr'")
  psql_as -c "INSERT INTO usr SELECT g, 'user' || g, 'user' || g || '@example.com',
    timestamp '2010-02-03 11:22:33' + g * interval '1 second' FROM generate_series(9000001, 10000000) g" \
    -c "VACUUM ANALYZE usr"
  for ((p = 1; p <= PAIRS; p++)); do
    rotate "$p" "lg $tsv 16 lg $p '$LOADGEN_PG_URL' --mix update=100 --keys 9000001-10000000 -c 16 -t 2" \
      "pgb $tsv 16 $p $B/pg-update.sql 1 16"
  done
  undo
  $LIB pairs "$tsv" "writes: PostgreSQL UPDATE usr SET user_name = \$2 WHERE user_id = \$1, loadgen --mix update=100 -t 2 vs pgbench -M prepared -j 2 (pg-update.sql), ids uniform in 9,000,001..10,000,000 (updates/s; CPU ms/1k = µs/update)" \
    loadgen pgbench "ratio >= 1.0"
}

# memcached, 90% get / 10% set at 16 connections: loadgen over usr:<id> (1,000,000 keys, its
# rows as values), memaslap over its own 16-byte keys with 51-byte values. loadgen's sets change
# the values (user<id>v<version>): the rows are loaded again afterwards (loadgen prepare).
writes_memcache() {
  have memcaslap || { skip "writes: memcache" "memcaslap (libmemcached-tools) not installed"; return; }
  local tsv=$WORK/mc-mix.tsv p
  UNDO+=("'$LOADGEN_BIN' prepare '$LOADGEN_MC_URL' >/dev/null")
  for ((p = 1; p <= PAIRS; p++)); do
    rotate "$p" "lg $tsv 16 lg $p '$LOADGEN_MC_URL' --mix read=90,upsert=10 -c 16 -t 2" \
      "memas $tsv 16 $p 16 $B/memaslap-get90-set10.cfg memaslap-mix"
  done
  undo
  $LIB pairs "$tsv" "writes: memcached 90% get / 10% set, loadgen --mix read=90,upsert=10 -t 2 vs memaslap -T 2 (memaslap-get90-set10.cfg; ops/s = gets + sets; memaslap p99 = log2 bucket upper bound over all its ops)" \
    loadgen memaslap "ratio >= 1.0"
}

# MariaDB inserts at 16 connections: loadgen into usr above max(user_id) (deleted afterwards),
# sysbench oltp_insert into its own table sbtest1 (dropped afterwards).
writes_mysql_insert() {
  have sysbench || { skip "writes: mysql insert" "sysbench not installed"; return; }
  local tsv=$WORK/my-insert.tsv p url="$LOADGEN_MY_URL?ssl-mode=DISABLED"
  can_write "$url" || { skip "writes: mysql insert" "loadgen cannot insert into MariaDB yet: $(tail -n 1 "$WORK/can-write")"; return; }
  SB_ARGS=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$LOADGEN_MY_PORT" --mysql-user=loadgen
    --mysql-password="${MYSQL_PWD:-}" --mysql-db=loadgen --tables=1 --table-size=1000)
  UNDO+=("sysbench oltp_insert \"\${SB_ARGS[@]}\" cleanup >/dev/null"
    "my_root -e 'DELETE FROM loadgen.usr WHERE user_id > 1000000'")
  sysbench oltp_insert "${SB_ARGS[@]}" prepare >"$WORK/sb-prepare" 2>&1 ||
    { skip "writes: mysql insert" "sysbench prepare failed: $(tail -n 1 "$WORK/sb-prepare")"; undo; return; }
  for ((p = 1; p <= PAIRS; p++)); do
    rotate "$p" "lg $tsv 16 lg $p '$url' --mix insert=100 -c 16 -t 2" "sysb_insert $tsv 16 $p 16"
  done
  undo
  $LIB pairs "$tsv" "writes: MariaDB inserts, loadgen --mix insert=100 -t 2 (prepared INSERT into usr) vs sysbench oltp_insert (its sbtest1, plain statements), innodb_flush_log_at_trx_commit=$(my_root -e 'SELECT @@innodb_flush_log_at_trx_commit') (inserts/s)" \
    loadgen sysbench "ratio >= 1.0"
}

# The seed table: inserts at 2, 5, 10, 20, 40 connections, BENCH_SEED_N per step, as the 2010
# blogs. PostgreSQL with synchronous_commit on and off per session (?options=), with fsync on
# for the section (the servers run with fsync off: ALTER SYSTEM, reload, reset afterwards);
# MariaDB, when loadgen can write to it, with innodb_flush_log_at_trx_commit 1 and 2 (SET
# GLOBAL, set back afterwards). The rows inserted are deleted afterwards.
writes_seed() {
  local n=${BENCH_SEED_N:-20000} counts=2,5,10,20,40 cols=() flush my="$LOADGEN_MY_URL?ssl-mode=DISABLED" v
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_SEED_N: a positive integer" >&2; exit 2; }
  seed_sweep() { # seed_sweep NAME URL: one sweep into $WORK/seed-NAME.json
    "$LOADGEN_BIN" run "$2" --mix insert=100 --sweep "$counts" -n "$n" -t 2 --warmup 0 -q \
      -o "$WORK/seed-$1.json" >"$WORK/seed-$1.out" 2>"$WORK/seed-$1.err" || true
    cols+=("$1=$WORK/seed-$1.json")
  }
  local servers=" ${BENCH_SEED_SERVERS:-postgres mariadb} "
  if [[ $servers == *" postgres "* ]]; then
    UNDO+=("psql_as -c 'ALTER SYSTEM RESET fsync' -c 'SELECT pg_reload_conf()' >/dev/null"
      "psql_as -c 'DELETE FROM usr WHERE user_id > 1000000' -c 'VACUUM usr'")
    psql_as -c "ALTER SYSTEM SET fsync = on" -c "SELECT pg_reload_conf()" >/dev/null
    sleep 1 # the reload reaches the backends
    for v in on off; do seed_sweep "pg-sync-$v" "$LOADGEN_PG_URL?options=-c%20synchronous_commit%3D$v"; done
    undo
  fi
  if [[ $servers != *" mariadb "* ]]; then
    :
  elif can_write "$my"; then
    flush=$(my_root -e 'SELECT @@innodb_flush_log_at_trx_commit')
    UNDO+=("my_root -e 'SET GLOBAL innodb_flush_log_at_trx_commit = $flush'"
      "my_root -e 'DELETE FROM loadgen.usr WHERE user_id > 1000000'")
    for v in 1 2; do
      my_root -e "SET GLOBAL innodb_flush_log_at_trx_commit = $v"
      seed_sweep "mariadb-flush-$v" "$my"
    done
    undo
  else
    echo "   note: MariaDB left out of the seed table: $(tail -n 1 "$WORK/can-write")"
  fi
  $LIB seed "writes: the seed table, inserts at $counts connections, $n per step and target (loadgen --mix insert=100 --sweep $counts -n $n -t 2; PostgreSQL fsync on, synchronous_commit per session)" "${cols[@]}"
}

for s in "${SECTIONS[@]}"; do "bench_$s"; done
