#!/usr/bin/env bash
# e2e of the observability work (issue 7): Debian's Prometheus server, started here on 127.0.0.1,
# scrapes nvl72-operator and nvl72-extender every second while a scenario runs on the local control
# plane (kube-apiserver + etcd + kwok, 4 racks of 18 x 4-GPU nodes) with a kube-scheduler serving
# the nvl72-scheduler profile. Everything is checked through Prometheus' HTTP API:
#  1. promtool check rules on the chart's alerts; Prometheus loads them; the operator serves /metrics
#     over mTLS (issue 9): curl without a client certificate and plain HTTP are refused, Prometheus
#     scrapes it with the test CA and its client certificate;
#  2. a 16-rank Required job runs: nvl72_operator_domain_free_gpus of EVERY domain equals the free
#     GPUs this script computes itself from the Node and Pod objects (schedulable nodes: allocatable
#     minus the GPU requests of their live pods); the totals and jobs by state agree;
#  3. one of its nodes fails (kwok stops, NotReady, unreachable NoExecute taint): the rank moves to a
#     spare of the same rack; exactly one in-place recovery is counted (none moved, none failed) with
#     one duration observation; free GPUs and healthy nodes per domain match the objects again;
#  4. every alert rule evaluates without error, and the leader / degraded-domain alerts are inactive;
#  5. every query of the Grafana dashboard parses and returns at least one series;
#  6. the operator's /healthz and /readyz answer; its JSON log lines parse and carry job and node
#     keys; the extender's JSON log lines parse.
#
#   tests/e2e/prometheus_e2e_test.sh OPERATOR_BINARY EXTENDER_BINARY
# Cluster: the one of $NVL72_CLUSTER_STATE (scripts/test) when it is up, else a fresh 4-rack one.
# Env: PROM_E2E_LOGS=DIR keeps the logs of every process started here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
op_bin=${1:-${NVL72_OPERATOR_BIN:-${NVL72_BUILD_DIR:-$repo/build/dev}/operator/nvl72-operator}}
ext_bin=${2:-${NVL72_EXTENDER_BIN:-${NVL72_BUILD_DIR:-$repo/build/dev}/scheduler-plugin/nvl72-extender}}
[[ -x $op_bin ]] || { echo "operator binary $op_bin not found" >&2; exit 2; }
[[ -x $ext_bin ]] || { echo "extender binary $ext_bin not found" >&2; exit 2; }
for tool in prometheus promtool jq curl python3; do
  command -v "$tool" >/dev/null || { echo "$tool not installed (scripts/install-deps installs it)" >&2; exit 2; }
done
e2e_name=prometheus-e2e
# shellcheck source=tests/e2e/lib.sh
source "$here/lib.sh"

chart=$repo/charts/nvl72-operator
workdir=$(mktemp -d /tmp/nvl72-prom-e2e-work.XXXXXX)
ns=prom-e2e-$(date +%s)-$$  # unique: a namespace of an earlier run may still be terminating
op_pid= ext_pid= sched_pid= prom_pid= failed_node=

cleanup() {
  local rc=$?
  set +e
  stop_pid "$prom_pid"
  stop_pid "$op_pid"
  stop_pid "$sched_pid"
  stop_pid "$ext_pid"
  if ((failures > 0 || rc != 0)); then
    tail_logs "$workdir" 25
  fi
  [[ -n ${PROM_E2E_LOGS:-} ]] && mkdir -p "$PROM_E2E_LOGS" && cp "$workdir"/*.log "$PROM_E2E_LOGS"/ 2>/dev/null
  if ((own_cluster)); then
    e2e_cluster_down "$repo"
  elif [[ -n ${state:-} ]]; then
    # A shared cluster gets its capacity back: the pods go, the job is released (no operator runs
    # any more: drop its finalizer), the failed node is repaired.
    kc -n "$ns" delete pods --all --force --grace-period=0 >/dev/null 2>&1
    kc -n "$ns" patch nvj moe --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
    kc -n "$ns" delete nvj --all --wait=false >/dev/null 2>&1
    [[ -n $failed_node ]] && repair_node "$failed_node"
    kc delete namespace "$ns" --wait=false >/dev/null 2>&1
  fi
  rm -rf "$workdir"
  exit "$rc"
}
trap cleanup EXIT
e2e_cluster "$repo"

# ------------------------------------------------------------------------------------------------
log "1. alerts: promtool, then Prometheus scraping the operator and the extender"
promtool check rules "$chart/files/alerts.yaml" >"$workdir/promtool.log" 2>&1 &&
  ok "promtool check rules: $(grep -o '[0-9]* rules found' "$workdir/promtool.log")" ||
  fail "promtool check rules: $(cat "$workdir/promtool.log")"

e2e_namespace "$repo" "$ns" || { fail "namespace $ns not ready"; exit 1; }
start_extender "$ext_bin" "$workdir/extender.log" --log-format json || { fail "extender not ready"; exit 1; }
start_nvl72_scheduler "$repo" "$workdir" "$workdir/nvl72-scheduler.log"
# The operator serves /metrics over mTLS (issue 9): a CA, a server certificate for 127.0.0.1 and a
# client certificate for Prometheus, all made here.
tls=$workdir/tls
mkdir -p "$tls"
mkcert() { # NAME SUBJECT_CN EXTENSIONS: NAME.key/NAME.crt signed by the test CA
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$tls/$1.key" \
    -out "$tls/$1.csr" -subj "/CN=$2" 2>/dev/null &&
    openssl x509 -req -in "$tls/$1.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
      -days 1 -out "$tls/$1.crt" -extfile <(printf '%s\n' "$3") 2>/dev/null
}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$tls/ca.key" \
  -out "$tls/ca.crt" -days 1 -subj "/CN=nvl72-e2e-ca" 2>/dev/null &&
  mkcert server nvl72-operator-metrics "subjectAltName=DNS:nvl72-operator-metrics,IP:127.0.0.1" &&
  mkcert client prometheus "extendedKeyUsage=clientAuth" || { fail "openssl: test certificates"; exit 1; }
start_operator "$op_bin" "$ns" "$workdir/operator.log" --admission-resync-seconds 2 \
  --log-format json --log-level info --metrics-tls-cert "$tls/server.crt" \
  --metrics-tls-key "$tls/server.key" --metrics-client-ca "$tls/ca.crt" || { fail "operator not ready"; exit 1; }
op_metrics="https://127.0.0.1:$op_metrics_port/metrics"
curl -sf --cacert "$tls/ca.crt" "$op_metrics" -o /dev/null &&
  fail "operator /metrics answered a client without a certificate" ||
  ok "operator /metrics refuses a client without a certificate (mTLS)"
curl -sf "${op_metrics/https/http}" -o /dev/null &&
  fail "operator /metrics answered plain HTTP" || ok "operator /metrics refuses plain HTTP"
# Read the whole body first: under pipefail `curl | grep -q` fails when grep exits at its first match
# and curl then writes into a closed pipe (it did in a CI run: the body was fine).
op_body=$(curl -sf --cacert "$tls/ca.crt" --cert "$tls/client.crt" --key "$tls/client.key" "$op_metrics" 2>&1) || true
grep -q '^nvl72_operator_' <<<"$op_body" && ok "operator /metrics over HTTPS with a client certificate" ||
  fail "operator /metrics over mTLS: $(head -3 <<<"$op_body")"
kill -0 "$sched_pid" 2>/dev/null || { fail "nvl72 kube-scheduler exited"; exit 1; }

prom_port=$(free_port)
cat >"$workdir/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
rule_files: ["$chart/files/alerts.yaml"]
scrape_configs:
  - job_name: nvl72-operator
    scheme: https
    tls_config: {ca_file: "$tls/ca.crt", cert_file: "$tls/client.crt", key_file: "$tls/client.key"}
    static_configs: [{targets: ["127.0.0.1:$op_metrics_port"]}]
  - job_name: nvl72-extender
    static_configs: [{targets: ["127.0.0.1:$ext_port"]}]
YAML
prometheus --config.file="$workdir/prometheus.yml" --storage.tsdb.path="$workdir/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" --storage.tsdb.retention.time=1h \
  >"$workdir/prometheus.log" 2>&1 &
prom_pid=$!
prom="http://127.0.0.1:$prom_port"
wait_until 60 curl -sf "$prom/-/ready" -o /dev/null || { fail "prometheus not ready"; exit 1; }

# promql QUERY: the JSON of an instant query (exit 1 on an HTTP or query error).
promql() { curl -sf --max-time 10 --get --data-urlencode "query=$1" "$prom/api/v1/query"; }
# value QUERY: the value of a single-series result, "" when there is none.
value() { promql "$1" | jq -r 'if .data.result | length == 1 then .data.result[0].value[1] else "" end'; }
targets_up() {
  [[ $(curl -sf "$prom/api/v1/targets" | jq '[.data.activeTargets[] | select(.health == "up")] | length') == 2 ]]
}
wait_until 30 targets_up && ok "prometheus scrapes both targets" ||
  fail "targets: $(curl -sf "$prom/api/v1/targets" | jq -c '[.data.activeTargets[] | {job: .labels.job, health, lastError}]')"
rules_loaded=$(curl -sf "$prom/api/v1/rules" | jq '[.data.groups[].rules[]] | length')
[[ $rules_loaded == "$(grep -c '^ *- alert:' "$chart/files/alerts.yaml")" && $rules_loaded -gt 0 ]] &&
  ok "prometheus loaded the $rules_loaded alert rules" || fail "prometheus loaded '$rules_loaded' rules"

# ------------------------------------------------------------------------------------------------
log "2. a 16-rank job runs; free GPUs per domain through PromQL = free GPUs from the objects"
cat >"$workdir/moe.yaml" <<YAML
apiVersion: nvl72.dev/v1alpha1
kind: NVL72Job
metadata: {name: moe}
spec:
  replicas: 16
  gpusPerReplica: 4
  topology: {mode: Required}
  recovery: {policy: InPlace, notReadyGraceSeconds: 10, maxRecoveries: 5}
  template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m}}}]}}
YAML
kc -n "$ns" apply -f "$workdir/moe.yaml" >/dev/null
node_of_rank() { job_json moe | jq -r --argjson r "$1" '.status.placement.ranks[]? | select(.rank == $r) | .node'; }
all_running_on_plan() {
  api GET "/api/v1/namespaces/$ns/pods?labelSelector=nvl72.dev%2Fjob%3Dmoe" | jq -e '
    [.items[] | select(.metadata.deletionTimestamp == null)] as $p
    | ($p | length) == 16 and ([$p[] | select(.spec.nodeName == .metadata.annotations["nvl72.dev/node"]
                                        and .status.phase == "Running")] | length) == 16' >/dev/null
}
wait_until 120 all_running_on_plan && ok "16 ranks bound to their planned nodes and Running" ||
  { fail "the job did not start: $(job_json moe | jq -c '.status.conditions')"; exit 1; }

# The oracle, computed from the objects alone: per domain (label nvidia.com/gpu.clique), over the
# schedulable nodes (Ready, not cordoned, no NoSchedule/NoExecute taint other than nvidia.com/gpu):
# sum of max(0, allocatable GPUs - GPU requests of the node's pods that are not Succeeded/Failed).
# Prints {"domain": {"free": F, "healthy": H, "gpus": G}}.
expected_domains() {
  api GET /api/v1/nodes >"$workdir/nodes.json"
  api GET /api/v1/pods >"$workdir/pods.json"
  jq -n --slurpfile nodes "$workdir/nodes.json" --slurpfile pods "$workdir/pods.json" '
    def gpus: (. // "0") | tonumber;
    def podgpus: ([.spec.containers[]? | (.resources.requests["nvidia.com/gpu"] // .resources.limits["nvidia.com/gpu"]) | gpus] | add // 0)
                 as $c | ([.spec.initContainers[]? | (.resources.requests["nvidia.com/gpu"] // .resources.limits["nvidia.com/gpu"]) | gpus] | max // 0)
                 as $i | if $c > $i then $c else $i end;
    ([$pods[0].items[] | select(.spec.nodeName != null and .status.phase != "Succeeded" and .status.phase != "Failed")
      | {node: .spec.nodeName, g: podgpus}] | group_by(.node) | map({key: .[0].node, value: (map(.g) | add)}) | from_entries) as $used
    | [$nodes[0].items[] | select(.metadata.labels["nvidia.com/gpu.clique"] != null)
       | {domain: .metadata.labels["nvidia.com/gpu.clique"], name: .metadata.name,
          alloc: (.status.allocatable["nvidia.com/gpu"] | gpus),
          ok: (([.status.conditions[]? | select(.type == "Ready")][0].status == "True")
               and (.spec.unschedulable != true)
               and ([.spec.taints[]? | select((.effect == "NoSchedule" or .effect == "NoExecute") and .key != "nvidia.com/gpu")] | length == 0))}]
    | group_by(.domain)
    | map({key: .[0].domain, value: {
        gpus: (map(.alloc) | add),
        healthy: (map(select(.ok)) | length),
        free: (map(select(.ok) | .alloc - ($used[.name] // 0) | if . < 0 then 0 else . end) | add // 0)}})
    | from_entries'
}
# PromQL values of one metric per domain as {"domain": value}.
prom_by_domain() {
  promql "$1" | jq '[.data.result[] | {key: .metric.domain, value: (.value[1] | tonumber)}] | from_entries'
}
# domains_match FIELD METRIC: the metric of every domain equals the oracle's FIELD (and no more
# domains, no fewer). Leaves the last comparison in $workdir/compare.json.
domains_match() {
  expected_domains | jq "map_values(.$1)" >"$workdir/expected.json"
  prom_by_domain "$2" >"$workdir/got.json"
  jq -n --slurpfile e "$workdir/expected.json" --slurpfile g "$workdir/got.json" \
    '{expected: $e[0], got: $g[0]}' >"$workdir/compare.json"
  jq -e '.expected == .got and (.expected | length) > 0' "$workdir/compare.json" >/dev/null
}
rack=$(node_of_rank 0 | cut -d- -f1)
if wait_until 30 domains_match free nvl72_operator_domain_free_gpus; then
  ok "free GPUs of all $(jq '.expected | length' "$workdir/compare.json") domains match the objects: $(jq -c .got "$workdir/compare.json")"
else
  fail "free GPUs per domain: $(jq -c . "$workdir/compare.json")"
fi
job_domain=$(job_json moe | jq -r '.status.placement.domains[0]')
result "prometheus_free_gpus_job_domain=$(value "nvl72_operator_domain_free_gpus{domain=\"$job_domain\"}") (16 ranks x 4 GPUs on a rack of 72)"
total=$(expected_domains | jq '[.[] | .gpus] | add')
[[ $(value 'sum(nvl72_operator_domain_gpus)') == "$total" ]] && ok "sum of nvl72_operator_domain_gpus = $total" ||
  fail "sum(nvl72_operator_domain_gpus) = '$(value 'sum(nvl72_operator_domain_gpus)')', objects: $total"
jobs_running_is_one() { [[ $(value 'nvl72_operator_jobs{state="Running"}') == 1 ]]; }
wait_until 15 jobs_running_is_one &&
  ok "nvl72_operator_jobs{state=\"Running\"} = 1" || fail "jobs by state: $(promql 'nvl72_operator_jobs' | jq -c '[.data.result[] | {(.metric.state): .value[1]}] | add')"
[[ $(value 'nvl72_operator_admitted_jobs_total') == 1 && $(value 'nvl72_operator_admission_wait_seconds_count') == 1 ]] &&
  ok "one admission, one admission-wait observation" ||
  fail "admitted_jobs_total '$(value nvl72_operator_admitted_jobs_total)', wait count '$(value nvl72_operator_admission_wait_seconds_count)'"
[[ $(value 'nvl72_operator_recoveries_total{outcome="in_place"}') == 0 ]] && ok "no recovery counted before a failure" ||
  fail "in_place recoveries before any failure: '$(value 'nvl72_operator_recoveries_total{outcome="in_place"}')'"

# ------------------------------------------------------------------------------------------------
log "3. a node of the job fails: one in-place recovery"
failed_node=$(node_of_rank 3)
tf=$(date +%s%N)
fail_node "$failed_node"
replaced() {
  local n; n=$(node_of_rank 3)
  [[ -n $n && $n != "$failed_node" ]] && all_running_on_plan
}
if wait_until 90 replaced; then
  new=$(node_of_rank 3)
  ok "rank 3: $failed_node -> $new after $((($(date +%s%N) - tf) / 1000000)) ms"
  [[ ${new%%-*} == "$rack" ]] || fail "replacement $new is not in $rack"
else
  fail "rank 3 not replaced: $(job_json moe | jq -c '.status.conditions')"
fi
recovered() { [[ $(value 'nvl72_operator_recoveries_total{outcome="in_place"}') == 1 ]]; }
if wait_until 30 recovered; then
  ok "nvl72_operator_recoveries_total{outcome=\"in_place\"} = 1"
else
  fail "in_place recoveries '$(value 'nvl72_operator_recoveries_total{outcome="in_place"}')'; Recovering: $(job_json moe | jq -c '.status.conditions[]? | select(.type == "Recovering")')"
fi
sleep 3  # a second recovery, if the operator counted one, would show within a few scrapes
[[ $(value 'sum(nvl72_operator_recoveries_total{outcome="in_place"})') == 1 ]] && ok "still exactly one in-place recovery" ||
  fail "in-place recoveries now '$(value 'sum(nvl72_operator_recoveries_total{outcome="in_place"})')'"
[[ $(value 'nvl72_operator_recoveries_total{outcome="moved"}') == 0 && $(value 'nvl72_operator_recoveries_total{outcome="failed"}') == 0 ]] &&
  ok "no moved or failed recovery" || fail "moved/failed recoveries: $(promql nvl72_operator_recoveries_total | jq -c '[.data.result[] | {(.metric.outcome): .value[1]}]')"
dur_count=$(value 'nvl72_operator_recovery_duration_seconds_count{outcome="in_place"}')
[[ $dur_count == 1 ]] && ok "one recovery duration observed: $(value 'nvl72_operator_recovery_duration_seconds_sum{outcome="in_place"}') s" ||
  fail "recovery duration count '$dur_count'"
result "prometheus_recovery_duration_s=$(value 'nvl72_operator_recovery_duration_seconds_sum{outcome="in_place"}') (recovery decision to all ranks running; the start is a condition time of 1 s resolution)"
wait_until 30 domains_match free nvl72_operator_domain_free_gpus && ok "free GPUs per domain match the objects after the failure" ||
  fail "free GPUs after the failure: $(jq -c . "$workdir/compare.json")"
wait_until 15 domains_match healthy nvl72_operator_domain_healthy_nodes &&
  ok "healthy nodes per domain match the objects: $(jq -c .got "$workdir/compare.json")" ||
  fail "healthy nodes: $(jq -c . "$workdir/compare.json")"

# ------------------------------------------------------------------------------------------------
log "4. alerts evaluate"
sleep 2  # a few evaluation rounds since the last change
rules=$(curl -sf "$prom/api/v1/rules")
bad=$(jq -r '.data.groups[].rules[] | select(.health != "ok") | "\(.name): \(.lastError)"' <<<"$rules")
[[ -z $bad ]] && ok "every rule evaluates (health ok)" || fail "rules with errors: $bad"
for a in NVL72OperatorNoLeader NVL72DomainDegraded NVL72RecoveryFailed; do
  st=$(jq -r --arg a "$a" '.data.groups[].rules[] | select(.name == $a) | .state' <<<"$rules")
  [[ $st == inactive ]] && ok "$a inactive" || fail "$a is '$st'"
done
[[ $(value 'nvl72_operator_leader') == 1 ]] && ok "nvl72_operator_leader = 1" || fail "leader '$(value nvl72_operator_leader)'"

# ------------------------------------------------------------------------------------------------
log "5. every dashboard query parses and returns a series"
nq=0
while IFS= read -r expr; do
  nq=$((nq + 1))
  q=${expr//\$__rate_interval/15s}
  if ! out=$(promql "$q"); then
    fail "query does not run: $q ($(curl -s --get --data-urlencode "query=$q" "$prom/api/v1/query" | jq -r .error))"
  elif [[ $(jq '.data.result | length' <<<"$out") -lt 1 ]]; then
    fail "no series: $q"
  fi
done < <(jq -r '.. | .expr? // empty' "$chart/files/dashboard.json")
((nq > 0)) || fail "no queries found in the dashboard"
ok "$nq dashboard queries checked"

# ------------------------------------------------------------------------------------------------
log "6. health endpoints and structured logs"
[[ $(curl -s "http://127.0.0.1:$op_health_port/healthz") == ok ]] && ok "/healthz ok" || fail "/healthz: $(curl -s "http://127.0.0.1:$op_health_port/healthz")"
[[ $(curl -s "http://127.0.0.1:$op_health_port/readyz") == "ok leader" ]] && ok "/readyz: ok leader" || fail "/readyz: $(curl -s "http://127.0.0.1:$op_health_port/readyz")"
if jq -e . "$workdir/operator.log" >/dev/null 2>&1 && [[ -s $workdir/operator.log ]]; then
  ok "all $(wc -l <"$workdir/operator.log") operator log lines are JSON"
else
  fail "operator log lines that are not JSON: $(grep -v '^{' "$workdir/operator.log" | head -3)"
fi
if jq -se 'length > 0 and all(.[]; .level != null and .msg != null and .logger == "nvl72-extender")' \
  "$workdir/extender.log" >/dev/null 2>&1 &&
  [[ $(jq -s 'length' "$workdir/extender.log") == $(wc -l <"$workdir/extender.log") ]]; then
  ok "all $(wc -l <"$workdir/extender.log") extender log lines are JSON"
else
  fail "extender log lines that are not JSON: $(grep -v '^{' "$workdir/extender.log" | head -3)"
fi
jq -se --arg j "$ns/moe" 'any(.[]; (.msg | startswith("admitted")) and .job == $j and .level == "info")' \
  "$workdir/operator.log" >/dev/null && ok "the admission log line carries job=$ns/moe" ||
  fail "no admission line with the job key"
jq -se --arg n "$failed_node" 'any(.[]; (.msg | contains("recovery 1:")) and .node == $n)' \
  "$workdir/operator.log" >/dev/null && ok "the recovery log line carries node=$failed_node" ||
  fail "no recovery line with the node key"

e2e_end
