#!/usr/bin/env bash
# Benchmarks of nvl72-extender; prints a markdown section for docs/benchmarks.md.
#
#   bench/extender_bench.sh [--build DIR] [--scheduler | --scheduler-only] [--racks 56] [--pods 2000]
#                           [--rounds 1] [--extender PATH/TO/nvl72-extender]
#
# Always: bench/extender_bench.cc (Google Benchmark): server-side filter + prioritize handling at
# 1,000 / 5,000 nodes (nodeCacheCapable, one 1-GPU pod, all node names), the HTTP round trip over one
# keep-alive connection, view rebuilds and cache memory. Percentiles come from per-iteration timings.
# --scheduler: also the real kube-scheduler on a local control plane with --racks x 18 kwok nodes:
# --pods single-GPU pods scheduled by the default profile, then the same number by the
# nvl72-scheduler profile (kube-scheduler + nvl72-extender) in the same run. Pods are created while
# the scheduler is stopped; throughput = pods / (last - first PodScheduled time). --rounds N repeats
# the pair (without, then with the extender) N times and adds the per-round ratios and their median.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../scripts/versions.env
source "$root/scripts/versions.env"
build=$root/build/ext scheduler=0 micro=1 racks=56 pods=2000 rounds=1 extender=
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --scheduler) scheduler=1; shift ;;
    --scheduler-only) scheduler=1 micro=0; shift ;;
    --extender) extender=$2; shift 2 ;;
    --racks) racks=$2; shift 2 ;;
    --pods) pods=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "--rounds wants a positive whole number, not '$rounds'" >&2; exit 2; }
extender=${extender:-$build/scheduler-plugin/nvl72-extender}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ((micro)); then
bench=$build/bench/extender_bench
[[ -x $bench ]] || { echo "build $bench first (ninja -C $build extender_bench)" >&2; exit 1; }
"$bench" --benchmark_format=json --benchmark_min_time=2 >"$out" 2>/dev/null

echo "## scheduler extender"
echo
echo "Measured $(date -u +%Y-%m-%d) on $(nproc) shared cores (load average $(cut -d' ' -f1 /proc/loadavg)) by"
echo '`bench/extender_bench.sh`; server-side = `Service` (parse, decide, serialise) without a socket;'
echo "round trip = httplib client -> nvl72-extender over one keep-alive connection on 127.0.0.1."
echo
echo "| benchmark | nodes | p50 (us) | p99 (us) | mean (us) | notes |"
echo "|---|---|---|---|---|---|"
python3 - "$out" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
for b in data["benchmarks"]:
    name = b["name"].split("/")[0].replace("BM_", "")
    arg = b["name"].split("/")[1] if "/" in b["name"] else ""
    unit = b.get("time_unit", "us")
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[unit]
    mean = b.get("real_time", 0) * scale
    notes = []
    for k in ("request_kB", "filter_p99_us", "pods", "rss_MB", "max_us"):
        if k in b:
            notes.append(f"{k}={b[k]:.1f}" if isinstance(b[k], float) else f"{k}={b[k]}")
    p50 = f"{b['p50_us']:.0f}" if "p50_us" in b else "-"
    p99 = f"{b['p99_us']:.0f}" if "p99_us" in b else "-"
    print(f"| {name} | {arg} | {p50} | {p99} | {mean:.0f} | {' '.join(notes)} |")
PY
fi

((scheduler)) || exit 0

# ---- real kube-scheduler throughput, with vs without the extender ----
lc=$root/scripts/local-cluster
state=$(mktemp -d "${TMPDIR:-/tmp}/nvl72-extender-bench.XXXXXX")
ext_pid= sched_pid=
cleanup2() {
  [[ -n $sched_pid ]] && kill "$sched_pid" 2>/dev/null || true
  [[ -n $ext_pid ]] && kill "$ext_pid" 2>/dev/null || true
  "$lc" down --state "$state" >/dev/null 2>&1 || true
  rm -rf "$state" "$out"
}
trap cleanup2 EXIT
"$lc" up --racks "$racks" --node-monitor-grace 40 --state "$state" >/dev/null
# shellcheck disable=SC1091
source "$state/env"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
kubectl create namespace bench >/dev/null
make_pods() { # PREFIX SCHEDULER COUNT
  python3 - "$@" <<'PY'
import json, sys
prefix, sched, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
items = [{"apiVersion": "v1", "kind": "Pod",
          "metadata": {"name": f"{prefix}-{i}", "namespace": "bench", "labels": {"app": prefix}},
          "spec": {"schedulerName": sched, "containers": [{"name": "c", "image": "busybox",
                   "resources": {"requests": {"cpu": "10m", "nvidia.com/gpu": "1"},
                                 "limits": {"nvidia.com/gpu": "1"}}}]}} for i in range(n)]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
}
bound() { kubectl get pods -n bench -l "app=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true; }
throughput() { # APP -> pods/s from PodScheduled transition times
  kubectl get pods -n bench -l "app=$1" -o json | python3 -c '
import json, sys, datetime
ts = []
for p in json.load(sys.stdin)["items"]:
    for c in p["status"].get("conditions", []):
        if c["type"] == "PodScheduled" and c["status"] == "True":
            ts.append(datetime.datetime.strptime(c["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ"))
span = (max(ts) - min(ts)).total_seconds() + 1
print(f"{len(ts) / span:.0f} {span:.0f}")'
}
wait_bound() { # APP COUNT TIMEOUT
  local deadline=$(( $(date +%s) + $3 ))
  until [[ $(bound "$1") == "$2" ]]; do (( $(date +%s) < deadline )) || return 1; sleep 1; done
}

make_pods plain default-scheduler "$pods" | kubectl create -f - >/dev/null
"$lc" scheduler start --state "$state" >/dev/null 2>&1
wait_bound plain "$pods" 900
read -r plain_rate plain_span < <(throughput plain)
"$lc" scheduler stop --state "$state" >/dev/null 2>&1
kubectl delete pods -n bench -l app=plain --wait=false >/dev/null
until [[ $(kubectl get pods -n bench -l app=plain --no-headers 2>/dev/null | wc -l) == 0 ]]; do sleep 1; done

# The same scheduler config as with the extender (nvl72-scheduler profile: percentageOfNodesToScore
# 100, qps 200) minus its extenders: what the extender itself costs. With --rounds N the two bursts
# alternate N times (the extender is started afresh for each of its bursts), so that a slow minute of
# this shared machine does not decide the ratio alone.
sed -e "s#KUBECONFIG_PATH#$KUBECONFIG#" -e "s#LEADER_ELECT#false#" \
  "$root/scheduler-plugin/scheduler-config.yaml" | sed '/^extenders:/,$d' >"$state/noext.yaml"
delete_app() { # APP
  kubectl delete pods -n bench -l "app=$1" --wait=false >/dev/null
  until [[ $(kubectl get pods -n bench -l "app=$1" --no-headers 2>/dev/null | wc -l) == 0 ]]; do sleep 1; done
}
start_scheduler() { # NAME: kube-scheduler with $state/NAME.yaml, logging to $state/NAME-scheduler.log
  "$NVL72_KUBE_SCHEDULER" --config="$state/$1.yaml" --secure-port="$(free_port)" --bind-address=127.0.0.1 \
    --authentication-kubeconfig="$KUBECONFIG" --authorization-kubeconfig="$KUBECONFIG" \
    >"$state/$1-scheduler.log" 2>&1 &
  sched_pid=$!
}
burst_noext() { # ROUND -> "rate span"
  make_pods "noext$1" nvl72-scheduler "$pods" | kubectl create -f - >/dev/null
  start_scheduler noext
  wait_bound "noext$1" "$pods" 900 >&2
  throughput "noext$1"
  kill "$sched_pid"; wait "$sched_pid" 2>/dev/null || true; sched_pid=
  delete_app "noext$1" >&2
}
burst_ext() { # ROUND; leaves the extender and kube-scheduler running for the figures below
  ext_port=$(free_port)
  "$extender" --kubeconfig "$KUBECONFIG" --listen "127.0.0.1:$ext_port" \
    >"$state/extender.log" 2>&1 &
  ext_pid=$!
  until curl -sf "http://127.0.0.1:$ext_port/readyz" >/dev/null; do sleep 0.5; done
  make_pods "ext$1" nvl72-scheduler "$pods" | kubectl create -f - >/dev/null
  sed -e "s#KUBECONFIG_PATH#$KUBECONFIG#" -e "s#EXTENDER_URL#http://127.0.0.1:$ext_port#" \
    -e "s#LEADER_ELECT#false#" "$root/scheduler-plugin/scheduler-config.yaml" >"$state/nvl72.yaml"
  start_scheduler nvl72
  wait_bound "ext$1" "$pods" 1800
}
stop_ext() { # ROUND
  kill "$sched_pid" "$ext_pid"; wait "$sched_pid" "$ext_pid" 2>/dev/null || true; sched_pid= ext_pid=
  delete_app "ext$1"
}
noext_rates=() ext_rates=() rows=()
for ((r = 1; r <= rounds; r++)); do
  read -r noext_rate noext_span < <(burst_noext "$r")
  burst_ext "$r"
  read -r ext_rate ext_span < <(throughput "ext$r")
  noext_rates+=("$noext_rate") ext_rates+=("$ext_rate")
  rows+=("| $r | $noext_rate | $noext_span | $ext_rate | $ext_span | $(python3 -c "print(f'{$ext_rate / $noext_rate:.0%}')") |")
  ((r == rounds)) || stop_ext "$r"
done
cpu_s() { awk '{printf "%.1f", ($14 + $15) / 100}' "/proc/$1/stat"; }  # utime + stime, USER_HZ 100
ext_cpu=$(cpu_s "$ext_pid") sched_cpu=$(cpu_s "$sched_pid")
filter_p99=$(curl -sf "http://127.0.0.1:$ext_port/metrics" | python3 -c '
import sys, re
buckets = []; count = 0
for line in sys.stdin:
    if not line.startswith("nvl72_extender_request_duration_seconds_bucket{") or "verb=\"filter\"" not in line:
        continue
    m = re.search(r"le=\"([^\"]+)\"", line)
    if m: buckets.append((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), float(line.split()[-1])))
buckets.sort(); total = buckets[-1][1] if buckets else 0
for le, c in buckets:
    if total and c >= 0.99 * total: print(f"<= {le*1e6:.0f} us"); break')
cache_hits=$(curl -sf "http://127.0.0.1:$ext_port/metrics" | python3 -c '
import sys
n = {}
for line in sys.stdin:
    if line.startswith("nvl72_extender_node_names_total{"):
        labels, value = line.rsplit(" ", 1)
        n[labels] = float(value)
def get(verb, cache):
    return sum(v for k, v in n.items() if f"verb=\"{verb}\"" in k and f"cache=\"{cache}\"" in k)
out = []
for verb in ("filter", "prioritize"):
    hit, miss = get(verb, "hit"), get(verb, "miss")
    out.append(f"{verb} {hit:.0f} of {hit + miss:.0f} ({hit / max(hit + miss, 1):.0%})")
print(", ".join(out))')
echo
echo "Real kube-scheduler ($K8S_VERSION) on $((racks * 18)) kwok nodes, $pods single-GPU pods created"
echo "while the scheduler was stopped, pods/s = pods / span of PodScheduled times (1 s resolution):"
echo
echo "| scheduler | pods/s | span (s) |"
echo "|---|---|---|"
echo "| default profile, no extender (stock config) | $plain_rate | $plain_span |"
echo "| nvl72-scheduler profile config without its extenders (percentageOfNodesToScore 100) | $noext_rate | $noext_span |"
echo "| nvl72-scheduler + nvl72-extender (filter, prioritize, bind) | $ext_rate | $ext_span |"
echo
if ((rounds > 1)); then
  echo "The last two rows are the last of $rounds rounds; each round ran the burst without the extender, then"
  echo "the one with it:"
  echo
  echo "| round | without extender, pods/s | span (s) | with nvl72-extender, pods/s | span (s) | with / without |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Median of the per-round ratios: $(python3 -c "
import statistics
n = [$(IFS=,; echo "${noext_rates[*]}")]; e = [$(IFS=,; echo "${ext_rates[*]}")]
print(f'{statistics.median(b / a for a, b in zip(n, e)):.0%} (lowest {min(b / a for a, b in zip(n, e)):.0%})')")."
  echo
fi
echo "With the extender: $(python3 -c "print(f'{$ext_rate / $noext_rate:.0%}')") of the same config without it, $(python3 -c "print(f'{$ext_rate / $plain_rate:.0%}')") of the stock default profile."
echo
echo "Extender-side filter p99 during that run (from /metrics histogram buckets): $filter_p99."
echo "NodeNames arrays served from the extender's cache (nvl72_extender_node_names_total): $cache_hits."
echo "CPU used from start to the end of the run: nvl72-extender ${ext_cpu} s (cache sync included),"
echo "kube-scheduler ${sched_cpu} s."
