#!/usr/bin/env bash
# A whole NVL72 rack fails at once (a field report: one NVLink link-down faulted every node of a
# rack): the kubelets of all 18 nodes stop heartbeating together, and kube-controller-manager marks
# them NotReady and taints them. On the real local control plane (etcd, kube-apiserver,
# kube-controller-manager, kwok with 4 racks) with nvl72-operator, nvl72-extender and a
# kube-scheduler serving the nvl72-scheduler profile.
#
#   tests/e2e/rack_failure_e2e_test.sh OPERATOR EXTENDER KUBECTL_NVL72
# Env: NVL72_CLUSTER_STATE=DIR reuses a running 4-rack cluster.
#
# Layout before the failure (admission is best fit): job a (16 ranks) fills one rack; jobs b (8) and
# c (4) share a second rack; a Deployment of 6 single-GPU pods (tolerationSeconds 5 for the
# unreachable taint, as users set for fast failover) prefers the second rack. That rack fails.
# Checks:
#  - every gang of the failed rack ends Running in one other rack each (Required), or waits with a
#    reason; job a never moves;
#  - the single pods are evicted by kube-controller-manager and rescheduled on live racks (the
#    Deployment is available again);
#  - no rank has two live pods, no job's placement (reservation) points into the failed rack;
#  - `kubectl nvl72 racks` shows the failed rack as all X;
#  - RESULT: the time from the last node going NotReady to all moved ranks Running;
#  - once the kubelets start again, the rack is Ready and untainted and takes a new gang.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
usage="usage: rack_failure_e2e_test.sh OPERATOR EXTENDER KUBECTL_NVL72"
op_bin=${1:?$usage} ext_bin=${2:?$usage} cli_bin=${3:?$usage}
e2e_name=rack-failure-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"

e2e_cluster "$repo"
ns=rack-e2e-$(date +%s)
workdir=$(mktemp -d /tmp/nvl72-rack-e2e.XXXXXX)
failed_nodes=()
op_pid= ext_pid= sched_pid=
cleanup() {
  kc -n "$ns" delete nvj --all --wait=true --timeout=30s >/dev/null 2>&1 || true
  kc -n "$ns" delete deployment --all --wait=false >/dev/null 2>&1 || true
  stop_pid "$op_pid"; stop_pid "$sched_pid"; stop_pid "$ext_pid"
  ((${#failed_nodes[@]})) && start_kubelet "${failed_nodes[@]}"
  local n
  for n in "${failed_nodes[@]}"; do wait_until 60 node_healthy "$n" || log "note: $n not healthy again"; done
  kc delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  if ((failures > 0)); then
    tail_logs "$workdir" 30
  fi
  e2e_cluster_down "$repo"
  rm -rf "$workdir"
}
trap cleanup EXIT
racks() { "$cli_bin" --kubeconfig "$KUBECONFIG" racks; }

log "namespace, CRD, extender, nvl72 kube-scheduler, operator (Kubernetes $NVL72_K8S_VERSION)"
e2e_namespace "$repo" "$ns" || { fail "namespace $ns not ready"; exit 1; }
start_extender "$ext_bin" "$workdir/extender.log" || { fail "extender not ready"; exit 1; }
start_nvl72_scheduler "$repo" "$workdir" "$workdir/nvl72-scheduler.log"
start_operator "$op_bin" "$ns" "$workdir/operator.log" --admission-resync-seconds 5 --log-level info ||
  { fail "operator not ready"; exit 1; }

job() { nvl72_job "$1" "$2" '{policy: InPlace, notReadyGraceSeconds: 5, waitForDomainSeconds: 5, maxRecoveries: 5}'; }
job_racks() { job_json "$1" | jq -r '.status.placement.ranks[]?.node' | cut -d- -f1 | sort -u | tr '\n' ' ' | sed 's/ $//'; }
# Ranks of JOB Running on their planned nodes, live: prints the count.
running_on_plan() {
  api GET "/api/v1/namespaces/$ns/pods?labelSelector=nvl72.dev%2Fjob%3D$1" | jq '[.items[] |
    select(.metadata.deletionTimestamp == null and .status.phase == "Running" and
           .spec.nodeName == .metadata.annotations["nvl72.dev/node"])] | length'
}
all_running() {  # JOB REPLICAS
  [[ $(running_on_plan "$1") == "$2" ]]
}
live_pods_per_rank_ok() {  # JOB: no rank has two live pods
  api GET "/api/v1/namespaces/$ns/pods?labelSelector=nvl72.dev%2Fjob%3D$1" | jq -e '[.items[] |
    select(.metadata.deletionTimestamp == null) | .metadata.labels["nvl72.dev/rank"]] |
    length == (unique | length)' >/dev/null
}

log "1. jobs a (16), b (8), c (4), then 6 single-GPU pods that prefer b's rack"
job a 16 | kc -n "$ns" apply -f - >/dev/null
wait_until 90 all_running a 16 || { fail "a not running"; exit 1; }
job b 8 | kc -n "$ns" apply -f - >/dev/null
wait_until 90 all_running b 8 || { fail "b not running"; exit 1; }
job c 4 | kc -n "$ns" apply -f - >/dev/null
wait_until 90 all_running c 4 || { fail "c not running"; exit 1; }
rack=$(job_racks b)
clique=$(kc get node "$rack-node00" -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.clique}')
cat >"$workdir/singles.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: singles}
spec:
  replicas: 6
  selector: {matchLabels: {app: singles}}
  template:
    metadata: {labels: {app: singles}}
    spec:
      schedulerName: nvl72-scheduler
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 5}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 5}
      affinity:
        nodeAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            preference: {matchExpressions: [{key: nvidia.com/gpu.clique, operator: In, values: ["$clique"]}]}
      containers:
      - {name: c, image: busybox, resources: {limits: {nvidia.com/gpu: "1"}, requests: {cpu: 100m}}}
YAML
kc -n "$ns" apply -f "$workdir/singles.yaml" >/dev/null
singles_available() { [[ $(kc -n "$ns" get deployment singles -o jsonpath='{.status.availableReplicas}') == 6 ]]; }
wait_until 90 singles_available || fail "the Deployment's 6 pods are not available"
singles_in() {  # RACK: live single pods bound there
  kc -n "$ns" get pods -l app=singles -o go-template --template='{{range .items}}{{if not .metadata.deletionTimestamp}}{{.spec.nodeName}}{{"\n"}}{{end}}{{end}}' |
    grep -c "^$1-" || true
}
in_rack=()
for j in a b c; do [[ $(job_racks "$j") == "$rack" ]] && in_rack+=("$j"); done
n_singles=$(singles_in "$rack")
log "a in $(job_racks a), b in $(job_racks b), c in $(job_racks c); $n_singles single pods in $rack"
((${#in_rack[@]} >= 2)) || fail "expected at least 2 gangs in $rack, got: ${in_rack[*]}"
((n_singles >= 1)) || fail "expected single pods in $rack"
[[ " ${in_rack[*]} " != *" a "* ]] || fail "a shares $rack with b: the layout is not the one this test needs"
racks | sed 's/^/    /' >&2

log "2. every kubelet of $rack stops at once"
mapfile -t failed_nodes < <(kc get nodes -o name | sed 's#node/##' | grep "^$rack-")
((${#failed_nodes[@]} == 18)) || fail "$rack has ${#failed_nodes[@]} nodes"
t_stop=$(now_ns)
stop_kubelet "${failed_nodes[@]}"
rack_down() { local n; for n in "${failed_nodes[@]}"; do node_is "$n" True && return 1; done; return 0; }
wait_until 90 rack_down || fail "not every node of $rack went NotReady within 90 s"
t_down=$(now_ns)
ok "all 18 nodes of $rack NotReady $(((t_down - t_stop) / 1000000)) ms after their kubelets stopped (kube-controller-manager)"

moved() {
  local j
  for j in "${in_rack[@]}"; do
    local r; r=$(job_racks "$j")
    [[ -n $r && $r != "$rack" && $r != *" "* ]] || return 1
  done
}
all_moved_running() {
  moved || return 1
  all_running b 8 && all_running c 4
}
if wait_until 120 all_moved_running; then
  moved_ms=$(ms_since "$t_down")
  ok "every gang of $rack Running in another rack ${moved_ms} ms after the last node went NotReady"
  for j in "${in_rack[@]}"; do log "  $j now in $(job_racks "$j") (recoveries $(job_json "$j" | jq -r '.status.recoveries // 0'))"; done
  result "rack_failure_last_notready_to_all_moved_running_ms=$moved_ms gangs=${#in_rack[@]} job_grace_s=5 wait_for_domain_s=5 (load average $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores)"
else
  fail "gangs of $rack not Running elsewhere within 120 s"
  for j in "${in_rack[@]}"; do
    log "  $j: racks '$(job_racks "$j")' $(job_json "$j" | jq -c '[.status.conditions[]? | {type, status, reason, message}]')"
  done
fi
[[ $(job_racks a) != "$rack" && -z $(job_json a | jq -r '.status.recoveries // empty') ]] &&
  ok "a did not move" || fail "a: racks $(job_racks a), recoveries $(job_json a | jq -r '.status.recoveries // 0')"

singles_back() { singles_available && [[ $(singles_in "$rack") == 0 ]]; }
if wait_until 120 singles_back; then
  ok "the single pods were evicted from $rack and rescheduled: 6 available, none live in $rack ($(ms_since "$t_down") ms)"
else
  fail "single pods: available $(kc -n "$ns" get deployment singles -o jsonpath='{.status.availableReplicas}'), live in $rack: $(singles_in "$rack")"
fi
terminating=$(kc -n "$ns" get pods -l app=singles -o go-template --template='{{range .items}}{{if .metadata.deletionTimestamp}}x{{end}}{{end}}' | wc -c)
log "  $terminating evicted single pods stay Terminating on $rack (no kubelet confirms their end), as on a real cluster"

for j in a b c; do live_pods_per_rank_ok "$j" && ok "$j: one live pod per rank" || fail "$j: a rank has two live pods"; done
orphaned=$(api GET "/apis/nvl72.dev/v1alpha1/namespaces/$ns/nvl72jobs" |
  jq -r --arg r "$rack-" '.items[] | select([.status.placement.ranks[]?.node | startswith($r)] | any) | .metadata.name')
[[ -z $orphaned ]] && ok "no reservation points into $rack" || fail "reservations in $rack: $orphaned"
map=$(racks)
echo "$map" | sed 's/^/    /' >&2
short=${clique##*.}
if grep -Eq "^$short +X{18}( |$)" <<<"$map"; then
  ok "kubectl nvl72 racks shows $rack (domain $short) as 18 failed nodes"
else
  fail "kubectl nvl72 racks does not show domain $short as all X"
fi

log "3. the kubelets of $rack start again"
start_kubelet "${failed_nodes[@]}"
rack_healthy() { local n; for n in "${failed_nodes[@]}"; do node_healthy "$n" || return 1; done; }
if wait_until 90 rack_healthy; then
  ok "$rack Ready and untainted again"
  job d 16 | kc -n "$ns" apply -f - >/dev/null
  if wait_until 90 all_running d 16; then
    ok "a new 16-rank job d runs (in $(job_racks d)): nothing of the failure is left reserved"
  else
    fail "d not running: $(job_json d | jq -c '[.status.conditions[]? | {type, reason, message}]')"
  fi
else
  fail "$rack not healthy 90 s after its kubelets started"
fi
failed_nodes=()

e2e_end
