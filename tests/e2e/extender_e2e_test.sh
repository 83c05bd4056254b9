#!/usr/bin/env bash
# e2e of nvl72-extender with the real kube-scheduler on a local control plane with kwok racks.
#
#   tests/e2e/extender_e2e_test.sh [PATH/TO/nvl72-extender]
#
# Brings up its own cluster (11 racks of 18 x 4-GPU kwok nodes) with the default kube-scheduler, then
# runs nvl72-extender and a SECOND kube-scheduler serving the `nvl72-scheduler` profile with
# scheduler-plugin/scheduler-config.yaml. Checks:
#   1. gang ranks (labels nvl72.dev/job + rank, annotation nvl72.dev/node) are bound to their
#      planned nodes;
#   2. 200 single-GPU pods on a partly filled cluster, measured side by side in the same run: racks
#      0-4 get them through the default profile, racks 5-9 (same pre-fill) through nvl72-scheduler,
#      all created at once;
#      ours must leave more whole free domains and more whole free nodes (both printed);
#   3. with the extender stopped, gang ranks stay Pending (never placed elsewhere); once it is back
#      they bind to their planned nodes;
#   4. the full-Nodes mode (`nodeCacheCapable: false`: kube-scheduler sends and expects whole Node
#      objects): the same config with that one line changed binds gang ranks to their planned nodes
#      and single-GPU pods through the extender, and kube-scheduler logs no extender error.
# Results are printed as "RESULT ..." lines (and appended to $NVL72_E2E_RESULTS if set).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lc=$root/scripts/local-cluster
extender_bin=${1:-${NVL72_EXTENDER_BIN:-${NVL72_BUILD_DIR:-$root/build}/scheduler-plugin/nvl72-extender}}
[[ -x $extender_bin ]] || { echo "nvl72-extender binary not found at $extender_bin" >&2; exit 1; }
e2e_name=extender-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"

# Its own cluster of 11 racks (not e2e_cluster's shared 4-rack one); e2e_cluster_down stops it. The
# state dir also holds the logs of the processes started here.
state=$(mktemp -d "${TMPDIR:-/tmp}/nvl72-extender-e2e.XXXXXX")
own_cluster=1
ext_pid= sched_pid=
cleanup() {
  local rc=$?
  set +e
  stop_pid "$sched_pid"
  stop_pid "$ext_pid"
  if ((failures > 0 || rc != 0)); then
    for f in "$state"/extender.log "$state"/nvl72-scheduler.log "$state"/nvl72-scheduler-full.log; do
      [[ -f $f ]] && { log "--- tail of $f"; tail -n 30 "$f" >&2; }
    done
  fi
  e2e_cluster_down "$root"
  rm -rf "$state"
  exit "$rc"
}
trap cleanup EXIT

racks=11
"$lc" up --racks "$racks" --state "$state" >/dev/null || { fail "local-cluster up"; exit 1; }
# shellcheck disable=SC1091
source "$state/env"
"$lc" scheduler start --state "$state" || { fail "default kube-scheduler"; exit 1; }
nodes_ready() { [[ $(kubectl get nodes -l nvidia.com/gpu.clique --no-headers 2>/dev/null | grep -c ' Ready ') == $((racks * 18)) ]]; }
wait_until 120 nodes_ready || { fail "nodes not Ready"; exit 1; }
ok "cluster up: $racks racks, default kube-scheduler running"

clique() { kubectl get node "rack$1-node00" -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.clique}'; }
kubectl create namespace e2e >/dev/null

# ---- nvl72-extender + second kube-scheduler (nvl72-scheduler profile) ----
start_extender "$extender_bin" "$state/extender.log" || { fail "extender not ready"; exit 1; }  # sets ext_port
ok "nvl72-extender ready on 127.0.0.1:$ext_port"
# restart_extender: the extender again on the same port (the scheduler's config names it), its log
# appended to the first one's; up to 60 s until /readyz.
restart_extender() {
  start_bg "$state/extender.log" "$extender_bin" --kubeconfig "$KUBECONFIG" \
    --listen "127.0.0.1:$ext_port" --spares-per-domain 2
  ext_pid=$BG_PID
  wait_url 60 "http://127.0.0.1:$ext_port/readyz"
}
scheduler_stays_up() { # NAME: the kube-scheduler just started with $state/NAME.yaml still runs 3 s later
  sleep 3
  kill -0 "$sched_pid" 2>/dev/null || { fail "kube-scheduler with $1.yaml exited"; exit 1; }
}
# Writes $state/nvl72-scheduler.yaml (the profile's config, extender http://127.0.0.1:$ext_port).
start_nvl72_scheduler "$root" "$state" "$state/nvl72-scheduler.log"
scheduler_stays_up nvl72-scheduler
ok "second kube-scheduler (profile nvl72-scheduler, extender http://127.0.0.1:$ext_port)"

# ---- helpers ----
# gang_pods JOB NODE... : one 4-GPU rank per planned node
gang_pods() {
  local job=$1; shift
  local rank=0 node
  for node in "$@"; do
    cat <<YAML
---
apiVersion: v1
kind: Pod
metadata:
  name: $job-$rank
  namespace: e2e
  labels: {nvl72.dev/job: $job, nvl72.dev/rank: "$rank"}
  annotations: {nvl72.dev/node: $node}
spec:
  schedulerName: nvl72-scheduler
  containers:
  - name: main
    image: busybox
    resources:
      requests: {cpu: 100m, nvidia.com/gpu: "4"}
      limits: {nvidia.com/gpu: "4"}
YAML
    rank=$((rank + 1))
  done
}
# "name node planned" per pod of a job
placements() {
  kubectl get pods -n e2e -l "nvl72.dev/job=$1" -o go-template \
    --template='{{range .items}}{{.metadata.name}} {{or .spec.nodeName "-"}} {{index .metadata.annotations "nvl72.dev/node"}}{{"\n"}}{{end}}'
}
all_on_plan() { # JOB COUNT
  local n; n=$(placements "$1" | awk '$2 == $3' | wc -l)
  [[ $n == "$2" ]]
}

# ---- 1. gang ranks land on their planned nodes ----
gang_pods g1 rack10-node03 rack10-node07 rack10-node11 rack10-node15 | kubectl apply -f - >/dev/null
wait_until 60 all_on_plan g1 4 || { fail "gang g1 not bound to its plan:
$(placements g1)"; exit 1; }
ok "gang g1: 4 ranks bound to their planned nodes by kube-scheduler + extender"

# ---- 2. 200 single-GPU pods, default profile vs nvl72-scheduler, side by side ----
# Identical pre-fill in both halves: in the first three racks of each half, nodes 1, 5, 9, 13 run a
# 2-GPU pod and node 3 a 3-GPU pod (bound directly, no scheduler); the other two racks are empty.
prefill() {
  local r n gpus
  for r in "$@"; do
    for n in 1 3 5 9 13; do
      gpus=2; [[ $n == 3 ]] && gpus=3
      cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: fill-r$r-n$n, namespace: e2e, labels: {app: fill}}
spec:
  nodeName: rack$r-node$(printf %02d "$n")
  containers:
  - name: main
    image: busybox
    resources:
      requests: {cpu: 100m, nvidia.com/gpu: "$gpus"}
      limits: {nvidia.com/gpu: "$gpus"}
YAML
    done
  done
}
prefill 0 1 2 5 6 7 | kubectl apply -f - >/dev/null
half_a="$(clique 0), $(clique 1), $(clique 2), $(clique 3), $(clique 4)"
half_b="$(clique 5), $(clique 6), $(clique 7), $(clique 8), $(clique 9)"
singles() { # PREFIX SCHEDULER CLIQUES COUNT
  local i
  for ((i = 0; i < $4; i++)); do
    cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: $1-$i, namespace: e2e, labels: {app: $1}}
spec:
  schedulerName: $2
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: nvidia.com/gpu.clique, operator: In, values: [$3]}
  containers:
  - name: main
    image: busybox
    resources:
      requests: {cpu: 100m, nvidia.com/gpu: "1"}
      limits: {nvidia.com/gpu: "1"}
YAML
  done
}
{ singles default default-scheduler "$half_a" 200; singles nvl72 nvl72-scheduler "$half_b" 200; } >"$state/singles.yaml"
bound_count() { kubectl get pods -n e2e -l "app=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true; }
ts=$(date +%s.%N)
kubectl apply -f "$state/singles.yaml" >/dev/null
t_default= t_nvl72=
deadline=$(( $(date +%s) + 300 ))
while [[ -z $t_default || -z $t_nvl72 ]]; do
  (( $(date +%s) < deadline )) || { fail "singles not all bound: default $(bound_count default)/200, nvl72 $(bound_count nvl72)/200"; exit 1; }
  [[ -z $t_default && $(bound_count default) == 200 ]] && t_default=$(awk -v a="$ts" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  [[ -z $t_nvl72 && $(bound_count nvl72) == 200 ]] && t_nvl72=$(awk -v a="$ts" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  sleep 0.5
done
ok "200 + 200 single-GPU pods bound (default profile ${t_default}s, nvl72-scheduler ${t_nvl72}s, created together)"

# GPUs requested per node (all pods in the cluster that are bound and not finished).
kubectl get pods -A -o go-template --template='{{range .items}}{{if .spec.nodeName}}{{.spec.nodeName}}{{range .spec.containers}} {{index .resources.requests "nvidia.com/gpu"}}{{end}}{{"\n"}}{{end}}{{end}}' \
  | awk '{ s = 0; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i; used[$1] += s } END { for (n in used) print n, used[n] }' \
  >"$state/used.txt"
stats() { # FIRST_RACK LAST_RACK -> "whole_free_domains whole_free_nodes largest_free_block"
  awk -v lo="$1" -v hi="$2" '
    { used[$1] = $2 }
    END {
      domains = 0; nodes = 0; best = 0
      for (r = lo; r <= hi; r++) {
        free = 0
        for (n = 0; n < 18; n++) { name = sprintf("rack%d-node%02d", r, n); if (!(name in used) || used[name] == 0) free++ }
        nodes += free; if (free == 18) domains++; if (free > best) best = free
      }
      print domains, nodes, best
    }' "$state/used.txt"
}
read -r d_dom d_nodes d_best < <(stats 0 4)
read -r o_dom o_nodes o_best < <(stats 5 9)
per_rack() { # FIRST LAST -> "rackR:used_gpus/free_nodes ..." (where the pods went)
  awk -v lo="$1" -v hi="$2" '{ used[$1] = $2 } END {
    for (r = lo; r <= hi; r++) { g = 0; free = 0
      for (n = 0; n < 18; n++) { name = sprintf("rack%d-node%02d", r, n); g += used[name]; if (used[name] == 0) free++ }
      printf "rack%d:%d/%d ", r, g, free }
    print "" }' "$state/used.txt"
}
log "GPUs used / whole free nodes per rack: default $(per_rack 0 4)| nvl72 $(per_rack 5 9)"
result "extender_e2e singles=200 racks_per_side=5 default: whole_free_domains=$d_dom whole_free_nodes=$d_nodes largest_free_block=$d_best bind_time_s=$t_default"
result "extender_e2e singles=200 racks_per_side=5 nvl72: whole_free_domains=$o_dom whole_free_nodes=$o_nodes largest_free_block=$o_best bind_time_s=$t_nvl72"
# What a gang needs is a whole domain or a large free block of one domain: nvl72 must leave more of
# both. Whole free nodes scattered over racks matter less; there it must be no worse (with
# kube-scheduler v1.37.2 the default profile left as many whole nodes as ours: 31 and 31).
if (( o_dom > d_dom && o_best > d_best && o_nodes >= d_nodes )); then
  ok "nvl72-scheduler leaves more whole capacity for gangs ($o_dom domains / largest block $o_best / $o_nodes nodes vs $d_dom / $d_best / $d_nodes)"
else
  fail "nvl72-scheduler left $o_dom whole domains / largest block $o_best / $o_nodes whole nodes, default $d_dom / $d_best / $d_nodes"
fi

# ---- 3. extender down: gang ranks wait; extender back: they bind ----
stop_pid "$ext_pid"; ext_pid=
ok "extender stopped"
gang_pods g2 rack10-node00 rack10-node01 | kubectl apply -f - >/dev/null
sleep 15
pending=$(placements g2 | awk '$2 == "-"' | wc -l)
[[ $pending == 2 ]] || { fail "with the extender down, gang g2 was placed:
$(placements g2)"; exit 1; }
ok "extender down for 15 s: both g2 ranks still Pending"
restart_extender || { fail "extender not ready"; exit 1; }
ok "extender back"
if ! wait_until 30 all_on_plan g2 2; then
  # The pods may sit in the scheduler's backoff; any pod update requeues them.
  kubectl annotate pods -n e2e -l nvl72.dev/job=g2 nvl72.dev/poke="$(date +%s)" --overwrite >/dev/null
  wait_until 60 all_on_plan g2 2 || { fail "g2 not bound after the extender came back:
$(placements g2)"; exit 1; }
fi
ok "gang g2 bound to its planned nodes after the extender came back"
grep -q 'nvl72_extender_requests_total{code="200",verb="bind"}' <(curl -sf "http://127.0.0.1:$ext_port/metrics") \
  || fail "metrics: no bind requests counted"
# ---- 4. full-Nodes mode: kube-scheduler sends Node objects, the filter answers with Nodes ----
stop_pid "$sched_pid"; sched_pid=
sed -e 's#nodeCacheCapable: true#nodeCacheCapable: false#' "$state/nvl72-scheduler.yaml" >"$state/nvl72-scheduler-full.yaml"
grep -q 'nodeCacheCapable: false' "$state/nvl72-scheduler-full.yaml" || { fail "could not switch nodeCacheCapable off"; exit 1; }
start_bg "$state/nvl72-scheduler-full.log" "$NVL72_KUBE_SCHEDULER" ${NVL72_FEATURE_GATES:+--feature-gates=$NVL72_FEATURE_GATES} --config="$state/nvl72-scheduler-full.yaml" \
  --secure-port="$(free_port)" --bind-address=127.0.0.1 --authentication-kubeconfig="$KUBECONFIG" \
  --authorization-kubeconfig="$KUBECONFIG"
sched_pid=$BG_PID
scheduler_stays_up nvl72-scheduler-full
full_before=$(curl -sf "http://127.0.0.1:$ext_port/metrics" | awk '/^nvl72_extender_requests_total\{code="200",verb="filter"\}/ {print $2}')
gang_pods g3 rack10-node04 rack10-node08 | kubectl apply -f - >/dev/null
wait_until 60 all_on_plan g3 2 || { fail "full-Nodes mode: gang g3 not bound to its plan:
$(placements g3)"; exit 1; }
ok "full-Nodes mode: gang g3 bound to its planned nodes"
for i in 0 1 2 3; do
  cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: full-single-$i, namespace: e2e, labels: {e2e: full-single}}
spec:
  schedulerName: nvl72-scheduler
  containers:
  - name: main
    image: busybox
    resources: {requests: {cpu: 100m, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
YAML
done | kubectl apply -f - >/dev/null
singles_bound() { [[ $(kubectl get pods -n e2e -l e2e=full-single -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c .) == 4 ]]; }
wait_until 60 singles_bound || { fail "full-Nodes mode: single-GPU pods not bound:
$(kubectl get pods -n e2e -l e2e=full-single -o wide)"; exit 1; }
full_after=$(curl -sf "http://127.0.0.1:$ext_port/metrics" | awk '/^nvl72_extender_requests_total\{code="200",verb="filter"\}/ {print $2}')
failures_before=$failures
(( ${full_after%.*} >= ${full_before%.*} + 6 )) || fail "full-Nodes mode: the extender answered only $(( ${full_after%.*} - ${full_before%.*} )) filter requests for 6 pods"
if grep -i 'extender' "$state/nvl72-scheduler-full.log" | grep -i -E 'error|fail'; then
  fail "full-Nodes mode: the scheduler logged extender errors"
fi
((failures > failures_before)) ||
  ok "full-Nodes mode: 4 single-GPU pods bound through the extender ($(( ${full_after%.*} - ${full_before%.*} )) filter requests answered with 200)"

e2e_end  # no NVL72Jobs here ($ns unset): PASS, or exit 1 with the failures
