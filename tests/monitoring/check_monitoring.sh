#!/usr/bin/env bash
# Offline checks of the chart's monitoring files (ctest alerts_promtool, label unit; needs promtool
# and jq, which scripts/install-deps installs):
#  - promtool check rules on files/alerts.yaml, and promtool test rules on tests/monitoring/alerts_test.yaml
#    (every alert shown firing and silent);
#  - files/dashboard.json: valid JSON, unique panel ids, every panel inside the 24-column grid and
#    with a datasource, every target with a PromQL expression;
#  - every nvl72_ metric the dashboard and the alerts use is registered by the operator or the
#    extender (operator/metrics.cc, scheduler-plugin/metrics.cc) and documented in
#    docs/observability.md.
# Whether each dashboard query parses and returns data is checked against a real Prometheus by
# tests/e2e/prometheus_e2e_test.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
chart=$repo/charts/nvl72-operator
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*" >&2; }
for tool in promtool jq; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not installed (scripts/install-deps)" >&2; exit 1; }
done

promtool check rules "$chart/files/alerts.yaml" >&2 && ok "promtool check rules" || fail "promtool check rules"
(cd "$here" && promtool test rules alerts_test.yaml >&2) && ok "promtool test rules" || fail "promtool test rules"
# Every alert of the rule file has at least one unit test.
for a in $(grep -oE '^ *- alert: *[A-Za-z0-9]+' "$chart/files/alerts.yaml" | awk '{print $3}'); do
  grep -q "alertname: $a\$" "$here/alerts_test.yaml" || fail "alert $a has no test in alerts_test.yaml"
done

dash=$chart/files/dashboard.json
if ! jq -e . "$dash" >/dev/null; then
  fail "dashboard.json is not valid JSON"
else
  dups=$(jq -r '[.panels[].id] | group_by(.) | map(select(length > 1) | .[0]) | .[]' "$dash")
  [[ -z $dups ]] && ok "unique panel ids" || fail "duplicate panel ids: $dups"
  bad=$(jq -r '.panels[] | select(.gridPos.x + .gridPos.w > 24 or .gridPos.w < 1 or .gridPos.h < 1) | .title' "$dash")
  [[ -z $bad ]] && ok "panels inside the grid" || fail "panels outside the 24-column grid: $bad"
  bad=$(jq -r '.panels[] | select(.type != "row") | select((.targets // []) | length == 0) | .title' "$dash")
  [[ -z $bad ]] && ok "every panel has targets" || fail "panels without targets: $bad"
  bad=$(jq -r '.panels[] | select(.type != "row") | select(.datasource.uid != "${datasource}") | .title' "$dash")
  [[ -z $bad ]] && ok "every panel uses the datasource variable" || fail "panels with another datasource: $bad"
  bad=$(jq -r '.panels[] | select(.type != "row") | .title as $t | .targets[] | select((.expr // "") == "") | $t' "$dash")
  [[ -z $bad ]] && ok "every target has an expression" || fail "targets without expr in: $bad"
fi

# Metric names (histogram series suffixes stripped) used by the dashboard and the alerts.
used=$( { jq -r '.. | .expr? // empty' "$dash"; cat "$chart/files/alerts.yaml"; } |
  grep -oE 'nvl72_[a-z0-9_]+' | sed -E 's/_(bucket|sum|count)$//' | sort -u)
[[ -n $used ]] || fail "no nvl72_ metric found in the dashboard and alerts"
registries=("$repo/operator/metrics.cc" "$repo/scheduler-plugin/metrics.cc")
# The informer series are registered by kube::InformerMetrics as <prefix> + "_<suffix>", with the
# prefix ("nvl72_operator", "nvl72_extender") given in the binaries' metrics.cc.
informer_suffixes=$(grep -oE 'prefix \+ "_[a-z_]+"' "$repo/kube/informer_metrics.cc" | grep -oE '_[a-z_]+')
[[ -n $informer_suffixes ]] || fail "no metric suffix found in kube/informer_metrics.cc"
registered() {
  grep -q "\"$1\"" "${registries[@]}" && return 0
  local suffix
  for suffix in $informer_suffixes; do
    [[ $1 == *"$suffix" ]] && grep -q "\"${1%"$suffix"}\"" "${registries[@]}" && return 0
  done
  return 1
}
for m in $used; do
  registered "$m" ||
    fail "$m is used but registered by neither operator/metrics.cc nor scheduler-plugin/metrics.cc (directly or through kube::InformerMetrics)"
  grep -q "\`$m" "$repo/docs/observability.md" || fail "$m is not documented in docs/observability.md"
done
ok "$(wc -w <<<"$used") metrics used by the dashboard and alerts are registered and documented"

if ((failures > 0)); then echo "$failures failures" >&2; exit 1; fi
echo "PASS" >&2
