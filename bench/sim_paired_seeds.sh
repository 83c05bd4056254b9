#!/usr/bin/env bash
# Paired seeds: nvl72 vs domain-best-fit usable capacity on cluster04, 8 racks, default failure
# model, for seeds 1..N (each seed is one failure timeline shared by both policies). Prints one row
# per seed and the mean ratio with a 95% interval (normal approximation) and the number of wins, so
# that a claim about "above" does not rest on a handful of seeds.
#
# Usage: bench/sim_paired_seeds.sh [N=30] [extra nvl72-sim flags...]
# Environment: NVL72_SIM (default build/lead/sim/nvl72-sim).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIM=${NVL72_SIM:-$ROOT/build/lead/sim/nvl72-sim}
N=${1:-30}
shift || true
[[ -x $SIM ]] || { echo "no simulator at $SIM (set NVL72_SIM)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=bench/sim_lib.sh
source "$ROOT/bench/sim_lib.sh"
echo "seed nvl72 domain-best-fit ratio"
for ((s = 1; s <= N; s++)); do
  "$SIM" --trace "$ROOT/sim/traces/cluster04.csv" --racks 8 --seed "$s" \
    --policies nvl72,domain-best-fit --json "$@" >"$TMP/out.json"
  a=$(metric "$TMP/out.json" nvl72 usable_capacity)
  b=$(metric "$TMP/out.json" domain-best-fit usable_capacity)
  awk -v s="$s" -v a="$a" -v b="$b" 'BEGIN { printf "%d %.4f %.4f %.4f\n", s, a, b, a / b }'
done | tee "$TMP/rows"
awk '{ a += $2; b += $3; r[++n] = $4; m += $4; w += ($4 > 1) }
  END { m /= n; for (i = 1; i <= n; i++) v += (r[i] - m) ^ 2; sd = sqrt(v / (n - 1)); se = sd / sqrt(n)
        printf "seeds %d: nvl72 %.4f, domain-best-fit %.4f (means); ratio %.4f, sd %.4f, 95%% interval %.4f-%.4f; nvl72 higher in %d of %d\n",
               n, a / n, b / n, m, sd, m - 1.96 * se, m + 1.96 * se, w, n }' "$TMP/rows"
