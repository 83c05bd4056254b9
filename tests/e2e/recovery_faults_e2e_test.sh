#!/usr/bin/env bash
# e2e of recovery under compound faults (issue 6, "Fault e2e") on its own local control plane:
# kube-apiserver + etcd + kube-controller-manager + kwok (4 racks of 18 x 4-GPU nodes), nvl72-operator,
# nvl72-extender and a kube-scheduler serving the nvl72-scheduler profile. The real scheduler binds every pod, including
# the replacements; nothing is bound by this script.
#
#   tests/e2e/recovery_faults_e2e_test.sh OPERATOR_BINARY EXTENDER_BINARY
# Env: REC_E2E_LOGS=DIR keeps the operator, extender and scheduler logs.
# Always starts its own cluster (it fails nodes and restarts kube-apiserver) and stops it at the end.
# The operator runs with --spare-reserve hard: new gangs get 16 nodes per rack, never the 2 spares,
# so a 17-rank Required job can never fit (under the default soft reserve it would take the spares
# of an empty rack).
#
# Checks:
#  1. two nodes of a running 16-rank Required job (recovery InPlace, notReadyGraceSeconds 10,
#     waitForDomainSeconds 8) fail together (lib.sh fail_node of both in parallel: their kubelets stop
#     heartbeating, kube-controller-manager marks them Unknown and taints them): both ranks get DISTINCT spares of
#     the SAME rack, their replacement pods are bound there by kube-scheduler + extender and Running;
#     16 pods, one per rank, none on a failed node; status.recoveries is printed (1 when one plan
#     covered both, 2 when the operator saw the failures one by one) and is 1 or 2; Recovering ends
#     False. The time from both nodes NotReady to both replacements Running is a RESULT line;
#  2. a third node of the job fails (no spare left in the rack); the operator is SIGKILLed as soon as
#     the job shows Recovering/WaitingForNode (seen on a watch of the job) and restarted; after the
#     8 s bound (the move no earlier than grace + 7 s after NotReady: condition times have 1 s
#     resolution) the whole gang moves to ONE other rack. The operator is SIGKILLed once more as
#     soon as the move is visible in status.placement (it is deleting the old pods and creating the
#     new ones; how many existed is printed) and restarted. Then: 16 pods, one per rank, all Running
#     on their planned nodes; Recovering went WaitingForNode -> MovingGang; status.recoveries counts
#     the move once; Recovering ends False; no pod of the job is left on the old rack. No orphaned
#     reservation: once the three nodes are repaired (lib.sh repair_node) a new 16-rank job is
#     admitted into the old rack and runs there, the moved job still runs on its placement;
#  3. kube-apiserver restarted (scripts/local-cluster restart-apiserver) right after a single
#     `kubectl apply` of 12 Required jobs (8 x 4 ranks, 3 x 8 ranks, 1 x 17 ranks): within the bound
#     every fitting job is Running with one Running pod per rank on its planned node and the 17-rank
#     job waits (Admitted False, reason Waiting, "needs 17 nodes" in the message; within 15 s the
#     message names the real largest free block) with no placement and no pod; no node holds two
#     ranks (bound or planned), no duplicate pods; operator, extender and kube-scheduler still alive
#     and ready. How far the burst had got when the restart began is printed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
op_bin=${1:-${NVL72_OPERATOR_BIN:-$repo/build/rec/operator/nvl72-operator}}
ext_bin=${2:-${NVL72_EXTENDER_BIN:-$repo/build/rec/scheduler-plugin/nvl72-extender}}
[[ -x $op_bin ]] || { echo "operator binary $op_bin not found" >&2; exit 2; }
[[ -x $ext_bin ]] || { echo "extender binary $ext_bin not found" >&2; exit 2; }

e2e_name=recovery-faults-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"

workdir=$(mktemp -d /tmp/nvl72-recovery-faults-e2e-work.XXXXXX)
op_pid= ext_pid= sched_pid= watch_pid=
cleanup() {
  local rc=$?
  set +e
  [[ -n $watch_pid ]] && kill "$watch_pid" 2>/dev/null
  stop_pid "$op_pid"
  stop_pid "$sched_pid"
  stop_pid "$ext_pid"
  if ((failures > 0 || rc != 0)); then
    tail_logs "$workdir" 30
  fi
  [[ -n ${REC_E2E_LOGS:-} ]] && mkdir -p "$REC_E2E_LOGS" && cp "$workdir"/*.log "$REC_E2E_LOGS"/ 2>/dev/null
  e2e_cluster_down "$repo"
  rm -rf "$workdir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# Never the shared cluster of scripts/test: this test fails nodes and restarts kube-apiserver.
unset NVL72_CLUSTER_STATE
e2e_cluster "$repo"  # sets state, own_cluster; sources $state/env
ns=recovery-faults-e2e

# ------------------------------------------------------------------------------------------------
log "namespace, CRD, extender, nvl72 kube-scheduler, operator"
e2e_namespace "$repo" "$ns" || { fail "namespace $ns not ready"; exit 1; }
start_extender "$ext_bin" "$workdir/extender.log" || { fail "extender not ready"; exit 1; }
start_nvl72_scheduler "$repo" "$workdir" "$workdir/nvl72-scheduler.log"
op_flags=(--admission-resync-seconds 5 --log-level debug --spare-reserve hard)
start_operator "$op_bin" "$ns" "$workdir/operator.log" "${op_flags[@]}" || { fail "operator not ready"; exit 1; }
kill -0 "$sched_pid" 2>/dev/null || { fail "nvl72 kube-scheduler exited"; exit 1; }
ok "extender, nvl72 kube-scheduler and operator running"

# ------------------------------------------------------------------------------------------------
# helpers (curl through lib.sh api: kubectl takes seconds to start on a loaded machine)
job_yaml() {  # NAME REPLICAS
  nvl72_job "$1" "$2" '{policy: InPlace, notReadyGraceSeconds: 10, waitForDomainSeconds: 8, maxRecoveries: 5}'
}
node_of_rank() { job_json "$1" | jq -r --argjson r "$2" '.status.placement.ranks[]? | select(.rank == $r) | .node'; }
placed_nodes() { job_json "$1" | jq -r '.status.placement.ranks[]?.node' | sort; }
racks_of() { placed_nodes "$1" | cut -d- -f1 | sort -u | tr '\n' ' ' | sed 's/ $//'; }
recoveries() { job_json "$1" | jq -r '.status.recoveries // 0'; }
cond() {  # JOB TYPE -> "status reason"
  job_json "$1" | jq -r --arg t "$2" '.status.conditions[]? | select(.type == $t) | "\(.status) \(.reason)"'
}
# "pod rank node planned phase live|deleting", one line per pod of JOB (every pod of the namespace
# without JOB)
pods_of() {
  local sel=
  [[ -n ${1:-} ]] && sel="?labelSelector=nvl72.dev%2Fjob%3D$1"
  api GET "/api/v1/namespaces/$ns/pods$sel" | jq -r '.items[] | [.metadata.name,
    (.metadata.labels["nvl72.dev/rank"] // "-"), (.spec.nodeName // "-"),
    (.metadata.annotations["nvl72.dev/node"] // "-"), (.status.phase // "-"),
    (if .metadata.deletionTimestamp then "deleting" else "live" end)] | join(" ")'
}
# JOB REPLICAS: exactly one pod per rank, each live, Running and bound to its planned node, and the
# planned nodes are those of status.placement.
running_on_plan() {
  local t planned
  t=$(pods_of "$1") || return 1
  [[ $(grep -c . <<<"$t") == "$2" ]] || return 1
  [[ $(awk '$3 == $4 && $5 == "Running" && $6 == "live"' <<<"$t" | wc -l) == "$2" ]] || return 1
  [[ $(awk '{print $2}' <<<"$t" | sort -un | tr '\n' ' ') == "$(seq -s ' ' 0 $(($2 - 1))) " ]] || return 1
  planned=$(awk '{print $4}' <<<"$t" | sort)
  [[ $planned == "$(placed_nodes "$1")" ]]
}
# On a failure: every pod of JOB not Running live on its plan, with its deletion state, finalizers,
# its node's Ready condition and the operators' lines about it.
stuck_pods_report() {
  local name node
  while read -r name node; do
    log "  $name: $(api GET "/api/v1/namespaces/$ns/pods/$name" | jq -c '{node: .spec.nodeName, phase: .status.phase, deletionTimestamp: .metadata.deletionTimestamp, grace: .metadata.deletionGracePeriodSeconds, finalizers: .metadata.finalizers}')"
    [[ $node != - ]] && log "  node $node: $(api GET "/api/v1/nodes/$node" | jq -c '[.status.conditions[]? | select(.type == "Ready") | {status, lastTransitionTime}] + [.spec.taints[]?.key]')"
    grep -h "$name" "$workdir"/operator*.log | tail -n 8 | cut -c1-300 >&2 || true
  done < <(pods_of "$1" | awk '!($3 == $4 && $5 == "Running" && $6 == "live") {print $1, $3}')
}
recovering_false() { [[ $(cond "$1" Recovering) == False* ]]; }
summary() { pods_of "$1" | awk '{print $5 "/" $6 "/" ($3 == $4 ? "on-plan" : "off-plan")}' | sort | uniq -c | tr -s ' \n' ' '; }

# ------------------------------------------------------------------------------------------------
log "0. a 16-rank Required job runs"
job_yaml moe 16 | kc -n "$ns" apply -f - >/dev/null
t_start=$(now_ns)
wait_until 120 running_on_plan moe 16 || { fail "moe did not start: $(summary moe)"; exit 1; }
rack=$(racks_of moe)
[[ $rack != *" "* ]] || { fail "moe spans racks: $rack"; exit 1; }
spares=$(for i in $(seq -w 0 17); do echo "$rack-node$i"; done | grep -vxF -f <(placed_nodes moe) || true)
ok "moe: 16 ranks bound by kube-scheduler + extender and Running in $rack after $(ms_since "$t_start") ms; spares: $(echo $spares)"
[[ $(wc -w <<<"$spares") == 2 ]] || fail "expected 2 spare nodes in $rack, got '$(echo $spares)'"

# ------------------------------------------------------------------------------------------------
log "1. two nodes of $rack fail together"
d1=$(node_of_rank moe 3) d2=$(node_of_rank moe 9)
tf=$(now_ns)
(fail_node "$d1"; wait_node_ready "$d1" Unknown 60; now_ns >"$workdir/f1") &
p1=$!
(fail_node "$d2"; wait_node_ready "$d2" Unknown 60; now_ns >"$workdir/f2") &
wait "$p1" $!
f1=$(cat "$workdir/f1") f2=$(cat "$workdir/f2")
spread_ms=$(((f1 > f2 ? f1 - f2 : f2 - f1) / 1000000))
log "stopped the kubelets of $d1 (rank 3) and $d2 (rank 9) together: kube-controller-manager marked both Unknown $(ms_since "$tf") ms later, ${spread_ms} ms apart"
tf=$(now_ns)
both_replaced() {
  n1=$(node_of_rank moe 3) n2=$(node_of_rank moe 9)
  [[ -n $n1 && -n $n2 && $n1 != "$d1" && $n2 != "$d2" ]] && pod_running_on moe-3 "$n1" && pod_running_on moe-9 "$n2"
}
n1= n2=
if wait_until 60 both_replaced; then
  both_ms=$(ms_since "$tf")
  ok "rank 3: $d1 -> $n1, rank 9: $d2 -> $n2; both replacement pods bound and Running ${both_ms} ms after both were NotReady (grace 10 s)"
else
  both_ms=timeout
  fail "ranks 3 and 9 not both replaced and Running within 60 s: rank 3 on '$n1', rank 9 on '$n2'; $(summary moe)"
fi
[[ -n $n1 && $n1 != "$n2" ]] && ok "distinct nodes" || fail "ranks 3 and 9 share node '$n1'"
[[ $(rack_of "$n1") == "$rack" && $(rack_of "$n2") == "$rack" ]] && ok "both replacements in $rack" ||
  fail "replacements $n1 $n2 not both in $rack"
grep -qxF "$n1" <<<"$spares" && grep -qxF "$n2" <<<"$spares" && ok "both replacements were the spares" ||
  fail "replacements $n1 $n2 are not the spares $(echo $spares)"
wait_until 30 running_on_plan moe 16 && ok "16 pods, one per rank, all Running on their planned nodes" ||
  fail "after two failures: $(summary moe)"
on_dead=$(pods_of moe | awk -v a="$d1" -v b="$d2" '$3 == a || $3 == b' | wc -l)
[[ $on_dead == 0 ]] && ok "no pod left on $d1 or $d2" || fail "$on_dead pods still on the failed nodes"
rec1=$(recoveries moe)
if [[ $rec1 == 1 || $rec1 == 2 ]]; then
  ok "status.recoveries $rec1 ($([[ $rec1 == 1 ]] && echo "one plan covered both failures" || echo "the operator saw the failures one by one"))"
else
  fail "status.recoveries '$rec1' after two simultaneous failures"
fi
wait_until 30 recovering_false moe && ok "Recovering $(cond moe Recovering)" || fail "Recovering is '$(cond moe Recovering)'"
grep -E "moe: recovery [0-9]+:" "$workdir/operator.log" | sed 's/^/    operator: /' | cut -c1-300 >&2 || true
result "recovery_two_nodes_notready_to_both_running_ms=$both_ms grace_ms=10000 recoveries=$rec1 failures_apart_ms=$spread_ms (load average $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores)"

# ------------------------------------------------------------------------------------------------
log "2. a third node fails (no spare left in $rack); the operator is SIGKILLed while it acts"
d3=$(node_of_rank moe 12)
# Every event of the job, from now on, one JSON object per line (the first is its current state).
curl -sN --max-time 150 --cacert "$NVL72_CA_FILE" -H "Authorization: Bearer $NVL72_TOKEN" \
  "$NVL72_APISERVER_URL/apis/nvl72.dev/v1alpha1/namespaces/$ns/nvl72jobs?watch=1&fieldSelector=metadata.name%3Dmoe&timeoutSeconds=150" \
  >"$workdir/moe-watch.json" &
watch_pid=$!
sleep 0.5
op_lines=$(wc -l <"$workdir/operator.log")
fail_node "$d3"
wait_node_ready "$d3" Unknown 60 || fail "$d3 not marked Unknown within 60 s"
tf=$(now_ns)
acting() { [[ $(cond moe Recovering) == True* ]]; }
wait_until 30 acting || fail "moe not Recovering 30 s after $d3 went NotReady"
kill -KILL "$op_pid"
kill_ms=$(ms_since "$tf")
wait "$op_pid" 2>/dev/null || true
op_pid=
acted=$(tail -n +$((op_lines + 1)) "$workdir/operator.log" | grep -E "moe( waits)?:" | cut -c1-250 || true)
log "$d3 (rank 12) NotReady; operator SIGKILLed ${kill_ms} ms later, once the job was Recovering; it had logged: ${acted:-nothing for moe}"
result "recovery_operator_kill_after_notready_ms=$kill_ms"
t_restart=$(now_ns)
start_operator "$op_bin" "$ns" "$workdir/operator-restarted.log" "${op_flags[@]}" || fail "restarted operator not ready"
ok "operator restarted, ready after $(ms_since "$t_restart") ms"
moved() {
  local r; r=$(racks_of moe)
  [[ -n $r && $r != *"$rack"* ]]
}
# The moment the move is written the operator deletes the 16 old pods and creates 16 new ones:
# SIGKILL it again right then and restart it.
deadline=$(($(date +%s) + 60))
until moved || (($(date +%s) >= deadline)); do sleep 0.02; done
if moved; then
  kill -KILL "$op_pid"
  move_ms=$(ms_since "$tf")
  wait "$op_pid" 2>/dev/null || true
  op_pid=
  rack2=$(racks_of moe)
  at_kill=$(pods_of moe | awk -v r="$rack2-" 'index($4, r) == 1' | wc -l)
  ok "gang moved ${move_ms} ms after NotReady (grace 10 s + bound 8 s) to: $rack2"
  log "operator SIGKILLed again as soon as the move was visible: $at_kill of 16 pods for $rack2 existed; it had logged: $(grep -E "moe: (recovery|created)" "$workdir/operator-restarted.log" | tail -n +1 | sed 's/ job=.*//' | tr '\n' '|' | cut -c1-400)"
  start_operator "$op_bin" "$ns" "$workdir/operator-restarted2.log" "${op_flags[@]}" || fail "operator not ready after the second restart"
  [[ $(wc -w <<<"$rack2") == 1 ]] && ok "all 16 ranks in one rack ($rack2)" || fail "gang spans $rack2"
  ((move_ms >= 16000)) || fail "gang moved before the grace and the 8 s bound (${move_ms} ms)"
else
  move_ms=timeout rack2=
  fail "gang did not move: $(cond moe Recovering); $(job_json moe | jq -c '[.status.conditions[]? | {type, status, reason}]')"
fi
if wait_until 60 running_on_plan moe 16; then
  ok "16 pods, one per rank, Running on their planned nodes in $rack2, $(ms_since "$tf") ms after NotReady"
else
  fail "after the move: $(summary moe)"
  stuck_pods_report moe
fi
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
watch_pid=
reasons=$(jq -r '.object.status.conditions[]? | select(.type == "Recovering") | .reason' "$workdir/moe-watch.json" 2>/dev/null | uniq | tr '\n' ' ')
log "Recovering reasons seen on the watch: $reasons"
[[ $reasons == *"WaitingForNode MovingGang"* ]] && ok "Recovering went WaitingForNode -> MovingGang" ||
  fail "Recovering reasons were '$reasons', wanted WaitingForNode then MovingGang"
rec2=$(recoveries moe)
[[ $rec2 == $((rec1 + 1)) ]] && ok "status.recoveries $rec2 (the move counted once)" || fail "status.recoveries '$rec2', wanted $((rec1 + 1))"
wait_until 30 recovering_false moe && ok "Recovering $(cond moe Recovering)" || fail "Recovering is '$(cond moe Recovering)'"
left=$(pods_of moe | awk -v r="$rack-" 'index($3, r) == 1 || index($4, r) == 1' | wc -l)
[[ $left == 0 ]] && ok "no pod of moe left on $rack" || fail "$left pods of moe still on $rack"
result "recovery_kill_during_recovery_notready_to_gang_moved_ms=$move_ms grace_ms=10000 wait_bound_ms=8000 new_pods_at_second_kill=${at_kill:-?}"

log "   repair $d1 $d2 $d3; a new 16-rank job must fit into $rack"
for n in "$d1" "$d2" "$d3"; do repair_node "$n"; done
t_refill=$(now_ns)
job_yaml refill 16 | kc -n "$ns" apply -f - >/dev/null
if wait_until 90 running_on_plan refill 16; then
  ok "refill: 16 ranks Running in $(racks_of refill) after $(ms_since "$t_refill") ms"
  [[ $(racks_of refill) == "$rack" ]] && ok "no orphaned reservation: $rack took a whole new gang" ||
    fail "refill went to $(racks_of refill), not to the freed $rack: $(job_json refill | jq -c '.status.conditions')"
else
  fail "refill not running: $(job_json refill | jq -c '[.status.conditions[]? | {type, status, reason, message}]'); $(summary refill)"
fi
running_on_plan moe 16 && ok "moe still Running on its placement" || fail "moe: $(summary moe)"

# ------------------------------------------------------------------------------------------------
log "3. kube-apiserver restarted during a burst of 12 jobs"
kc -n "$ns" delete nvj moe refill --wait=true --timeout=90s >/dev/null || fail "moe and refill not deleted"
no_pods() { [[ -z $(pods_of) ]]; }
wait_until 60 no_pods || fail "pods left after deleting moe and refill: $(pods_of | wc -l)"
declare -A size=()
burst=(b01:4 b02:8 b03:4 b04:4 huge:17 b05:8 b06:4 b07:4 b08:8 b09:4 b10:4 b11:4)
for j in "${burst[@]}"; do
  size[${j%%:*}]=${j##*:}
  job_yaml "${j%%:*}" "${j##*:}"
done >"$workdir/burst.yaml"
fitting=$(printf '%s\n' "${!size[@]}" | grep -vx huge | sort)
want_pods=0
for j in $fitting; do want_pods=$((want_pods + size[$j])); done
t_burst=$(now_ns)
kc -n "$ns" apply -f "$workdir/burst.yaml" >/dev/null
applied_ms=$(ms_since "$t_burst")
admitted_at_restart=$(grep -c "admitted $ns/b" "$workdir/operator-restarted2.log" || true)
pods_at_restart=$(pods_of | awk '{n++} $5 == "Running" {r++} END {printf "%d pods, %d Running", n, r}')
t_rs=$(now_ns)
"$repo/scripts/local-cluster" restart-apiserver --state "$state" >"$workdir/restart-apiserver.log" 2>&1 ||
  fail "restart-apiserver failed: $(tail -3 "$workdir/restart-apiserver.log")"
restart_ms=$(ms_since "$t_rs")
log "applied 12 jobs in ${applied_ms} ms, then restarted kube-apiserver in ${restart_ms} ms (when it began: $admitted_at_restart of the 11 fitting jobs admitted, $pods_at_restart of $want_pods)"
all_fitting_running() {
  local j
  for j in $fitting; do running_on_plan "$j" "${size[$j]}" || return 1; done
}
if wait_until 150 all_fitting_running; then
  burst_ms=$(ms_since "$t_burst")
  ok "all 11 fitting jobs ($want_pods ranks) Running with one pod per rank on its planned node, ${burst_ms} ms after the apply"
else
  burst_ms=timeout
  for j in $fitting; do
    running_on_plan "$j" "${size[$j]}" || fail "$j: $(job_json "$j" | jq -r '.status.state // "-"'); $(summary "$j")"
  done
fi
huge_waits() {
  [[ $(cond huge Admitted) == "False Waiting" ]] &&
    job_json huge | jq -e '.status.conditions[] | select(.type == "Admitted") | .message | contains("needs 17 nodes")' >/dev/null
}
if wait_until 30 huge_waits; then
  ok "huge (17 ranks) waits: $(job_json huge | jq -r '.status.conditions[] | select(.type == "Admitted") | .message')"
else
  fail "huge: Admitted '$(cond huge Admitted)', $(job_json huge | jq -c '.status.conditions')"
fi
# The wait reason follows the cluster: once everything else runs it names the real largest free
# block (whole-node ranks, 2 spares held back per rack: 16 - used nodes), at the latest after the
# 5 s admission resync.
largest=$(for r in 0 1 2 3; do pods_of | awk -v r="rack$r-" 'index($3, r) == 1' | wc -l; done |
  awk 'BEGIN {m = 0} {f = 16 - $1; if (f > m) m = f} END {print m}')
huge_reason_current() {
  job_json huge | jq -e --arg m "largest free block is $largest nodes" \
    '.status.conditions[] | select(.type == "Admitted") | .message | contains($m)' >/dev/null
}
if wait_until 15 huge_reason_current; then
  ok "huge's wait reason is current: largest free block $largest nodes"
else
  fail "huge's wait reason is stale (largest free block is $largest nodes now): $(job_json huge | jq -r '.status.conditions[] | select(.type == "Admitted") | .message')"
fi
[[ -z $(placed_nodes huge) && -z $(pods_of huge) ]] && ok "huge has no placement and no pod" ||
  fail "huge has a placement ($(placed_nodes huge | wc -l) ranks) or pods ($(pods_of huge | wc -l))"
all=$(pods_of)
n_pods=$(grep -c . <<<"$all" || true)
[[ $n_pods == "$want_pods" && $(awk '{print $1}' <<<"$all" | sort -u | wc -l) == "$want_pods" ]] &&
  ok "$n_pods pods for $want_pods ranks, no duplicates" || fail "$n_pods pods for $want_pods ranks"
double=$(awk '$3 != "-" {print $3}' <<<"$all" | sort | uniq -d | tr '\n' ' ')
double_planned=$(for j in $fitting; do placed_nodes "$j"; done | sort | uniq -d | tr '\n' ' ')
[[ -z $double && -z $double_planned ]] && ok "no node holds two ranks (bound or planned)" ||
  fail "nodes with two ranks: bound '$double' planned '$double_planned'"
kill -0 "$op_pid" 2>/dev/null && curl -fs --max-time 5 "http://127.0.0.1:$op_health_port/readyz" -o /dev/null &&
  ok "operator alive and ready" || fail "operator gone or not ready after the apiserver restart"
kill -0 "$ext_pid" 2>/dev/null && curl -fs --max-time 5 "http://127.0.0.1:$ext_port/readyz" -o /dev/null &&
  ok "extender alive and ready" || fail "extender gone or not ready after the apiserver restart"
kill -0 "$sched_pid" 2>/dev/null && ok "kube-scheduler alive" || fail "kube-scheduler gone"
result "recovery_apiserver_restart_burst_to_all_running_ms=$burst_ms jobs=12 ranks=$want_pods apiserver_restart_ms=$restart_ms"

e2e_end
