#!/usr/bin/env bash
# Deleting an NVL72Job with each cascading policy, with kube-controller-manager's garbage collector
# running next to nvl72-operator (docs/operator.md, "Deletion"):
#  - background (kubectl's default): the job goes at once; its pods and headless Service go too, and
#    a waiting job is admitted into the freed rack;
#  - foreground: the job stays (deletionTimestamp, finalizer foregroundDeletion) until every pod is
#    gone; one pod held by a test finalizer holds the job, and releasing it lets the job go;
#  - orphan: the job goes; its pods and Service stay, without ownerReferences (the garbage collector
#    took them off), and the operator does not delete them; the job's reservation is released.
#   tests/e2e/deletion_e2e_test.sh OPERATOR
# Env: NVL72_CLUSTER_STATE=DIR reuses a running cluster with at least 2 racks.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
op_bin=${1:?usage: deletion_e2e_test.sh OPERATOR}
e2e_name=deletion-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"

e2e_cluster "$repo"
ns=del-e2e-$(date +%s)
workdir=$(mktemp -d /tmp/nvl72-del-e2e.XXXXXX)
op_pid=
cleanup() {
  kc -n "$ns" patch pod hold-0 --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
  kc -n "$ns" delete nvj --all --wait=true --timeout=30s >/dev/null 2>&1 || true
  stop_pid "$op_pid"
  kc delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  ((failures > 0)) && { log "--- tail of the operator log"; tail -n 40 "$workdir/operator.log" >&2 || true; }
  e2e_cluster_down "$repo"
  rm -rf "$workdir"
}
trap cleanup EXIT

e2e_namespace "$repo" "$ns" || { fail "namespace $ns not ready"; exit 1; }
start_operator "$op_bin" "$ns" "$workdir/operator.log" --admission-resync-seconds 5 || { fail "operator not ready"; exit 1; }

job() { nvl72_job "$1" "$2" | kc -n "$ns" apply -f - >/dev/null; }
job_exists() { [[ $(api GET "$(job_path "$1")" | jq -r '.kind') == NVL72Job ]]; }
job_gone() { ! job_exists "$1"; }
svc_exists() { [[ $(api GET "/api/v1/namespaces/$ns/services/$1" | jq -r '.kind') == Service ]]; }
svc_gone() { ! svc_exists "$1"; }
pods_of() { api GET "/api/v1/namespaces/$ns/pods?labelSelector=nvl72.dev%2Fjob%3D$1"; }
npods() { pods_of "$1" | jq '.items | length'; }
has_pods() { [[ $(npods "$1") == "$2" ]]; }
no_pods() { [[ $(npods "$1") == 0 ]]; }
admitted() { [[ $(api GET "$(job_path "$1")" | jq -r '.status.placement.ranks | length') == "$2" ]]; }
delete_job() {  # NAME POLICY
  api DELETE "$(job_path "$1")" application/json "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"propagationPolicy\":\"$2\"}" >/dev/null
}

log "1. background: the job, its pods and its Service go; a waiting job takes the freed capacity"
racks=${NVL72_RACKS:-4}
for ((i = 0; i < racks; i++)); do job "fill$i" 16; done
wait_until 60 has_pods "fill$((racks - 1))" 16 || fail "fill jobs not admitted"
job waiting 16
sleep 2
admitted waiting 16 && fail "waiting was admitted although every rack is full"
wait_until 30 svc_exists fill0 || fail "fill0 has no Service"
delete_job fill0 Background
if wait_until 30 job_gone fill0; then
  ok "background: fill0 is gone"
else
  fail "background: fill0 still exists: $(api GET "$(job_path fill0)" | jq -c '.metadata | {deletionTimestamp, finalizers}')"
fi
wait_until 30 no_pods fill0 && ok "background: its 16 pods are gone" || fail "background: $(npods fill0) pods left"
wait_until 30 svc_gone fill0 && ok "background: its Service is gone" || fail "background: Service fill0 left"
wait_until 30 admitted waiting 16 && ok "the waiting job took the freed rack" || fail "waiting not admitted after fill0 went"

log "2. foreground: the job stays until its pods are gone"
wait_until 30 has_pods fill1 16 || fail "fill1 pods"
# A test finalizer on one pod stands for a pod that takes long to go.
kc -n "$ns" patch pod fill1-0 --type=merge -p '{"metadata":{"finalizers":["nvl72.dev/e2e-hold"]}}' >/dev/null
delete_job fill1 Foreground
sleep 3
fg=$(api GET "$(job_path fill1)" | jq -c '{d: (.metadata.deletionTimestamp != null), f: .metadata.finalizers}')
left=$(pods_of fill1 | jq -r '[.items[].metadata.name] | join(",")')
if [[ $fg == *'"d":true'* && $fg == *foregroundDeletion* && $left == fill1-0 ]]; then
  ok "foreground: fill1 waits for its last pod ($fg; pods left: $left)"
else
  fail "foreground: job $fg, pods left '$left' (want only fill1-0, held)"
fi
kc -n "$ns" patch pod fill1-0 --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null
if wait_until 30 job_gone fill1; then
  ok "foreground: fill1 is gone once its last pod went"
else
  fail "foreground: fill1 still exists"
fi

log "3. orphan: the job goes, its pods and Service stay without ownerReferences"
wait_until 30 has_pods fill2 16 || fail "fill2 pods"
uids_before=$(pods_of fill2 | jq -r '[.items[].metadata.uid] | sort | join(",")')
delete_job fill2 Orphan
wait_until 30 job_gone fill2 && ok "orphan: fill2 is gone" ||
  fail "orphan: fill2 still exists: $(api GET "$(job_path fill2)" | jq -c '.metadata | {deletionTimestamp, finalizers}')"
no_owner() { [[ $(pods_of fill2 | jq '[.items[] | select((.metadata.ownerReferences // []) | length > 0)] | length') == 0 ]]; }
wait_until 30 no_owner || fail "orphan: pods still have ownerReferences"
sleep 3  # the operator has seen the deletion: it must not delete the orphans
after=$(pods_of fill2 | jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.uid] | sort | join(",")')
if [[ -n $uids_before && $after == "$uids_before" ]]; then
  ok "orphan: the 16 pods stay, unowned and not deleted"
else
  fail "orphan: pods before [$uids_before] after [$after]"
fi
svc_owner=$(api GET "/api/v1/namespaces/$ns/services/fill2" | jq -c '.metadata.ownerReferences // []')
svc_exists fill2 && [[ $svc_owner == '[]' ]] && ok "orphan: the Service stays, unowned" || fail "orphan: Service fill2 owner $svc_owner"
released=$(kc -n "$ns" get events.events.k8s.io -o jsonpath='{range .items[?(@.reason=="Released")]}{.regarding.name}: {.note}{"\n"}{end}')
grep -q '^fill2: .*pods orphaned' <<<"$released" && ok "orphan: the Released event says the pods were orphaned" ||
  fail "orphan: Released events: $released"
kc -n "$ns" delete pods -l nvl72.dev/job=fill2 --wait=false >/dev/null
kc -n "$ns" delete service fill2 --wait=false >/dev/null

e2e_end
