#!/usr/bin/env bash
# e2e of multi-node NVLink through IMEX ComputeDomains (docs/crd.md#multi-node-nvlink-computedomains):
# nvl72-operator (--compute-domains auto), nvl72-extender and a kube-scheduler with the
# nvl72-scheduler profile, whose DynamicResources plugin allocates the channel claims, on a fresh
# 2-rack local control plane (its own: the CRD and the stand-in driver would change every later test).
#  0. without the ComputeDomain CRD nothing changes: a 4-rank job runs, status.fabric None, its pods
#     carry no resource claim, the operator says ComputeDomains are not served;
#  1. a platform team installs NVIDIA's driver (here our stand-in: tests/compute-domain/, by
#     `local-cluster compute-domains`); a user's own ComputeDomain takes rack0-node08 (a pod with its
#     channel claim runs there, so the driver labels the node);
#  2. a 32-rank job in 2 segments of 16 (spec.fabric unset): the operator noticed the CRD (within its
#     10-s re-probe), so the job gets ComputeDomains <job>-seg-0 and -seg-1 owned by it; every rank
#     pod is Running on its planned node with its channel claim allocated on that node; no rank on
#     the labelled node; condition ComputeDomainReady True; `kubectl nvl72 explain` shows it;
#  3. recovery skips labelled nodes: the last free node of a segment's rack is taken by another pod of
#     the user's ComputeDomain, then the kubelet of a rank's node stops: the rank waits rather than
#     take a labelled node; once that pod goes (its claim with it, the label with that), the rank
#     moves there, its new pod's claim is allocated there and the node joins the segment's
#     ComputeDomain while the failed node leaves it;
#  4. deleting the job removes its ComputeDomains (and the driver their templates and node labels);
#     the user's own ComputeDomain and label stay;
#  5. the driver's controller is killed: a new job creates no rank pod, its conditions say it waits
#     for the channel template (ComputeDomainReady TemplatePending, Running ClaimPending); it runs
#     once the driver is back;
#  6. two racks more (the driver publishes their slices): each example job of examples/ gets its
#     ComputeDomain(s) and runs with every channel allocated on its planned node (job-too-big waits,
#     with none); deleting them removes their ComputeDomains.
#
#   tests/e2e/compute_domains_e2e_test.sh OPERATOR EXTENDER KUBECTL_NVL72
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
op_bin=${1:?usage: compute_domains_e2e_test.sh OPERATOR EXTENDER KUBECTL_NVL72}
ext_bin=${2:?usage: compute_domains_e2e_test.sh OPERATOR EXTENDER KUBECTL_NVL72}
cli_bin=${3:?usage: compute_domains_e2e_test.sh OPERATOR EXTENDER KUBECTL_NVL72}
e2e_name=compute-domains-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"

e2e_cluster "$repo" --own --racks 2
ns=cd-e2e
workdir=$(mktemp -d /tmp/nvl72-cd-e2e.XXXXXX)
op_pid= ext_pid= sched_pid= dead=
cleanup() {
  stop_pid "$op_pid"; stop_pid "$sched_pid"; stop_pid "$ext_pid"
  if ((failures > 0)); then
    cp "$state"/logs/*standin*.log "$workdir/" 2>/dev/null || true
    tail_logs "$workdir" 40
  fi
  e2e_cluster_down "$repo"
  rm -rf "$workdir"
}
trap cleanup EXIT

e2e_namespace "$repo" "$ns" || { fail "namespace $ns not ready"; exit 1; }
start_extender "$ext_bin" "$workdir/extender.log" || { fail "extender not ready"; exit 1; }
start_nvl72_scheduler "$repo" "$workdir" "$workdir/nvl72-scheduler.log"
start_operator "$op_bin" "$ns" "$workdir/operator.log" --admission-resync-seconds 5 \
  --compute-domains auto || { fail "operator not ready"; exit 1; }
ok "extender, nvl72 kube-scheduler and operator running (Kubernetes $NVL72_K8S_VERSION, 2 racks)"

cd_api=/apis/resource.nvidia.com/v1beta1/namespaces/$ns/computedomains
rct_api=/apis/resource.k8s.io/v1/namespaces/$ns/resourceclaimtemplates
cd_label=resource.nvidia.com/computeDomain
cd_names() { api GET "$cd_api?labelSelector=nvl72.dev%2Fjob%3D$1" | jq -r '[.items[]?.metadata.name] | sort | join(",")'; }
cd_uid() { api GET "$cd_api/$1" | jq -r '.metadata.uid // "-"'; }
node_cd() { api GET "/api/v1/nodes/$1" | jq -r --arg l "$cd_label" '.metadata.labels[$l] // "-"'; }
node_cd_is() { [[ $(node_cd "$1") == "$2" ]]; }
nodes_labelled() { api GET "/api/v1/nodes?labelSelector=${cd_label//\//%2F}%3D$1" | jq -r '[.items[].metadata.name] | sort | join(",")'; }
job_cond() { job_json "$1" | jq -r --arg t "$2" '(.status.conditions // [])[] | select(.type == $t) | "\(.status) \(.reason): \(.message)"'; }
node_of_rank() { job_json "$1" | jq -r --argjson r "$2" '.status.placement.ranks[]? | select(.rank == $r) | .node'; }
# "rank node planned phase channel" per live rank pod of JOB; channel = the node(s) its nvl72-channel
# claim is allocated on (the pool of NVIDIA's compute-domain driver is the node name), "-" if none.
# (The claims go through a file: 32 of them are more than one argument may hold, 128 KiB.)
rank_claims() {
  api GET "/apis/resource.k8s.io/v1/namespaces/$ns/resourceclaims" >"$workdir/claims.json"
  api GET "/api/v1/namespaces/$ns/pods?labelSelector=nvl72.dev%2Fjob%3D$1" | jq -r --slurpfile claims "$workdir/claims.json" '
    (($claims[0].items // []) | map({key: .metadata.name, value: ([.status.allocation.devices.results[]?
      | select(.driver == "compute-domain.nvidia.com") | .pool] | join("+"))}) | from_entries) as $alloc
    | .items[] | select(.metadata.deletionTimestamp == null)
    | (((.status.resourceClaimStatuses // []) | map(select(.name == "nvl72-channel")) | first) // {}) as $s
    | ($alloc[$s.resourceClaimName // ""] // "") as $on
    | [.metadata.labels["nvl72.dev/rank"], (.spec.nodeName // "-"), .metadata.annotations["nvl72.dev/node"],
       .status.phase, (if $on == "" then "-" else $on end)] | join(" ")' | sort -n
}
# JOB N: N live rank pods, each Running on its planned node with its channel allocated there.
on_plan_with_channel() {
  local t; t=$(rank_claims "$1")
  [[ $(grep -c . <<<"$t") == "$2" && $(awk '$2 == $3 && $4 == "Running" && $5 == $2' <<<"$t" | wc -l) == "$2" ]]
}
job() {  # NAME REPLICAS SEGMENT: a Required job, InPlace recovery with a 10-s grace
  cat <<YAML | kc -n "$ns" apply -f - >/dev/null
apiVersion: nvl72.dev/v1alpha1
kind: NVL72Job
metadata: {name: $1}
spec:
  replicas: $2
  gpusPerReplica: 4
  topology: {mode: Required, segmentSize: $3}
  recovery: {policy: InPlace, notReadyGraceSeconds: 10, maxRecoveries: 5, waitForDomainSeconds: 600}
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m}}}]
YAML
}
users_pod() {  # NAME NODE: a pod of the user's own ComputeDomain "users-own" on NODE
  cat <<YAML | kc -n "$ns" apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  schedulerName: nvl72-scheduler
  nodeSelector: {kubernetes.io/hostname: $2}
  resourceClaims: [{name: imex, resourceClaimTemplateName: users-own-channel}]
  containers: [{name: c, image: busybox, resources: {claims: [{name: imex}]}}]
YAML
}
job_gone() { [[ $(api GET "$(job_path "$1")" | jq -r .kind) != NVL72Job ]]; }

log "0. without the ComputeDomain CRD"
job plain 4 0
plain_running() { [[ $(rank_claims plain | awk '$2 == $3 && $4 == "Running"' | wc -l) == 4 ]]; }
if wait_until 90 plain_running; then
  fabric=$(job_json plain | jq -r '.status.fabric // "-"')
  claims=$(api GET "/api/v1/namespaces/$ns/pods?labelSelector=nvl72.dev%2Fjob%3Dplain" | jq '[.items[].spec.resourceClaims // [] | length] | add')
  [[ $fabric == None && $claims == 0 ]] && ok "4 ranks Running as before: status.fabric None, no resource claims" ||
    fail "without the CRD: status.fabric $fabric, $claims resource claims"
  [[ $(api GET "$cd_api") == "404 page not found" ]] && ok "computedomains not served (404)" || fail "computedomains served before the CRD"
else
  fail "plain did not start: $(rank_claims plain | tr '\n' ';')"
fi
grep -q "ComputeDomains: not served by the API server" "$workdir/operator.log" &&
  ok "the operator logs that the API server serves no ComputeDomains" || fail "no 'not served' line in the operator log"
kc -n "$ns" delete nvj plain --wait=false >/dev/null
wait_until 60 job_gone plain || fail "plain not deleted"

log "1. the platform team installs the driver (the stand-in); a user's own ComputeDomain on rack0-node08"
t_crd=$(date +%s)
"$repo/scripts/local-cluster" compute-domains --state "$state" >/dev/null || { fail "local-cluster compute-domains"; exit 1; }
cat <<YAML | kc -n "$ns" apply -f - >/dev/null
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: users-own}
spec: {numNodes: 0, channel: {resourceClaimTemplate: {name: users-own-channel}}}
YAML
users_pod users-a rack0-node08
users_uid=$(cd_uid users-own)
if wait_until 60 node_cd_is rack0-node08 "$users_uid"; then
  ok "rack0-node08 labelled $cd_label=$users_uid (the user's pod got its channel there)"
else
  fail "rack0-node08 not labelled for users-own ($(node_cd rack0-node08)); pod: $(kc -n "$ns" get pod users-a -o wide 2>&1 | tail -1)"
fi
# The operator asks again every 10 s whether ComputeDomains are served.
left=$((t_crd + 11 - $(date +%s)))
((left > 0)) && sleep "$left"

log "2. a 32-rank job in 2 segments of 16, spec.fabric unset"
t0=$(now_ns)
job moe 32 16
if wait_until 180 on_plan_with_channel moe 32; then
  ok "32 ranks Running on their planned nodes, each with its channel claim allocated on that node ($(ms_since "$t0") ms)"
else
  fail "moe did not start with channels: $(rank_claims moe | tr '\n' ';'); Running: $(job_cond moe Running)"
  exit 1
fi
fabric=$(job_json moe | jq -r '.status.fabric // "-"')
[[ $fabric == ComputeDomain ]] && ok "status.fabric ComputeDomain" || fail "status.fabric $fabric"
[[ $(cd_names moe) == moe-seg-0,moe-seg-1 ]] && ok "ComputeDomains moe-seg-0 and moe-seg-1" || fail "ComputeDomains: $(cd_names moe)"
job_uid=$(job_json moe | jq -r .metadata.uid)
owners=$(api GET "$cd_api?labelSelector=nvl72.dev%2Fjob%3Dmoe" | jq -r '[.items[].metadata.ownerReferences[]? | select(.controller) | .uid] | unique | join(",")')
[[ $owners == "$job_uid" ]] && ok "both owned by the job" || fail "owners $owners, job $job_uid"
seg_uid=("$(cd_uid moe-seg-0)" "$(cd_uid moe-seg-1)")
bad=0
for r in 0 31; do
  s=$((r / 16)) n=$(node_of_rank moe "$r")
  node_cd_is "$n" "${seg_uid[$s]}" || { bad=1; fail "rank $r's node $n labelled $(node_cd "$n"), not moe-seg-$s"; }
done
((bad)) || ok "rank nodes labelled for their segment's ComputeDomain"
# kube-scheduler would refuse a rank there (its one channel device is taken) and the safety net
# would re-plan: the operator must not have planned it there in the first place.
replanned=$(job_json moe | jq -r '"\(.status.replans // 0) \((.status.refusedNodes // []) | join(","))"')
if job_json moe | jq -r '.status.placement.ranks[].node' | grep -qx rack0-node08; then
  fail "a rank was placed on rack0-node08, labelled for another ComputeDomain"
elif [[ $replanned != "0 " ]]; then
  fail "the gang was re-planned (replans, refused nodes: $replanned): a first plan was refused"
else
  ok "no rank planned on rack0-node08 (labelled for the user's ComputeDomain), no re-plan"
fi
cd_ready() { [[ $(job_cond moe ComputeDomainReady) == "True Ready:"* ]]; }
wait_until 30 cd_ready && ok "ComputeDomainReady: $(job_cond moe ComputeDomainReady)" ||
  fail "ComputeDomainReady: $(job_cond moe ComputeDomainReady)"
explain=$("$cli_bin" --kubeconfig "$KUBECONFIG" -n "$ns" explain moe 2>&1 || true)
grep -q "Fabric:      IMEX ComputeDomain moe-seg-{0..1}: Ready" <<<"$explain" &&
  ok "kubectl nvl72 explain: $(grep Fabric: <<<"$explain" | sed 's/^ *//')" || fail "explain: $explain"

log "3. recovery skips nodes of another ComputeDomain"
s=0; [[ $(node_of_rank moe 16) == rack0-* ]] && s=1
first=$((s * 16)) rack=rack0
placed=$(job_json moe | jq -r '.status.placement.ranks[].node')
free=$(for i in $(seq -w 0 17); do n=$rack-node$i; grep -qx "$n" <<<"$placed" || [[ $n == rack0-node08 ]] || echo "$n"; done)
if [[ $(grep -c . <<<"$free") != 1 ]]; then
  fail "expected one free unlabelled node in $rack besides rack0-node08, found: $(tr '\n' ' ' <<<"$free")"; exit 1
fi
users_pod users-b "$free"
wait_until 60 node_cd_is "$free" "$users_uid" && ok "$free now serves the user's ComputeDomain too: every free node of $rack is labelled" ||
  fail "$free not labelled: $(node_cd "$free")"
dead=$(node_of_rank moe "$first")
fail_node "$dead"
recovering() { [[ $(job_cond moe Recovering) == "True WaitingForNode:"* ]]; }
if wait_until 60 recovering; then
  ok "rank $first of $dead waits: $(job_cond moe Recovering)"
  [[ $(job_cond moe Recovering) == *"2 by a ComputeDomain still on the node"* ]] ||
    fail "the wait does not name the two nodes of another ComputeDomain"
else
  fail "no WaitingForNode: Recovering $(job_cond moe Recovering), rank $first on $(node_of_rank moe "$first")"
fi
sleep 5
now_on=$(node_of_rank moe "$first")
[[ $now_on == "$dead" ]] && ok "rank $first stays planned on $dead: no replacement on rack0-node08 or $free" ||
  fail "rank $first re-planned on $now_on ($(node_cd "$now_on"))"
t0=$(now_ns)
kc -n "$ns" delete pod users-b --wait=false >/dev/null
moved() { [[ $(node_of_rank moe "$first") == "$free" ]] && on_plan_with_channel moe 32; }
if wait_until 120 moved; then
  ok "once $free was free, rank $first moved there and its new claim is allocated there ($(ms_since "$t0") ms after the pod's delete)"
else
  fail "rank $first: planned on $(node_of_rank moe "$first"); $(rank_claims moe | awk -v r="$first" '$1 == r'); label of $free: $(node_cd "$free")"
fi
members() { api GET "$cd_api/moe-seg-$s" | jq -r '[.status.nodes[]?.name] | sort | join(",")'; }
joined() { [[ ,$(members), == *,$free,* && ,$(members), != *,$dead,* ]] && node_cd_is "$free" "${seg_uid[$s]}"; }
wait_until 60 joined && ok "$free joined moe-seg-$s (labelled for it, in its status.nodes); $dead left it" ||
  fail "moe-seg-$s nodes: $(members); $free labelled $(node_cd "$free"); $dead labelled $(node_cd "$dead")"

log "4. deleting the job"
kc -n "$ns" delete nvj moe --wait=false >/dev/null
cleaned() {
  [[ -z $(cd_names moe) && -z $(nodes_labelled "${seg_uid[0]}") && -z $(nodes_labelled "${seg_uid[1]}") ]] &&
    [[ $(api GET "$rct_api" | jq -r '[.items[].metadata.name | select(startswith("moe-"))] | length') == 0 ]]
}
if wait_until 90 cleaned; then
  ok "ComputeDomains, their templates and node labels gone"
else
  fail "left: ComputeDomains '$(cd_names moe)', labelled '$(nodes_labelled "${seg_uid[0]}") $(nodes_labelled "${seg_uid[1]}")'"
fi
node_cd_is rack0-node08 "$users_uid" && [[ $(cd_uid users-own) == "$users_uid" ]] &&
  ok "the user's own ComputeDomain and its node label stay" || fail "users-own touched: $(node_cd rack0-node08)"
repair_node "$dead"; dead=

log "5. the driver's controller dies (an SRE kills it): a new job says what it waits for"
read -r standin_pid _ <"$state/run/dra-standin.pid"
kill -KILL "$standin_pid"
job late 4 0
pending() {
  [[ $(job_cond late ComputeDomainReady) == "False TemplatePending:"* &&
    $(job_cond late Running) == "False ClaimPending:"* ]]
}
if wait_until 30 pending; then
  ok "no rank pod without its channel template: $(job_cond late Running)"
  [[ $(rank_claims late | grep -c .) == 0 ]] || fail "rank pods of late exist before their template"
else
  fail "late: ComputeDomainReady '$(job_cond late ComputeDomainReady)', Running '$(job_cond late Running)'"
fi
t0=$(now_ns)
"$repo/scripts/local-cluster" compute-domains --state "$state" >/dev/null || fail "local-cluster compute-domains (restart)"
wait_until 60 on_plan_with_channel late 4 && ok "the driver back: late runs with its channels ($(ms_since "$t0") ms)" ||
  fail "late after the driver came back: $(rank_claims late | tr '\n' ';') $(job_cond late Running)"
kc -n "$ns" delete nvj late --wait=false >/dev/null

log "6. the example jobs (examples/), on 2 racks more"
"$repo/scripts/local-cluster" add-racks 2 --state "$state" >/dev/null || { fail "local-cluster add-racks 2"; exit 1; }
slices() { api GET /apis/resource.k8s.io/v1/resourceslices | jq '[.items[] | select(.spec.driver == "compute-domain.nvidia.com")] | length'; }
wait_until 60 eval '[[ $(slices) == 72 ]]' && ok "the driver publishes a ResourceSlice for each of the 72 nodes" ||
  fail "$(slices) ResourceSlices of compute-domain.nvidia.com for 72 nodes"
t0=$(now_ns)
for f in job-16-required jobs-two-8 job-32-segmented job-too-big; do kc -n "$ns" apply -f "$repo/examples/$f.yaml" >/dev/null; done
examples_running() {
  on_plan_with_channel moe-16 16 && on_plan_with_channel tp-8-a 8 && on_plan_with_channel tp-8-b 8 &&
    on_plan_with_channel ep-32 32
}
if wait_until 180 examples_running; then
  ok "moe-16, tp-8-a, tp-8-b, ep-32: all 64 ranks Running on their planned nodes with their channel allocated there ($(ms_since "$t0") ms)"
else
  for j in moe-16 tp-8-a tp-8-b ep-32; do log "$j: $(rank_claims "$j" | awk '$2 != $3 || $4 != "Running" || $5 != $2' | head -3 | tr '\n' ';') $(job_cond "$j" Running)"; done
  fail "the example jobs did not all run with their channels"
fi
got=$(for j in moe-16 tp-8-a tp-8-b ep-32 too-big-17; do echo "$j=$(cd_names "$j")"; done | tr '\n' ' ')
want="moe-16=moe-16-seg-0 tp-8-a=tp-8-a-seg-0 tp-8-b=tp-8-b-seg-0 ep-32=ep-32-seg-0,ep-32-seg-1 too-big-17= "
[[ $got == "$want" ]] && ok "each example job has its ComputeDomains; too-big-17 waits without any: $got" ||
  fail "ComputeDomains per job: $got (want: $want)"
kc -n "$ns" delete nvj --all --wait=false >/dev/null
none_left() { [[ $(api GET "$cd_api" | jq '[.items[] | select(.metadata.labels["nvl72.dev/job"] != null)] | length') == 0 ]]; }
wait_until 90 none_left && ok "deleting the example jobs removes their ComputeDomains" || fail "ComputeDomains left: $(api GET "$cd_api" | jq -r '[.items[].metadata.name] | join(",")')"
e2e_end
