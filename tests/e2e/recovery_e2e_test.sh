#!/usr/bin/env bash
# e2e of node-failure recovery on the real local control plane: etcd + kube-apiserver +
# kube-controller-manager + kwok (4 racks of 18 x 4-GPU nodes), nvl72-operator, nvl72-extender and a
# kube-scheduler serving the nvl72-scheduler profile. The real scheduler binds every pod, including
# the replacements; failures are induced the way they happen: a node's kubelet stops heartbeating,
# and kube-controller-manager (not this script) marks it NotReady and taints it.
#
#   tests/e2e/recovery_e2e_test.sh OPERATOR_BINARY EXTENDER_BINARY
# Env: NVL72_CLUSTER_STATE=DIR reuses a running cluster (started with --racks 4) instead of starting
#      one; REC_E2E_LOGS=DIR keeps the operator, extender and scheduler logs.
#
# Checks:
#  1. a 16-rank Required job (recovery InPlace, notReadyGraceSeconds 10, and a template toleration
#     of node.kubernetes.io/unreachable:NoExecute for 2 s, as users write) runs with every rank bound
#     to its planned node;
#  2. a heartbeat blip: the kubelet of one of its nodes stops until kube-controller-manager marks the
#     node Unknown, then starts again; the node is NotReady for less than the grace: no replacement;
#  3. a node's kubelet stops for good: kube-controller-manager marks it Unknown and taints it
#     unreachable (NoSchedule and NoExecute); during the job's grace the rank pod is NOT evicted
#     (taint-based eviction would have at the template's 2 s: the operator's toleration wins); after
#     the grace the rank gets a spare of the SAME rack, bound by kube-scheduler + extender and
#     Running; exactly one pod per rank; status.recoveries 1. RESULT: NotReady -> Running, and how
#     long after the grace ended (target < 5 s);
#  4. a second node the same way: the rack's last spare; RESULT again;
#  5. a third node fails while the operator is SIGKILLed. Both spares are used: the restarted
#     operator waits (Recovering/WaitingForNode), then after the bound (3 x grace) moves the whole
#     gang to another rack; one pod per rank.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
op_bin=${1:?usage: recovery_e2e_test.sh OPERATOR EXTENDER}
ext_bin=${2:?usage: recovery_e2e_test.sh OPERATOR EXTENDER}
e2e_name=recovery-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"

e2e_cluster "$repo"
ns=rec-e2e-$(date +%s)
workdir=$(mktemp -d /tmp/nvl72-rec-e2e-work.XXXXXX)
failed_nodes=()
op_pid= ext_pid= sched_pid=
cleanup() {
  # The operator releases the job (finalizer) and the garbage collector takes its pods; the failed
  # nodes come back, so kwok finishes the deletions of pods that were on them.
  kc -n "$ns" delete nvj --all --wait=true --timeout=30s >/dev/null 2>&1 || true
  stop_pid "$op_pid"; stop_pid "$sched_pid"; stop_pid "$ext_pid"
  local n
  for n in "${failed_nodes[@]}"; do repair_node "$n"; done
  kc delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  if ((failures > 0)); then
    tail_logs "$workdir" 30
  fi
  [[ -n ${REC_E2E_LOGS:-} ]] && mkdir -p "$REC_E2E_LOGS" && cp "$workdir"/*.log "$REC_E2E_LOGS"/ 2>/dev/null
  e2e_cluster_down "$repo"
  rm -rf "$workdir"
}
trap cleanup EXIT

# ------------------------------------------------------------------------------------------------
log "namespace, CRD, extender, nvl72 kube-scheduler, operator (Kubernetes $NVL72_K8S_VERSION)"
e2e_namespace "$repo" "$ns" || { fail "namespace $ns not ready"; exit 1; }
start_extender "$ext_bin" "$workdir/extender.log" || { fail "extender not ready"; exit 1; }
start_nvl72_scheduler "$repo" "$workdir" "$workdir/nvl72-scheduler.log"
start_op() {  # LOGFILE
  start_operator "$op_bin" "$ns" "$1" --admission-resync-seconds 5 --log-level "${REC_E2E_LOG_LEVEL:-info}"
}
start_op "$workdir/operator.log" || { fail "operator not ready"; exit 1; }
kill -0 "$sched_pid" 2>/dev/null || { fail "nvl72 kube-scheduler exited"; exit 1; }
ok "extender, nvl72 kube-scheduler and operator running"

# The timed paths talk to the API server with curl (kubectl takes seconds to start on a loaded
# machine, which would swamp the numbers).
node_of_rank() { job_json moe | jq -r --argjson r "$1" '.status.placement.ranks[]? | select(.rank == $r) | .node'; }
recoveries() { job_json moe | jq -r '.status.recoveries // empty'; }
cond() { job_json moe | jq -r --arg t "$1" '.status.conditions[]? | select(.type == $t) | .status'; }
# "name nodeName planned phase deleting uid" per pod
pods_table() {
  kc -n "$ns" get pods -l nvl72.dev/job=moe -o go-template --template='{{range .items}}{{.metadata.name}} {{or .spec.nodeName "-"}} {{index .metadata.annotations "nvl72.dev/node"}} {{.status.phase}} {{if .metadata.deletionTimestamp}}deleting{{else}}live{{end}} {{.metadata.uid}}{{"\n"}}{{end}}'
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
  template:
    spec:
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}
      containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m}}}]
YAML
kc -n "$ns" apply -f "$workdir/moe.yaml" >/dev/null
if wait_until 120 all_running_on_plan; then
  ok "16 ranks bound to their planned nodes by kube-scheduler + extender, Running"
else
  fail "job did not start: $(pods_table | awk '{print $2, $4}' | sort | uniq -c | tr '\n' ';')"; exit 1
fi
rack=$(rack_of "$(node_of_rank 0)")
gang_nodes=$(job_json moe | jq -r '.status.placement.ranks[].node')
spares=$(for i in $(seq -w 0 17); do echo "$rack-node$i"; done | grep -vxF -f <(echo "$gang_nodes") || true)
log "job in $rack; spares: $(echo $spares)"
tolerations=$(api GET "/api/v1/namespaces/$ns/pods/moe-0" | jq -c '[.spec.tolerations[] | select(.effect == "NoExecute")]')
if jq -e 'length == 2 and all(.[]; .tolerationSeconds == null)' <<<"$tolerations" >/dev/null; then
  ok "rank pods tolerate not-ready/unreachable NoExecute without a time limit: $tolerations"
else
  fail "rank pod NoExecute tolerations: $tolerations"
fi

# ------------------------------------------------------------------------------------------------
log "2. a heartbeat blip shorter than the 10 s grace changes nothing"
blip=$(node_of_rank 5)
stop_kubelet "$blip"
if wait_node_ready "$blip" Unknown 60; then
  tb=$(now_ns)
  start_kubelet "$blip"
  wait_node_ready "$blip" True 30 || fail "$blip not Ready again 30 s after its kubelet started"
  blip_ms=$(ms_since "$tb")
  ok "kube-controller-manager marked $blip Unknown; Ready again after ${blip_ms} ms"
else
  fail "kube-controller-manager did not mark $blip Unknown within 60 s"; start_kubelet "$blip"; blip_ms=?
fi
sleep 12  # past the grace: a wrong recovery would have happened by now
if [[ $(node_of_rank 5) == "$blip" && -z $(recoveries) ]] && all_running_on_plan; then
  ok "NotReady blip of ${blip_ms} ms on $blip: no replacement, no recovery counted"
else
  fail "blip caused a change: rank 5 on $(node_of_rank 5), recoveries '$(recoveries)'"
fi
result "recovery_blip_ms=$blip_ms replaced=$([[ $(node_of_rank 5) == "$blip" ]] && echo no || echo yes)"

# ------------------------------------------------------------------------------------------------
# fail_rank RANK STEP: stops the kubelet of RANK's node; checks what kube-controller-manager does
# and that the rank pod survives the grace; times NotReady -> replacement Running. Sets `new`.
fail_rank() {
  local r=$1 step=$2 dead old_uid t_stop t_nr nr_ms evicted=0 n
  dead=$(node_of_rank "$r")
  old_uid=$(pod_line "moe-$r" | awk '{print $NF}')
  failed_nodes+=("$dead")
  t_stop=$(now_ns)
  stop_kubelet "$dead"
  wait_node_ready "$dead" Unknown 60 || { fail "$dead not marked Unknown within 60 s"; return; }
  t_nr=$(now_ns)
  nr_ms=$(((t_nr - t_stop) / 1000000))
  # The grace runs from the Ready condition's lastTransitionTime (whole seconds), as the operator reads it.
  local ltt grace_end_ms
  ltt=$(api GET "/api/v1/nodes/$dead" | jq -r '.status.conditions[] | select(.type == "Ready") | .lastTransitionTime')
  grace_end_ms=$(( $(date -d "$ltt" +%s) * 1000 + 10000 ))
  ok "kube-controller-manager marked $dead Ready=Unknown ${nr_ms} ms after its kubelet stopped"
  new=
  local deadline=$(($(date +%s) + 60))
  while (($(date +%s) < deadline)); do
    n=$(node_of_rank "$r")
    if [[ -n $n && $n != "$dead" ]]; then
      pod_running_on "moe-$r" "$n" && { new=$n; break; }
    elif [[ $(api GET "/api/v1/namespaces/$ns/pods/moe-$r" | jq -r --arg u "$old_uid" 'select(.metadata.uid == $u) |
      (.status.conditions // [])[] | select(.type == "DisruptionTarget") | .reason') == DeletionByTaintManager ]]; then
      evicted=1  # the taint-eviction controller marks a pod so before it deletes it
    fi
    sleep 0.05
  done
  local run_ms after_ms; run_ms=$(ms_since "$t_nr"); after_ms=$(( $(date +%s%3N) - grace_end_ms ))
  local taints; taints=$(node_taints "$dead" | tr '\n' ' ')
  [[ $taints == *node.kubernetes.io/unreachable:NoSchedule* ]] && ok "kube-controller-manager tainted $dead: $taints" ||
    fail "$dead taints: '$taints' (no unreachable taint from kube-controller-manager)"
  ((evicted == 0)) && ok "rank $r pod was not evicted during the job's grace" ||
    fail "rank $r pod was deleted before the operator replaced it (taint-based eviction)"
  if [[ -n $new ]]; then
    ok "rank $r: $dead -> $new, Running ${run_ms} ms after NotReady (grace 10000 ms)"
    # lastTransitionTime has 1 s resolution and is stamped before the poll sees it: the grace may
    # end up to 2 s before the 10 s counted from our observation.
    ((run_ms >= 8000)) || fail "replaced before the grace ended (${run_ms} ms)"
  else
    fail "no running replacement for rank $r within 60 s (placement '$(node_of_rank "$r")'): $(pods_table | grep "moe-$r " || true)"
  fi
  [[ $(rack_of "$new") == "$rack" ]] && ok "replacement in the same rack ($rack)" || fail "replacement $new is not in $rack"
  grep -qxF "$new" <<<"$spares" && ok "replacement $new was a spare" || fail "replacement $new was not a spare"
  result "recovery_step${step}_grace_end_to_running_ms=$after_ms notready_seen_to_running_ms=$run_ms kubelet_stop_to_notready_ms=$nr_ms (target: grace end -> Running under 5000 ms; grace 10 s from the Ready condition's lastTransitionTime; node monitor grace ${NVL72_NODE_MONITOR_GRACE} s; load average $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores)"
}

log "3. the kubelet of rank 3's node stops: kube-controller-manager takes the node down, the rank moves to a spare of $rack"
fail_rank 3 3
wait_until 30 all_running_on_plan && ok "all 16 ranks Running on their planned nodes" || fail "not all ranks running: $(pods_table | tr '\n' ';')"
one_pod_per_rank && ok "exactly one pod per rank" || fail "pods: $(pods_table | tr '\n' ';')"
[[ $(recoveries) == 1 ]] && ok "status.recoveries 1 (the rank was replaced once)" || fail "status.recoveries '$(recoveries)'"
wait_until 30 bash -c "[[ \$('$NVL72_KUBECTL' --kubeconfig '$KUBECONFIG' -n $ns get nvj moe -o jsonpath='{.status.conditions[?(@.type==\"Recovering\")].status}') == False ]]" &&
  ok "Recovering True -> False, Running $(cond Running)" || fail "Recovering is '$(cond Recovering)'"

log "4. the kubelet of rank 10's node stops: the rack's last spare"
fail_rank 10 4
wait_until 30 all_running_on_plan && one_pod_per_rank && [[ $(recoveries) == 2 ]] &&
  ok "16 ranks Running, one pod each, recoveries 2" || fail "after 2nd recovery: recoveries '$(recoveries)' $(pods_table | tr '\n' ';')"

# ------------------------------------------------------------------------------------------------
log "5. a node fails while the operator is SIGKILLed; the restarted operator recovers it"
kill -9 "$op_pid"; wait "$op_pid" 2>/dev/null || true; op_pid=
dead3=$(node_of_rank 12)
failed_nodes+=("$dead3")
stop_kubelet "$dead3"
wait_node_ready "$dead3" Unknown 60 || fail "$dead3 not marked Unknown within 60 s"
tr_=$(now_ns)
start_op "$workdir/operator-restarted.log" || { fail "operator not ready after restart"; exit 1; }
waiting() { [[ $(job_json moe | jq -r '.status.conditions[]? | select(.type == "Recovering") | .reason') == WaitingForNode ]]; }
if wait_until 30 waiting; then
  ok "restarted operator: no healthy node left in $rack, Recovering/WaitingForNode ($(ms_since "$tr_") ms after restart)"
else
  fail "not waiting: $(job_json moe | jq -c '.status.conditions')"
fi
moved() { [[ $(job_json moe | jq -r '.status.placement.ranks[].node' | cut -d- -f1 | sort -u | tr -d '\n') != "$rack" ]]; }
if wait_until 90 moved; then
  racks_now=$(job_json moe | jq -r '.status.placement.ranks[].node' | cut -d- -f1 | sort -u | tr '\n' ' ')
  ok "gang moved after $(ms_since "$tr_") ms to: $racks_now"
  [[ $(wc -w <<<"$racks_now") == 1 ]] && ok "all 16 ranks in one rack" || fail "gang spans $racks_now"
else
  fail "gang did not move: $(job_json moe | jq -c '.status.conditions')"
fi
wait_until 60 all_running_on_plan && one_pod_per_rank && [[ $(recoveries) == 3 ]] &&
  ok "after the move: 16 ranks Running on their planned nodes, one pod each, recoveries 3 ($(ms_since "$tr_") ms)" ||
  fail "after the move: recoveries '$(recoveries)' $(pods_table | tr '\n' ';')"

e2e_end
