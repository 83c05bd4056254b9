#!/usr/bin/env bash
# The operator's issue-4 target measured against the REAL local control plane (etcd +
# kube-apiserver + kwok): N NVL72Jobs created at once on R kwok racks; time until every job is
# admitted (status.placement written) and every rank pod exists; operator peak RSS; the job
# reconcile p50/p99 from the operator's own histogram (wall time, API calls included).
#
#   bench/operator_cluster_bench.sh [--racks 100] [--jobs 1000] [--workers 4] [--seed 1]
#                                   [--build DIR] [--timeout 300]
#
# The job mix is bench/operator_bench.cc's: per 1,000 jobs 8 x 16 ranks, 22 x 8, 40 x 4, 150 x 2, the
# rest 1 rank; 4 GPUs per rank; topology Required; shuffled by --seed. No kube-scheduler runs: the
# pods stay Pending (the target is admission + pod creation). Needs nvl72-operator in --build DIR
# (default build/bench) and the pinned tools of scripts/build-tools. Starts and stops its own
# cluster. Prints a markdown summary on stdout; progress on stderr.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
racks=100 jobs=1000 workers=4 seed=1 build=$root/build/bench timeout=300
while (($#)); do
  case $1 in
    --racks) racks=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in racks jobs workers seed timeout; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "--$v must be a positive integer" >&2; exit 2; }
done
op_bin=$build/operator/nvl72-operator
[[ -x $op_bin ]] || { echo "build nvl72-operator in $build first (cmake --build $build --target nvl72-operator)" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq is needed (scripts/install-deps)" >&2; exit 2; }
e2e_name=operator-cluster-bench
# shellcheck source=../tests/e2e/lib.sh
source "$root/tests/e2e/lib.sh"

state=$(mktemp -d /tmp/nvl72-opbench.XXXXXX) && rmdir "$state"
work=$(mktemp -d /tmp/nvl72-opbench-work.XXXXXX)
op_pid=
cleanup() {
  [[ -n $op_pid ]] && stop_pid "$op_pid"
  "$root/scripts/local-cluster" down --state "$state" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

log "local control plane with $racks racks ($((racks * 18)) kwok nodes)"
"$root/scripts/local-cluster" up --racks "$racks" --node-monitor-grace 40 --state "$state" >/dev/null
# shellcheck disable=SC1091
source "$state/env"
kc apply -f "$root/crds/" >/dev/null
kc wait --for=condition=Established crd/nvl72jobs.nvl72.dev --timeout=60s >/dev/null
ns=bench
kc create namespace "$ns" >/dev/null

metrics_port=$(free_port) health_port=$(free_port)
"$op_bin" --kubeconfig "$KUBECONFIG" --namespace "$ns" --workers "$workers" \
  --metrics-addr "127.0.0.1:$metrics_port" --health-addr "127.0.0.1:$health_port" \
  --log-level warning >"$work/operator.log" 2>&1 &
op_pid=$!
ready() { [[ $(curl -s --max-time 2 "http://127.0.0.1:$health_port/readyz") == ok* ]]; }
wait_until 120 ready || { tail -20 "$work/operator.log" >&2; echo "operator not ready" >&2; exit 1; }
log "operator ready (pid $op_pid, $workers workers; caches hold $((racks * 18)) nodes)"

# The jobs, one List, created by a single kubectl call (sequential POSTs by kubectl).
python3 - "$jobs" "$seed" "$ns" >"$work/jobs.json" <<'EOF'
import json, random, sys
n, seed, ns = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sizes = []
for size, per_mille in ((16, 8), (8, 22), (4, 40), (2, 150)):
    sizes += [size] * (n * per_mille // 1000)
sizes += [1] * (n - len(sizes))
random.Random(seed).shuffle(sizes)
items = [{"apiVersion": "nvl72.dev/v1alpha1", "kind": "NVL72Job",
          "metadata": {"name": f"job-{i}", "namespace": ns},
          "spec": {"replicas": s, "gpusPerReplica": 4, "topology": {"mode": "Required"},
                   "template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                                         "command": ["sleep", "3600"]}]}}}}
         for i, s in enumerate(sizes)]
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)
EOF
total_ranks=$(jq '[.items[].spec.replicas] | add' "$work/jobs.json")
rss_start=$(awk '/^VmRSS/ {print $2}' "/proc/$op_pid/status")

count_admitted() {
  api GET "/apis/nvl72.dev/v1alpha1/namespaces/$ns/nvl72jobs" |
    jq '[.items[] | select((.status.placement.ranks // []) | length > 0)] | length'
}
count_pods() { api GET "/api/v1/namespaces/$ns/pods?labelSelector=nvl72.dev%2Fjob" | jq '.items | length'; }
ms_now() { date +%s%3N; }

log "creating $jobs NVL72Jobs ($total_ranks ranks) with one kubectl create"
t0=$(ms_now)
kc create -f "$work/jobs.json" >/dev/null
t_created=$(ms_now)
log "all $jobs created in $(((t_created - t0))) ms; waiting for admission and pods"
admitted=0 pods=0 t_admitted= t_pods=
while (($(ms_now) - t0 < timeout * 1000)); do
  if [[ -z $t_admitted ]]; then
    admitted=$(count_admitted)
    ((admitted == jobs)) && t_admitted=$(ms_now)
  fi
  pods=$(count_pods)
  if ((pods >= total_ranks)) && [[ -n $t_admitted ]]; then t_pods=$(ms_now); break; fi
  sleep 0.5
done
kill -0 "$op_pid" 2>/dev/null || { tail -20 "$work/operator.log" >&2; echo "operator died" >&2; exit 1; }
rss_peak=$(awk '/^VmHWM/ {print $2}' "/proc/$op_pid/status")
metrics=$(curl -s --max-time 10 "http://127.0.0.1:$metrics_port/metrics")

# p50/p99 of a histogram: the upper bound of the first bucket whose cumulative count reaches q.
quantile() {  # KIND Q
  awk -v kind="$1" -v q="$2" '
    index($0, "nvl72_operator_reconcile_duration_seconds_bucket{") == 1 && index($0, "kind=\"" kind "\"") {
      match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5)
      n++; les[n] = le; cum[n] = $NF
    }
    END {
      if (n == 0 || cum[n] == 0) { print "-"; exit }
      for (i = 1; i <= n; i++) if (cum[i] >= q * cum[n]) { print (les[i] == "+Inf" ? "+Inf" : les[i] * 1000) " ms"; exit }
    }' <<<"$metrics"
}
count_of() {  # KIND
  awk -v kind="$1" 'index($0, "nvl72_operator_reconcile_duration_seconds_count{") == 1 && index($0, "kind=\"" kind "\"") {print $NF}' <<<"$metrics"
}
errors=$(awk 'index($0, "nvl72_operator_reconciles_total{") == 1 && index($0, "result=\"error\"") {s += $NF} END {print s + 0}' <<<"$metrics")

done_ms=${t_pods:+$((t_pods - t0))}
cat <<EOF
| racks (nodes) | jobs (ranks) | workers | created (kubectl) | all admitted | all pods created | job reconciles: count, p50 / p99 (bucket bound, API incl.) | admission passes: count, p50 / p99 | reconcile errors | operator RSS start / peak |
|---|---|---|---|---|---|---|---|---|---|
| $racks ($((racks * 18))) | $admitted/$jobs ($pods/$total_ranks) | $workers | $((t_created - t0)) ms | ${t_admitted:+$((t_admitted - t0)) ms} | ${done_ms:+$done_ms ms} | $(count_of job), $(quantile job 0.5) / $(quantile job 0.99) | $(count_of admission), $(quantile admission 0.5) / $(quantile admission 0.99) | $errors | $((rss_start / 1024)) / $((rss_peak / 1024)) MB |
EOF
if [[ -z $done_ms ]]; then
  log "NOT DONE within ${timeout} s: $admitted/$jobs admitted, $pods/$total_ranks pods"
  exit 1
fi
log "done: $jobs jobs admitted and $total_ranks pods created $done_ms ms after the first create"
