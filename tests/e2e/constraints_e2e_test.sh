#!/usr/bin/env bash
# A job's own scheduling constraints, judged by nvl72-operator as kube-scheduler judges them
# (docs/operator.md, "The job's own constraints"), on the real local control plane (4 kwok racks)
# with nvl72-extender and a kube-scheduler serving the nvl72-scheduler profile:
#  1. taints: the only free rack carries dedicated=team-a:NoSchedule and nvidia.com/gpu=present:
#     NoSchedule (as GKE taints GPU nodes). A job without the toleration waits with a reason that
#     names the taint (condition and `kubectl nvl72 explain`); the same job with it runs in that rack
#     (the operator adds the GPU taint's toleration itself);
#  2. nodeSelector kubernetes.io/hostname=X: a 2-rank job waits (the selector matches 1 node), a
#     1-rank job runs on X;
#  3. resources: a CPU request that does not fit next to a non-GPU pod on the only allowed node waits
#     with the reason, and runs once that pod is gone;
#  4. an impossible job (100 segments of 16 on 4 racks) says it can never fit;
#  5. the safety net: a required pod anti-affinity (which the operator does not model) makes
#     kube-scheduler refuse a rank on its planned node; after --unschedulable-replan-seconds the
#     operator releases the gang and plans it again without that node, and the gang runs.
#     RESULT: job created -> all ranks Running.
#  6. rank pods the API server rejects (a missing PriorityClass: 403; a container name and memory
#     limit it refuses: 422): Placed False PodRejected quoting the API server, a PodRejected event,
#     the operator's log names it, and past the stuck bound a Stuck event and
#     nvl72_operator_stuck_jobs{reason="PodRejected"}; e2e_end's stuck check then sees both stuck
#     with a reason.
#   tests/e2e/constraints_e2e_test.sh OPERATOR EXTENDER KUBECTL_NVL72
# Env: NVL72_CLUSTER_STATE=DIR reuses a running 4-rack cluster.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
usage="usage: constraints_e2e_test.sh OPERATOR EXTENDER KUBECTL_NVL72"
op_bin=${1:?$usage} ext_bin=${2:?$usage} cli_bin=${3:?$usage}
e2e_name=constraints-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"

e2e_cluster "$repo"
ns=cons-e2e-$(date +%s)
workdir=$(mktemp -d /tmp/nvl72-cons-e2e.XXXXXX)
op_pid= ext_pid= sched_pid=
rack0=()
for ((i = 0; i < 18; i++)); do printf -v n 'rack0-node%02d' "$i"; rack0+=("$n"); done
cleanup() {
  kc -n "$ns" delete nvj --all --wait=true --timeout=30s >/dev/null 2>&1 || true
  kc -n "$ns" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
  stop_pid "$op_pid"; stop_pid "$sched_pid"; stop_pid "$ext_pid"
  kc taint nodes "${rack0[@]}" dedicated- nvidia.com/gpu- >/dev/null 2>&1 || true
  kc label nodes "${rack0[@]}" e2e-pool- >/dev/null 2>&1 || true
  kc delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  if ((failures > 0)); then
    tail_logs "$workdir" 30
  fi
  e2e_cluster_down "$repo"
  rm -rf "$workdir"
}
trap cleanup EXIT

admitted_msg() { job_json "$1" | jq -r '(.status.conditions // [])[] | select(.type == "Admitted") | .message'; }
waits_with() {  # JOB TEXT: not admitted, and the Admitted condition's message contains TEXT
  local j
  j=$(job_json "$1")
  [[ $(jq -r '.status.placement.ranks // [] | length' <<<"$j") == 0 ]] &&
    [[ $(jq -r '(.status.conditions // [])[] | select(.type == "Admitted") | .message' <<<"$j") == *"$2"* ]]
}
running() {  # JOB N: N rank pods Running
  local pods
  pods=$(api GET "/api/v1/namespaces/$ns/pods?labelSelector=nvl72.dev%2Fjob%3D$1")
  [[ $(jq '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length' <<<"$pods") == "$2" ]]
}
rank_nodes() {
  api GET "/api/v1/namespaces/$ns/pods?labelSelector=nvl72.dev%2Fjob%3D$1" |
    jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .spec.nodeName] | sort | join(",")'
}
clique() { api GET "/api/v1/nodes/$1" | jq -r '.metadata.labels["nvidia.com/gpu.clique"]'; }
# job NAME REPLICAS GPUS SPEC_EXTRA(YAML lines under spec:) POD_EXTRA(YAML lines under template.spec:) [CPU]
job() {
  {
    printf -- 'apiVersion: nvl72.dev/v1alpha1\nkind: NVL72Job\nmetadata: {name: %s}\nspec:\n' "$1"
    printf '  replicas: %s\n  gpusPerReplica: %s\n  topology: {mode: Required}\n' "$2" "$3"
    [[ -z $4 ]] || printf '%s\n' "$4"
    printf '  template:\n    spec:\n'
    printf '      containers: [{name: c, image: busybox, resources: {requests: {cpu: "%s"}}}]\n' "${6:-100m}"
    [[ -z $5 ]] || printf '%s\n' "$5"
  } | kc -n "$ns" apply -f - >/dev/null
}
tolerate_team_a='      tolerations: [{key: dedicated, operator: Equal, value: team-a, effect: NoSchedule}]'

log "namespace, CRD, extender, nvl72 kube-scheduler, operator (Kubernetes $NVL72_K8S_VERSION)"
e2e_namespace "$repo" "$ns" || { fail "namespace $ns not ready"; exit 1; }
start_extender "$ext_bin" "$workdir/extender.log" || { fail "extender not ready"; exit 1; }
start_nvl72_scheduler "$repo" "$workdir" "$workdir/nvl72-scheduler.log"
start_operator "$op_bin" "$ns" "$workdir/operator.log" --admission-resync-seconds 5 \
  --unschedulable-replan-seconds 10 || { fail "operator not ready"; exit 1; }

log "1. taints: rack 0, the only free rack, is dedicated to team-a and carries GKE's GPU taint"
kc taint nodes "${rack0[@]}" dedicated=team-a:NoSchedule nvidia.com/gpu=present:NoSchedule >/dev/null
for r in 1 2 3; do job "fill$r" 16 4 "" ""; done
for r in 1 2 3; do wait_until 90 running "fill$r" 16 || fail "fill$r not Running"; done
job t-no 8 4 "" ""
job t-yes 8 4 "" "$tolerate_team_a"
if wait_until 60 running t-yes 8 && [[ $(job_json t-yes | jq -r .status.domains) == "$(clique rack0-node00)" ]]; then
  ok "the job that tolerates dedicated=team-a runs in rack 0 (the GPU taint tolerated by the operator)"
else
  fail "t-yes: $(job_json t-yes | jq -c '{domains: .status.domains, c: [.status.conditions[]? | {type, message}]}')"
fi
if wait_until 30 waits_with t-no "dedicated=team-a:NoSchedule"; then
  ok "t-no waits: $(admitted_msg t-no)"
else
  fail "t-no: $(admitted_msg t-no)"
fi
explain=$("$cli_bin" --kubeconfig "$KUBECONFIG" -n "$ns" explain t-no 2>&1 || true)
grep -q "dedicated=team-a:NoSchedule" <<<"$explain" && ok "kubectl nvl72 explain names the taint" ||
  fail "explain: $explain"
kc -n "$ns" delete nvj t-no --wait=true >/dev/null

log "2. nodeSelector on one node"
x=rack1-node17
job sel-2 2 4 "" "      nodeSelector: {kubernetes.io/hostname: $x}"
job sel-1 1 4 "" "      nodeSelector: {kubernetes.io/hostname: $x}"
wait_until 60 running sel-1 1 && [[ $(rank_nodes sel-1) == "$x" ]] && ok "sel-1 runs on $x" ||
  fail "sel-1 on '$(rank_nodes sel-1)': $(admitted_msg sel-1)"
wait_until 30 waits_with sel-2 "nodeSelector kubernetes.io/hostname=$x" && ok "sel-2 waits: $(admitted_msg sel-2)" ||
  fail "sel-2: $(admitted_msg sel-2)"
kc -n "$ns" delete nvj sel-2 sel-1 --wait=true >/dev/null

log "3. a CPU request that does not fit next to a non-GPU pod"
y=rack2-node17
kc -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: hog}
spec:
  nodeName: $y
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "140"}}}]
EOF
job cpu-1 1 4 "" "      nodeSelector: {kubernetes.io/hostname: $y}" 8
if wait_until 30 waits_with cpu-1 "cpu"; then
  ok "cpu-1 waits: $(admitted_msg cpu-1)"
else
  fail "cpu-1: $(admitted_msg cpu-1) (nodes: $(rank_nodes cpu-1))"
fi
kc -n "$ns" delete pod hog --grace-period=0 --force >/dev/null 2>&1
wait_until 60 running cpu-1 1 && [[ $(rank_nodes cpu-1) == "$y" ]] && ok "cpu-1 runs on $y once the pod is gone" ||
  fail "cpu-1 after the pod went: $(admitted_msg cpu-1)"
kc -n "$ns" delete nvj cpu-1 --wait=true >/dev/null

log "4. an impossible job"
job huge 1600 4 "  topology: {mode: Required, segmentSize: 16}" ""
wait_until 30 waits_with huge "can never fit" && ok "huge waits: $(admitted_msg huge)" || fail "huge: $(admitted_msg huge)"
kc -n "$ns" delete nvj huge --wait=true >/dev/null

log "5. the safety net: a pod anti-affinity the operator does not model"
# Three free nodes of rack 0 form the pool; a 1-GPU pod labelled app=guard sits on the first, so the
# planner takes it first (a partly used node) and kube-scheduler refuses the rank there.
pool=(rack0-node10 rack0-node11 rack0-node12)
kc label nodes "${pool[@]}" e2e-pool=sn >/dev/null
kc -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: guard, labels: {app: guard}}
spec:
  nodeName: ${pool[0]}
  containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: "1"}}}]
EOF
wait_until 30 kc -n "$ns" get pod guard -o name >/dev/null 2>&1 || fail "guard pod"
t0=$(date +%s%N)
job sn 2 2 "" "$tolerate_team_a
      nodeSelector: {e2e-pool: sn}
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: guard}}
            topologyKey: kubernetes.io/hostname"
first_plan() { [[ $(job_json sn | jq -r '[.status.placement.ranks[]?.node] | sort | join(",")') == *"${pool[0]}"* ]]; }
wait_until 30 first_plan && ok "sn planned on ${pool[0]} first (where the guard pod is)" ||
  log "note: sn's first plan avoided ${pool[0]}: $(job_json sn | jq -c .status.placement)"
if wait_until 90 running sn 2; then
  ms=$((($(date +%s%N) - t0) / 1000000))
  ok "sn runs on $(rank_nodes sn) after $ms ms"
  result "safety_net_created_to_running_ms=$ms (bound 10 s)"
else
  fail "sn: $(job_json sn | jq -c '{p: .status.placement, r: .status.refusedNodes, c: [.status.conditions[]? | {type, reason, message}]}')"
fi
st=$(job_json sn)
[[ $(jq -r '.status.refusedNodes | join(",")' <<<"$st") == "${pool[0]}" && $(jq -r .status.replans <<<"$st") == 1 ]] &&
  ok "status: refusedNodes ${pool[0]}, replans 1" || fail "status: $(jq -c '{refusedNodes: .status.refusedNodes, replans: .status.replans}' <<<"$st")"
[[ $(rank_nodes sn) != *"${pool[0]}"* ]] || fail "a rank of sn is on the refused node"
ev=$(kc -n "$ns" get events.events.k8s.io -o jsonpath='{range .items[?(@.reason=="RankUnschedulable")]}{.regarding.name}: {.note}{"\n"}{end}')
grep -q "^sn: .*${pool[0]}" <<<"$ev" && ok "event RankUnschedulable: $(head -1 <<<"$ev")" || fail "events: $ev"
metric=$(curl -s "http://127.0.0.1:$op_metrics_port/metrics" | awk '/^nvl72_operator_replans_total /{print $2}')
[[ $metric == 1 ]] && ok "nvl72_operator_replans_total 1" || fail "nvl72_operator_replans_total '$metric'"

log "6. rank pods the API server rejects (issue 27 case 1): no such PriorityClass (403), an invalid container (422)"
job rej-prio 1 4 "" "$tolerate_team_a
      priorityClassName: does-not-exist"
kc -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: nvl72.dev/v1alpha1
kind: NVL72Job
metadata: {name: rej-inv}
spec:
  replicas: 1
  gpusPerReplica: 4
  template:
    spec:
$tolerate_team_a
      containers:
      - {name: Trainer_Main, image: busybox, resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}}
EOF
placed() { job_json "$1" | jq -r '(.status.conditions // [])[] | select(.type == "Placed") | "\(.reason): \(.message)"'; }
rejected_with() { [[ $(placed "$1") == "PodRejected: "*"$2"* ]]; }
for j in "rej-prio does-not-exist" "rej-inv Trainer_Main"; do
  read -r name want <<<"$j"
  if wait_until 60 rejected_with "$name" "$want"; then
    ok "$name: Placed False $(placed "$name" | cut -c1-200)"
  else
    fail "$name: Placed '$(placed "$name")'"
  fi
  [[ -n $(event_notes "$ns" PodRejected "$name") ]] && ok "$name: event PodRejected" || fail "$name: no PodRejected event"
  grep -q "$ns/$name.*$want" "$workdir/operator.log" && ok "$name: the operator's log names the rejection" ||
    fail "$name: the operator's log does not name the rejection"
done
stuck_evented() { [[ -n $(event_notes "$ns" Stuck rej-prio) && -n $(event_notes "$ns" Stuck rej-inv) ]]; }
if wait_until $((op_stuck_seconds + 60)) stuck_evented; then
  ok "both get a Stuck event past the ${op_stuck_seconds}s bound: $(event_notes "$ns" Stuck rej-prio | head -1 | cut -c1-160)"
else
  fail "Stuck events: rej-prio '$(event_notes "$ns" Stuck rej-prio)' rej-inv '$(event_notes "$ns" Stuck rej-inv)'"
fi
metric=$(curl -s "http://127.0.0.1:$op_metrics_port/metrics" |
  awk '/^nvl72_operator_stuck_jobs\{reason="PodRejected"\}/ {print $2}')
[[ $metric == 2 ]] && ok "nvl72_operator_stuck_jobs{reason=\"PodRejected\"} 2" ||
  fail "nvl72_operator_stuck_jobs{reason=\"PodRejected\"} '$metric'"

e2e_end
