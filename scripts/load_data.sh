#!/usr/bin/env bash
# Loads the data sets the tests read into the servers of scripts/servers.sh (whose `env` must be
# in the environment): PostgreSQL's and MariaDB's usr tables when they do not hold the rows
# already (a server restarted from its data dir keeps them), and memcached's and Redis's every
# time (they keep nothing across a restart).
# Usage: scripts/load_data.sh LOADGEN_BINARY [NAME...]   (names: pg my mc mc_unix redis; default all)
set -euo pipefail
lg=$1
shift
rows=1000000
say() { printf 'load_data: %s\n' "$*" >&2; }

load_pg() {
  local n
  [ -n "${LOADGEN_PG_URL:-}" ] || { say "no LOADGEN_PG_URL from servers.sh env"; return 1; }
  n=$(psql "$LOADGEN_PG_URL" -XAtqc "SELECT count(*) FROM usr" 2>/dev/null || echo 0)
  [ "$n" = "$rows" ] || "$lg" prepare "$LOADGEN_PG_URL" --rows $rows
}
load_my() {
  local n
  [ -n "${LOADGEN_MY_URL:-}" ] || { say "no LOADGEN_MY_URL from servers.sh env"; return 1; }
  n=$(mariadb --protocol=tcp -h 127.0.0.1 -P "${LOADGEN_MY_PORT:-3306}" -u loadgen -N -e "SELECT count(*) FROM loadgen.usr" 2>/dev/null || echo 0)
  [ "$n" = "$rows" ] || "$lg" prepare "$LOADGEN_MY_URL" --rows $rows
}
load_url() { [ -z "${1:-}" ] || "$lg" prepare "$1" --rows $rows; }

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(pg my mc mc_unix redis)
for n in "${names[@]}"; do
  case $n in
    pg) load_pg ;;
    my) load_my ;;
    mc) load_url "${LOADGEN_MC_URL:-}" ;;
    mc_unix) load_url "${LOADGEN_MC_SOCKET_URL:-}" ;;
    redis) load_url "${LOADGEN_REDIS_URL:-}" ;;
    *) say "unknown data set $n (pg, my, mc, mc_unix, redis)"; exit 2 ;;
  esac
done
