#!/usr/bin/env bash
# Runs nvl72-sim on the ITP cluster04 trace (8 racks) at loads 1, 1.5 and 2 and a sweep of node MTBF
# x spare reserve (0..3) x reserve mode (soft = default, hard) over several seeds, then writes the tables into docs/simulator.md (between
# the sim_report markers) and the replay time into the "## simulator" section of docs/benchmarks.md.
# The "defrag" part (spares 2 / 0 x defragmentation on / off with preemptible jobs) has its own
# block (sim_report_defrag markers).
#
# Usage: bench/sim_report.sh [--no-write]
# Environment: NVL72_SIM (binary; default build/sim/sim/nvl72-sim, built if missing), SEEDS
# (default "1 2 3 4 5"), MTBFS (default "0 12669 3000 1000"), SPARES (default "0 1 2 3"),
# LOADS (default "1 1.5 2"), LEND_GPUS (default 4), LEND_MTBFS (default "12669 1000"),
# PARTS (default "main defrag"; "defrag" alone regenerates only that block), DEFRAG_GPUS
# (--preemptible-max-gpus values of the defrag part, default "8 16").
# Needs only bash, awk and the simulator (no jq / python).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build/sim}
SIM=${NVL72_SIM:-$BUILD/sim/nvl72-sim}
TRACE_REL=sim/traces/cluster04.csv
TRACE=$ROOT/$TRACE_REL
SEEDS=${SEEDS:-"1 2 3 4 5"}
MTBFS=${MTBFS:-"0 12669 3000 1000"}
SPARES=${SPARES:-"0 1 2 3"}
LOADS=${LOADS:-"1 1.5 2"}
# Second sweep: jobs of <= LEND_GPUS GPUs preemptible (nvl72 may lend them its spares).
LEND_GPUS=${LEND_GPUS:-4}
LEND_MTBFS=${LEND_MTBFS:-"12669 1000"}
PARTS=${PARTS:-"main defrag"}
DEFRAG_GPUS=${DEFRAG_GPUS:-"8 16"}
WRITE=1
[[ "${1:-}" == "--no-write" ]] && WRITE=0
part() { [[ " $PARTS " == *" $1 "* ]]; }

if [[ ! -x "$SIM" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja >/dev/null
  cmake --build "$BUILD" --target nvl72-sim -j2 >/dev/null
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# shellcheck source=bench/sim_lib.sh
source "$ROOT/bench/sim_lib.sh"

# mean of numbers on stdin
mean() { awk '{ s += $1; n++ } END { if (n) printf "%.6f", s / n; else print "nan" }'; }
minmax() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.3f-%.3f", lo, hi }'; }
fmt() { awk -v x="$1" -v d="${2:-3}" 'BEGIN { printf "%.*f", d, x }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }

POLICIES="nvl72 domain-best-fit spread first-fit"

main_part() {
# ---- replay time: cluster04, 8 racks, all four policies, default failure model ----------------
# Wall time depends on what else runs on the machine; CPU time (user + sys) much less.
best=""
best_cpu=""
TIMEFORMAT='%R %U %S'
for i in 1 2 3; do
  { time "$SIM" --trace "$TRACE" --racks 8 --json >"$TMP/timing.json"; } 2>"$TMP/time.txt"
  read -r wall user sys <"$TMP/time.txt"
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.3f", u + s }')
  if [[ -z "$best" ]] || awk -v t="$wall" -v b="$best" 'BEGIN { exit !(t < b) }'; then best=$wall; fi
  if [[ -z "$best_cpu" ]] || awk -v t="$cpu" -v b="$best_cpu" 'BEGIN { exit !(t < b) }'; then best_cpu=$cpu; fi
done
REPLAY_S=$best
REPLAY_CPU_S=$best_cpu
LOADAVG=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo unknown)
JOBS=$(awk '/"jobs":/ { gsub(/,/, "", $2); print $2; exit }' "$TMP/timing.json")
BUILD_TYPE=$(awk -F= '/^CMAKE_BUILD_TYPE:/ { print $2 }' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo (project default)}
CPU=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || echo unknown)

# ---- loads -------------------------------------------------------------------------------------
for load in $LOADS; do
  for seed in $SEEDS; do
    "$SIM" --trace "$TRACE" --racks 8 --load "$load" --seed "$seed" --json >"$TMP/load_${load}_${seed}.json"
    # The same run with the hard reserve (the rule before the soft one), nvl72 only.
    "$SIM" --trace "$TRACE" --racks 8 --load "$load" --seed "$seed" --spare-reserve hard --policies nvl72 \
      --json >"$TMP/load_${load}_${seed}_hard.json"
  done
done

load_tables() {
  local load seed p key
  for load in $LOADS; do
    echo
    echo "#### load x$load (mean over seeds $SEEDS)"
    echo
    echo "| policy | usable capacity (min-max) | vs spread | vs domain-best-fit | wait mean h | wait p99 h | gang wait mean / p99 h | pod wait mean h | single-domain | in-place recovery | gang recovery wait mean / p99 h | stranded | spare share | makespan d | gang failures | requeues |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    declare -A use
    for p in $POLICIES; do
      use[$p]=$(for seed in $SEEDS; do metric "$TMP/load_${load}_${seed}.json" "$p" usable_capacity; done | mean)
    done
    use[hard]=$(for seed in $SEEDS; do metric "$TMP/load_${load}_${seed}_hard.json" nvl72 usable_capacity; done | mean)
    # row LABEL POLICY SUFFIX: SUFFIX "" = the default run, "_hard" = the hard-reserve run.
    row() {
      local label=$1 p=$2 sfx=$3 m=() vals key spare
      for key in wait_mean_s wait_p99_s single_domain_ratio in_place_recovery_ratio stranded_gpu_ratio makespan_s gang_failures requeues wait_mean_gang_s wait_p99_gang_s wait_mean_pod_s gang_recovery_wait_mean_s gang_recovery_wait_p99_s; do
        m+=("$(for seed in $SEEDS; do metric "$TMP/load_${load}_${seed}${sfx}.json" "$p" "$key"; done | mean)")
      done
      spare=$(for seed in $SEEDS; do
        f="$TMP/load_${load}_${seed}${sfx}.json"
        awk -v a="$(metric "$f" "$p" spare_gpu_hours_waiting)" -v b="$(metric "$f" "$p" healthy_gpu_hours_waiting)" \
          'BEGIN { if (b > 0) print a / b; else print 0 }'
      done | mean)
      vals=$(for seed in $SEEDS; do metric "$TMP/load_${load}_${seed}${sfx}.json" "$p" usable_capacity; done | minmax)
      local u=${use[$p]}
      [[ -n "$sfx" ]] && u=${use[hard]}
      h() { fmt "$(awk -v x="$1" 'BEGIN{print x/3600}')" "$2"; }
      echo "| $label | $(fmt "$u") ($vals) | $(ratio "$u" "${use[spread]}") | $(ratio "$u" "${use[domain-best-fit]}") | $(h "${m[0]}" 2) | $(h "${m[1]}" 1) | $(h "${m[8]}" 1) / $(h "${m[9]}" 1) | $(h "${m[10]}" 2) | $(fmt "${m[2]}") | $(fmt "${m[3]}" 2) | $(h "${m[11]}" 2) / $(h "${m[12]}" 1) | $(fmt "${m[4]}") | $(fmt "$spare") | $(fmt "$(awk -v x="${m[5]}" 'BEGIN{print x/86400}')" 1) | $(fmt "${m[6]}" 1) | $(fmt "${m[7]}" 1) |"
    }
    for p in $POLICIES; do
      if [[ "$p" == nvl72 ]]; then
        row "nvl72 (soft reserve, default)" nvl72 ""
        row "nvl72 (hard reserve)" nvl72 _hard
      else
        row "$p" "$p" ""
      fi
    done
    unset use
  done
}

# ---- sweep: MTBF x spares ----------------------------------------------------------------------
run_sweep() {  # run_sweep PREEMPTIBLE_MAX_GPUS MTBFS
  local pm=$1 mtbf spares seed mode
  for mtbf in $2; do
    for spares in $SPARES; do
      for mode in soft hard; do
        for seed in $SEEDS; do
          "$SIM" --trace "$TRACE" --racks 8 --mtbf-hours "$mtbf" --spares "$spares" --seed "$seed" \
            --spare-reserve "$mode" --preemptible-max-gpus "$pm" --defrag off \
            --policies nvl72,domain-best-fit,spread --json \
            >"$TMP/sweep_${pm}_${mtbf}_${spares}_${mode}_${seed}.json"
        done
      done
    done
  done
}
run_sweep 0 "$MTBFS"
run_sweep "$LEND_GPUS" "$LEND_MTBFS"

sweep_table() {  # sweep_table PREEMPTIBLE_MAX_GPUS MTBFS
  local pm=$1 mtbfs=$2 mtbf spares seed mode
  echo
  echo "| node MTBF h | spares | reserve | nvl72 usable | domain-best-fit usable | spread usable | nvl72 / domain-best-fit (min-max over seeds) | nvl72 / spread | nvl72 wait mean h | domain-best-fit wait mean h | gang failures (nvl72) | in-place (nvl72) | gang recovery wait mean h (nvl72 / domain-best-fit) | preemptions (nvl72) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for mtbf in $mtbfs; do
    for spares in $SPARES; do
      for mode in soft hard; do
        # spares 0: the mode changes nothing; show it once.
        [[ "$spares" == 0 && "$mode" == hard ]] && continue
        local n d s r nw dw gf ip pr rn rd f
        f() { echo "$TMP/sweep_${pm}_${mtbf}_${spares}_${mode}_$1.json"; }
        n=$(for seed in $SEEDS; do metric "$(f "$seed")" nvl72 usable_capacity; done | mean)
        d=$(for seed in $SEEDS; do metric "$(f "$seed")" domain-best-fit usable_capacity; done | mean)
        s=$(for seed in $SEEDS; do metric "$(f "$seed")" spread usable_capacity; done | mean)
        r=$(for seed in $SEEDS; do
          awk -v a="$(metric "$(f "$seed")" nvl72 usable_capacity)" -v b="$(metric "$(f "$seed")" domain-best-fit usable_capacity)" 'BEGIN { print a / b }'
        done | minmax)
        nw=$(for seed in $SEEDS; do metric "$(f "$seed")" nvl72 wait_mean_s; done | mean)
        dw=$(for seed in $SEEDS; do metric "$(f "$seed")" domain-best-fit wait_mean_s; done | mean)
        gf=$(for seed in $SEEDS; do metric "$(f "$seed")" nvl72 gang_failures; done | mean)
        ip=$(for seed in $SEEDS; do metric "$(f "$seed")" nvl72 in_place_recovery_ratio; done | mean)
        rn=$(for seed in $SEEDS; do metric "$(f "$seed")" nvl72 gang_recovery_wait_mean_s; done | mean)
        rd=$(for seed in $SEEDS; do metric "$(f "$seed")" domain-best-fit gang_recovery_wait_mean_s; done | mean)
        pr=$(for seed in $SEEDS; do metric "$(f "$seed")" nvl72 preemptions; done | mean)
        local label=$mtbf mode_label=$mode
        [[ "$mtbf" == 0 ]] && label="none"
        [[ "$spares" == 0 ]] && mode_label="-"
        echo "| $label | $spares | $mode_label | $(fmt "$n") | $(fmt "$d") | $(fmt "$s") | $(ratio "$n" "$d") ($r) | $(ratio "$n" "$s") | $(fmt "$(awk -v x="$nw" 'BEGIN{print x/3600}')" 2) | $(fmt "$(awk -v x="$dw" 'BEGIN{print x/3600}')" 2) | $(fmt "$gf" 1) | $(fmt "$ip" 2) | $(fmt "$(awk -v x="$rn" 'BEGIN{print x/3600}')" 2) / $(fmt "$(awk -v x="$rd" 'BEGIN{print x/3600}')" 2) | $(fmt "$pr" 1) |"
      done
    done
  done
}

{
  echo "<!-- sim_report:begin (generated by bench/sim_report.sh on $(date -u +%Y-%m-%d); do not edit by hand) -->"
  echo
  echo "Trace \`$TRACE_REL\`, 8 racks x 18 nodes x 4 GPUs (576 GPUs), default failure model unless"
  echo "stated (node MTBF 12669 h, repair 24 h, checkpoint 30 min, restart 10 min), spares 2 with the"
  echo "soft reserve (the default; \"hard\" rows: \`--spare-reserve hard\`, the rule before), cross-domain"
  echo "speed 0.57. \"spare share\" = GPU-hours on nvl72's designated spare nodes / healthy GPU-hours,"
  echo "while jobs wait. \"gang recovery wait\" = gang failure -> the gang holds nodes again (0 when"
  echo "recovered in place at once), over gang failures; nvl72 recovers like the operator (a gang with"
  echo "no free node in its rack holds its nodes and waits, \`--gang-recovery hold\`). Ratios are of"
  echo "the seed means."
  echo
  echo "### Loads"
  load_tables
  echo
  echo "### Sweep: node MTBF x spare reserve (load x1, mean over seeds $SEEDS)"
  echo
  echo "domain-best-fit and spread do not keep spares; their columns change with the spare setting only"
  echo "through gang segmentation: at spares 3 the 16-node (64-GPU) jobs exceed 18 - 3 = 15 nodes and are split into two 8-node segments for every policy."
  sweep_table 0 "$MTBFS"
  echo
  echo "### Sweep with the reserve lent to preemptible work (--preemptible-max-gpus $LEND_GPUS, load x1)"
  echo
  echo "Jobs of at most $LEND_GPUS GPUs are marked preemptible: nodes they hold count toward nvl72's"
  echo "spare reserve and recovery may evict them (they lose the work since their checkpoint and are"
  echo "requeued). The trace does not say which jobs are preemptible; this measures lending the reserve"
  echo "to work that can give it back (an option of the design), not the default. Defragmentation is"
  echo "off here (\`--defrag off\`): it has its own section below."
  sweep_table "$LEND_GPUS" "$LEND_MTBFS"
  echo
  echo "Replay time (cluster04, 8 racks, all four policies, one process): ${REPLAY_S} s wall, ${REPLAY_CPU_S} s CPU (best of 3; load average ${LOADAVG})."
  echo
  echo "<!-- sim_report:end -->"
} >"$TMP/results.md"

cat "$TMP/results.md"

if [[ "$WRITE" == 1 ]]; then
  doc=$ROOT/docs/simulator.md
  if grep -q '<!-- sim_report:begin' "$doc"; then
    awk -v f="$TMP/results.md" '
      /<!-- sim_report:begin/ { while ((getline line < f) > 0) print line; skip = 1; next }
      /<!-- sim_report:end/ { skip = 0; next }
      !skip { print }
    ' "$doc" >"$TMP/doc.md"
    cat "$TMP/doc.md" >"$doc"
  else
    cat "$TMP/results.md" >>"$doc"
  fi

  bench=$ROOT/docs/benchmarks.md
  {
    echo "## simulator"
    echo
    echo "Generated by \`bench/sim_report.sh\` on $(date -u +%Y-%m-%d). Replaying \`$TRACE_REL\` ($JOBS"
    echo "jobs) on 8 racks with all four policies and the default failure model, in one"
    echo "\`nvl72-sim\` process: **${REPLAY_S} s** wall time, ${REPLAY_CPU_S} s CPU (user + sys), best of 3;"
    echo "target < 10 s. Machine: $(nproc) cores shared with other builds (load average $LOADAVG at the"
    echo "time), $CPU. Build type: $BUILD_TYPE. Single-threaded: the policies run one after the other."
    echo "Quality results (usable capacity per policy, loads, sweep): docs/simulator.md."
    echo
  } >"$TMP/bench_section.md"
  if [[ ! -f "$bench" ]]; then
    printf '# Benchmarks\n\n' >"$bench"
  fi
  awk -v f="$TMP/bench_section.md" '
    /^## simulator$/ { while ((getline line < f) > 0) print line; skip = 1; done = 1; next }
    skip && /^## / { skip = 0 }
    !skip { print }
    { last = $0 }
    END { if (!done) { if (last != "") print ""; while ((getline line < f) > 0) print line } }
  ' "$bench" >"$TMP/bench.md"
  cat "$TMP/bench.md" >"$bench"
  echo "wrote $doc and the ## simulator section of $bench" >&2
fi
}

# ---- defragmentation: spares 2 / 0 x defrag on / off, with preemptible jobs ---------------------
# nvl72 with --defrag on (the operator's behaviour) and off; domain-best-fit without (what the
# baselines do) and, for attribution only, with --defrag all; spread for context. Load 1, default
# failure model.
defrag_part() {
  local pm spares seed
  local t0 t1
  t0=$(date +%s)
  for pm in $DEFRAG_GPUS; do
    for spares in 2 0; do
      for seed in $SEEDS; do
        local base=(--trace "$TRACE" --racks 8 --seed "$seed" --spares "$spares" --preemptible-max-gpus "$pm" --json)
        "$SIM" "${base[@]}" --policies nvl72,domain-best-fit,spread --defrag on >"$TMP/defrag_${pm}_${spares}_${seed}_on.json"
        "$SIM" "${base[@]}" --policies nvl72 --defrag off >"$TMP/defrag_${pm}_${spares}_${seed}_off.json"
        "$SIM" "${base[@]}" --policies domain-best-fit --defrag all >"$TMP/defrag_${pm}_${spares}_${seed}_all.json"
      done
    done
  done
  t1=$(date +%s)
  local elapsed=$((t1 - t0))
  # one nvl72 replay with defragmentation, for the cost of the planner
  local wall
  TIMEFORMAT='%R'
  wall=$( { time "$SIM" --trace "$TRACE" --racks 8 --preemptible-max-gpus 8 --policies nvl72 --json >/dev/null; } 2>&1 )

  # drow LABEL PM SPARES SUFFIX POLICY: one table row, means over seeds.
  drow() {
    local label=$1 pm=$2 spares=$3 sfx=$4 p=$5 key vals u d m=() f
    f() { echo "$TMP/defrag_${pm}_${spares}_$1_${sfx}.json"; }
    u=$(for seed in $SEEDS; do metric "$(f "$seed")" "$p" usable_capacity; done | mean)
    vals=$(for seed in $SEEDS; do metric "$(f "$seed")" "$p" usable_capacity; done | minmax)
    d=$(for seed in $SEEDS; do metric "$TMP/defrag_${pm}_2_${seed}_on.json" domain-best-fit usable_capacity; done | mean)
    for key in wait_mean_s wait_mean_gang_s wait_p99_gang_s wait_mean_pod_s stranded_gpu_ratio in_place_recovery_ratio gang_recovery_wait_mean_s defrag_moves preemptions lost_gpu_hours restart_gpu_hours useful_gpu_hours_total; do
      m+=("$(for seed in $SEEDS; do metric "$(f "$seed")" "$p" "$key"; done | mean)")
    done
    h() { fmt "$(awk -v x="$1" 'BEGIN{print x/3600}')" "$2"; }
    echo "| $label | $(fmt "$u") ($vals) | $(ratio "$u" "$d") | $(h "${m[0]}" 2) | $(h "${m[1]}" 1) / $(h "${m[2]}" 1) | $(h "${m[3]}" 2) | $(fmt "${m[4]}") | $(fmt "${m[5]}" 2) | $(h "${m[6]}" 2) | $(fmt "${m[7]}" 1) | $(fmt "${m[8]}" 1) | $(fmt "${m[9]}" 0) / $(fmt "${m[10]}" 0) |"
  }
  {
    echo "<!-- sim_report_defrag:begin (generated by bench/sim_report.sh on $(date -u +%Y-%m-%d); do not edit by hand) -->"
    echo
    echo "Trace \`$TRACE_REL\`, 8 racks x 18 nodes x 4 GPUs, load 1, default failure model (node MTBF"
    echo "12669 h, repair 24 h, checkpoint 30 min, restart 10 min), soft reserve, seeds $SEEDS (means;"
    echo "usable capacity also min-max over seeds). Defragmentation budget: the operator's defaults (2"
    echo "moves per plan, 30 s between plans, 600 s cooldown per job). \"vs dbf\" = / domain-best-fit"
    echo "without defragmentation (spares do not change it here: every ITP gang has <= 16 nodes)."
    echo "\"lost / restart GPU-h\" = work lost since the last checkpoint / GPUs held while restarting,"
    echo "for failures, recovery evictions and defragmentation moves together."
    for pm in $DEFRAG_GPUS; do
      echo
      echo "#### jobs of <= $pm GPUs preemptible (\`--preemptible-max-gpus $pm\`)"
      echo
      echo "| policy | usable capacity (min-max) | vs dbf | wait mean h | gang wait mean / p99 h | pod wait mean h | stranded | in-place recovery | gang recovery wait mean h | defrag moves | preemptions | lost / restart GPU-h |"
      echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
      drow "nvl72, spares 2, defrag on (default)" "$pm" 2 on nvl72
      drow "nvl72, spares 2, defrag off" "$pm" 2 off nvl72
      drow "nvl72, spares 0, defrag on" "$pm" 0 on nvl72
      drow "nvl72, spares 0, defrag off" "$pm" 0 off nvl72
      drow "domain-best-fit (baseline, no defrag)" "$pm" 2 on domain-best-fit
      drow "domain-best-fit + defrag (\`--defrag all\`, attribution only)" "$pm" 2 all domain-best-fit
      drow "spread (baseline)" "$pm" 2 on spread
    done
    echo
    echo "Cost: ${elapsed} s wall for all runs of this block (load average $(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo unknown));"
    echo "one nvl72 replay with defragmentation at \`--preemptible-max-gpus 8\`: ${wall} s wall (without:"
    echo "~0.1 s). The time is spent in \`PlanDefrag\`'s \`PlaceGang\` calls (one per candidate set and rack)."
    echo
    echo "<!-- sim_report_defrag:end -->"
  } >"$TMP/defrag.md"
  cat "$TMP/defrag.md"
  if [[ "$WRITE" == 1 ]]; then
    local doc=$ROOT/docs/simulator.md
    if grep -q '<!-- sim_report_defrag:begin' "$doc"; then
      awk -v f="$TMP/defrag.md" '
        /<!-- sim_report_defrag:begin/ { while ((getline line < f) > 0) print line; skip = 1; next }
        /<!-- sim_report_defrag:end/ { skip = 0; next }
        !skip { print }
      ' "$doc" >"$TMP/doc.md"
      cat "$TMP/doc.md" >"$doc"
    else
      cat "$TMP/defrag.md" >>"$doc"
    fi
    echo "wrote the defragmentation block of $doc" >&2
  fi
}

part main && main_part
part defrag && defrag_part
exit 0
