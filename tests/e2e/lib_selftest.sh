#!/usr/bin/env bash
# Self-test of tests/e2e/lib.sh's stuck check (ctest lib_selftest, label unit; no cluster): the check
# must fail for a job that holds GPUs without every rank running and says no reason, for one past
# the operator's bound without a Stuck event, and when it cannot list the jobs; it must pass for
# a running job, a young one, and one with a reason and its Stuck event. The API answers come from
# a stand-in for lib's `api` (the only function replaced, and only here).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
e2e_name=lib-selftest
# shellcheck source=lib.sh
source "$here/lib.sh"
ns=t op_stuck_seconds=20
iso() { date -u -d "@$(($(date +%s) - $1))" +%Y-%m-%dT%H:%M:%SZ; }  # AGE_S -> RFC 3339 time
job() {  # NAME RUNNING_STATUS RUNNING_REASON AGE_S
  jq -n --arg n "$1" --arg s "$2" --arg r "$3" --arg t "$(iso "$4")" '{metadata: {name: $n},
    status: {state: "Admitted", placement: {ranks: [{rank: 0, node: "rack0-node00"}]},
      conditions: [{type: "Admitted", status: "True", lastTransitionTime: $t},
                   {type: "Running", status: $s, reason: $r, lastTransitionTime: $t}]}}'
}
jobs_json= events_json='{"items": []}'
api() {  # the stand-in: GET of the job list or the event list
  case $2 in
    */nvl72jobs) printf '%s' "$jobs_json" ;;
    */events) printf '%s' "$events_json" ;;
    *) return 1 ;;
  esac
}
# expect RESULT DESCRIPTION: runs the check in a subshell; RESULT pass|fail.
expect() {
  local got
  if (failures=0; e2e_check_no_silent_stuck >/dev/null 2>&1; ((failures == 0))); then got=pass; else got=fail; fi
  if [[ $got == "$1" ]]; then echo "ok: $2 -> $got"; else echo "WRONG: $2 -> $got, wanted $1"; wrong=1; fi
}
wrong=0
jobs_json=$(jq -n --argjson a "$(job run True AllRunning 100)" '{items: [$a]}')
expect pass "every rank running"
jobs_json=$(jq -n --argjson a "$(job young False PodsPending 5)" '{items: [$a]}')
expect pass "not running for 5 s, under the 20 s bound"
jobs_json=$(jq -n --argjson a "$(job silent False "" 30)" '{items: [$a]}')
expect fail "not running for 30 s and no reason"
jobs_json=$(jq -n --argjson a "$(job stuck False PodRejected 60)" '{items: [$a]}')
expect fail "past the bound with a reason but no Stuck event"
events_json='{"items": [{"reason": "Stuck", "regarding": {"name": "stuck"}, "note": "PodRejected for 60 s"}]}'
expect pass "past the bound with a reason and its Stuck event"
jobs_json='<html>503</html>'
expect fail "the job list cannot be read"
exit "$wrong"
