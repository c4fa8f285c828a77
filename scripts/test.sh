#!/usr/bin/env bash
# All the tests: fmt, clippy and the import-loop check, unit tests, then integration tests
# against real servers that this script installs (apt-get, when missing) and starts on loopback
# via scripts/servers.sh (which also installs Chromium, for the HTML report's tests).
# Usage: scripts/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'test.sh: %s\n' "$*" >&2; }

# Style and shape first, so such a failure shows before any server starts.
say "cargo fmt --check"
cargo fmt --check
say "cargo clippy (-D warnings)"
cargo clippy --release --quiet --all-targets -- -D warnings
say "import loops (scripts/imports.py)"
python3 scripts/imports.py

bash scripts/servers.sh up
bash scripts/servers.sh tools   # headless Chromium opens the HTML reports (tests/html.rs)
eval "$(bash scripts/servers.sh env)"
export LOADGEN_REQUIRE_SERVERS=1

say "building (release)"
cargo build --release --quiet
lg=target/release/loadgen

# Load the data sets once; a server restarted from its data dir keeps them.
rows=1000000
pg_rows=$(psql "$LOADGEN_PG_URL" -XAtqc "SELECT count(*) FROM usr" 2>/dev/null || echo 0)
if [ "$pg_rows" != "$rows" ]; then say "loading PostgreSQL"; $lg prepare "$LOADGEN_PG_URL" --rows $rows; fi
my_rows=$(mariadb --protocol=tcp -h 127.0.0.1 -P "$LOADGEN_MY_PORT" -u loadgen -N -e "SELECT count(*) FROM loadgen.usr" 2>/dev/null || echo 0)
if [ "$my_rows" != "$rows" ]; then say "loading MariaDB"; $lg prepare "$LOADGEN_MY_URL" --rows $rows; fi
if $lg prepare --help >/dev/null 2>&1 && [ -n "${LOADGEN_MC_URL:-}" ]; then
  say "loading memcached"; $lg prepare "$LOADGEN_MC_URL" --rows $rows || say "memcached prepare failed"
fi
# The second memcached (on a Unix socket only) starts empty too.
if [ -n "${LOADGEN_MC_SOCKET_URL:-}" ]; then
  say "loading memcached_unix"; $lg prepare "$LOADGEN_MC_SOCKET_URL" --rows $rows || say "memcached_unix prepare failed"
fi
# Redis keeps nothing across a restart (no persistence): load it every time, like memcached.
if [ -n "${LOADGEN_REDIS_URL:-}" ]; then
  say "loading Redis"; $lg prepare "$LOADGEN_REDIS_URL" --rows $rows || say "Redis prepare failed"
fi

say "unit tests"
cargo test --release --quiet --lib --bins "$@"
# Integration tests share the servers and read their global counters: one at a time.
say "integration tests (real servers)"
cargo test --release --quiet --test '*' "$@" -- --test-threads=1
say "all tests passed"
