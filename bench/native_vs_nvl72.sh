#!/usr/bin/env bash
# Stock Kubernetes gang scheduling and nvl72, side by side on one cluster (issue 20); prints a
# markdown section for docs/benchmarks.md.
#
#   bench/native_vs_nvl72.sh [--build DIR] [--racks 8] [--load 0.7] [--arrival-seconds 120]
#                            [--singles 60] [--seed 1] [--systems "native nvl72-pg nvl72"]
#                            [--node-monitor-grace 10]
#
# One local control plane of the current release (scripts/local-cluster up --workload-scheduling:
# Workload/PodGroup v1beta1, gang and topology-aware scheduling on) with --racks kwok racks. The same
# workload (bench/native_vs_nvl72.py: job shapes drawn from the ITP cluster04 trace, gangs of 2-16
# whole nodes and single pods of 1-4 GPUs, arrivals spread over --arrival-seconds; then a node of the
# busiest rack stops heartbeating; then a burst of --singles single pods) runs against each system,
# one after the other, each in its own namespace on an emptied cluster:
#   native    the stock kube-scheduler (default profile) alone: each gang is a PodGroup with the
#             topology constraint on nvidia.com/gpu.clique and an Indexed Job whose pods join it;
#   nvl72-pg  nvl72-operator (--pod-groups on) + nvl72-extender + kube-scheduler (nvl72-scheduler
#             profile): each gang is an NVL72Job (Required, recovery InPlace);
#   nvl72     the same with --pod-groups off.
# Every system tolerates a NotReady node for the same 10 s (native: tolerationSeconds of the pods;
# nvl72: the job's notReadyGraceSeconds).
# Scale (issue 20 part 3): past 50 racks kwok's Lease renewals every quarter of the node monitor grace
# (5,004 nodes every 2.5 s: 2,000 writes/s) would swamp this machine, so the grace defaults to 300 s
# there and the node failure is left out (it would take over 5 min to be noticed); the rest runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/test racks=8 load=0.7 arrival=120 singles=60 seed=1 systems="native nvl72-pg nvl72"
grace=
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --racks) racks=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --arrival-seconds) arrival=$2; shift 2 ;;
    --singles) singles=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --systems) systems=$2; shift 2 ;;
    --node-monitor-grace) grace=$2; shift 2 ;;
    *) echo "unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
if [[ -z $grace ]]; then grace=10; ((racks > 50)) && grace=300; fi
failure_flag=; ((grace > 10)) && failure_flag=--no-node-failure
for b in operator/nvl72-operator scheduler-plugin/nvl72-extender; do
  [[ -x $build/$b ]] || { echo "build $build/$b first (cmake --build $build)" >&2; exit 1; }
done
e2e_name=native-vs-nvl72
# shellcheck source=../tests/e2e/lib.sh
source "$root/tests/e2e/lib.sh"
lc=$root/scripts/local-cluster
driver=$root/bench/native_vs_nvl72.py
state=$(mktemp -d /tmp/nvl72-native-bench.XXXXXX) && rmdir "$state"
work=$(mktemp -d /tmp/nvl72-native-bench-work.XXXXXX)
op_pid= ext_pid= sched_pid=
cleanup() {
  stop_pid "$op_pid"; stop_pid "$ext_pid"; stop_pid "$sched_pid"
  "$lc" down --state "$state" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
# native: kube-scheduler with its own default node sampling (percentageOfNodesToScore unset: all nodes
# up to 100, then 50% - nodes/125, at least 5%: 10% of 5,004). The nvl72-scheduler profile scores
# every node (the extender must see them all), which costs it time on a large cluster.
native_config=$work/native-scheduler.yaml
cat >"$native_config" <<'EOF'
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: KUBECONFIG_PATH, qps: 200, burst: 400}
leaderElection: {leaderElect: false}
EOF

log "local control plane: $racks racks, workload scheduling on"
"$lc" up --racks "$racks" --node-monitor-grace "$grace" --workload-scheduling --state "$state" >/dev/null
# shellcheck disable=SC1091
source "$state/env"
kc apply -f "$root/crds/nvl72jobs.nvl72.dev.yaml" >/dev/null
kc wait --for condition=established --timeout=60s crd/nvl72jobs.nvl72.dev >/dev/null
python3 "$driver" workload --trace "$root/sim/traces/cluster04.csv" --racks "$racks" --load "$load" \
  --arrival-seconds "$arrival" --singles "$singles" --seed "$seed" >"$work/workload.json"
read -r njobs ngangs ngpus < <(jq -r '[(.jobs | length), ([.jobs[] | select(.kind == "gang")] | length), .gpus] | @tsv' "$work/workload.json")
log "workload: $njobs jobs ($ngangs gangs), $ngpus GPUs of $((racks * 72)); burst of $singles single pods"

cpu_s() { [[ -n ${1:-} && -r /proc/$1/stat ]] && awk '{printf "%.1f", ($14 + $15) / 100}' "/proc/$1/stat" || echo 0; }
# The local cluster's own kube-scheduler ("" once stopped: its pid file goes; awk would exit 2 and
# `set -e` end the script without a word).
lc_scheduler_pid() { [[ -r $state/run/kube-scheduler.pid ]] && awk '{print $1}' "$state/run/kube-scheduler.pid" || true; }

start_system() {  # SYSTEM NS
  case $1 in
    native) "$lc" scheduler start "$native_config" --state "$state" >/dev/null ;;
    nvl72*)
      local groups=on; [[ $1 == nvl72 ]] && groups=off
      start_extender "$build/scheduler-plugin/nvl72-extender" "$work/$1-extender.log" || { log "extender not ready"; return 1; }
      start_nvl72_scheduler "$root" "$work" "$work/$1-scheduler.log"
      start_operator "$build/operator/nvl72-operator" "$2" "$work/$1-operator.log" \
        --pod-groups "$groups" --admission-resync-seconds 5 || { log "operator not ready"; return 1; } ;;
  esac
}
no_pods_in() { [[ $(api GET "/api/v1/namespaces/$1/pods" | jq '.items // [] | length') == 0 ]]; }
stop_system() {  # SYSTEM NS
  kc delete namespace "$2" --wait=false >/dev/null 2>&1 || true
  # A Job's pods keep batch.kubernetes.io/job-tracking until the Job controller has counted them
  # terminal, which a kubelet reports and kwok's fast stages do not: let them go (cleanup only; one
  # kubectl per 50 pods took over 10 min for 6,000 pods).
  python3 "$driver" release --namespace "$2" 2>/dev/null || true
  # the pods go (kwok finishes their deletion), then the components
  wait_until 180 no_pods_in "$2" || log "note: pods of $2 still there after 180 s"
  case $1 in
    native) "$lc" scheduler stop --state "$state" >/dev/null ;;
    *) stop_pid "$op_pid"; stop_pid "$sched_pid"; stop_pid "$ext_pid"; op_pid= sched_pid= ext_pid= ;;
  esac
}

rows=()
for sys in $systems; do
  ns=bench-$sys
  log "== $sys"
  kc create namespace "$ns" >/dev/null
  wait_until 60 kc -n "$ns" get serviceaccount default -o name >/dev/null 2>&1
  start_system "$sys" "$ns"
  pids=("$(lc_scheduler_pid)" "$sched_pid" "$op_pid" "$ext_pid")
  [[ $sys == native ]] && pids=("$(lc_scheduler_pid)" "" "" "")
  cpu0=(); for p in "${pids[@]}"; do cpu0+=("$(cpu_s "$p")"); done
  mode=nvl72; [[ $sys == native ]] && mode=native
  python3 "$driver" run --system "$mode" --workload "$work/workload.json" --namespace "$ns" \
    --local-cluster "$lc" --state "$state" $failure_flag >"$work/$sys.json"
  cpu=(); for i in "${!pids[@]}"; do cpu+=("$(awk -v a="${cpu0[$i]}" -v b="$(cpu_s "${pids[$i]}")" 'BEGIN {printf "%.1f", b - a}')"); done
  jq -c --arg s "$sys" '. + {system: $s}' "$work/$sys.json" | tee -a "$work/results.jsonl" >&2
  failed=$(jq -r '.failed_node // empty' "$work/$sys.json")
  # the node first: kwok finishes the deletions of its pods only once it runs it again
  [[ -n $failed ]] && repair_node "$failed"
  stop_system "$sys" "$ns"
  sched_cpu=$(awk -v a="${cpu[0]}" -v b="${cpu[1]}" 'BEGIN {printf "%.1f", a + b}')
  rows+=("$(jq -r --arg s "$sys" --arg c "$sched_cpu / ${cpu[2]} / ${cpu[3]}" '
    def n: if . == null then "-" else tostring end;
    "| \($s) | \(.gangs_one_domain)/\(.gangs) (\(.gangs_running) running) | \(.gang_start_p50_s | if . == null then "-" else (. * 10 | round / 10 | tostring) end) / \(.gang_start_p99_s | if . == null then "-" else (. * 10 | round / 10 | tostring) end) | \(.free_racks_after_burst) / \(.largest_free_block_nodes) | \(if .failed_node == null then "not run" elif .replacement_s == null then "none in 180 s" + (if .replacement_pending then ": " + (.replacement_pending[0] | .[0:90]) else "" end) else "\(.replacement_s) s, " + (if .replacement_same_rack then "same rack" else "other rack" end) end) | \(.burst_pods_per_s | n) | \($c) |"' "$work/$sys.json")")
done

echo "## Stock gang scheduling and nvl72 side by side"
echo
echo "Measured $(date -u +%Y-%m-%d) on $(nproc) shared cores (load average $(cut -d' ' -f1 /proc/loadavg)) by"
echo "\`bench/native_vs_nvl72.sh --racks $racks --load $load --arrival-seconds $arrival --singles $singles --seed $seed\`"
echo "(node monitor grace $grace s$([[ -n $failure_flag ]] && echo ", no node failure")):"
echo "Kubernetes $NVL72_K8S_VERSION with workload scheduling on, $racks kwok racks; $njobs jobs ($ngangs gangs, $ngpus GPUs) from cluster04's shapes."
echo
echo "| system | gangs in one domain | submit -> all ranks Running p50 / p99 (s) | whole free racks / largest free block (nodes) after the burst | node failure: replacement Running after, where | burst (pods/s) | CPU s: kube-scheduler / operator / extender |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
