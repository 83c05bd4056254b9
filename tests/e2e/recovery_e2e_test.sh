#!/usr/bin/env bash
# e2e of node-failure recovery (issue 6) on the real local control plane: kube-apiserver + etcd +
# kwok (4 racks of 18 x 4-GPU nodes), nvl72-operator, nvl72-extender and a kube-scheduler serving the
# nvl72-scheduler profile (scheduler-plugin/scheduler-config.yaml). The real scheduler binds every
# pod, including the replacements; nothing is bound by this script.
#
#   tests/e2e/recovery_e2e_test.sh OPERATOR_BINARY EXTENDER_BINARY
# Env: REC_E2E_STATE=DIR reuses a running cluster (started with --racks 4) instead of starting one;
#      REC_E2E_LOGS=DIR keeps the operator, extender and scheduler logs.
#
# Checks:
#  1. a 16-rank Required job (recovery InPlace, notReadyGraceSeconds 10) runs with every rank bound
#     to its planned node;
#  2. a NotReady blip of one of its nodes shorter than the grace causes no replacement;
#  3. one node fails (kwok stops heartbeating it, Ready=False, taint node.kubernetes.io/unreachable:
#     NoExecute): the rank gets a spare of the SAME rack, the dead pod is force-deleted, the
#     replacement pod is bound there by kube-scheduler + extender and Running; exactly one pod per
#     rank; status.recoveries 1; Recovering goes True -> False. The time from the failure (taint
#     applied) to the replacement pod bound and Running is printed as a RESULT line;
#  4. the same with a NotReady-only failure (no taint): the replacement comes after the grace;
#  5. a node fails while the operator is SIGKILLed. Both spares of the rack are used by 3 and 4, so
#     the restarted operator finds no healthy node in the rack: Recovering/WaitingForNode, then after
#     the bound (3 x grace = 30 s) the whole gang moves to another rack; one pod per rank.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
op_bin=${1:-${NVL72_OPERATOR_BIN:-$repo/build/rec/operator/nvl72-operator}}
ext_bin=${2:-${NVL72_EXTENDER_BIN:-$repo/build/rec/scheduler-plugin/nvl72-extender}}
[[ -x $op_bin ]] || { echo "operator binary $op_bin not found" >&2; exit 2; }
[[ -x $ext_bin ]] || { echo "extender binary $ext_bin not found" >&2; exit 2; }

t0=$(date +%s)
log() { printf '[recovery-e2e %s +%ss] %s\n' "$(date +%H:%M:%S)" "$(($(date +%s) - t0))" "$*" >&2; }
failures=0
fail() { log "FAIL: $*"; failures=$((failures + 1)); }
ok() { log "ok: $*"; }
result() {
  log "RESULT $*"
  if [[ -n ${NVL72_E2E_RESULTS:-} ]]; then echo "$*" >>"$NVL72_E2E_RESULTS"; fi
}

own_cluster=0
if [[ -n ${REC_E2E_STATE:-} ]]; then
  state=$REC_E2E_STATE
else
  state=$(mktemp -d /tmp/nvl72-rec-e2e.XXXXXX)
  rmdir "$state"
  own_cluster=1
  log "starting a local control plane with 4 racks in $state"
  "$repo/scripts/local-cluster" up --racks 4 --state "$state" >/dev/null
fi
# shellcheck disable=SC1091
source "$state/env"
kc() { "$NVL72_KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
ns=rec-e2e-$(date +%s)  # unique: without a controller-manager a namespace never finishes deleting
workdir=$(mktemp -d /tmp/nvl72-rec-e2e-work.XXXXXX)
op_pid= ext_pid= sched_pid= failed_nodes=

stop_pid() {  # PID: TERM, wait up to 10 s, then KILL
  local pid=$1
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.25; done
  kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
  stop_pid "$op_pid"
  stop_pid "$sched_pid"
  stop_pid "$ext_pid"
  if ((failures > 0)); then
    for f in "$workdir"/*.log; do log "--- tail of $f"; tail -n 30 "$f" >&2 || true; done
  fi
  [[ -n ${REC_E2E_LOGS:-} ]] && mkdir -p "$REC_E2E_LOGS" && cp "$workdir"/*.log "$REC_E2E_LOGS"/ 2>/dev/null
  if ((own_cluster)); then
    "$repo/scripts/local-cluster" down --state "$state" >/dev/null 2>&1 || true
  else
    # A reused cluster gets its capacity back: no controller-manager deletes namespaces, so delete the
    # pods, release the job (the operator is gone: drop its finalizer) and repair the failed nodes.
    kc -n "$ns" delete pods --all --force --grace-period=0 >/dev/null 2>&1 || true
    kc -n "$ns" patch nvj moe --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
    kc -n "$ns" delete nvj --all --wait=false >/dev/null 2>&1 || true
    local n
    for n in ${failed_nodes:-}; do
      api PATCH "/api/v1/nodes/$n" application/merge-patch+json \
        '{"spec":{"taints":null},"metadata":{"annotations":{"kwok.x-k8s.io/node":"fake"}}}' >/dev/null || true
      set_ready "$n" True || true
    done
    kc delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  fi
  rm -rf "$workdir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_until() {  # TIMEOUT_S CMD...
  local deadline=$(($(date +%s) + $1)); shift
  until "$@"; do (($(date +%s) < deadline)) || return 1; sleep 0.1; done
}
now_ns() { date +%s%N; }
ms_since() { echo $((($(now_ns) - $1) / 1000000)); }

# ------------------------------------------------------------------------------------------------
log "namespace, CRD, extender, nvl72 kube-scheduler, operator"
kc create namespace "$ns" >/dev/null
kc apply -f "$repo/crds/nvl72jobs.nvl72.dev.yaml" >/dev/null
kc wait --for condition=established --timeout=60s crd/nvl72jobs.nvl72.dev >/dev/null

ext_port=$(free_port)
"$ext_bin" --kubeconfig "$KUBECONFIG" --listen "127.0.0.1:$ext_port" --spares-per-domain 2 \
  >"$workdir/extender.log" 2>&1 &
ext_pid=$!
wait_until 60 curl -sf "http://127.0.0.1:$ext_port/readyz" -o /dev/null || { fail "extender not ready"; exit 1; }
sed -e "s#KUBECONFIG_PATH#$KUBECONFIG#" -e "s#EXTENDER_URL#http://127.0.0.1:$ext_port#" \
  -e "s#LEADER_ELECT#false#" "$repo/scheduler-plugin/scheduler-config.yaml" >"$workdir/nvl72-scheduler.yaml"
"$NVL72_KUBE_SCHEDULER" --config="$workdir/nvl72-scheduler.yaml" --secure-port="$(free_port)" \
  --bind-address=127.0.0.1 --authentication-kubeconfig="$KUBECONFIG" \
  --authorization-kubeconfig="$KUBECONFIG" >"$workdir/nvl72-scheduler.log" 2>&1 &
sched_pid=$!

health_port=$(free_port)
"$op_bin" --kubeconfig "$KUBECONFIG" --namespace "$ns" --metrics-addr "127.0.0.1:$(free_port)" \
  --health-addr "127.0.0.1:$health_port" --admission-resync-seconds 5 --log-level info \
  >"$workdir/operator.log" 2>&1 &
op_pid=$!
wait_until 60 curl -fs "http://127.0.0.1:$health_port/readyz" -o /dev/null || { fail "operator not ready"; exit 1; }
kill -0 "$sched_pid" 2>/dev/null || { fail "nvl72 kube-scheduler exited"; exit 1; }
ok "extender, nvl72 kube-scheduler and operator running"

# ------------------------------------------------------------------------------------------------
# helpers. The timed paths talk to the API server with curl (kubectl takes seconds to start on a
# loaded machine, which would swamp the numbers).
api() {  # METHOD PATH [CONTENT-TYPE BODY]
  local args=(-s --cacert "$NVL72_CA_FILE" -H "Authorization: Bearer $NVL72_TOKEN" -X "$1")
  [[ $# -ge 4 ]] && args+=(-H "Content-Type: $3" --data-binary "$4")
  curl "${args[@]}" "$NVL72_APISERVER_URL$2"
}
api_watch() {  # PATH: a watch stream that ends by itself after 60 s
  curl -sN --max-time 60 --cacert "$NVL72_CA_FILE" -H "Authorization: Bearer $NVL72_TOKEN" \
    "$NVL72_APISERVER_URL$1&timeoutSeconds=60"
}
job_json() { api GET "/apis/nvl72.dev/v1alpha1/namespaces/$ns/nvl72jobs/moe"; }
node_of_rank() { job_json | jq -r --argjson r "$1" '.status.placement.ranks[]? | select(.rank == $r) | .node'; }
recoveries() { job_json | jq -r '.status.recoveries // empty'; }
cond() { job_json | jq -r --arg t "$1" '.status.conditions[]? | select(.type == $t) | .status'; }
# "name nodeName planned phase deleting" per pod
pods_table() {
  kc -n "$ns" get pods -l nvl72.dev/job=moe -o go-template --template='{{range .items}}{{.metadata.name}} {{or .spec.nodeName "-"}} {{index .metadata.annotations "nvl72.dev/node"}} {{.status.phase}} {{if .metadata.deletionTimestamp}}deleting{{else}}live{{end}}{{"\n"}}{{end}}'
}
all_running_on_plan() {
  local t; t=$(pods_table)
  [[ $(awk '$2 == $3 && $4 == "Running" && $5 == "live"' <<<"$t" | wc -l) == 16 && $(wc -l <<<"$t") == 16 ]]
}
pod_running_on() {  # POD NODE
  local l; l=$(api GET "/api/v1/namespaces/$ns/pods/$1" |
    jq -r '[.spec.nodeName // "", .status.phase // "", .metadata.deletionTimestamp // ""] | join(" ")')
  [[ $l == "$2 Running " ]]
}
one_pod_per_rank() {
  local t; t=$(pods_table)
  [[ $(wc -l <<<"$t") == 16 && $(awk '{print $1}' <<<"$t" | sort -u | wc -l) == 16 ]]
}
rack_of() { echo "${1%%-*}"; }
stamp() { date -u +%Y-%m-%dT%H:%M:%SZ; }
set_ready() {  # NODE True|False
  local t; t=$(stamp)
  api PATCH "/api/v1/nodes/$1/status" application/strategic-merge-patch+json \
    "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"$2\",\"reason\":\"e2e\",\"lastHeartbeatTime\":\"$t\",\"lastTransitionTime\":\"$t\"}]}}" >/dev/null
}
taint_unreachable() {
  api PATCH "/api/v1/nodes/$1" application/merge-patch+json \
    '{"spec":{"taints":[{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}]}}' >/dev/null
}
stop_kwok() {
  api PATCH "/api/v1/nodes/$1" application/merge-patch+json '{"metadata":{"annotations":{"kwok.x-k8s.io/node":null}}}' >/dev/null
}
start_kwok() {
  api PATCH "/api/v1/nodes/$1" application/merge-patch+json '{"metadata":{"annotations":{"kwok.x-k8s.io/node":"fake"}}}' >/dev/null
}

# ------------------------------------------------------------------------------------------------
log "1. a 16-rank job runs"
cat >"$workdir/moe.yaml" <<YAML
apiVersion: nvl72.dev/v1alpha1
kind: NVL72Job
metadata: {name: moe}
spec:
  replicas: 16
  gpusPerReplica: 4
  topology: {mode: Required}
  recovery: {policy: InPlace, notReadyGraceSeconds: 10, maxRecoveries: 5}
  template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m}}}]}}
YAML
kc -n "$ns" apply -f "$workdir/moe.yaml" >/dev/null
if wait_until 120 all_running_on_plan; then
  ok "16 ranks bound to their planned nodes by kube-scheduler + extender, Running"
else
  fail "job did not start: $(pods_table | awk '{print $2, $4}' | sort | uniq -c | tr '\n' ';')"; exit 1
fi
rack=$(rack_of "$(node_of_rank 0)")
gang_nodes=$(job_json | jq -r '.status.placement.ranks[].node')
spares=$(for i in $(seq -w 0 17); do echo "$rack-node$i"; done | grep -vxF -f <(echo "$gang_nodes") || true)
log "job in $rack; spares: $(echo $spares)"

# ------------------------------------------------------------------------------------------------
log "2. a NotReady blip shorter than the 10 s grace changes nothing"
blip=$(node_of_rank 5)
stop_kwok "$blip"
tb=$(now_ns)
set_ready "$blip" False
sleep 1
set_ready "$blip" True
blip_ms=$(ms_since "$tb")
start_kwok "$blip"
sleep 12  # past the grace: a wrong recovery would have happened by now
if [[ $(node_of_rank 5) == "$blip" && -z $(recoveries) ]] && all_running_on_plan; then
  ok "NotReady blip of ${blip_ms} ms on $blip: no replacement, no recovery counted"
else
  fail "blip caused a change: rank 5 on $(node_of_rank 5), recoveries '$(recoveries)'"
fi
result "recovery_blip_ms=$blip_ms replaced=$([[ $(node_of_rank 5) == "$blip" ]] && echo no || echo yes)"

# ------------------------------------------------------------------------------------------------
log "3. a node fails (unreachable taint + NotReady): its rank moves to a spare of $rack"
dead=$(node_of_rank 3)
failed_nodes+=" $dead"
stop_kwok "$dead"
# Watches stamp every event of pod moe-3 and of the job on arrival ($EPOCHREALTIME, no fork), so the
# numbers do not depend on how fast the polling below runs.
stamp_events() { while IFS= read -r l; do printf '%s %s\n' "${EPOCHREALTIME/./}" "$l"; done; }
api_watch "/api/v1/namespaces/$ns/pods?watch=1&fieldSelector=metadata.name%3Dmoe-3" | stamp_events >"$workdir/w-pod" &
w_pod=$!
api_watch "/apis/nvl72.dev/v1alpha1/namespaces/$ns/nvl72jobs?watch=1&fieldSelector=metadata.name%3Dmoe" |
  stamp_events >"$workdir/w-job" &
w_job=$!
sleep 1
tf=$(now_ns)
tf_us=${EPOCHREALTIME/./}
taint_unreachable "$dead"
set_ready "$dead" False
new=
placed_ms=
deadline=$(($(date +%s) + 60))
while (($(date +%s) < deadline)); do
  n=$(node_of_rank 3)
  if [[ -n $n && $n != "$dead" ]]; then
    [[ -z $placed_ms ]] && placed_ms=$(ms_since "$tf")
    new=$n
    pod_running_on moe-3 "$new" && break
  fi
  sleep 0.05
done
bound_ms=$(ms_since "$tf")
if [[ -n $new ]] && pod_running_on moe-3 "$new"; then
  ok "rank 3: $dead -> $new, replacement pod bound and Running after ${bound_ms} ms (placement after ${placed_ms} ms)"
else
  fail "no running replacement for rank 3 within 60 s (placement: '$(node_of_rank 3)'): $(pods_table | grep moe-3 || true)"
fi
[[ $(rack_of "$new") == "$rack" ]] && ok "replacement in the same rack ($rack)" || fail "replacement $new is not in $rack"
grep -qxF "$new" <<<"$spares" && ok "replacement $new was a spare" || fail "replacement $new was not a spare"
sleep 0.5
kill "$w_pod" "$w_job" 2>/dev/null || true
# First event (microseconds) of FILE matching the jq filter, minus the failure time, in ms.
first_ms() {
  local t; t=$(while read -r ts line; do
    jq -e "$2" <<<"$line" >/dev/null 2>&1 && { echo "$ts"; break; }
  done <"$1")
  [[ -n $t ]] && echo $(((t - tf_us) / 1000)) || echo "?"
}
w_placed=$(first_ms "$workdir/w-job" ".object.status.placement.ranks[] | select(.rank == 3) | .node == \"$new\"")
w_created=$(first_ms "$workdir/w-pod" ".type == \"ADDED\" and .object.metadata.annotations[\"nvl72.dev/node\"] == \"$new\"")
w_bound=$(first_ms "$workdir/w-pod" ".object.spec.nodeName == \"$new\"")
w_running=$(first_ms "$workdir/w-pod" ".object.spec.nodeName == \"$new\" and .object.status.phase == \"Running\"")
result "recovery_watch_ms placement=$w_placed replacement_created=$w_created bound=$w_bound running=$w_running (from the taint write; watch events stamped on arrival)"
# Where the time went: the operator logs its decision with a millisecond wall-clock stamp.
decided=$(grep -m1 "moe: recovery 1:" "$workdir/operator.log" | awk '{print $2}')
decide_ms=
if [[ -n $decided ]]; then
  decide_ms=$(( $(date -d "$(date +%F) $decided" +%s%3N) - tf / 1000000 ))
fi
result "recovery_failure_to_bound_ms=$bound_ms failure_to_operator_decision_ms=${decide_ms:-?} failure_to_placement_visible_ms=$placed_ms (target < 5000 ms; taint NoExecute, grace not involved; load average $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores)"
wait_until 30 all_running_on_plan && ok "all 16 ranks Running on their planned nodes" || fail "not all ranks running: $(pods_table | tr '\n' ';')"
one_pod_per_rank && ok "exactly one pod per rank" || fail "pods: $(pods_table | tr '\n' ';')"
[[ $(recoveries) == 1 ]] && ok "status.recoveries 1" || fail "status.recoveries '$(recoveries)'"
wait_until 30 bash -c "[[ \$('$NVL72_KUBECTL' --kubeconfig '$KUBECONFIG' -n $ns get nvj moe -o jsonpath='{.status.conditions[?(@.type==\"Recovering\")].status}') == False ]]" &&
  ok "Recovering True -> False, Running $(cond Running)" || fail "Recovering is '$(cond Recovering)'"
kc -n "$ns" get events --field-selector involvedObject.name=moe -o jsonpath='{range .items[*]}{.reason}: {.note}{.message}{"\n"}{end}' 2>/dev/null |
  grep -E "Recovering|Recovered" | head -3 | while read -r l; do log "event $l"; done || true

# ------------------------------------------------------------------------------------------------
log "4. NotReady only (no taint): replaced once the 10 s grace has passed"
dead2=$(node_of_rank 10)
failed_nodes+=" $dead2"
stop_kwok "$dead2"
tf=$(now_ns)
set_ready "$dead2" False
new2=
deadline=$(($(date +%s) + 60))
while (($(date +%s) < deadline)); do
  n=$(node_of_rank 10)
  if [[ -n $n && $n != "$dead2" ]] && pod_running_on moe-10 "$n"; then new2=$n; break; fi
  sleep 0.05
done
bound2_ms=$(ms_since "$tf")
if [[ -n $new2 && $(rack_of "$new2") == "$rack" ]]; then
  ok "rank 10: $dead2 -> $new2 after ${bound2_ms} ms (grace 10000 ms)"
  # lastTransitionTime has 1 s resolution: the grace may end up to 1 s early.
  ((bound2_ms >= 9000)) || fail "replaced before the grace ended (${bound2_ms} ms)"
else
  fail "rank 10 not replaced in $rack (now on '$(node_of_rank 10)')"
fi
result "recovery_notready_to_bound_ms=$bound2_ms grace_ms=10000"
wait_until 30 all_running_on_plan && one_pod_per_rank && [[ $(recoveries) == 2 ]] &&
  ok "16 ranks Running, one pod each, recoveries 2" || fail "after 2nd recovery: recoveries '$(recoveries)' $(pods_table | tr '\n' ';')"

# ------------------------------------------------------------------------------------------------
log "5. a node fails while the operator is SIGKILLed; the restarted operator recovers it"
kill -9 "$op_pid"; wait "$op_pid" 2>/dev/null || true; op_pid=
dead3=$(node_of_rank 12)
failed_nodes+=" $dead3"
stop_kwok "$dead3"
taint_unreachable "$dead3"
set_ready "$dead3" False
health_port=$(free_port)
tr_=$(now_ns)
"$op_bin" --kubeconfig "$KUBECONFIG" --namespace "$ns" --metrics-addr "127.0.0.1:$(free_port)" \
  --health-addr "127.0.0.1:$health_port" --admission-resync-seconds 5 --log-level info \
  >>"$workdir/operator.log" 2>&1 &
op_pid=$!
waiting() { [[ $(job_json | jq -r '.status.conditions[]? | select(.type == "Recovering") | .reason') == WaitingForNode ]]; }
if wait_until 30 waiting; then
  ok "restarted operator: no healthy node left in $rack, Recovering/WaitingForNode ($(ms_since "$tr_") ms after restart)"
else
  fail "not waiting: $(job_json | jq -c '.status.conditions')"
fi
moved() { [[ $(job_json | jq -r '.status.placement.ranks[].node' | cut -d- -f1 | sort -u | tr -d '\n') != "$rack" ]]; }
if wait_until 90 moved; then
  racks_now=$(job_json | jq -r '.status.placement.ranks[].node' | cut -d- -f1 | sort -u | tr '\n' ' ')
  ok "gang moved after $(ms_since "$tr_") ms to: $racks_now"
  [[ $(wc -w <<<"$racks_now") == 1 ]] && ok "all 16 ranks in one rack" || fail "gang spans $racks_now"
else
  fail "gang did not move: $(job_json | jq -c '.status.conditions')"
fi
wait_until 60 all_running_on_plan && one_pod_per_rank && [[ $(recoveries) == 3 ]] &&
  ok "after the move: 16 ranks Running on their planned nodes, one pod each, recoveries 3 ($(ms_since "$tr_") ms)" ||
  fail "after the move: recoveries '$(recoveries)' $(pods_table | tr '\n' ';')"

if ((failures > 0)); then log "$failures failures"; exit 1; fi
log "PASS"
