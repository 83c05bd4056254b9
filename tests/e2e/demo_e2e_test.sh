#!/usr/bin/env bash
# The README's first command under test: scripts/demo on the suite's build (NVL72_DEMO_SKIP_BUILD=1),
# in its own state dir and cluster. Passes when both rack maps are printed, every example gang runs,
# the 17-node job waits with its reason, rank 3 of moe-16 moves to a node of the same rack, and
# `scripts/demo down` leaves none of the demo's processes behind.
#   demo_e2e_test.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${1:?usage: demo_e2e_test.sh BUILD_DIR}
e2e_name=demo-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"
state=$(mktemp -d /tmp/nvl72-demo-e2e.XXXXXX)
cleanup() { NVL72_DEMO_STATE=$state "$repo/scripts/demo" down >/dev/null 2>&1 || true; rm -rf "$state"; }
trap cleanup EXIT

t0=$(date +%s%N)
if ! out=$(NVL72_DEMO_STATE=$state BUILD_DIR=$build NVL72_DEMO_SKIP_BUILD=1 "$repo/scripts/demo" 2>&1); then
  echo "$out" | tail -40 >&2
  fail "scripts/demo exited non-zero"
  exit 1
fi
secs=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
echo "$out" | sed -n '/6\/8/,$p' | head -60

grep -q '64 of 64 gang pods Running' <<<"$out" || fail "the example gangs are not all Running"
[[ $(grep -c '^DOMAIN  NODES' <<<"$out") == 2 ]] || fail "expected two rack maps"
grep -Eq '^too-big-17 +Waiting' <<<"$out" || fail "too-big-17 does not wait"
grep -q 'needs 17 nodes' <<<"$out" || fail "no waiting reason for too-big-17"
if line=$(grep -E '^rank 3 moved ' <<<"$out"); then
  grep -q 'same rack: yes' <<<"$line" || fail "rank 3 left its rack: $line"
else
  fail "no recovery line"
fi
# The second map shows the failed node (X) in rack 0.
grep -Eq '^0 +[#sX.+]*X' <<<"$(sed -n '/8\/8/,$p' <<<"$out")" || fail "the second map does not show the failed node"
grep -q "NVL72_DEMO_STATE=$state scripts/demo down" <<<"$out" || fail "the stop hint does not name this state dir"

# The stuck check of e2e_end, on the demo's jobs (namespace default) while its cluster still runs:
# `scripts/demo down` below stops that cluster. (This shell's env becomes the demo cluster's.)
# shellcheck disable=SC1091
source "$state/env"
e2e_check_no_silent_stuck default

pids=()
for p in operator extender; do [[ -f $state/$p.pid ]] && pids+=("$(cat "$state/$p.pid")"); done
((${#pids[@]} == 2)) || fail "the demo did not record both pids"
NVL72_DEMO_STATE=$state "$repo/scripts/demo" down | grep -q 'demo stopped' || fail "scripts/demo down"
for pid in "${pids[@]}"; do
  kill -0 "$pid" 2>/dev/null && fail "process $pid still running after scripts/demo down"
done
result "demo_seconds=$secs ${line:-}"
# No namespace here: the stuck check ran above, before the demo's cluster was stopped.
e2e_end
