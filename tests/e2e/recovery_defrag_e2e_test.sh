#!/usr/bin/env bash
# e2e of the node-caused pod failure trigger and of defragmentation (issue 6) on the real local
# control plane: kube-apiserver + etcd + kube-controller-manager + kwok (4 racks of 18 x 4-GPU nodes), nvl72-operator,
# nvl72-extender and a kube-scheduler serving the nvl72-scheduler profile. The real scheduler binds
# every pod; nothing is bound by this script.
#
#   tests/e2e/recovery_defrag_e2e_test.sh OPERATOR_BINARY EXTENDER_BINARY
# Env: NVL72_CLUSTER_STATE=DIR reuses a running cluster (started with --racks 4) instead of starting
#      one; REC_E2E_LOGS=DIR keeps the operator, extender and scheduler logs.
#
# Checks:
#  1. a 16-rank Required job "moe" runs; its rank-3 pod is failed by the node (phase Failed, reason
#     NodeLost, written to the pod's status as the node lifecycle would; the node itself stays
#     Ready): the rank moves to a spare of the SAME rack, bound by kube-scheduler + extender and
#     Running; status.recoveries 1; the job is not Failed. Time from the pod failure to the
#     replacement Running is printed as a RESULT line.
#  2. defragmentation: the three other racks are fragmented through admission (preemptible p1 + p2
#     fill rack A; B + X fill rack B; C half-fills rack C; X is deleted), so a 16-rank Required job
#     "big" fits no rack although 20+ nodes are free. The operator moves p1 and p2 (graceful
#     deletion, then re-admission in racks B and C): big runs in rack A, p1 and p2 run again
#     (Moved True -> False, defragMoves 1), B and C (not preemptible) never move. The time from
#     big's creation to all of its ranks Running is a RESULT line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
op_bin=${1:-${NVL72_OPERATOR_BIN:-$repo/build/rec/operator/nvl72-operator}}
ext_bin=${2:-${NVL72_EXTENDER_BIN:-$repo/build/rec/scheduler-plugin/nvl72-extender}}
[[ -x $op_bin ]] || { echo "operator binary $op_bin not found" >&2; exit 2; }
[[ -x $ext_bin ]] || { echo "extender binary $ext_bin not found" >&2; exit 2; }

e2e_name=defrag-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"

e2e_cluster "$repo"
ns=defrag-e2e-$(date +%s)
workdir=$(mktemp -d /tmp/nvl72-defrag-e2e-work.XXXXXX)
op_pid= ext_pid= sched_pid=

cleanup() {
  # The operator releases the jobs (finalizer); the garbage collector and kwok take their pods.
  kc -n "$ns" delete nvj --all --wait=true --timeout=30s >/dev/null 2>&1 || true
  stop_pid "$op_pid"
  stop_pid "$sched_pid"
  stop_pid "$ext_pid"
  if ((failures > 0)); then
    tail_logs "$workdir" 30
  fi
  [[ -n ${REC_E2E_LOGS:-} ]] && mkdir -p "$REC_E2E_LOGS" && cp "$workdir"/*.log "$REC_E2E_LOGS"/ 2>/dev/null
  kc delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  e2e_cluster_down "$repo"
  rm -rf "$workdir"
}
trap cleanup EXIT

# ------------------------------------------------------------------------------------------------
log "namespace, CRD, extender, nvl72 kube-scheduler, operator"
e2e_namespace "$repo" "$ns" || { fail "namespace $ns not ready"; exit 1; }
start_extender "$ext_bin" "$workdir/extender.log" || { fail "extender not ready"; exit 1; }
start_nvl72_scheduler "$repo" "$workdir" "$workdir/nvl72-scheduler.log"
start_operator "$op_bin" "$ns" "$workdir/operator.log" --admission-resync-seconds 5 --log-level info \
  --defrag-max-concurrent-moves 2 --defrag-min-interval-seconds 5 --defrag-cooldown-seconds 300 \
  --defrag-grace-seconds 2 || { fail "operator not ready"; exit 1; }
kill -0 "$sched_pid" 2>/dev/null || { fail "nvl72 kube-scheduler exited"; exit 1; }
ok "extender, nvl72 kube-scheduler and operator running"

# ------------------------------------------------------------------------------------------------
# helpers. The timed paths talk to the API server with curl (kubectl takes seconds to start on a
# loaded machine, which would swamp the numbers).
node_of_rank() { job_json moe | jq -r --argjson r "$1" '.status.placement.ranks[]? | select(.rank == $r) | .node'; }
recoveries() { job_json moe | jq -r '.status.recoveries // empty'; }
cond() { job_json moe | jq -r --arg t "$1" '.status.conditions[]? | select(.type == $t) | .status'; }
# "name nodeName planned phase deleting" per pod
pods_table() {
  kc -n "$ns" get pods -l nvl72.dev/job=moe -o go-template --template='{{range .items}}{{.metadata.name}} {{or .spec.nodeName "-"}} {{index .metadata.annotations "nvl72.dev/node"}} {{.status.phase}} {{if .metadata.deletionTimestamp}}deleting{{else}}live{{end}}{{"\n"}}{{end}}'
}
all_running_on_plan() {
  local t; t=$(pods_table)
  [[ $(awk '$2 == $3 && $4 == "Running" && $5 == "live"' <<<"$t" | wc -l) == 16 && $(wc -l <<<"$t") == 16 ]]
}
one_pod_per_rank() {
  local t; t=$(pods_table)
  [[ $(wc -l <<<"$t") == 16 && $(awk '{print $1}' <<<"$t" | sort -u | wc -l) == 16 ]]
}
# ------------------------------------------------------------------------------------------------

job_yaml() {  # NAME REPLICAS PREEMPTIBLE
  cat <<YAML
apiVersion: nvl72.dev/v1alpha1
kind: NVL72Job
metadata: {name: $1}
spec:
  replicas: $2
  gpusPerReplica: 4
  preemptible: $3
  topology: {mode: Required}
  recovery: {policy: InPlace, notReadyGraceSeconds: 10, maxRecoveries: 5}
  template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m}}}]}}
YAML
}
racks_of() { job_json "$1" | jq -r '.status.placement.ranks[]?.node' | cut -d- -f1 | sort -u | tr '\n' ' ' | sed 's/ $//'; }
nodes_of() { job_json "$1" | jq -r '.status.placement.ranks[]?.node' | sort | tr '\n' ' '; }
running_on_plan() {  # JOB REPLICAS: every rank pod bound to its planned node, Running, not deleting
  local t
  t=$(kc -n "$ns" get pods -l "nvl72.dev/job=$1" -o go-template --template='{{range .items}}{{.metadata.name}} {{or .spec.nodeName "-"}} {{index .metadata.annotations "nvl72.dev/node"}} {{.status.phase}} {{if .metadata.deletionTimestamp}}deleting{{else}}live{{end}}{{"\n"}}{{end}}')
  [[ $(awk '$2 == $3 && $4 == "Running" && $5 == "live"' <<<"$t" | wc -l) == "$2" && $(grep -c . <<<"$t") == "$2" ]] || return 1
  # ... and on the nodes of the current placement
  local planned; planned=$(awk '{print $3}' <<<"$t" | sort | tr '\n' ' ')
  [[ $planned == "$(nodes_of "$1")" ]]
}
start_job() {  # NAME REPLICAS PREEMPTIBLE
  job_yaml "$@" | kc -n "$ns" apply -f - >/dev/null
  wait_until 90 running_on_plan "$1" "$2" || { fail "$1 did not start"; exit 1; }
}
moved_cond() { job_json "$1" | jq -r '[.status.conditions[]? | select(.type == "Moved") | .status, .reason] | join("/")'; }

# ------------------------------------------------------------------------------------------------
log "1. a rank pod failed by its node (NodeLost) moves to a spare of the same rack"
start_job moe 16 false
ok "moe: 16 ranks Running in $(racks_of moe)"
mrack=$(racks_of moe)
old=$(job_json moe | jq -r '.status.placement.ranks[] | select(.rank == 3) | .node')
tf=$(now_ns)
api PATCH "/api/v1/namespaces/$ns/pods/moe-3/status" application/merge-patch+json \
  '{"status":{"phase":"Failed","reason":"NodeLost","message":"e2e: node lost the pod"}}' >/dev/null
new=
deadline=$(($(date +%s) + 60))
while (($(date +%s) < deadline)); do
  n=$(job_json moe | jq -r '.status.placement.ranks[] | select(.rank == 3) | .node')
  if [[ -n $n && $n != "$old" ]] && pod_running_on moe-3 "$n"; then new=$n; break; fi
  sleep 0.05
done
pf_ms=$(ms_since "$tf")
if [[ -n $new ]]; then
  ok "rank 3: $old -> $new after ${pf_ms} ms (node $old itself stayed Ready)"
  [[ $(rack_of "$new") == "$mrack" ]] && ok "replacement in the same rack" || fail "replacement $new not in $mrack"
else
  fail "rank 3 not replaced within 60 s (placement $(job_json moe | jq -c '.status.placement.ranks[3]'))"
fi
result "recovery_pod_failed_by_node_to_running_ms=$pf_ms"
[[ $(job_json moe | jq -r '.status.recoveries // 0') == 1 ]] && ok "status.recoveries 1" || fail "recoveries $(job_json moe | jq -r .status.recoveries)"
[[ $(job_json moe | jq -r '.status.conditions[]? | select(.type == "Failed") | .status') != True ]] && ok "moe not Failed" || fail "moe Failed"
wait_until 30 running_on_plan moe 16 && ok "16 ranks Running, one pod each" || fail "moe not running again"

# ------------------------------------------------------------------------------------------------
log "2. defragmentation: a 16-rank Required gang fits only after two preemptible jobs move"
start_job p1 8 true
start_job p2 8 true
rack_a=$(racks_of p1)
[[ $(racks_of p2) == "$rack_a" && $rack_a != "$mrack" ]] || { fail "layout: p1 in $rack_a, p2 in $(racks_of p2)"; exit 1; }
start_job b 8 false
start_job x 8 false
rack_b=$(racks_of b)
[[ $(racks_of x) == "$rack_b" ]] || { fail "layout: b in $rack_b, x in $(racks_of x)"; exit 1; }
start_job c 8 false
rack_c=$(racks_of c)
[[ $rack_c != "$rack_b" && $rack_c != "$rack_a" && $rack_c != "$mrack" ]] || { fail "layout: c in $rack_c"; exit 1; }
b_nodes=$(nodes_of b) c_nodes=$(nodes_of c)
kc -n "$ns" delete nvj x --wait=false >/dev/null
wait_until 60 bash -c "! '$NVL72_KUBECTL' --kubeconfig '$KUBECONFIG' -n $ns get nvj x >/dev/null 2>&1" || fail "x not deleted"
ok "fragmented: p1+p2 in $rack_a, b in $rack_b, c in $rack_c, moe in $mrack (x deleted)"
tb=$(now_ns)
job_yaml big 16 false | kc -n "$ns" apply -f - >/dev/null
if wait_until 100 running_on_plan big 16; then
  big_ms=$(ms_since "$tb")
  ok "big: 16 ranks Running in $(racks_of big) after ${big_ms} ms"
  [[ $(racks_of big) == "$rack_a" ]] && ok "big got the freed rack $rack_a" || fail "big in $(racks_of big), freed rack was $rack_a"
else
  big_ms=timeout
  fail "big not running: $(job_json big | jq -c '.status.conditions')"
fi
result "defrag_waiting_gang_created_to_running_ms=$big_ms moves=2"
for j in p1 p2; do
  if wait_until 60 running_on_plan "$j" 8; then
    ok "$j runs again in $(racks_of "$j")"
  else
    fail "$j not running again: $(job_json "$j" | jq -c '.status.conditions')"
  fi
  [[ $(racks_of "$j") != "$rack_a" ]] || fail "$j still in $rack_a"
  [[ $(job_json "$j" | jq -r '.status.defragMoves // 0') == 1 ]] && ok "$j defragMoves 1" || fail "$j defragMoves $(job_json "$j" | jq -r .status.defragMoves)"
  wait_until 30 bash -c "[[ \$(curl -s --cacert '$NVL72_CA_FILE' -H 'Authorization: Bearer $NVL72_TOKEN' '$NVL72_APISERVER_URL/apis/nvl72.dev/v1alpha1/namespaces/$ns/nvl72jobs/$j' | jq -r '[.status.conditions[]? | select(.type == \"Moved\") | .status, .reason] | join(\"/\")') == False/MoveCompleted ]]" &&
    ok "$j Moved False/MoveCompleted" || fail "$j Moved is '$(moved_cond "$j")'"
done
[[ $(nodes_of b) == "$b_nodes" && $(nodes_of c) == "$c_nodes" ]] && ok "b and c (not preemptible) did not move" || fail "a non-preemptible job moved"
kc -n "$ns" get events -o jsonpath='{range .items[*]}{.reason}: {.note}{.message}{"\n"}{end}' 2>/dev/null |
  grep -E "^(Defragmenting|MovedForDefragmentation)" | head -3 | while read -r l; do log "event $l"; done || true

e2e_end
