#!/usr/bin/env bash
# Load test of nvl72-extender with wrk (Debian package `wrk`) on 127.0.0.1; prints a markdown section
# for docs/benchmarks.md.
#
#   bench/extender_wrk.sh [--build DIR | --extender PATH] [--racks 56] [--duration 30]
#                         [--connections 4] [--threads 2] [--mix mix|filter|prioritize]
#                         [--sample-seconds 5] [--state DIR]
#
# Starts a local control plane (scripts/local-cluster up --racks N: N x 18 kwok nodes, 56 = 1,008)
# in a temporary state dir, or reuses the running one at --state DIR, applies the NVL72Job CRD and
# starts nvl72-extender against it on a free port of 127.0.0.1. Then: a 5 s warm-up run, and the
# measured run of --duration seconds: --connections keep-alive connections (at most the extender's
# --workers, 8: a keep-alive connection holds its worker) POST the body a kube-scheduler with
# nodeCacheCapable sends for a 1-GPU pod (the Pod + every node name), alternating filter and
# prioritize (--mix). The extender's RSS (VmRSS) is sampled every --sample-seconds.
# Exit status: 0 when there were no socket errors and no non-2xx replies, 1 otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/dev extender= racks=56 duration=30 connections=4 threads=2 mix=mix sample=5 reuse_state=
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --extender) extender=$2; shift 2 ;;
    --racks) racks=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --mix) mix=$2; shift 2 ;;
    --sample-seconds) sample=$2; shift 2 ;;
    --state) reuse_state=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
extender=${extender:-$build/scheduler-plugin/nvl72-extender}
[[ -x $extender ]] || { echo "nvl72-extender not found at $extender (build it or pass --extender)" >&2; exit 2; }
command -v wrk >/dev/null || { echo "wrk not installed (scripts/install-deps installs it)" >&2; exit 2; }
for v in racks duration connections threads sample; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "--$v must be a positive integer" >&2; exit 2; }
done
((duration <= 3600)) || { echo "--duration is capped at 3600 s" >&2; exit 2; }
((connections >= threads)) || { echo "--connections must be >= --threads" >&2; exit 2; }
lc=$root/scripts/local-cluster
log() { printf '[extender_wrk %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/nvl72-wrk.XXXXXX")
own_cluster=0 ext_pid= sampler_pid=
if [[ -n $reuse_state ]]; then
  state=$reuse_state
else
  state=$work/cluster own_cluster=1
fi
cleanup() {
  set +e  # best effort: a process that already exited must not stop the clean-up
  [[ -n $sampler_pid ]] && kill "$sampler_pid" 2>/dev/null
  if [[ -n $ext_pid ]]; then
    kill -TERM "$ext_pid" 2>/dev/null
    for _ in $(seq 40); do kill -0 "$ext_pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$ext_pid" 2>/dev/null
  fi
  ((own_cluster)) && "$lc" down --state "$state" >/dev/null 2>&1
  rm -rf "$work"
}
trap 'rc=$?; cleanup; exit "$rc"' EXIT
trap 'exit 130' INT TERM

if ((own_cluster)); then
  log "starting a local control plane with $racks racks ($((racks * 18)) nodes) in $state"
  "$lc" up --racks "$racks" --node-monitor-grace 40 --state "$state" >/dev/null
fi
# shellcheck disable=SC1091
source "$state/env"
"$NVL72_KUBECTL" apply -f "$root/crds/" >/dev/null
"$NVL72_KUBECTL" wait --for condition=established --timeout=60s crd/nvl72jobs.nvl72.dev >/dev/null
nodes=$("$NVL72_KUBECTL" get nodes -l nvidia.com/gpu.clique -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
n_nodes=$(grep -c . <<<"$nodes")
log "$n_nodes GPU nodes"

# The body: what kube-scheduler v1.34 sends with nodeCacheCapable for a 1-GPU pod of the
# nvl72-scheduler profile (a v1.Pod as the API returns it, then every feasible node name).
{
  printf '{"Pod":'
  cat <<'JSON' | tr -d '\n'
{"metadata":{"name":"train-worker-7f9c","namespace":"team-a","uid":"0b6a7c1e-3f2d-4d8e-9a51-6c2f0e4b7d10",
"resourceVersion":"123456","creationTimestamp":"2026-12-02T12:00:00Z","labels":{"app":"train","team":"a"},
"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}},
"spec":{"schedulerName":"nvl72-scheduler","restartPolicy":"Never","terminationGracePeriodSeconds":30,
"containers":[{"name":"main","image":"nvcr.io/nvidia/pytorch:24.10-py3","command":["python","train.py"],
"env":[{"name":"NCCL_DEBUG","value":"WARN"}],
"resources":{"requests":{"cpu":"8","memory":"64Gi","nvidia.com/gpu":"1"},"limits":{"nvidia.com/gpu":"1"}},
"volumeMounts":[{"name":"data","mountPath":"/data"}]}],
"volumes":[{"name":"data","emptyDir":{}}],
"tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"},
{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],
"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},
"status":{"phase":"Pending","qosClass":"Burstable"}}
JSON
  printf ',"Nodes":null,"NodeNames":['
  awk 'NF { printf "%s\"%s\"", (n++ ? "," : ""), $1 }' <<<"$nodes"
  printf ']}'
} >"$work/body.json"
body_bytes=$(stat -c %s "$work/body.json")

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$extender" --kubeconfig "$KUBECONFIG" --listen "127.0.0.1:$port" >"$work/extender.log" 2>&1 &
ext_pid=$!
deadline=$((SECONDS + 120))
until curl -sf "http://127.0.0.1:$port/readyz" -o /dev/null; do
  kill -0 "$ext_pid" 2>/dev/null || { tail -20 "$work/extender.log" >&2; log "extender exited"; exit 1; }
  ((SECONDS < deadline)) || { tail -20 "$work/extender.log" >&2; log "extender not ready in 120 s"; exit 1; }
  sleep 0.5
done
url=http://127.0.0.1:$port
# One request by hand: the reply must be a filter result naming nodes.
code=$(curl -s -o "$work/reply.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary @"$work/body.json" "$url/filter")
[[ $code == 200 ]] && grep -q '"NodeNames":\["' "$work/reply.json" ||
  { log "a single filter request failed: HTTP $code $(head -c 300 "$work/reply.json")"; exit 1; }
passed=$(grep -o '"NodeNames":\[[^]]*\]' "$work/reply.json" | tr ',' '\n' | grep -c '"' || true)
log "extender ready on $url; body $body_bytes bytes; one filter passes $passed of $n_nodes nodes"

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$ext_pid/status" 2>/dev/null || echo 0; }
rss_idle=$(rss_kb)
log "warm-up: 5 s"
wrk -t "$threads" -c "$connections" -d 5s -s "$root/bench/extender_wrk.lua" "$url" -- "$work/body.json" "$mix" \
  >"$work/warmup.txt" 2>&1 || { cat "$work/warmup.txt" >&2; log "wrk failed in warm-up"; exit 1; }
rss_before=$(rss_kb)

# RSS samples during the run: "seconds_since_start rss_kb", bounded by the run's length.
(
  i=0 max=$((duration / sample + 2))
  while ((i <= max)); do
    echo "$((i * sample)) $(rss_kb)"
    i=$((i + 1))
    sleep "$sample"
  done
) >"$work/rss.txt" &
sampler_pid=$!
log "measured run: $duration s, $threads threads, $connections connections, mix=$mix"
t_start=$(date -u +%H:%M:%S)
wrk -t "$threads" -c "$connections" -d "${duration}s" --timeout 5s --latency \
  -s "$root/bench/extender_wrk.lua" "$url" -- "$work/body.json" "$mix" >"$work/wrk.txt" 2>&1 ||
  { cat "$work/wrk.txt" >&2; log "wrk failed"; exit 1; }
kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=
rss_after=$(rss_kb)
load=$(cut -d' ' -f1-3 /proc/loadavg)
kill -0 "$ext_pid" 2>/dev/null || { log "the extender died during the run"; tail -20 "$work/extender.log" >&2; exit 1; }
cat "$work/wrk.txt" >&2

val() { grep -o "$1=[0-9.]*" "$work/wrk.txt" | head -1 | cut -d= -f2; }
requests=$(val requests) dur_us=$(val duration_us)
e_connect=$(val errors_connect) e_read=$(val errors_read) e_write=$(val errors_write)
e_status=$(val errors_status) e_timeout=$(val errors_timeout)
p50=$(val p50_us) p90=$(val p90_us) p99=$(val p99_us) p999=$(val p999_us) pmax=$(val max_us)
rps=$(awk -v r="$requests" -v d="$dur_us" 'BEGIN { printf "%.0f", r / (d / 1e6) }')
socket_errors=$((e_connect + e_read + e_write + e_timeout))
# The extender's own count of non-200 replies (wrk's status errors count >= 400 only).
non200=$(curl -s "$url/metrics" | awk '/^nvl72_extender_requests_total\{/ && !/code="200"/ { s += $NF } END { print s + 0 }')
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
rss_min=$(awk '$2 > 0 { if (m == "" || $2 < m) m = $2 } END { print m + 0 }' "$work/rss.txt")
rss_max=$(awk '{ if ($2 > m) m = $2 } END { print m + 0 }' "$work/rss.txt")
growth=$(awk -v a="$rss_before" -v b="$rss_after" 'BEGIN { printf "%+.1f", (b - a) * 100 / a }')
samples=$(awk -v s="$sample" '$2 > 0 { printf "%s%d s: %.1f", (n++ ? ", " : ""), $1, $2 / 1024 }' "$work/rss.txt")

echo "## scheduler extender under wrk"
echo
echo "Measured $(date -u +%Y-%m-%d) $t_start UTC by \`bench/extender_wrk.sh --racks $racks --duration $duration"
echo "--connections $connections --threads $threads\` on $(nproc) shared cores (load average $load at the end)."
echo "nvl72-extender (defaults: 8 workers, RelWithDebInfo) against a local control plane with $n_nodes"
echo "kwok nodes ($racks racks); wrk $(wrk -v 2>&1 | head -1 | awk '{print $2}') on 127.0.0.1 with $connections keep-alive connections,"
echo "each POSTing a ${body_bytes}-byte ExtenderArgs (a 1-GPU pod + all $n_nodes node names, nodeCacheCapable),"
echo "mix=$mix (filter and prioritize alternate). wrk shares the 2 cores with the extender."
echo
echo "| requests | req/s | socket errors | non-2xx | p50 | p90 | p99 | p99.9 | max |"
echo "|---|---|---|---|---|---|---|---|---|"
ms() { awk -v u="$1" 'BEGIN { printf "%.2f ms", u / 1000 }'; }
echo "| $requests | $rps | $socket_errors | $e_status (extender counted $non200 non-200) | $(ms "$p50") | $(ms "$p90") | $(ms "$p99") | $(ms "$p999") | $(ms "$pmax") |"
echo
echo "Extender RSS: $(mib "$rss_idle") MiB idle after sync, $(mib "$rss_before") MiB after the 5 s warm-up,"
echo "$(mib "$rss_after") MiB after the run ($growth % vs after warm-up); min/max during the run"
echo "$(mib "$rss_min") / $(mib "$rss_max") MiB. Samples every $sample s (MiB): $samples."

if ((socket_errors > 0 || e_status > 0 || non200 > 0)); then
  log "FAIL: $socket_errors socket errors, $e_status HTTP errors, $non200 non-200 replies counted by the extender"
  exit 1
fi
