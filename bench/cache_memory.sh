#!/usr/bin/env bash
# Memory of nvl72-extender and nvl72-operator with a large cluster in their caches, on the REAL
# local control plane (etcd + kube-apiserver + kwok): --racks x 18 kwok nodes and --pods running
# 1-GPU pods (created bound to nodes round-robin; kwok marks them Running), so the informers hold
# objects exactly as the API server sends them (managedFields, status, ...) before the transforms
# of model/slim.h. Reports VmRSS / VmHWM of each process once its caches synced.
#
#   bench/cache_memory.sh [--racks 556] [--pods 20000] [--build DIR] [--kube-bench]
#
# --kube-bench: also runs bench/kube_bench's BM_InformerSyncRealServer against the cluster (the kube/
# informers alone, through HttpClient: time to sync Nodes and Pods, RSS added; objects as sent,
# without managedFields, and the Nodes alone), each variant in its own process.
#
# 556 racks = 10,008 nodes. Needs nvl72-extender and nvl72-operator in --build DIR (default
# build/bench) and the pinned tools of scripts/build-tools. Starts and stops its own cluster.
# Prints a markdown table row on stdout; progress on stderr.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
racks=556 pods=20000 build=$root/build/bench kube_bench=0
while (($#)); do
  case $1 in
    --kube-bench) kube_bench=1; shift ;;
    --racks) racks=$2; shift 2 ;;
    --pods) pods=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in racks pods; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "--$v must be a positive integer" >&2; exit 2; }
done
ext_bin=$build/scheduler-plugin/nvl72-extender op_bin=$build/operator/nvl72-operator
[[ -x $ext_bin && -x $op_bin ]] || { echo "build nvl72-extender and nvl72-operator in $build first" >&2; exit 2; }
e2e_name=cache-memory
# shellcheck source=../tests/e2e/lib.sh
source "$root/tests/e2e/lib.sh"

state=$(mktemp -d /tmp/nvl72-cachemem.XXXXXX) && rmdir "$state"
work=$(mktemp -d /tmp/nvl72-cachemem-work.XXXXXX)
ext_pid= op_pid=
cleanup() {
  [[ -n $ext_pid ]] && stop_pid "$ext_pid"
  [[ -n $op_pid ]] && stop_pid "$op_pid"
  "$root/scripts/local-cluster" down --state "$state" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

nodes=$((racks * 18))
log "local control plane with $racks racks ($nodes kwok nodes)"
"$root/scripts/local-cluster" up --racks "$racks" --node-monitor-grace 40 --state "$state" >/dev/null
# shellcheck disable=SC1091
source "$state/env"
kc apply -f "$root/crds/" >/dev/null
kc create namespace load >/dev/null

# Pods: one curl per 2,000 (HTTP/2, 16 in flight), bound round-robin to the nodes.
log "creating $pods pods"
t0=$(date +%s)
mapfile -t node_names < <(api GET /api/v1/nodes | jq -r '.items[].metadata.name')
((${#node_names[@]} == nodes)) || { echo "expected $nodes nodes, got ${#node_names[@]}" >&2; exit 1; }
url="$NVL72_APISERVER_URL/api/v1/namespaces/load/pods"
for ((start = 0; start < pods; start += 2000)); do
  {
    printf 'parallel\nparallel-max = 16\nno-progress-meter\n'
    for ((i = start; i < start + 2000 && i < pods; i++)); do
      node=${node_names[i % nodes]}
      ((i == start)) || printf 'next\n'
      printf 'url = "%s"\ncacert = "%s"\nheader = "Authorization: Bearer %s"\nheader = "Content-Type: application/json"\noutput = "/dev/null"\n' \
        "$url" "$NVL72_CA_FILE" "$NVL72_TOKEN"
      body="{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"load-$i\",\"labels\":{\"app\":\"load\",\"team\":\"t$((i % 7))\"}},"
      body+="\"spec\":{\"nodeName\":\"$node\",\"restartPolicy\":\"Always\",\"tolerations\":[{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],"
      body+="\"volumes\":[{\"name\":\"data\",\"emptyDir\":{}}],\"containers\":[{\"name\":\"worker\",\"image\":\"registry.example/ml/worker:1.4.2\",\"command\":[\"python3\",\"-m\",\"worker\"],"
      body+="\"env\":[{\"name\":\"WORKER_ID\",\"value\":\"$i\"},{\"name\":\"LOG_LEVEL\",\"value\":\"info\"},{\"name\":\"DATA_DIR\",\"value\":\"/data\"}],"
      body+="\"volumeMounts\":[{\"name\":\"data\",\"mountPath\":\"/data\"}],"
      body+="\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"8Gi\",\"nvidia.com/gpu\":\"1\"},\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}"
      printf 'data = "%s"\n' "${body//\"/\\\"}"
    done
  } >"$work/pods.curl"
  curl -s -K "$work/pods.curl" || true
done
count_pods() {
  local r; r=$(api GET "/api/v1/namespaces/load/pods?limit=1")
  jq -r '(.metadata.remainingItemCount // 0) + (.items | length)' <<<"$r"
}
running_pods() {  # kwok marks a bound pod Running. remainingItemCount is not given with a field
  # selector: page through (5,000 a page) and count.
  local total=0 cont= r
  while :; do
    r=$(api GET "/api/v1/namespaces/load/pods?limit=5000&fieldSelector=status.phase%3DRunning${cont:+&continue=$cont}")
    total=$((total + $(jq '.items | length' <<<"$r")))
    cont=$(jq -r '.metadata.continue // empty' <<<"$r")
    [[ -n $cont ]] || break
  done
  echo "$total"
}
n=$(count_pods)
log "$n pods created in $(($(date +%s) - t0)) s; waiting for kwok to mark them Running"
((n == pods)) || { echo "only $n of $pods pods created" >&2; exit 1; }
all_running() { (($(running_pods) >= pods)); }
wait_until 600 all_running || log "not all Running after 600 s: $(running_pods) (measuring anyway)"
sample_pod_bytes=$(api GET /api/v1/namespaces/load/pods/load-0 | jq -c . | wc -c)
sample_node_bytes=$(api GET "/api/v1/nodes/${node_names[0]}" | jq -c . | wc -c)
log "$(running_pods) Running; one pod is $sample_pod_bytes bytes of JSON, one node $sample_node_bytes"

if ((kube_bench)); then
  [[ -x $build/bench/kube_bench ]] || { echo "build kube_bench in $build first" >&2; exit 2; }
  for variant in 0 1 2; do
    log "kube_bench BM_InformerSyncRealServer/$variant (0: objects as sent, 1: without managedFields, 2: Nodes only)"
    NVL72_KUBECONFIG=$KUBECONFIG "$build/bench/kube_bench" --benchmark_filter="InformerSyncRealServer/$variant/" \
      2>/dev/null | grep -E '^BM_InformerSyncRealServer' >&2
  done
fi

mem() {  # PID -> "rss_mb hwm_mb"
  awk '/^VmRSS/ {r = $2} /^VmHWM/ {h = $2} END {printf "%d %d", r / 1024, h / 1024}' "/proc/$1/status"
}
ext_port=$(free_port)
"$ext_bin" --kubeconfig "$KUBECONFIG" --listen "127.0.0.1:$ext_port" >"$work/extender.log" 2>&1 &
ext_pid=$!
ext_ready() { [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$ext_port/readyz") == 200 ]]; }
te=$(date +%s)
wait_until 300 ext_ready || { tail -5 "$work/extender.log" >&2; echo "extender not ready" >&2; exit 1; }
ext_sync=$(($(date +%s) - te))
sleep 5
read -r ext_rss ext_hwm <<<"$(mem "$ext_pid")"
log "extender ready after ${ext_sync} s: RSS $ext_rss MB, peak $ext_hwm MB"

health_port=$(free_port)
"$op_bin" --kubeconfig "$KUBECONFIG" --metrics-addr 0 --health-addr "127.0.0.1:$health_port" \
  --log-level warning >"$work/operator.log" 2>&1 &
op_pid=$!
op_ready() { [[ $(curl -s --max-time 2 "http://127.0.0.1:$health_port/readyz") == ok* ]]; }
to=$(date +%s)
wait_until 300 op_ready || { tail -5 "$work/operator.log" >&2; echo "operator not ready" >&2; exit 1; }
op_sync=$(($(date +%s) - to))
sleep 5
read -r op_rss op_hwm <<<"$(mem "$op_pid")"
log "operator ready after ${op_sync} s: RSS $op_rss MB, peak $op_hwm MB"

echo "| nodes | pods (Running) | bytes of JSON per pod / node | extender: synced after, RSS / peak | operator: synced after, RSS / peak |"
echo "|---|---|---|---|---|"
echo "| $nodes | $pods ($(running_pods)) | $sample_pod_bytes / $sample_node_bytes | ${ext_sync} s, $ext_rss / $ext_hwm MB | ${op_sync} s, $op_rss / $op_hwm MB |"
