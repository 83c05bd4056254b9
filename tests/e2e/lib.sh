# Shared helpers of the e2e scripts (bash). Source it after setting `e2e_name` (log prefix):
#   e2e_name=prometheus-e2e; source "$here/lib.sh"
# It provides logging and failure counting, a local control plane (the one scripts/test started,
# else a fresh one), free ports, bounded waits, process start/stop, raw API calls as admin, node
# failure helpers for kwok nodes, and starters for nvl72-extender, a kube-scheduler serving the
# nvl72-scheduler profile, and nvl72-operator. Every wait has a deadline.
# Every e2e script sources it and redefines none of its helpers; each ends with e2e_end.

e2e_t0=$(date +%s)
failures=0
log() { printf '[%s %s +%ss] %s\n' "${e2e_name:-e2e}" "$(date +%H:%M:%S)" "$(($(date +%s) - e2e_t0))" "$*" >&2; }
fail() { log "FAIL: $*"; failures=$((failures + 1)); }
ok() { log "ok: $*"; }
result() {  # a measured number, also appended to $NVL72_E2E_RESULTS when set
  log "RESULT $*"
  if [[ -n ${NVL72_E2E_RESULTS:-} ]]; then echo "$*" >>"$NVL72_E2E_RESULTS"; fi
}

# e2e_cluster REPO [--own [UP_FLAGS...]]: sets `state` and `own_cluster` and sources the cluster env.
# Reuses the cluster of $NVL72_CLUSTER_STATE (exported by scripts/test) when it is up, else starts a
# 4-rack one in a temporary state dir (stopped by e2e_cluster_down). --own: always a fresh cluster,
# started with `local-cluster up --racks 4 UP_FLAGS...`, for a test that installs what every later
# test would see (a CRD, a stand-in driver).
e2e_cluster() {
  local repo=$1 own=0
  shift
  if [[ ${1:-} == --own ]]; then own=1; shift; fi
  own_cluster=0
  if ((!own)) && [[ -n ${NVL72_CLUSTER_STATE:-} && -f $NVL72_CLUSTER_STATE/env ]] &&
    "$repo/scripts/local-cluster" status --state "$NVL72_CLUSTER_STATE" >/dev/null 2>&1; then
    state=$NVL72_CLUSTER_STATE
    log "using the running local control plane in $state"
  else
    state=$(mktemp -d "/tmp/nvl72-${e2e_name:-e2e}.XXXXXX")
    rmdir "$state"
    own_cluster=1
    log "starting a local control plane (--racks 4 $*) in $state"
    "$repo/scripts/local-cluster" up --racks 4 "$@" --state "$state" >/dev/null
  fi
  # shellcheck disable=SC1091
  source "$state/env"
}
e2e_cluster_down() {  # REPO: stops the cluster if e2e_cluster started it
  if ((${own_cluster:-0})); then "$1/scripts/local-cluster" down --state "$state" >/dev/null 2>&1 || true; fi
}

# tail_logs DIR LINES: the last LINES lines of every DIR/*.log, for a failed test's cleanup.
tail_logs() {
  local f
  for f in "$1"/*.log; do log "--- tail of $f"; tail -n "$2" "$f" >&2 || true; done
}
kc() { "$NVL72_KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
# free_port: a TCP port of 127.0.0.1 that nothing listens on, below the ephemeral range (so an
# outgoing connection cannot take it between this check and the server's bind).
free_port() {
  local lo=20000 hi first p tries=0 listening=" " addr st _
  read -r first _ </proc/sys/net/ipv4/ip_local_port_range
  hi=$((first - 1))
  while read -r _ addr _ st _; do # /proc/net/tcp: sl local_address rem_address st; 0A = LISTEN
    [[ $st == 0A ]] && listening+="$((16#${addr##*:})) "
  done < <(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null)
  while ((tries++ < 1000)); do
    p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
    [[ $listening == *" $p "* ]] && continue
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
    echo "$p"
    return 0
  done
  echo "free_port: no free port in $lo-$hi" >&2
  return 1
}
wait_until() {  # TIMEOUT_S CMD...: runs CMD every 0.2 s until it succeeds; 1 after the deadline
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}
wait_url() { wait_until "$1" curl -sf --max-time 2 -o /dev/null "$2"; }  # TIMEOUT_S URL: until 2xx
stop_pid() {  # PID [GRACE_S]: TERM, KILL after GRACE_S (default 10), reap; never fails
  local pid=$1 grace=${2:-10} i
  [[ -n $pid ]] || return 0
  if kill -TERM "$pid" 2>/dev/null; then
    for ((i = 0; i < grace * 4; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # `wait` returns the status of a TERMed child (143): never let `set -e` turn that into an exit.
  wait "$pid" 2>/dev/null || true
}
# start_bg LOGFILE CMD...: starts CMD in the background (stdout+stderr appended to LOGFILE), sets
# BG_PID and remembers it for stop_all (for an EXIT trap).
BG_PIDS=()
start_bg() {
  local logfile=$1
  shift
  "$@" >>"$logfile" 2>&1 &
  BG_PID=$!
  BG_PIDS+=("$BG_PID")
}
stop_all() {
  local pid
  for pid in "${BG_PIDS[@]}"; do stop_pid "$pid" 5; done
  BG_PIDS=()
}

# Raw API calls as admin (curl starts much faster than kubectl on a loaded machine).
api() {  # METHOD PATH [CONTENT-TYPE BODY]
  local args=(-s --max-time 30 --cacert "$NVL72_CA_FILE" -H "Authorization: Bearer $NVL72_TOKEN" -X "$1")
  [[ $# -ge 4 ]] && args+=(-H "Content-Type: $3" --data-binary "$4")
  curl "${args[@]}" "$NVL72_APISERVER_URL$2"
}

# Small shared helpers: clocks, names, the job objects of the namespace $ns.
now_ns() { date +%s%N; }
ms_since() { echo $((($(now_ns) - $1) / 1000000)); }  # T_NS: ms since the now_ns value T_NS
rack_of() { echo "${1%%-*}"; }                          # NODE (rack2-node07) -> rack2
job_path() { echo "/apis/nvl72.dev/v1alpha1/namespaces/$ns/nvl72jobs/$1"; }  # NAME -> API path
job_json() { api GET "$(job_path "$1")"; }                                # NAME -> the job, JSON
# POD -> "nodeName phase deletionTimestamp uid" of pod POD of $ns; empty fields when it is absent.
pod_line() {
  api GET "/api/v1/namespaces/$ns/pods/$1" | jq -r 'if .kind == "Pod" then . else {} end |
    [.spec.nodeName // "", .status.phase // "", .metadata.deletionTimestamp // "",
     .metadata.uid // ""] | join(" ")'
}
pod_running_on() { [[ $(pod_line "$1") == "$2 Running  "* ]]; }  # POD NODE: Running, not deleting

# Node faults the way they happen: a node's kubelet stops heartbeating (`scripts/local-cluster kubelet
# stop`: its Lease is no longer renewed, kwok no longer runs it), and kube-controller-manager's node
# lifecycle controller marks it Ready=Unknown about NVL72_NODE_MONITOR_GRACE s after the last
# heartbeat and taints it node.kubernetes.io/unreachable (NoSchedule at once, NoExecute at its
# eviction rate). Nothing here writes a condition or a taint.
#   stop_kubelet NODE...        its heartbeats stop (fail_node is the same)
#   start_kubelet NODE...       they start again: kwok posts Ready=True, the controller lifts the taints
#   node_ready NODE             prints the Ready condition's status (True, False, Unknown, or empty)
#   node_taints NODE            prints its taints, one key:effect a line
#   wait_node_ready NODE STATUS SECONDS   until Ready is STATUS
#   node_healthy NODE           Ready=True and no node.kubernetes.io/ taint
#   repair_node NODE            start_kubelet, then up to 60 s until node_healthy
stop_kubelet() { "$NVL72_LOCAL_CLUSTER" kubelet stop "$@" --state "$NVL72_CLUSTER_STATE"; }
start_kubelet() { "$NVL72_LOCAL_CLUSTER" kubelet start "$@" --state "$NVL72_CLUSTER_STATE"; }
fail_node() { stop_kubelet "$@"; }
node_ready() { api GET "/api/v1/nodes/$1" | jq -r '(.status.conditions // [])[] | select(.type == "Ready") | .status'; }
node_taints() { api GET "/api/v1/nodes/$1" | jq -r '(.spec.taints // [])[] | "\(.key):\(.effect)"'; }
node_is() { [[ $(node_ready "$1") == "$2" ]]; }
wait_node_ready() { wait_until "$3" node_is "$1" "$2"; }
node_healthy() { node_is "$1" True && [[ $(node_taints "$1") != *node.kubernetes.io/* ]]; }
repair_node() {
  start_kubelet "$1" || true
  wait_until 60 node_healthy "$1" || log "note: $1 not Ready and untainted 60 s after its kubelet started"
}

# e2e_namespace REPO NS: creates namespace NS, installs the NVL72Job CRD (waits until it is served)
# and waits for NS's default ServiceAccount (the ServiceAccount admission plugin refuses pods until
# kube-controller-manager has made it).
e2e_namespace() {
  kc create namespace "$2" >/dev/null
  kc apply -f "$1/crds/nvl72jobs.nvl72.dev.yaml" >/dev/null
  kc wait --for condition=established --timeout=60s crd/nvl72jobs.nvl72.dev >/dev/null
  wait_until 60 kc -n "$2" get serviceaccount default -o name >/dev/null 2>&1
}

# e2e_release_namespace NS: gives a shared cluster its capacity back at once when the test's
# operator no longer runs: drops the finalizer of NS's jobs, deletes them and force-deletes NS's
# pods, then deletes NS (and whatever else is in it, a Lease) without waiting. Never fails.
e2e_release_namespace() {
  local j
  kc -n "$1" get nvj -o name 2>/dev/null | while read -r j; do
    kc -n "$1" patch "$j" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
  done
  kc -n "$1" delete nvj --all --wait=false >/dev/null 2>&1
  kc -n "$1" delete pods --all --force --grace-period=0 >/dev/null 2>&1
  kc delete namespace "$1" --wait=false >/dev/null 2>&1
  return 0
}

# nvl72_job NAME REPLICAS [RECOVERY]: prints the manifest of a Required NVL72Job of 4-GPU ranks (one
# container, 100m CPU); RECOVERY is spec.recovery as a YAML flow map, e.g.
# '{policy: InPlace, notReadyGraceSeconds: 10}' (default: none, the CRD's defaults).
nvl72_job() {
  printf -- '---\napiVersion: nvl72.dev/v1alpha1\nkind: NVL72Job\nmetadata: {name: %s}\nspec:\n' "$1"
  printf '  replicas: %s\n  gpusPerReplica: 4\n  topology: {mode: Required}\n' "$2"
  [[ -z ${3:-} ]] || printf '  recovery: %s\n' "$3"
  printf '  template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m}}}]}}\n'
}

# start_extender BINARY LOGFILE [FLAGS...]: sets ext_pid and ext_port; waits (60 s) for /readyz.
start_extender() {
  local bin=$1 logfile=$2; shift 2
  ext_port=$(free_port)
  "$bin" --kubeconfig "$KUBECONFIG" --listen "127.0.0.1:$ext_port" --spares-per-domain 2 "$@" >"$logfile" 2>&1 &
  ext_pid=$!
  wait_until 60 curl -sf "http://127.0.0.1:$ext_port/readyz" -o /dev/null
}
# start_nvl72_scheduler REPO WORKDIR LOGFILE: a kube-scheduler with the nvl72-scheduler profile whose
# extender is the one start_extender started; sets sched_pid and sched_port (its /metrics).
start_nvl72_scheduler() {
  sed -e "s#KUBECONFIG_PATH#$KUBECONFIG#" -e "s#EXTENDER_URL#http://127.0.0.1:$ext_port#" \
    -e "s#LEADER_ELECT#false#" "$1/scheduler-plugin/scheduler-config.yaml" >"$2/nvl72-scheduler.yaml"
  # Every kube-scheduler of a cluster runs with its feature gates (local-cluster
  # --workload-scheduling exports them as NVL72_FEATURE_GATES).
  sched_port=$(free_port)
  "$NVL72_KUBE_SCHEDULER" ${NVL72_FEATURE_GATES:+--feature-gates=$NVL72_FEATURE_GATES} --config="$2/nvl72-scheduler.yaml" --secure-port="$sched_port" \
    --bind-address=127.0.0.1 --authentication-kubeconfig="$KUBECONFIG" \
    --authorization-kubeconfig="$KUBECONFIG" >"$3" 2>&1 &
  sched_pid=$!
}
# start_operator BINARY NAMESPACE LOGFILE [FLAGS...]: sets op_pid, op_health_port, op_metrics_port;
# waits (60 s) for /readyz.
# start_operator BIN NS LOGFILE [FLAGS...]: the stuck bound is E2E_STUCK_SECONDS (default 20), so
# e2e_end can demand the operator's Stuck event for a job stuck longer than that.
start_operator() {
  local bin=$1 ns=$2 logfile=$3; shift 3
  op_health_port=$(free_port)
  op_metrics_port=$(free_port)
  op_stuck_seconds=${E2E_STUCK_SECONDS:-20}
  "$bin" --kubeconfig "$KUBECONFIG" --namespace "$ns" --metrics-addr "127.0.0.1:$op_metrics_port" \
    --health-addr "127.0.0.1:$op_health_port" --stuck-seconds "$op_stuck_seconds" "$@" >"$logfile" 2>&1 &
  op_pid=$!
  wait_until 60 curl -fs "http://127.0.0.1:$op_health_port/readyz" -o /dev/null
}

# ---- the end of every e2e test (issue 27: every path ends in a true state with a reason) ---------
# e2e_stuck_jobs NS BOUND_S: "<name> <reason or -> <age_s>" for each job of NS that holds a
# reservation, has not ended, and whose ranks have not all run for BOUND_S or longer (Running
# condition not True since then; a job with no Running condition counts from its Admitted one).
e2e_stuck_jobs() {
  local list
  list=$(api GET "/apis/nvl72.dev/v1alpha1/namespaces/$1/nvl72jobs")
  # A check that could not look must not pass: no answer, or not a list, is an error.
  jq -e '.items | type == "array"' >/dev/null 2>&1 <<<"$list" || { echo "ERROR cannot-list-jobs 0"; return 0; }
  jq -r --argjson now "$(date +%s)" --argjson bound "$2" '
      .items[]? | select(.metadata.deletionTimestamp == null)
      | select(((.status.placement.ranks // []) | length) > 0)
      | select((.status.state // "") as $s | ($s != "Succeeded" and $s != "Failed"))
      | (.status.conditions // []) as $c
      | ($c | map(select(.type == "Running")) | first) as $r
      | select($r == null or $r.status != "True")
      | (($r // ($c | map(select(.type == "Admitted")) | first) // {}).lastTransitionTime) as $t
      | select($t != null)
      | ($now - ($t | sub("\\.[0-9]+"; "") | fromdateiso8601)) as $age
      | select($age >= $bound)
      | "\(.metadata.name) \(if $r == null or ($r.reason // "") == "" then "-" else $r.reason end) \($age)"' <<<"$list"
}

# event_notes NS REASON NAME: the notes of the events (events.k8s.io) of object NAME with REASON.
event_notes() {
  api GET "/apis/events.k8s.io/v1/namespaces/$1/events" |
    jq -r --arg r "$2" --arg n "$3" '.items[] | select(.reason == $r and .regarding.name == $n) | .note'
}

# e2e_check_no_silent_stuck [NS]: no job of NS (default $ns) is stuck without a reason: each job whose
# ranks have not all run for the operator's stuck bound has a Running condition with a reason, and
# (when start_operator set the bound) the operator's Warning event "Stuck" a little after the bound.
e2e_check_no_silent_stuck() {
  local ns=${1:-${ns:-}} bound=${op_stuck_seconds:-300} name reason age notes n=0
  [[ -n $ns ]] || return 0
  while read -r name reason age; do
    [[ -n $name ]] || continue
    if [[ $name == ERROR ]]; then
      fail "stuck-check: the jobs of $ns could not be listed (API server down or namespace wrong)"
      continue
    fi
    n=$((n + 1))
    if [[ $reason == - ]]; then
      fail "stuck-check: $ns/$name has not had every rank running for ${age}s and its status says no reason"
      continue
    fi
    ((age >= bound + 15)) && [[ -n ${op_stuck_seconds:-} ]] || continue
    notes=$(event_notes "$ns" Stuck "$name")
    [[ -n $notes ]] || fail "stuck-check: $ns/$name stuck for ${age}s ($reason) without a Stuck event"
  done < <(e2e_stuck_jobs "$ns" "$bound")
  ok "stuck-check: $n job(s) of $ns past the ${bound}s stuck bound, each with a reason"
}

# e2e_end [NS]: the last line of an e2e test: the stuck check on NS (default $ns, the jobs'
# namespace), then PASS or exit 1 with the failures.
e2e_end() {
  e2e_check_no_silent_stuck "$@"
  if ((failures > 0)); then log "$failures failures"; exit 1; fi
  log "PASS in $(($(date +%s) - e2e_t0)) s"
}
