#!/usr/bin/env bash
# e2e of nvl72-operator on the real local control plane (kube-apiserver + etcd + kwok, 4 racks of
# 18 nodes x 4 GPUs, no kube-scheduler): CRD validation, admission of the examples, waiting reason,
# `kubectl nvl72 jobs` found by kubectl's plugin discovery, a second replica standing by on the same
# Lease, deletion frees capacity, SIGKILL in the middle of a burst.
#
#   tests/e2e/operator_e2e_test.sh OPERATOR_BINARY [EXTENDER_BINARY]
# Cluster: the one of $NVL72_CLUSTER_STATE (scripts/test) when it is up, else a fresh 4-rack one;
# OP_E2E_STATE=DIR names the running 4-rack cluster to reuse (it wins over $NVL72_CLUSTER_STATE).
# It needs all 4 racks free: 16 jobs of 4 ranks fill them in the burst phase.
# Env: NVL72_CLI_BIN=PATH names kubectl-nvl72 (default: cli/kubectl-nvl72 of the operator's build).
# The checks are on status.placement and the planned node of every pod (annotation nvl72.dev/node
# and its required node affinity). With EXTENDER_BINARY (or $NVL72_EXTENDER_BIN), a last phase runs
# nvl72-extender + a kube-scheduler with the nvl72-scheduler profile and checks that every rank pod
# is bound to its planned node and every admitted job reaches Running (kwok runs bound pods).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${1:-${NVL72_OPERATOR_BIN:-$repo/build/op/operator/nvl72-operator}}
[[ -x $bin ]] || { echo "operator binary $bin not found" >&2; exit 2; }
ext_bin=${2:-${NVL72_EXTENDER_BIN:-}}
# kubectl-nvl72 of the same build, run through kubectl's plugin discovery.
cli=${NVL72_CLI_BIN:-$(dirname "$bin")/../cli/kubectl-nvl72}
[[ -x $cli ]] || { echo "kubectl-nvl72 not found at $cli (set NVL72_CLI_BIN)" >&2; exit 2; }
cli_dir=$(cd "$(dirname "$cli")" && pwd)
e2e_name=operator-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"

# OP_E2E_STATE (the older name) picks the cluster e2e_cluster reuses.
[[ -z ${OP_E2E_STATE:-} ]] || NVL72_CLUSTER_STATE=$OP_E2E_STATE
ns=op-e2e-$(date +%s)-$$  # unique: a namespace of an earlier run may still be terminating
workdir=$(mktemp -d /tmp/nvl72-op-e2e-work.XXXXXX)
op_pid= ext_pid= sched_pid= standby_pid=

cleanup() {
  local rc=$?
  set +e  # best effort: a process that already exited must not change the result
  stop_pid "$op_pid"
  stop_pid "$standby_pid"
  stop_pid "$sched_pid"
  stop_pid "$ext_pid"
  if ((failures > 0)); then
    log "operator log (last 40 lines):"; tail -n 40 "$workdir"/operator*.log >&2 || true
  fi
  if ((${own_cluster:-0})); then
    e2e_cluster_down "$repo"
  elif [[ -n ${state:-} ]]; then
    # A shared cluster gets its capacity back at once: no operator runs any more, so drop its
    # finalizer from the jobs left; the namespace (and the Lease in it) goes.
    e2e_release_namespace "$ns"
  fi
  rm -rf "$workdir"
  exit "$rc"
}
trap cleanup EXIT
e2e_cluster "$repo"

# start_leader SUFFIX: nvl72-operator (lib's start_operator) on the e2e Lease, logging to
# operator-SUFFIX.log; up to 20 s more until its /readyz says it leads. Sets op_pid, op_health_port.
op_leads() { curl -fsS "http://127.0.0.1:$op_health_port/readyz" 2>/dev/null | grep -q leader; }
start_leader() {
  start_operator "$bin" "$ns" "$workdir/operator-$1.log" --leader-elect --lease-namespace "$ns" \
    --lease-name nvl72-operator-e2e --admission-resync-seconds 5 &&
    wait_until 20 op_leads && return 0
  fail "operator did not become ready leader"; return 1
}

# state of a job ("" if none)
state_of() { kc -n "$ns" get nvj "$1" -o jsonpath='{.status.state}' 2>/dev/null || true; }
wait_state() {  # job state [timeout s]
  local deadline=$(($(date +%s) + ${3:-60}))
  while (($(date +%s) < deadline)); do
    [[ $(state_of "$1") == "$2" ]] && return 0
    sleep 0.3
  done
  fail "$1: state $(state_of "$1"), wanted $2"; return 1
}
# "rank node" lines of a job's placement
ranks_of() { kc -n "$ns" get nvj "$1" -o jsonpath='{range .status.placement.ranks[*]}{.rank} {.node}{"\n"}{end}'; }
# checks that every segment of `seg` ranks of job $1 sits in one rack
check_segments() {
  local job=$1 seg=$2 racks
  racks=$(ranks_of "$job" | awk -v seg="$seg" '{split($2, a, "-"); print int($1 / seg), a[1]}' | sort -u |
          awk '{n[$1]++} END {bad = 0; for (s in n) if (n[s] != 1) bad = 1; print bad}')
  [[ $racks == 0 ]] && ok "$job: every segment of $seg ranks in one domain" || fail "$job: a segment spans domains"
}
check_pods_match() {  # job replicas
  local job=$1 n=$2 pods mism
  # Pods are created after the reservation is written (Admitted), so give the operator a moment.
  for _ in $(seq 60); do
    pods=$(kc -n "$ns" get pods -l "nvl72.dev/job=$job" -o name | wc -l)
    [[ $pods == "$n" ]] && break
    sleep 0.5
  done
  [[ $pods == "$n" ]] || { fail "$job: $pods pods, wanted $n (after 30 s)"; return; }
  mism=$(join <(ranks_of "$job" | awk -v j="$job" '{print j "-" $1, $2}' | sort) \
              <(kc -n "$ns" get pods -l "nvl72.dev/job=$job" \
                  -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.annotations.nvl72\.dev/node} {.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]}{"\n"}{end}' | sort) |
         awk '$2 != $3 || $2 != $4' | wc -l)
  [[ $mism == 0 ]] && ok "$job: $n pods, each planned on its placement node" || fail "$job: $mism pods off their placement node"
}

# ------------------------------------------------------------------------------------------------
log "namespace and CRD"
e2e_namespace "$repo" "$ns" || { fail "namespace $ns not ready"; exit 1; }

log "invalid manifests are rejected with a message naming the field"
n_invalid=0
for f in "$repo"/tests/e2e/invalid/*.yaml; do
  expect=$(sed -n '1s/^# expect: //p' "$f")
  if out=$(kc -n "$ns" apply -f "$f" 2>&1); then
    fail "$(basename "$f") was accepted"
  elif [[ $out != *"$expect"* ]]; then
    fail "$(basename "$f"): message lacks \"$expect\": $out"
  else
    n_invalid=$((n_invalid + 1))
  fi
done
((n_invalid >= 8)) && ok "$n_invalid invalid manifests rejected" || fail "only $n_invalid invalid manifests rejected"
# placement-relevant fields are immutable
kc -n "$ns" apply -f "$repo/examples/job-too-big.yaml" >/dev/null
out=$(kc -n "$ns" patch nvj too-big-17 --type merge -p '{"spec":{"replicas":16}}' 2>&1) &&
  fail "replicas change accepted" ||
  { [[ $out == *"spec.replicas is immutable"* ]] && ok "spec.replicas immutable" || fail "immutability message: $out"; }
out=$(kc -n "$ns" patch nvj too-big-17 --type merge -p '{"spec":{"topology":{"segmentSize":1}}}' 2>&1) &&
  fail "topology change accepted" ||
  { [[ $out == *"immutable"* ]] && ok "spec.topology immutable" || fail "immutability message: $out"; }
kc -n "$ns" delete nvj too-big-17 --wait=true >/dev/null

# ------------------------------------------------------------------------------------------------
log "operator + examples"
start_leader first || exit 1
# Issue 24, as a new user met it: a 16-node job, then a 2-node job, on 4 empty racks. The 2-node
# job would fill the first rack's two free nodes exactly, but they are the 16-node job's spares: it
# goes to an empty rack instead.
kc -n "$ns" apply -f "$repo/examples/job-16-required.yaml" >/dev/null
wait_state moe-16 Admitted 60
kc -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: nvl72.dev/v1alpha1
kind: NVL72Job
metadata: {name: tp-2}
spec:
  replicas: 2
  gpusPerReplica: 4
  template:
    spec:
      containers: [{name: trainer, image: busybox:1.36, command: [sleep, infinity]}]
YAML
wait_state tp-2 Admitted 60
moe_rack=$(ranks_of moe-16 | awk '{split($2, a, "-"); print a[1]}' | sort -u)
tp2_rack=$(ranks_of tp-2 | awk '{split($2, a, "-"); print a[1]}' | sort -u)
moe_rack_used=$(for j in moe-16 tp-2; do ranks_of "$j"; done | awk -v r="$moe_rack" '{split($2, a, "-")} a[1] == r' | wc -l)
[[ -n $moe_rack && $tp2_rack != "$moe_rack" && $moe_rack_used == 16 ]] &&
  ok "a 2-node job after a 16-node one leaves ${moe_rack}'s 2 spares free (it went to $tp2_rack)" ||
  fail "tp-2 in '$tp2_rack', moe-16 in '$moe_rack' with $moe_rack_used nodes used"
kc -n "$ns" delete nvj tp-2 --wait=true >/dev/null
for f in jobs-two-8 job-32-segmented; do kc -n "$ns" apply -f "$repo/examples/$f.yaml" >/dev/null; done
for j in moe-16 tp-8-a tp-8-b ep-32; do wait_state "$j" Admitted 60; done
kc -n "$ns" apply -f "$repo/examples/job-too-big.yaml" >/dev/null
wait_state too-big-17 Waiting 30
msg=$(kc -n "$ns" get nvj too-big-17 -o jsonpath='{.status.conditions[?(@.type=="Admitted")].message}')
[[ $msg == *"needs 17 nodes"*"one NVLink domain"* ]] && ok "too-big-17 waits: $msg" || fail "waiting message: $msg"
# Issue 27 case 6: an admitted job's template cannot change (a recovery would mix two images in one
# gang); a waiting job's can.
out=$(kc -n "$ns" patch nvj moe-16 --type json \
        -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"busybox:1.37"}]' 2>&1) &&
  fail "template change of an admitted job accepted" ||
  { [[ $out == *"spec.template"*"cannot change once the job is admitted"* ]] &&
      ok "an admitted job's template is immutable" || fail "template immutability message: $out"; }
kc -n "$ns" patch nvj too-big-17 --type json \
  -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"busybox:1.37"}]' >/dev/null &&
  ok "a waiting job's template may change" || fail "template change of a waiting job refused"
check_segments moe-16 16
check_segments tp-8-a 8
check_segments tp-8-b 8
check_segments ep-32 16
[[ $(kc -n "$ns" get nvj ep-32 -o jsonpath='{.status.placement.domains}' | tr ',' '\n' | grep -c .) == 2 ]] &&
  ok "ep-32 holds 2 domains" || fail "ep-32 domains"
# Spares: no rack gives more than 16 of its 18 nodes to gangs, and no node is used twice.
used=$(for j in moe-16 tp-8-a tp-8-b ep-32; do ranks_of "$j"; done | awk '{print $2}')
[[ $(sort <<<"$used" | uniq -d | wc -l) == 0 ]] && ok "no node holds two ranks" || fail "a node holds two ranks"
max_per_rack=$(awk -F- '{print $1}' <<<"$used" | sort | uniq -c | awk 'BEGIN{m=0} $1>m{m=$1} END{print m}')
((max_per_rack <= 16)) && ok "2 spare nodes per rack untouched (max $max_per_rack used)" || fail "a rack gave $max_per_rack nodes"
check_pods_match moe-16 16
check_pods_match ep-32 32
check_pods_match tp-8-a 8
kc -n "$ns" get svc moe-16 -o jsonpath='{.spec.clusterIP}' | grep -q None && ok "headless service" || fail "no headless service"
kc -n "$ns" get nvj >&2

log "kubectl nvl72 jobs, found by kubectl's plugin discovery on PATH"
failures_before=$failures
jobs_out=$(PATH="$cli_dir:$PATH" KUBECONFIG="$KUBECONFIG" "$NVL72_KUBECTL" nvl72 jobs -n "$ns" 2>&1) ||
  fail "kubectl nvl72 jobs: $jobs_out"
for j in moe-16 tp-8-a tp-8-b ep-32 too-big-17; do
  # STATE and DOMAINS columns: the job's state, its domains without the common "<uuid>." prefix.
  domains=$(kc -n "$ns" get nvj "$j" -o jsonpath='{range .status.placement.domains[*]}{@}{"\n"}{end}' |
            sed 's/.*\.//' | paste -sd, -) || true
  want="$(state_of "$j") ${domains:--}"
  got=$(awk -v j="$j" '$1 == j { print $2, $6; exit }' <<<"$jobs_out")
  [[ $got == "$want" ]] || fail "kubectl nvl72 jobs: $j shows \"$got\", wanted \"$want\": $jobs_out"
done
# The placement row of moe-16: its domain's nodes, 16 of them marked '#', and the ranks.
row=$(grep -E "^ +moe-16 +[^ ]+ +\[[#.]+\] +ranks 0-15$" <<<"$jobs_out" || true)
[[ $(tr -cd '#' <<<"$row" | wc -c) == 16 ]] ||
  fail "kubectl nvl72 jobs: no placement row with 16 ranks 0-15 for moe-16: $jobs_out"
((failures == failures_before)) && ok "kubectl nvl72 jobs (plugin discovery): state and domains of 5 jobs, moe-16's ranks"

log "a second operator replica on the same Lease stands by"
failures_before=$failures
standby_health=$(free_port) standby_metrics=$(free_port)
"$bin" --kubeconfig "$KUBECONFIG" --namespace "$ns" --metrics-addr "127.0.0.1:$standby_metrics" \
  --health-addr "127.0.0.1:$standby_health" --leader-elect --lease-namespace "$ns" \
  --lease-name nvl72-operator-e2e --admission-resync-seconds 5 --identity standby-e2e \
  >"$workdir/operator-standby.log" 2>&1 &
standby_pid=$!
readyz=
for _ in $(seq 1 150); do
  readyz=$(curl -fsS "http://127.0.0.1:$standby_health/readyz" 2>/dev/null) && break
  sleep 0.2
done
[[ $readyz == "ok standby" ]] || fail "standby /readyz: \"$readyz\", wanted \"ok standby\""
leader_metric=$(curl -fsS "http://127.0.0.1:$standby_metrics/metrics" 2>/dev/null |
                awk '$1 == "nvl72_operator_leader" { print $2 }') || true
[[ $leader_metric == 0 ]] || fail "standby nvl72_operator_leader = \"$leader_metric\", wanted 0"
[[ $(curl -fsS "http://127.0.0.1:$op_health_port/readyz" 2>/dev/null) == "ok leader" ]] ||
  fail "the first operator no longer says \"ok leader\""
kill -TERM "$standby_pid"; wait "$standby_pid" || fail "standby operator exit code $?"; standby_pid=
[[ $(kc -n "$ns" get lease nvl72-operator-e2e -o jsonpath='{.spec.holderIdentity}') != standby-e2e ]] ||
  fail "the standby holds the lease"
((failures == failures_before)) &&
  ok "standby replica: /readyz \"ok standby\", nvl72_operator_leader 0; the first still leads"

log "deleting a job admits a waiting one"
cat >"$workdir/waiter.yaml" <<YAML
apiVersion: nvl72.dev/v1alpha1
kind: NVL72Job
metadata: {name: waiter-16}
spec:
  replicas: 16
  template: {spec: {containers: [{name: c, image: busybox}]}}
YAML
kc -n "$ns" apply -f "$workdir/waiter.yaml" >/dev/null
wait_state waiter-16 Waiting 30
moe_rack=$(rack_of "$(ranks_of moe-16 | awk 'NR==1{print $2}')")
kc -n "$ns" delete nvj moe-16 --wait=true --timeout=60s >/dev/null
# Arrival order: too-big-17 waited first. Under the default soft spare reserve a 17-node gang may
# take a spare when no rack fits it otherwise, so it gets the freed rack and waiter-16 keeps waiting.
wait_state too-big-17 Admitted 30
[[ $(rack_of "$(ranks_of too-big-17 | awk 'NR==1{print $2}')") == "$moe_rack" ]] &&
  ok "too-big-17 (first in line) took the freed domain $moe_rack" || fail "too-big-17 not in $moe_rack"
[[ $(state_of waiter-16) == Waiting ]] &&
  ok "waiter-16 still waits behind it" || fail "waiter-16 not waiting"
[[ $(kc -n "$ns" get pods -l nvl72.dev/job=moe-16 -o name | wc -l) == 0 ]] && ok "moe-16 pods deleted" || fail "moe-16 pods left"
kc -n "$ns" delete nvj too-big-17 --wait=true --timeout=60s >/dev/null
wait_state waiter-16 Admitted 30
[[ $(rack_of "$(ranks_of waiter-16 | awk 'NR==1{print $2}')") == "$moe_rack" ]] &&
  ok "waiter-16 took the freed domain $moe_rack" || fail "waiter-16 not in $moe_rack"
check_pods_match waiter-16 16

# ------------------------------------------------------------------------------------------------
log "SIGKILL in the middle of a burst of 20 jobs"
kc -n "$ns" delete nvj --all --wait=true --timeout=120s >/dev/null
[[ $(kc -n "$ns" get pods -o name | wc -l) == 0 ]] || fail "pods left after deleting all jobs"
: >"$workdir/burst.yaml"
for i in $(seq -w 1 20); do
  cat >>"$workdir/burst.yaml" <<YAML
---
apiVersion: nvl72.dev/v1alpha1
kind: NVL72Job
metadata: {name: burst-$i}
spec:
  replicas: 4
  template: {spec: {containers: [{name: c, image: busybox}]}}
YAML
done
kc -n "$ns" apply -f "$workdir/burst.yaml" >/dev/null &
apply_pid=$!
# Kill as soon as a few burst jobs are admitted (read from the operator's log, no API round trip).
for _ in $(seq 1 1200); do
  (($(grep -c "admitted $ns/burst-" "$workdir/operator-first.log" || true) >= 3)) && break
  sleep 0.05
done
kill -9 "$op_pid"; wait "$op_pid" 2>/dev/null || true; op_pid=
wait "$apply_pid" || fail "kubectl apply of the burst failed"
placed_at_kill=$(grep -c "admitted $ns/burst-" "$workdir/operator-first.log" || true)
pods_at_kill=$(kc -n "$ns" get pods -o name | wc -l)
log "killed the operator with $placed_at_kill of 20 jobs placed and $pods_at_kill pods"
for j in $(kc -n "$ns" get nvj -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'); do
  ranks_of "$j" | sed "s/^/$j /"
done >"$workdir/before-restart"
start_leader second || exit 1
# 4 racks x 16 usable nodes = 64 nodes: 16 jobs of 4 fit, 4 wait.
deadline=$(($(date +%s) + 90))
while (($(date +%s) < deadline)); do
  states=$(kc -n "$ns" get nvj -o jsonpath='{range .items[*]}{.status.state}{"\n"}{end}')
  [[ $(grep -c '^Admitted$' <<<"$states") == 16 && $(grep -c '^Waiting$' <<<"$states") == 4 &&
     $(kc -n "$ns" get pods -o name | wc -l) == 64 ]] && break
  sleep 0.5
done
states=$(kc -n "$ns" get nvj -o jsonpath='{range .items[*]}{.status.state}{"\n"}{end}')
[[ $(grep -c '^Admitted$' <<<"$states") == 16 && $(grep -c '^Waiting$' <<<"$states") == 4 ]] &&
  ok "16 jobs admitted, 4 waiting" || fail "states after restart: $(sort <<<"$states" | uniq -c | tr '\n' ' ')"
all_ranks=$(for j in $(kc -n "$ns" get nvj -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'); do
  ranks_of "$j" | sed "s/^/$j /"; done)
[[ $(awk '{print $3}' <<<"$all_ranks" | sort | uniq -d | wc -l) == 0 ]] && ok "no node given twice" || fail "a node was given twice"
# Placements committed before the kill did not change.
changed=$(join -j1 <(awk '{print $1 "/" $2, $3}' "$workdir/before-restart" | sort) \
                   <(awk '{print $1 "/" $2, $3}' <<<"$all_ranks" | sort) | awk '$2 != $3' | wc -l)
[[ $changed == 0 ]] && ok "no job placed twice ($(wc -l <"$workdir/before-restart") ranks placed before the kill kept)" ||
  fail "$changed ranks moved after restart"
pods=$(kc -n "$ns" get pods -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
[[ $(wc -l <<<"$pods") == 64 && $(sort <<<"$pods" | uniq -d | wc -l) == 0 ]] && ok "64 pods, no duplicates" ||
  fail "$(wc -l <<<"$pods") pods after restart"
for j in $(kc -n "$ns" get nvj -o jsonpath='{range .items[?(@.status.state=="Admitted")]}{.metadata.name}{"\n"}{end}'); do
  check_segments "$j" 4 >/dev/null 2>&1 || true
  [[ $(kc -n "$ns" get pods -l "nvl72.dev/job=$j" -o name | wc -l) == 4 ]] || fail "$j has not 4 pods"
done
for j in $(kc -n "$ns" get nvj -o jsonpath='{range .items[?(@.status.state=="Waiting")]}{.metadata.name}{"\n"}{end}'); do
  [[ $(kc -n "$ns" get pods -l "nvl72.dev/job=$j" -o name | wc -l) == 0 ]] || fail "waiting $j has pods"
done

if [[ -n $ext_bin && -x $ext_bin ]]; then
  log "nvl72-extender + kube-scheduler (profile nvl72-scheduler) bind the rank pods"
  start_extender "$ext_bin" "$workdir/extender.log" || { fail "nvl72-extender not ready"; exit 1; }
  start_nvl72_scheduler "$repo" "$workdir" "$workdir/scheduler.log"
  deadline=$(($(date +%s) + 120))
  while (($(date +%s) < deadline)); do
    running=$(kc -n "$ns" get nvj -o jsonpath='{range .items[*]}{.status.state}{"\n"}{end}' | grep -c '^Running$' || true)
    ((running == 16)) && break
    sleep 1
  done
  ((running == 16)) && ok "16 admitted jobs Running" || fail "$running of 16 jobs Running"
  off=$(kc -n "$ns" get pods -o jsonpath='{range .items[*]}{.metadata.annotations.nvl72\.dev/node} {.spec.nodeName}{"\n"}{end}' |
        awk '$1 != $2' | wc -l)
  [[ $off == 0 ]] && ok "every rank pod bound to its planned node by kube-scheduler + nvl72-extender" ||
    fail "$off rank pods not bound to their planned node"
  placed=$(kc -n "$ns" get nvj -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Placed")].status}{"\n"}{end}' | grep -c '^True$' || true)
  ((placed == 16)) && ok "Placed=True on 16 jobs" || fail "Placed=True on $placed jobs"
fi

kc -n "$ns" delete nvj --all --wait=true --timeout=120s >/dev/null  # leaves a reused cluster empty
[[ $(kc -n "$ns" get pods -o name | wc -l) == 0 ]] && ok "all pods gone after deleting every job" || fail "pods left"

log "SIGTERM releases the lease"
kill -TERM "$op_pid"; wait "$op_pid" || fail "operator exit code $?"; op_pid=
holder=$(kc -n "$ns" get lease nvl72-operator-e2e -o jsonpath='{.spec.holderIdentity}')
[[ -z $holder ]] && ok "lease released" || fail "lease still held by $holder"

e2e_end
