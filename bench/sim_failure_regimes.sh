#!/usr/bin/env bash
# Failure-heavy regimes (issue #24): nvl72 against domain-best-fit over paired seeds, for each node
# MTBF x rack-outage rate. Each seed is one failure timeline (and, with --mix, one job mix) that
# both policies see. Prints one row per regime:
#   - usable capacity: seed means of both and their ratio, with a 95% interval;
#   - mean gang recovery wait (failure -> the gang holds nodes again): seed means, ratio, interval;
#   - nvl72's share of gang failures recovered in place (pooled over seeds), and the targets.
# Ratios are ratios of seed means; the interval is the delta method on the paired seeds
# (d_i = a_i - R b_i, se = sd(d) / (sqrt(n) mean(b))), so it needs no resampling and no python.
#
# Usage: bench/sim_failure_regimes.sh [N=30] [extra nvl72-sim flags, e.g. --mix llm]
# Environment: NVL72_SIM (default build/sim/sim/nvl72-sim, built if missing), MTBFS (node MTBF h,
# default "12669 3000 1000"), RACK_MTBFS (rack MTBF h, 0 = none; default "0 8760 2190 720"),
# TRACE (default sim/traces/cluster04.csv; ignored with --mix), JOBS (parallel runs, default 2).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build/sim}
SIM=${NVL72_SIM:-$BUILD/sim/nvl72-sim}
N=${1:-30}
shift || true
MTBFS=${MTBFS:-"12669 3000 1000"}
RACK_MTBFS=${RACK_MTBFS:-"0 8760 2190 720"}
TRACE=${TRACE:-$ROOT/sim/traces/cluster04.csv}
JOBS=${JOBS:-2}
if [[ ! -x "$SIM" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" --target nvl72-sim -j2 >/dev/null
fi
INPUT=(--trace "$TRACE")
[[ " $* " == *" --mix "* ]] && INPUT=()
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=bench/sim_lib.sh
source "$ROOT/bench/sim_lib.sh"

# One seed: "usable_nvl72 usable_dbf wait_nvl72_h wait_dbf_h gang_failures in_place".
one_seed() {
  local out=$TMP/$1-$2-$3.json
  "$SIM" "${INPUT[@]}" --racks 8 --seed "$3" --mtbf-hours "$1" --rack-mtbf-hours "$2" \
    --policies nvl72,domain-best-fit --json "${@:4}" >"$out" || return 1
  echo "$(metric "$out" nvl72 usable_capacity) $(metric "$out" domain-best-fit usable_capacity)" \
    "$(metric "$out" nvl72 gang_recovery_wait_mean_s) $(metric "$out" domain-best-fit gang_recovery_wait_mean_s)" \
    "$(metric "$out" nvl72 gang_failures) $(metric "$out" nvl72 gang_recovered_in_place)"
}
export -f one_seed metric
export SIM TMP
export INPUT_FLAGS="${INPUT[*]}"

echo "| node MTBF h | rack MTBF h | usable nvl72 / dbf | ratio (95% interval) | >= 0.99 | gang recovery wait h nvl72 / dbf | ratio (95% interval) | <= 0.7 | in place (nvl72) | gang failures / seed |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for m in $MTBFS; do
  for r in $RACK_MTBFS; do
    seq 1 "$N" | xargs -P "$JOBS" -I{} bash -c \
      'INPUT=($INPUT_FLAGS); one_seed "$0" "$1" {} "${@:2}" > "$TMP/row-$0-$1-{}"' "$m" "$r" "$@"
    cat "$TMP"/row-"$m"-"$r"-* | awk -v m="$m" -v r="$r" '
      { ua[NR] = $1; ub[NR] = $2; wa[NR] = $3 / 3600; wb[NR] = $4 / 3600; f += $5; ip += $6 }
      function ratio_ci(a, b, n,   i, ma, mb, R, d, md, v, se) {
        for (i = 1; i <= n; i++) { ma += a[i]; mb += b[i] }
        ma /= n; mb /= n; R = mb > 0 ? ma / mb : 0
        for (i = 1; i <= n; i++) { d[i] = a[i] - R * b[i]; md += d[i] }
        md /= n
        for (i = 1; i <= n; i++) v += (d[i] - md) ^ 2
        se = (n > 1 && mb > 0) ? sqrt(v / (n - 1)) / (sqrt(n) * mb) : 0
        RA = ma; RB = mb; RR = R; LO = R - 1.96 * se; HI = R + 1.96 * se
      }
      END {
        n = NR
        ratio_ci(ua, ub, n); u = sprintf("%.4f / %.4f | %.3f (%.3f-%.3f) | %s", RA, RB, RR, LO, HI, LO >= 0.99 ? "yes" : (RR >= 0.99 ? "mean only" : "no"))
        ratio_ci(wa, wb, n); w = sprintf("%.2f / %.2f | %.2f (%.2f-%.2f) | %s", RA, RB, RR, LO, HI, HI <= 0.7 ? "yes" : (RR <= 0.7 ? "mean only" : "no"))
        printf "| %s | %s | %s | %s | %.2f | %.1f |\n", m, (r == 0 ? "none" : r), u, w, (f > 0 ? ip / f : 0), f / n
      }'
  done
done
