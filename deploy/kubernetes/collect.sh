#!/usr/bin/env bash
# Copies every generator's result files out of the loadgen Job's pods, lets the pods end,
# and merges the results:
#
#   deploy/kubernetes/collect.sh [JOB] [DIR]      (defaults: loadgen, results/<job>-<time>)
#
# Waits for each pod's `loadgen` container to finish, then `kubectl cp`s /results/gen-<i>.json
# and gen-<i>.hlog from the pod's `results` container (the loadgen image needs no tar) and
# touches /results/collected so that container ends. Needs kubectl (current namespace, or
# set KUBECTL="kubectl -n NS") and loadgen on the PATH for the final merge.
set -euo pipefail

job=${1:-loadgen}
dir=${2:-results/$job-$(date -u +%Y%m%d-%H%M%S)}
kubectl=${KUBECTL:-kubectl}
loadgen=${LOADGEN:-loadgen}

mkdir -p "$dir"
read -ra pods <<<"$($kubectl get pods -l "job-name=$job" -o jsonpath='{.items[*].metadata.name}')"
((${#pods[@]})) || { echo "collect: no pods of job $job" >&2; exit 1; }

files=()
for pod in "${pods[@]}"; do
  index=$($kubectl get pod "$pod" -o jsonpath="{.metadata.annotations['batch\.kubernetes\.io/job-completion-index']}")
  echo "collect: $pod (generator $index): waiting for loadgen to finish" >&2
  until code=$($kubectl get pod "$pod" \
    -o jsonpath='{.status.containerStatuses[?(@.name=="loadgen")].state.terminated.exitCode}') && [[ -n $code ]]; do
    sleep 5
  done
  echo "collect: $pod: loadgen exited with $code" >&2
  for ext in json hlog; do
    if $kubectl cp -c results "$pod:/results/gen-$index.$ext" "$dir/gen-$index.$ext" >/dev/null; then
      [[ $ext == json ]] && files+=("$dir/gen-$index.json")
    else
      echo "collect: $pod: no gen-$index.$ext" >&2
    fi
  done
  $kubectl exec "$pod" -c results -- touch /results/collected || true
done

((${#files[@]})) || { echo "collect: no result files" >&2; exit 1; }
echo "collect: merging ${#files[@]} result files" >&2
"$loadgen" merge "${files[@]}" -o "$dir/merged.json"
