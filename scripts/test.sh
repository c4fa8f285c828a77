#!/usr/bin/env bash
# All the tests: fmt, clippy, rustdoc, the import-loop and size checks, unit tests, then
# integration tests against real servers that this script installs (apt-get, when missing) and
# starts on loopback via scripts/servers.sh (which also installs Chromium, for the HTML
# report's tests).
# Every step and every test file runs even when an earlier one failed (servers up, the build
# and the data loads too; what cannot run without the build or the servers' environment is
# reported NOT RUN); the end prints one
# summary (which passed, failed or did not run, with the failing tests' names) and the exit code
# is non-zero when anything failed or did not run.
# Usage: scripts/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'test.sh: %s\n' "$*" >&2; }
started=$(date +%s)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
passed=() failed=() notrun=()

# step NAME CMD...: runs CMD, its output shown as it goes, and records NAME as passed or failed;
# $ok is "yes" when it passed (step itself never fails, so set -e stops nothing).
step() {
  local name=$1
  shift
  say "$name"
  ok=
  if "$@"; then passed+=("$name") ok=yes; else failed+=("$name"); fi
}

# tests NAME CMD...: a cargo test command; a failure lists the failing tests by name, and a run
# that never got to its `test result:` line (a build error, a crash) is one that did not run.
tests() {
  local name=$1 log t0 rc=0 names
  shift
  log=$logs/$(echo "$name" | tr -c 'A-Za-z0-9_\n' _).log
  t0=$(date +%s)
  say "$name"
  "$@" 2>&1 | tee "$log" || rc=$?
  local took=$(($(date +%s) - t0))s
  names=$(sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$log" | paste -sd ' ')
  if ! grep -q '^test result: ' "$log"; then
    notrun+=("$name ($took; exit $rc, no test result: see its output above)")
  elif [ "$rc" -ne 0 ] || [ -n "$names" ]; then
    failed+=("$name ($took): ${names:-exit $rc}")
  else
    passed+=("$name ($took)")
  fi
}

summary() {
  local total=$(($(date +%s) - started)) x
  printf '\ntest.sh: summary after %dm%02ds\n' $((total / 60)) $((total % 60))
  for x in "${passed[@]}"; do printf '  passed   %s\n' "$x"; done
  for x in "${failed[@]}"; do printf '  FAILED   %s\n' "$x"; done
  for x in "${notrun[@]}"; do printf '  NOT RUN  %s\n' "$x"; done
  # The closing line counts steps and test files; one that did not run counts as failed.
  printf 'summary: %d passed, %d failed\n' ${#passed[@]} $((${#failed[@]} + ${#notrun[@]}))
  [ ${#failed[@]} -eq 0 ] && [ ${#notrun[@]} -eq 0 ]
}

# Style and shape first, so such a failure shows before any server starts; the tests run anyway.
step "cargo fmt --check" cargo fmt --check
step "cargo clippy (-D warnings)" cargo clippy --release --quiet --all-targets -- -D warnings
step "cargo doc (-D warnings)" env RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
step "import loops (scripts/imports.py)" python3 scripts/imports.py
step "file and fn sizes (scripts/sizes.py)" python3 scripts/sizes.py

# notrun NAME WHY: a step that cannot run because an earlier one failed.
notrun() { say "$1: not run ($2)"; notrun+=("$1 ($2)"); }

step "servers up (scripts/servers.sh up)" bash scripts/servers.sh up
step "tools (scripts/servers.sh tools)" bash scripts/servers.sh tools # headless Chromium (tests/html.rs)
servers=yes
if env_out=$(bash scripts/servers.sh env) && eval "$env_out"; then
  passed+=("servers env (scripts/servers.sh env)")
else
  failed+=("servers env (scripts/servers.sh env)")
  servers=
fi
export LOADGEN_REQUIRE_SERVERS=1

step "build (cargo build --release)" cargo build --release --quiet
built=$ok
lg=target/release/loadgen

# Load the data sets once (scripts/load_data.sh: a server restarted from its data dir keeps them).
if [ -z "$built" ] || [ -z "$servers" ]; then
  why=$([ -z "$built" ] && echo "the build failed" || echo "no server environment")
  notrun "loading the data sets" "$why"
else
  step "loading PostgreSQL" bash scripts/load_data.sh $lg pg
  step "loading MariaDB" bash scripts/load_data.sh $lg my
  # memcached and Redis keep nothing across a restart: loaded every time. The second
  # memcached (on a Unix socket only) starts empty too.
  step "loading memcached" bash scripts/load_data.sh $lg mc mc_unix
  step "loading Redis" bash scripts/load_data.sh $lg redis
fi

if [ -z "$built" ]; then
  notrun "unit tests" "the build failed"
else
  tests "unit tests" cargo test --release --lib --bins "$@"
fi
# Integration tests share the servers and read their global counters: one file at a time, one
# test at a time, every file whatever happened to the ones before it.
for f in tests/*.rs; do
  t=$(basename "$f" .rs)
  if [ -z "$built" ]; then
    notrun "tests/$t.rs" "the build failed"
  elif [ -z "$servers" ]; then
    notrun "tests/$t.rs" "no server environment"
  else
    tests "tests/$t.rs" cargo test --release --test "$t" "$@" -- --test-threads=1
  fi
done
summary
