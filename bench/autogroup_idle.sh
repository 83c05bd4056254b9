#!/usr/bin/env bash
# Does idle CPU priority hold against other sessions? Two sessions of two CPU burners each for
# SECONDS (default 14): one at normal priority, one `setsid chrt --idle 0` whose autogroup gets the
# nice value NICE (0 = as a plain setsid leaves it, 19 = what scripts/test's idle_session sets).
# Prints the CPU seconds each burner got. With the kernel's autogroup scheduling on
# (/proc/sys/kernel/sched_autogroup_enabled = 1), nice 0 splits the CPUs between the sessions.
#   bench/autogroup_idle.sh [SECONDS]
set -euo pipefail
secs=${1:-14}
echo "sched_autogroup_enabled=$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo n/a), $(nproc) CPUs"
burn='end=$((SECONDS + $1)); while ((SECONDS < end)); do :; done'
for nice in 0 19; do
  setsid bash -c "bash -c '$burn' b $secs & bash -c '$burn' b $secs & wait" &
  setsid chrt --idle 0 bash -c "echo $nice >/proc/self/autogroup; bash -c '$burn' b $secs & bash -c '$burn' b $secs & wait" &
  sleep "$((secs - 1))"
  normal=() idle=()
  for p in $(pgrep -f "^bash -c end=" || true); do
    t=$(awk '{printf "%.0f", ($14 + $15) / 100}' "/proc/$p/stat")
    if [[ $(ps -o cls= -p "$p" | tr -d ' ') == IDL ]]; then idle+=("$t"); else normal+=("$t"); fi
  done
  wait
  echo "idle session autogroup nice $nice: normal session CPU s ${normal[*]:-?}; idle session CPU s ${idle[*]:-?}"
done
