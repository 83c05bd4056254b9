#!/usr/bin/env bash
# e2e of stock gang scheduling next to nvl72 (docs/pod-groups.md): nvl72-operator (--pod-groups
# auto), nvl72-extender and a kube-scheduler with the nvl72-scheduler profile on the real local
# control plane.
#
# On a cluster started with `scripts/local-cluster up --workload-scheduling` (Kubernetes 1.37: the
# Workload/PodGroup API served, the gang and topology-aware scheduling plugins on):
#  1. an 8-rank Required job in 2 segments of 4 gets a Workload and the PodGroups <job>-seg-0 and
#     -seg-1 (gang minCount 4, topology constraint on nvidia.com/gpu.clique, owned by the job); every
#     rank pod is in its segment's group; all ranks Running on their planned nodes;
#  2. kube-scheduler scheduled each segment as a group: the PodGroups' PodGroupInitiallyScheduled
#     condition is True and its scheduler_podgroup_schedule_attempts_total{result="scheduled"} grew
#     by at least 2;
#  3. the kubelet of rank 5's node stops: the operator replaces rank 5 on a spare of the same rack;
#     the new pod is in <job>-seg-1 (the same PodGroup object: its uid did not change) and Running;
#  4. deleting the job removes its Workload and PodGroups (kube-controller-manager's PodGroup
#     protection lets them go once the pods are gone).
# On a cluster without the API (Kubernetes 1.35, or 1.37 without --workload-scheduling): the job runs
# as before, its pods carry no schedulingGroup, and the operator says why it makes no PodGroups.
#
#   tests/e2e/pod_groups_e2e_test.sh OPERATOR EXTENDER
# Env: NVL72_CLUSTER_STATE=DIR reuses a running cluster with at least 2 racks.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
op_bin=${1:?usage: pod_groups_e2e_test.sh OPERATOR EXTENDER}
ext_bin=${2:?usage: pod_groups_e2e_test.sh OPERATOR EXTENDER}
e2e_name=pod-groups-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"

e2e_cluster "$repo"
ns=pg-e2e-$(date +%s)
workdir=$(mktemp -d /tmp/nvl72-pg-e2e.XXXXXX)
op_pid= ext_pid= sched_pid= dead=
cleanup() {
  kc -n "$ns" delete nvj --all --wait=true --timeout=30s >/dev/null 2>&1 || true
  stop_pid "$op_pid"; stop_pid "$sched_pid"; stop_pid "$ext_pid"
  [[ -n $dead ]] && repair_node "$dead"
  kc delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  if ((failures > 0)); then
    tail_logs "$workdir" 30
  fi
  e2e_cluster_down "$repo"
  rm -rf "$workdir"
}
trap cleanup EXIT

e2e_namespace "$repo" "$ns" || { fail "namespace $ns not ready"; exit 1; }
start_extender "$ext_bin" "$workdir/extender.log" || { fail "extender not ready"; exit 1; }
start_nvl72_scheduler "$repo" "$workdir" "$workdir/nvl72-scheduler.log"
start_operator "$op_bin" "$ns" "$workdir/operator.log" --admission-resync-seconds 5 ||
  { fail "operator not ready"; exit 1; }
ok "extender, nvl72 kube-scheduler and operator running (Kubernetes $NVL72_K8S_VERSION, workload scheduling ${NVL72_WORKLOAD_SCHEDULING:-0})"

pg_api=/apis/scheduling.k8s.io/v1beta1/namespaces/$ns
pod_group() { api GET "/api/v1/namespaces/$ns/pods/$1" | jq -r '.spec.schedulingGroup.podGroupName // "-"'; }
# "rank group node planned phase" of every live pod of the job
ranks_table() {
  api GET "/api/v1/namespaces/$ns/pods?labelSelector=nvl72.dev%2Fjob%3Dgang" | jq -r '.items[] |
    select(.metadata.deletionTimestamp == null) | [.metadata.labels["nvl72.dev/rank"],
    .spec.schedulingGroup.podGroupName // "-", .spec.nodeName // "-",
    .metadata.annotations["nvl72.dev/node"], .status.phase] | join(" ")' | sort -n
}
all_running_on_plan() {
  local t; t=$(ranks_table)
  [[ $(awk '$3 == $4 && $5 == "Running"' <<<"$t" | wc -l) == 8 && $(wc -l <<<"$t") == 8 ]]
}
node_of_rank() { job_json gang | jq -r --argjson r "$1" '.status.placement.ranks[]? | select(.rank == $r) | .node'; }
scheduled_groups() {  # scheduler_podgroup_schedule_attempts_total{result="scheduled"} of the nvl72 scheduler
  local m
  m=$(curl -sk --max-time 10 -H "Authorization: Bearer $NVL72_TOKEN" "https://127.0.0.1:$sched_port/metrics") ||
    { echo "?"; return 0; }
  awk '/^scheduler_podgroup_schedule_attempts_total\{.*result="scheduled"/ {s += $2} END {print s + 0}' <<<"$m"
}
groups_of_job() { api GET "$pg_api/podgroups?labelSelector=nvl72.dev%2Fjob%3Dgang" | jq -r '[.items[]?.metadata.name] | sort | join(",")'; }
no_groups_left() {
  [[ -z $(groups_of_job) && $(api GET "$pg_api/workloads/gang" | jq -r .kind) != Workload ]]
}

log "1. an 8-rank Required job in 2 segments of 4"
attempts_before=0
scheduler_metrics_up() { [[ $(scheduled_groups) != "?" ]]; }
if ((${NVL72_WORKLOAD_SCHEDULING:-0})); then
  wait_until 30 scheduler_metrics_up || fail "the nvl72 kube-scheduler serves no /metrics"
  attempts_before=$(scheduled_groups)
fi
cat >"$workdir/gang.yaml" <<YAML
apiVersion: nvl72.dev/v1alpha1
kind: NVL72Job
metadata: {name: gang}
spec:
  replicas: 8
  gpusPerReplica: 4
  topology: {mode: Required, segmentSize: 4}
  recovery: {policy: InPlace, notReadyGraceSeconds: 10, maxRecoveries: 5}
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m}}}]
YAML
kc -n "$ns" apply -f "$workdir/gang.yaml" >/dev/null
if wait_until 120 all_running_on_plan; then
  ok "8 ranks bound to their planned nodes and Running"
else
  fail "job did not start: $(ranks_table | tr '\n' ';')"; exit 1
fi

if ! ((${NVL72_WORKLOAD_SCHEDULING:-0})); then
  groups=$(ranks_table | awk '{print $2}' | sort -u | tr '\n' ' ')
  [[ $groups == "- " ]] && ok "no PodGroup API here: rank pods carry no schedulingGroup" ||
    fail "rank pods name PodGroups on a cluster without the API: $groups"
  grep -q "PodGroups: not served by the API server" "$workdir/operator.log" &&
    ok "the operator logs that the API server serves no PodGroups" ||
    fail "no 'not served' line in the operator log"
  e2e_end
  exit 0
fi

pg0=$(api GET "$pg_api/podgroups/gang-seg-0")
uid=$(job_json gang | jq -r .metadata.uid)
want='{"gang":{"minCount":4}} [{"key":"nvidia.com/gpu.clique"}] gang '"$uid"' gang segment'
got=$(jq -c '.spec.schedulingPolicy' <<<"$pg0")\ $(jq -c '.spec.schedulingConstraints.topology' <<<"$pg0")\ $(jq -r '[.metadata.ownerReferences[0].name, .metadata.ownerReferences[0].uid, .spec.workloadRef.workloadName, .spec.workloadRef.templateName] | join(" ")' <<<"$pg0")
[[ $got == "$want" ]] && ok "PodGroup gang-seg-0: gang minCount 4, topology on the clique label, owned by the job, from Workload gang" ||
  fail "PodGroup gang-seg-0: got '$got', want '$want'"
[[ $(groups_of_job) == gang-seg-0,gang-seg-1 ]] && ok "one PodGroup per segment" || fail "PodGroups: $(groups_of_job)"
[[ $(api GET "$pg_api/workloads/gang" | jq -r '.spec.controllerRef.kind + "/" + .spec.controllerRef.name') == NVL72Job/gang ]] &&
  ok "Workload gang points at NVL72Job gang" || fail "Workload gang: $(api GET "$pg_api/workloads/gang" | jq -c .spec)"
membership=$(ranks_table | awk '{print $1 ":" $2}' | tr '\n' ' ')
want_membership="0:gang-seg-0 1:gang-seg-0 2:gang-seg-0 3:gang-seg-0 4:gang-seg-1 5:gang-seg-1 6:gang-seg-1 7:gang-seg-1 "
[[ $membership == "$want_membership" ]] && ok "every rank pod is in its segment's PodGroup" ||
  fail "membership: $membership"

log "2. kube-scheduler scheduled each segment as a group"
initially_scheduled() {
  [[ $(api GET "$pg_api/podgroups/$1" | jq -r '.status.conditions[]? | select(.type == "PodGroupInitiallyScheduled") | .status') == True ]]
}
for g in gang-seg-0 gang-seg-1; do
  wait_until 30 initially_scheduled "$g" && ok "$g: PodGroupInitiallyScheduled True (kube-scheduler's group cycle)" ||
    fail "$g conditions: $(api GET "$pg_api/podgroups/$g" | jq -c '.status.conditions')"
done
attempts=$(scheduled_groups)
[[ $attempts != "?" && $attempts_before != "?" ]] && ((attempts - attempts_before >= 2)) &&
  ok "scheduler_podgroup_schedule_attempts_total{result=scheduled}: $attempts_before -> $attempts" ||
  fail "scheduler_podgroup_schedule_attempts_total{result=scheduled}: $attempts_before -> $attempts"

log "3. rank 5's node stops heartbeating: the replacement joins gang-seg-1"
seg1_uid=$(api GET "$pg_api/podgroups/gang-seg-1" | jq -r .metadata.uid)
dead=$(node_of_rank 5)
old_uid=$(api GET "/api/v1/namespaces/$ns/pods/gang-5" | jq -r .metadata.uid)
fail_node "$dead"
replaced() {
  local n; n=$(node_of_rank 5)
  [[ -n $n && $n != "$dead" ]] && all_running_on_plan &&
    [[ $(api GET "/api/v1/namespaces/$ns/pods/gang-5" | jq -r .metadata.uid) != "$old_uid" ]]
}
if wait_until 120 replaced; then
  spare=$(node_of_rank 5)
  [[ $(rack_of "$spare") == $(rack_of "$dead") ]] && ok "rank 5: $dead -> $spare (same rack), Running" ||
    fail "rank 5 left its rack: $dead -> $spare"
else
  fail "rank 5 not replaced: $(ranks_table | tr '\n' ';')"
fi
[[ $(pod_group gang-5) == gang-seg-1 ]] && ok "the replacement pod is in gang-seg-1" || fail "replacement pod's group: $(pod_group gang-5)"
[[ $(api GET "$pg_api/podgroups/gang-seg-1" | jq -r .metadata.uid) == "$seg1_uid" ]] &&
  ok "gang-seg-1 is the same object through the recovery" || fail "gang-seg-1 was recreated"

log "4. deleting the job removes its Workload and PodGroups"
kc -n "$ns" delete nvj gang --wait=false >/dev/null
if wait_until 90 no_groups_left; then
  ok "Workload and PodGroups gone with the job"
else
  fail "left after the delete: podgroups [$(groups_of_job)] workload $(api GET "$pg_api/workloads/gang" | jq -r '.kind')"
fi

e2e_end
