#!/usr/bin/env bash
# Deliberate bugs in the behaviours loadgen's numbers rest on, and whether the tests catch them.
# Each mutant is one exact edit of one file in a scratch clone of HEAD; the tests named for it
# run against the real servers (scripts/servers.sh), and the mutant is KILLED when any of them
# fails, SURVIVED when all pass. The table at the end is the report; the exit code is 1 when a
# mutant survived or could not be applied (the code moved on: update its line below).
#
#   scripts/mutants.sh            every mutant
#   scripts/mutants.sh NAME...    those named
#
# Slow (a rebuild per mutant), so not part of scripts/test.sh; from a clean clone it runs in well
# under an hour on 2 cores. Builds go to target/mutants (kept, so a second run is quicker).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

# name^file^text^mutated text^tests (FILE:FILTER, space-separated; FILTER may be empty)
MUTANTS=$(
  cat <<'EOF'
count-more-matches^src/result/run.rs^delta <= expected && delta + unknown >= expected^delta + unknown >= expected^conservation_negative: memcached:a_proxy_is_counted_by_the_servers_behind_it
count-fewer-matches^src/result/run.rs^delta <= expected && delta + unknown >= expected^delta <= expected^memcached:a_proxy_is_counted_by_the_servers_behind_it
verdict-drops-count-reason^src/verdict.rs^            why.push(w);^            let _ = w;^conservation_negative: faults:memcached_killed_and_restarted_mid_run
warmup-keys-counted^src/recorder.rs^        self.count(warm, None, |c| {^        self.count(false, None, |c| {^mget_warmup: mget_mix:
ketama-wrong-word^src/proto/memcached/ketama.rs^let hash = word(&Md5::digest(key), 0);^let hash = word(&Md5::digest(key), 4);^memcached:a_proxy_is_counted_by_the_servers_behind_it
moved-not-kept^src/proto/redis/slots.rs^        self.owner[slot].store(to as u16, Ordering::Relaxed);^        let _ = slot;^redis_failover:a_graceful_failover_is_followed_and_counted_on_every_node
set-hang-ignored^src/proto/routed.rs^        self.hang_after = timeout * 9 / 10;^        self.hang_after = Duration::MAX;^memcached:a_hung_pool_server_holds_up_only_its_own_keys redis_failover:a_hung_master
replicas-not-mapped^src/proto/redis/slots.rs^            .filter(|l| !l.gone)^            .filter(|l| !l.gone && l.master)^redis_failover:a_graceful_failover
member-borrows-run-unknowns^src/collector/members.rs^let unknown = a.unsure.saturating_sub(b.unsure).min(expected);^let unknown = expected;^memcached:a_hung_pool_server_holds_up_only_its_own_keys
pacer-gap-off^src/pacer.rs^let gap_ns = 1e9 * conns as f64 / r;^let gap_ns = 1e9 * conns as f64 / r * 1.01;^load_models:a_fixed_rate_sends_exactly_its_schedule
trace-speed-ignored^src/trace/schedule.rs^            speed,^            speed: 1.0,^trace:
EOF
)

want=("$@")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git clone -q "$repo" "$scratch/src"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target/mutants}
cd "$scratch/src"

bash scripts/servers.sh up >&2
eval "$(bash scripts/servers.sh env)"
export LOADGEN_REQUIRE_SERVERS=1
cargo build --release --quiet
bash scripts/load_data.sh "$CARGO_TARGET_DIR/release/loadgen"

# run_tests SPEC...: 0 when every test passed, 1 when any failed.
run_tests() {
  local spec file filter rc=0
  for spec in "$@"; do
    file=${spec%%:*} filter=${spec#*:}
    [ -f "tests/$file.rs" ] || { echo "mutants: no tests/$file.rs" >&2; rc=1; continue; }
    cargo test --release --quiet --test "$file" ${filter:+"$filter"} -- --test-threads=1 >"$scratch/log" 2>&1 || rc=1
  done
  return $rc
}

results=()
survived=0
while IFS='^' read -r name file from to tests; do
  [ -n "$name" ] || continue
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
  if ! python3 - "$file" "$from" "$to" <<'PY'; then
import sys
path, a, b = sys.argv[1:]
s = open(path).read()
if s.count(a) != 1:
    sys.exit(f"mutants: {path}: the text to mutate is there {s.count(a)} times, not once")
open(path, "w").write(s.replace(a, b))
PY
    results+=("STALE     $name ($file: text not found once)")
    survived=$((survived + 1))
    continue
  fi
  echo "mutants: $name: $file; tests $tests" >&2
  # shellcheck disable=SC2086 # the tests are a list of words
  if run_tests $tests; then
    results+=("SURVIVED  $name (every test passed: $tests)")
    survived=$((survived + 1))
  else
    results+=("killed    $name (by $tests)")
  fi
  git checkout -q -- "$file"
done <<<"$MUTANTS"

printf '\nmutants: %d run\n' ${#results[@]}
printf '  %s\n' "${results[@]}"
[ "$survived" -eq 0 ]
