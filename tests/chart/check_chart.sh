#!/usr/bin/env bash
# Offline checks of charts/nvl72-operator (ctest chart_checks, label unit): helm lint and helm
# template only, no cluster. What a cluster is needed for (server dry run, install, RBAC as the
# ServiceAccounts, upgrade, uninstall) is tests/e2e/helm_e2e_test.sh.
#  - values that cannot work are refused by `helm lint --strict` and by `helm template` (so by
#    `helm install` too) with a message naming the value to set: replicas > 1 without leader election
#    (operator, scheduler), metricsTLS / extender TLS without their Secret, the ServiceMonitor with
#    metrics client certificates but no clientCertSecret;
#  - PodDisruptionBudgets (maxUnavailable 1) for exactly the components running more than one replica;
#  - the probes take their timeouts, periods and thresholds from values;
#  - ClusterRoles aggregated to view (read NVL72Jobs and status) and edit/admin (also write), optional;
#  - the ServiceMonitor names the scrape jobs the alerts select, and the PrometheusRule carries
#    files/alerts.yaml without the alerts that cannot hold in the release.
# Needs helm (scripts/build-tools builds it into ${XDG_CACHE_HOME:-~/.cache}/nvl72/tools/helm-*).
set -uo pipefail  # no -e: every check reports its failure and the next one runs
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
chart=$repo/charts/nvl72-operator
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*" >&2; }

if ! command -v helm >/dev/null; then
  # shellcheck source=../../scripts/versions.env
  source "$repo/scripts/versions.env"
  tools="${XDG_CACHE_HOME:-$HOME/.cache}/nvl72/tools"
  [[ -x $tools/helm-$HELM_VERSION/bin/helm ]] ||
    { echo "FAIL: helm not on PATH nor in $tools/helm-$HELM_VERSION (scripts/build-tools helm)" >&2; exit 1; }
  PATH="$tools/helm-$HELM_VERSION/bin:$PATH"
fi
# No helm state of the user's is read or written.
work=$(mktemp -d "${TMPDIR:-/tmp}/nvl72-chart-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
export HELM_CACHE_HOME=$work/cache HELM_CONFIG_HOME=$work/config HELM_DATA_HOME=$work/data

render() { helm template x "$chart" -n ns "$@"; }

# refused WHAT WANT ARGS...: helm lint --strict and helm template both fail, and both say WANT.
refused() {
  local what=$1 want=$2 out; shift 2
  if out=$(helm lint --strict "$chart" "$@" 2>&1); then
    fail "helm lint --strict accepted $what"
  elif ! grep -q -- "$want" <<<"$out"; then
    fail "helm lint --strict refused $what without naming '$want': $out"
  fi
  if out=$(render "$@" 2>&1); then
    fail "helm template accepted $what"
  elif ! grep -q -- "$want" <<<"$out"; then
    fail "helm template refused $what without naming '$want': $out"
  else
    ok "refused: $what ($(grep -m1 -o -- "[^:]*$want[^\"]*" <<<"$out" | head -c 160))"
  fi
}
accepted() {
  local what=$1 out; shift
  out=$(helm lint --strict "$chart" "$@" 2>&1) || fail "helm lint --strict refused $what: $out"
  out=$(render "$@" 2>&1) && ok "accepted: $what" || fail "helm template refused $what: $out"
}

# --- values that cannot work ------------------------------------------------------------------------
accepted "the defaults"
refused "operator.replicas=2 without leader election" "/operator/leaderElection/enabled" \
  --set operator.leaderElection.enabled=false
refused "operator.replicas=3 without leader election" "/operator/leaderElection/enabled" \
  --set operator.replicas=3 --set operator.leaderElection.enabled=false
accepted "one operator replica without leader election" \
  --set operator.replicas=1 --set operator.leaderElection.enabled=false
refused "scheduler.replicas=2 without leader election" "/scheduler/leaderElection/enabled" \
  --set scheduler.leaderElection.enabled=false
refused "operator.metricsTLS.enabled without a secretName" "/operator/metricsTLS/secretName" \
  --set operator.metricsTLS.enabled=true
refused "extender.tls.enabled without a secretName" "/extender/tls/secretName" \
  --set extender.tls.enabled=true
refused "metrics client certificates and a ServiceMonitor without clientCertSecret" \
  "/monitoring/serviceMonitor/clientCertSecret" \
  --set operator.metricsTLS.enabled=true --set operator.metricsTLS.secretName=m \
  --set operator.metricsTLS.clientAuth=true --set monitoring.serviceMonitor.enabled=true
accepted "TLS with its Secrets, client certificates with clientCertSecret" \
  --set operator.metricsTLS.enabled=true --set operator.metricsTLS.secretName=m \
  --set operator.metricsTLS.clientAuth=true --set monitoring.serviceMonitor.enabled=true \
  --set monitoring.serviceMonitor.clientCertSecret=c --set extender.tls.enabled=true \
  --set extender.tls.secretName=e

# --- PodDisruptionBudgets ---------------------------------------------------------------------------
# pdbs ARGS...: "<name> <maxUnavailable> <component>" per PodDisruptionBudget rendered.
pdbs() {
  render "$@" | awk '
    /^kind: / { kind = $2; name = ""; max = ""; comp = "" }
    kind == "PodDisruptionBudget" && /^  name: / { name = $2 }
    kind == "PodDisruptionBudget" && /^  maxUnavailable: / { max = $2 }
    kind == "PodDisruptionBudget" && /^      app.kubernetes.io\/component: / { comp = $2; print name, max, comp }'
}
got=$(pdbs)
want="x-nvl72-operator 1 operator
x-nvl72-operator-extender 1 extender
x-nvl72-operator-scheduler 1 scheduler"
[[ $got == "$want" ]] && ok "defaults (2 replicas each): a PodDisruptionBudget per component, maxUnavailable 1" ||
  fail "PodDisruptionBudgets with the defaults: '$got', wanted '$want'"
got=$(pdbs --set operator.replicas=1 --set scheduler.replicas=1 --set extender.enabled=false)
[[ -z $got ]] && ok "one replica (or disabled): no PodDisruptionBudget (it would block every drain)" ||
  fail "PodDisruptionBudgets for single replicas / a disabled extender: '$got'"
got=$(pdbs --set podDisruptionBudget.enabled=false)
[[ -z $got ]] && ok "podDisruptionBudget.enabled=false: none" || fail "podDisruptionBudget.enabled=false rendered '$got'"

# --- probes ---------------------------------------------------------------------------------------
# probe DEPLOYMENT_FILE PROBE ARGS...: the probe's settings, one "key: value" per line, sorted.
probe() {
  local file=$1 which=$2; shift 2
  render --show-only "templates/$file" "$@" |
    awk -v p="          $which:" '$0 == p { on = 1; next } on && /^          [a-z]/ { on = 0 } on && /^            [a-zA-Z]+: [0-9]+$/ { print $1, $2 }' |
    sort
}
got=$(probe operator.yaml livenessProbe | tr '\n' ' ')
[[ $got == "failureThreshold: 3 initialDelaySeconds: 10 periodSeconds: 10 timeoutSeconds: 5 " ]] &&
  ok "operator liveness probe: $got" || fail "operator liveness probe: '$got'"
got=$(probe operator.yaml readinessProbe | tr '\n' ' ')
[[ $got == "failureThreshold: 3 periodSeconds: 5 timeoutSeconds: 5 " ]] &&
  ok "operator readiness probe: $got" || fail "operator readiness probe: '$got'"
got=$(probe extender.yaml livenessProbe | tr '\n' ' ')
[[ $got == "failureThreshold: 3 initialDelaySeconds: 5 periodSeconds: 10 timeoutSeconds: 5 " ]] &&
  ok "extender liveness probe: $got" || fail "extender liveness probe: '$got'"
got=$(probe operator.yaml livenessProbe --set operator.livenessProbe.timeoutSeconds=7 \
  --set operator.livenessProbe.failureThreshold=6 --set operator.livenessProbe.periodSeconds=20 | tr '\n' ' ')
[[ $got == "failureThreshold: 6 initialDelaySeconds: 10 periodSeconds: 20 timeoutSeconds: 7 " ]] &&
  ok "operator liveness probe from values: $got" || fail "operator liveness probe from values: '$got'"
refused "a probe timeout of 0" "/operator/livenessProbe/timeoutSeconds" --set operator.livenessProbe.timeoutSeconds=0

# --- ClusterRoles aggregated to the user-facing roles ------------------------------------------------
roles=$(render --show-only templates/aggregated-roles.yaml)
# role NAME: its aggregation labels and rules, on one line.
role() {
  awk -v n="  name: x-nvl72-operator-$1" '
    /^---/ { on = 0 } $0 == n { on = 1 }
    on && /aggregate-to-/ { gsub(/"/, ""); printf "%s ", $1 $2 }
    on && /resources:|verbs:/ { printf "%s ", $0 }' <<<"$roles" | tr -s ' '
}
got=$(role view)
want='rbac.authorization.k8s.io/aggregate-to-view:true resources: ["nvl72jobs", "nvl72jobs/status"] verbs: ["get", "list", "watch"] '
[[ $got == "$want" ]] && ok "view: read NVL72Jobs and their status" || fail "view role: '$got', wanted '$want'"
got=$(role edit)
want='rbac.authorization.k8s.io/aggregate-to-edit:true rbac.authorization.k8s.io/aggregate-to-admin:true resources: ["nvl72jobs"] verbs: ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"] resources: ["nvl72jobs/status"] verbs: ["get", "list", "watch"] '
[[ $got == "$want" ]] && ok "edit and admin: also create, update, patch, delete, deletecollection (status stays read-only)" ||
  fail "edit role: '$got', wanted '$want'"
if out=$(render --show-only templates/aggregated-roles.yaml --set aggregatedRoles.enabled=false 2>&1); then
  fail "aggregatedRoles.enabled=false still rendered: $out"
else
  ok "aggregatedRoles.enabled=false: no aggregated role"
fi

# --- monitoring ------------------------------------------------------------------------------------
mon=(--set monitoring.serviceMonitor.enabled=true --set monitoring.prometheusRule.enabled=true)
out=$(render "${mon[@]}")
before=$failures
grep -q '^  jobLabel: nvl72.dev/scrape-job$' <<<"$out" || fail "the ServiceMonitor does not take its job names from nvl72.dev/scrape-job"
for job in nvl72-operator nvl72-extender; do
  grep -q "^    nvl72.dev/scrape-job: $job\$" <<<"$out" || fail "no Service labelled nvl72.dev/scrape-job: $job"
  grep -q "job=\"$job\"" "$chart/files/alerts.yaml" || fail "files/alerts.yaml selects no job=\"$job\""
done
((failures == before)) &&
  ok "scrape jobs nvl72-operator and nvl72-extender (ServiceMonitor jobLabel, Service labels) are those the alerts select"
# alerts ARGS...: the alert names of the rendered PrometheusRule.
alerts() { render --show-only templates/monitoring.yaml "${mon[@]}" "$@" | sed -n 's/^ *- alert: *//p' | sort; }
all=$(sed -n 's/^ *- alert: *//p' "$chart/files/alerts.yaml" | sort)
[[ $(alerts) == "$all" ]] && ok "PrometheusRule: all $(wc -l <<<"$all") alerts of files/alerts.yaml" ||
  fail "PrometheusRule alerts differ from files/alerts.yaml: $(diff <(alerts) <(echo "$all") | tr '\n' ' ' || true)"
got=$(diff <(echo "$all") <(alerts --set placement.sparesPerDomain=0 --set extender.enabled=false) |
  sed -n 's/^< //p' | tr '\n' ' ' || true)
[[ $got == "NVL72ExtenderDown NVL72SparesExhausted " ]] &&
  ok "PrometheusRule without the extender and without spares leaves out: $got" ||
  fail "PrometheusRule without the extender and spares left out '$got'"

if ((failures > 0)); then echo "$failures failures" >&2; exit 1; fi
echo "PASS" >&2
