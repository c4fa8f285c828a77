#!/usr/bin/env bash
# Starts one run of the loadgen Job: (re)creates it suspended, sets START_AT a little ahead so
# every pod has pulled its image and waits, then resumes the Job.
#
#   deploy/kubernetes/start.sh [SECONDS_AHEAD]     (default 90)
#
# The Secret loadgen-target must exist (docs/scaling-out.md). Set KUBECTL="kubectl -n NS" for
# another namespace.
set -euo pipefail
cd "$(dirname "$0")"
ahead=${1:-90}
kubectl=${KUBECTL:-kubectl}

$kubectl delete job loadgen --ignore-not-found --wait=true
$kubectl apply -k .
start_at=$(date -u -d "+$ahead seconds" +%Y-%m-%dT%H:%M:%SZ)
$kubectl patch configmap loadgen-run --type merge -p "{\"data\":{\"START_AT\":\"$start_at\"}}"
$kubectl patch job loadgen --type merge -p '{"spec":{"suspend":false}}'
echo "start: generators begin at $start_at" >&2
