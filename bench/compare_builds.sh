#!/usr/bin/env bash
# The Google Benchmark binaries of two builds, run alternately on the same machine (before, after,
# before, after, ...), so that load changes hit both sides alike; prints one table of the median
# CPU time per benchmark and the after/before ratio.
#   bench/compare_builds.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR [ROUNDS] [BENCH[:FILTER] ...]
# Default benches: placement_bench, extender_bench:ServiceFilter, kube_bench:WatchDecode|Dispatch
# (Google Benchmark binaries only; operator_bench prints its own report). Each round runs each bench once per side with --benchmark_min_time=0.3.
# Example (a commit before a refactor against the tree now):
#   git worktree add /tmp/before <commit> && cmake -S /tmp/before -B /tmp/before/build -G Ninja \
#     -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/before/build --target placement_bench \
#     extender_bench kube_bench operator_bench
#   bench/compare_builds.sh /tmp/before/build build/test 3
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
before=$1 after=$2 rounds=${3:-3}
shift $(($# >= 3 ? 3 : 2))
benches=("$@")
((${#benches[@]})) || benches=(placement_bench extender_bench:ServiceFilter
  "kube_bench:WatchDecode|Dispatch")
work=$(mktemp -d /tmp/nvl72-compare.XXXXXX)
trap 'rm -rf "$work"' EXIT
# Each benchmark runs in a process of its own: one that runs after others in the same process
# inherits their heap (measured: the extender's filter benches 1.4x apart by order alone).
run() {  # SIDE DIR BENCH NAME
  local bin="$2/bench/$3"
  [[ -x $bin ]] || { echo "missing $bin" >&2; exit 2; }
  "$bin" --benchmark_min_time=0.3 --benchmark_filter="^$4\$" --benchmark_format=json 2>/dev/null |
    jq -r --arg side "$1" '.benchmarks[] |
      select(.run_type == "iteration" or .aggregate_name == "median") | .name |= sub("_median$"; "") |
      [$side, .name, .cpu_time, .time_unit] | @tsv' >>"$work/results"
}
for b in "${benches[@]}"; do  # BENCH:FILTER -> "BENCH NAME" lines, names both builds have
  bench=${b%%:*} filter=.
  [[ $b == *:* ]] && filter=${b#*:}
  comm -12 <("$before/bench/$bench" --benchmark_list_tests --benchmark_filter="$filter" | sort) \
    <("$after/bench/$bench" --benchmark_list_tests --benchmark_filter="$filter" | sort) |
    sed "s|^|$bench |"
done >"$work/list"
for ((r = 1; r <= rounds; r++)); do
  echo "round $r/$rounds: $(wc -l <"$work/list") benchmarks" >&2
  while read -r bench name; do
    run before "$before" "$bench" "$name"
    run after "$after" "$bench" "$name"
  done <"$work/list"
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores), $(date -u +%FT%TZ)"
printf '| benchmark | before (median CPU) | after (median CPU) | after/before |\n|---|---|---|---|\n'
awk -F'\t' '
  { v[$2, $1] = v[$2, $1] " " $3; unit[$2] = $4; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } }
  function median(s,   a, k, i, j, t) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  END {
    for (i = 1; i <= n; i++) {
      b = order[i]
      if (!((b, "before") in v) || !((b, "after") in v)) continue
      mb = median(v[b, "before"]); ma = median(v[b, "after"])
      printf "| %s | %.3g %s | %.3g %s | %.2f |\n", b, mb, unit[b], ma, unit[b], ma / mb
    }
  }' "$work/results"
