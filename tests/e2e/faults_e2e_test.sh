#!/usr/bin/env bash
# Fault e2e (issue 9): bad input and process faults against a running nvl72-extender and
# nvl72-operator on the real local control plane.
#
#   tests/e2e/faults_e2e_test.sh OPERATOR_BINARY EXTENDER_BINARY
# Cluster: the shared one of scripts/test when $NVL72_CLUSTER_STATE points at a running local
# cluster (scripts/local-cluster status), else its own with 4 racks in a temporary state dir (lib.sh
# e2e_cluster).
# Binaries default to $NVL72_BUILD_DIR/{operator,scheduler-plugin}/.
#
# Checks (each prints what happened; any wrong outcome fails the test):
#  1. malformed requests (not JSON, truncated, wrong types, deep nesting, empty, every verb) get
#     400 with a JSON {"Error": "..."} body; an unknown path 404 with a JSON body;
#  2. a body over --max-body-bytes (with Content-Length, chunked, and a Content-Length that
#     announces 64 GiB) gets 413 or a closed connection, never a crash; the extender serves on;
#  3. a slow client that sends headers (or half the headers) then stalls is disconnected after the
#     read timeout (--request-timeout-ms 2000) while other clients are served meanwhile; as many
#     idle connections as workers do not block /healthz; a 64 MiB request line is cut off without
#     the extender's memory growing; a request trickled just inside the read timeout is cut off at
#     the whole-request limit;
#  4. the operator and the extender started with a kubeconfig whose token is wrong: never ready,
#     a clear "Unauthorized" error in the log, the token string nowhere in any log (nor the real
#     admin token);
#  5. the operator's health port answers a garbage request line with 400 and stays healthy;
#     SIGKILL of the operator and the extender in the middle of admitting jobs, then restart:
#     every job placed and Running, placements made before the kill unchanged, exactly one pod per
#     rank, every pod on its planned node, and the restarted extender's filter sends a rank only to
#     its planned node (state recovered from the API server);
#  6. kube-apiserver restarted (scripts/local-cluster restart-apiserver) under the running operator,
#     extender and kube-scheduler: a job created afterwards runs, no placement changes;
#  7. SIGKILL of the kube-scheduler serving the nvl72-scheduler profile: a job admitted meanwhile
#     gets its pods, which stay unbound (no other scheduler takes them); a restarted kube-scheduler
#     binds them to their planned nodes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
e2e_name=faults-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"
build=${NVL72_BUILD_DIR:-$repo/build/dev}
op_bin=${1:-${NVL72_OPERATOR_BIN:-$build/operator/nvl72-operator}}
ext_bin=${2:-${NVL72_EXTENDER_BIN:-$build/scheduler-plugin/nvl72-extender}}
[[ -x $op_bin ]] || { echo "operator binary $op_bin not found" >&2; exit 2; }
[[ -x $ext_bin ]] || { echo "extender binary $ext_bin not found" >&2; exit 2; }

lc=$repo/scripts/local-cluster
e2e_cluster "$repo"  # sets state, own_cluster; sources $state/env
ns=faults-e2e-$(date +%s)
work=$(mktemp -d /tmp/nvl72-faults-e2e-work.XXXXXX)
ext_pid= op_pid= sched_pid=

cleanup() {
  local rc=$?
  set +e
  if [[ -n $op_pid ]] && kill -0 "$op_pid" 2>/dev/null; then
    # The operator deletes the pods of deleted jobs and drops its finalizer.
    kc -n "$ns" delete nvj --all --wait=true --timeout=30s >/dev/null 2>&1
  fi
  stop_all
  if ((own_cluster)); then
    e2e_cluster_down "$repo"
  else # a shared cluster gets its capacity back at once (not when the namespace is finally gone)
    e2e_release_namespace "$ns"
  fi
  if ((failures > 0 || rc != 0)); then
    tail_logs "$work" 25
  fi
  [[ -n ${FAULTS_E2E_LOGS:-} ]] && mkdir -p "$FAULTS_E2E_LOGS" && cp "$work"/*.log "$FAULTS_E2E_LOGS"/ 2>/dev/null
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

e2e_namespace "$repo" "$ns" || { fail "namespace $ns not ready"; exit 1; }

ext_port=$(free_port)
url=http://127.0.0.1:$ext_port
max_body=1048576 read_timeout_ms=2000
# start_faults_extender [KUBECONFIG]: (re)starts the extender on the fixed $ext_port (the
# kube-scheduler's config names $url), with the limits under test; appends to extender.log.
start_faults_extender() {
  start_bg "$work/extender.log" "$ext_bin" --kubeconfig "${1:-$KUBECONFIG}" --listen "127.0.0.1:$ext_port" \
    --max-body-bytes "$max_body" --request-timeout-ms "$read_timeout_ms" --workers 4
  ext_pid=$BG_PID
}
start_faults_extender
wait_url 60 "$url/readyz" || { fail "extender not ready in 60 s"; exit 1; }
ok "nvl72-extender ready on $url (--max-body-bytes $max_body --request-timeout-ms $read_timeout_ms --workers 4)"
ext_alive() { kill -0 "$ext_pid" 2>/dev/null && [[ $(curl -s --max-time 5 "$url/healthz") == ok ]]; }

# A valid filter body: a 1-GPU pod and some node names.
node_names=$(kc get nodes -l nvidia.com/gpu.clique -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | awk 'NR <= 36')
names_json=$(awk 'NF { printf "%s\"%s\"", (n++ ? "," : ""), $1 }' <<<"$node_names")
pod_json='{"metadata":{"name":"p","namespace":"default","uid":"u1"},"spec":{"containers":[{"name":"c","resources":{"requests":{"nvidia.com/gpu":"1"}}}]}}'
printf '{"Pod":%s,"NodeNames":[%s]}' "$pod_json" "$names_json" >"$work/valid.json"
post() { # VERB BODY_FILE [extra curl args] -> "code" ; body in $work/reply
  local verb=$1 file=$2
  shift 2
  curl -s --max-time 10 -o "$work/reply" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$file" "$@" "$url/$verb"
}
valid_served() { [[ $(post filter "$work/valid.json") == 200 ]] && grep -q '"NodeNames":\[' "$work/reply"; }
valid_served && ok "a valid filter request is served (200)" || fail "a valid filter request is not served"

# ------------------------------------------------------------------------------------------------
log "1. malformed requests"
deep=$(printf '%0.s[' $(seq 5000))
declare -A bad=(
  [not-json]='this is not json'
  [truncated]='{"Pod": {"metadata": {"name": "p"'
  [array]='[1, 2, 3]'
  [empty]=''
  [nodenames-not-array]="{\"Pod\":$pod_json,\"NodeNames\":5}"
  [nodenames-numbers]="{\"Pod\":$pod_json,\"NodeNames\":[1,2]}"
  [pod-string]='{"Pod":"p","NodeNames":["a"]}'
  [bad-gpu-quantity]='{"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"requests":{"nvidia.com/gpu":"lots"}}}]}},"NodeNames":["a"]}'
  [deep-nesting]="{\"Pod\":$pod_json,\"Extra\":$deep,\"NodeNames\":[]}"
  [nul-bytes]=$'{"Pod":{"metadata":{"name":"p\x01"}}}'
  [trailing-garbage]="{\"Pod\":$pod_json,\"NodeNames\":[]} xyz"
)
n_bad=0
for name in "${!bad[@]}"; do
  printf '%s' "${bad[$name]}" >"$work/bad.json"
  for verb in filter prioritize bind preempt; do
    # Some bodies are valid JSON for some verbs' purposes only in shape; all of these are malformed
    # for every verb except where noted.
    # preempt reads the Pod only to find gang ranks; bind has no Pod.
    [[ $name == bad-gpu-quantity && ($verb == bind || $verb == preempt) ]] && continue
    [[ $name == nodenames-* && ($verb == bind || $verb == preempt) ]] && continue
    [[ $name == pod-string && $verb == bind ]] && continue
    [[ $name == nul-bytes && $verb == bind ]] && continue
    code=$(post "$verb" "$work/bad.json")
    if [[ $code == 400 ]] && jq -e '.Error | type == "string" and length > 0' "$work/reply" >/dev/null 2>&1; then
      n_bad=$((n_bad + 1))
    else
      fail "$name -> /$verb: HTTP $code, body $(head -c 200 "$work/reply")"
    fi
  done
done
ext_alive && ok "$n_bad malformed requests: 400 with a JSON Error body each; extender alive" ||
  fail "extender not alive after malformed requests"
log "   e.g. not JSON -> $(printf 'x' >"$work/bad.json"; post filter "$work/bad.json"; echo " $(head -c 150 "$work/reply")")"
code=$(curl -s --max-time 5 -o "$work/reply" -w '%{http_code}' -X POST --data 'x' "$url/no-such-verb")
[[ $code == 404 ]] && jq -e '.Error' "$work/reply" >/dev/null 2>&1 &&
  ok "unknown path: 404 $(cat "$work/reply")" || fail "unknown path: HTTP $code $(head -c 200 "$work/reply")"

# ------------------------------------------------------------------------------------------------
log "2. bodies over --max-body-bytes ($max_body)"
head -c $((2 * max_body)) /dev/zero | tr '\0' ' ' >"$work/huge.json"
check_huge() { # DESCRIPTION CURL-RESULT
  local what=$1 code=$2 rc=$3
  # Always a 413 the client can read: refused before "100 Continue" when curl asks first, and the
  # connection closed lingering when the body comes anyway (a reset used to lose the reply).
  if [[ $code == 413 && $rc == 0 ]]; then
    ok "$what: 413 $(head -c 100 "$work/reply")"
  else
    fail "$what: HTTP $code (curl exit $rc) $(head -c 200 "$work/reply")"
  fi
}
rc=0; code=$(post filter "$work/huge.json") || rc=$?
check_huge "2 MiB body with Content-Length" "$code" "$rc"
rc=0; code=$(post filter "$work/huge.json" -H 'Transfer-Encoding: chunked') || rc=$?
check_huge "2 MiB chunked body" "$code" "$rc"
# Only the header announces 64 GiB; a server that tried to allocate it would die.
rc=0
code=$(curl -s --max-time 10 -o "$work/reply" -w '%{http_code}' -H 'Content-Type: application/json' \
  -H 'Content-Length: 68719476736' --data-binary '{}' "$url/filter") || rc=$?
check_huge "Content-Length of 64 GiB, 2 bytes sent" "$code" "$rc"
ext_alive && valid_served && ok "extender alive and serving after the huge bodies" ||
  fail "extender not serving after the huge bodies"

# ------------------------------------------------------------------------------------------------
log "3. slow clients (read timeout ${read_timeout_ms} ms)"
# slow_client PART: opens a connection, sends PART, then stalls. Meanwhile 3 valid requests from
# other clients (count in $work/others). Prints the status line the server sent within the read
# timeout + 15 s ("none" if it sent nothing), then whether the connection was still open 1 s later.
slow_client() {
  local part=$1 line='' served=0 i
  exec 3<>"/dev/tcp/127.0.0.1/$ext_port"
  printf '%b' "$part" >&3
  for i in 1 2 3; do valid_served && served=$((served + 1)); done
  echo "$served" >"$work/others"
  IFS= read -r -t $((read_timeout_ms / 1000 + 15)) line <&3 || true
  line=${line%$'\r'}
  # Drain the rest of the reply; the read that ends the drain says whether the server closed
  # (EOF: status 1) or keeps the connection (timeout: status > 128).
  local rc=0 n=0
  while ((n++ < 50)); do rc=0; IFS= read -r -t 1 _ <&3 || rc=$?; ((rc == 0)) || break; done
  if ((rc > 128)); then echo "${line:-none}|open"; else echo "${line:-none}|closed"; fi
  exec 3<&-
}
for variant in headers half-headers; do
  if [[ $variant == headers ]]; then
    part="POST /filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"Pod\":"
    want="HTTP/1.1 408"
  else
    part="POST /filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le"
    want="HTTP/1.1 400"
  fi
  ts=$SECONDS
  how=$(slow_client "$part")
  served=$(cat "$work/others")
  status_line=${how%|*} conn=${how#*|}
  if [[ $status_line == "$want"* ]]; then
    ok "slow client ($variant, then stall): '$status_line' after the read timeout (${ts:+$((SECONDS - ts))} s incl. drain); connection then $conn; $served of 3 other requests served meanwhile"
  else
    fail "slow client ($variant, then stall): got '$status_line', wanted '$want' (connection $conn)"
  fi
  [[ $served == 3 ]] || fail "only $served of 3 other requests were served while a slow client stalled"
  [[ $conn == closed ]] || fail "slow client ($variant): the connection stayed open after the error reply (it holds a worker)"
done
ext_alive || fail "extender not alive after the slow clients"

# Idle connections, as many as --workers (4): each holds a worker, which an idle one gives up 200 ms
# after another connection waits (before: /healthz waited 59.5 s for the keep-alive timeout).
# A request line of 64 MiB (httplib 0.11 alone would hold it all in memory) and a request trickled
# a byte at a time are cut off. Prints: healthz seconds, RSS growth (kB), bytes the server took of
# the long line, seconds until the trickling client was cut off.
read -r idle_s rss_kb took_mb trickle_s < <(python3 - "$ext_port" "$ext_pid" "$read_timeout_ms" <<'PY'
import socket, sys, time, urllib.request
port, pid, timeout_ms = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
rss = lambda: int(next(l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")).split()[1])
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
time.sleep(0.3)
t = time.time()
urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30).read()
idle_s = time.time() - t
for c in idle: c.close()
before = rss()
c = socket.create_connection(("127.0.0.1", port)); c.sendall(b"GET /")
sent, chunk = 0, b"a" * (1 << 20)
try:
    while sent < (64 << 20):
        c.sendall(chunk); sent += len(chunk)
except OSError:
    pass
c.close()
time.sleep(0.5)
grown = rss() - before
c = socket.create_connection(("127.0.0.1", port)); t = time.time()
try:
    for b in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 400 + b"\r\n\r\n":
        c.sendall(bytes([b])); time.sleep(timeout_ms / 1000 / 4)
        if time.time() - t > 60: break
except OSError:
    pass
c.settimeout(5)
try:
    while c.recv(4096): pass
except OSError:
    pass
print(f"{idle_s:.2f} {grown} {sent >> 20} {time.time() - t:.1f}")
PY
)
awk -v s="$idle_s" 'BEGIN { exit !(s < 5) }' &&
  ok "4 idle connections on 4 workers: /healthz answered in ${idle_s} s (an idle connection gives its worker up)" ||
  fail "4 idle connections on 4 workers: /healthz took ${idle_s} s"
((took_mb < 64 && rss_kb < 16384)) &&
  ok "a 64 MiB request line: cut off after ${took_mb} MiB sent, extender RSS +${rss_kb} kB" ||
  fail "a 64 MiB request line: the extender took ${took_mb} MiB, RSS +${rss_kb} kB"
awk -v s="$trickle_s" -v lim="$((2 * read_timeout_ms / 1000 + 10))" 'BEGIN { exit !(s <= lim) }' &&
  ok "a request trickled a byte every $((read_timeout_ms / 4)) ms: cut off after ${trickle_s} s (whole-request limit: twice the read timeout, at least 10 s)" ||
  fail "a trickled request held its connection ${trickle_s} s"
ext_alive || fail "extender not alive after idle, endless and trickling clients"

# ------------------------------------------------------------------------------------------------
log "4. a kubeconfig with a wrong token"
bad_token=nvl72-faults-e2e-wrong-token-$(openssl rand -hex 12)
sed "s#token: .*#token: $bad_token#" "$KUBECONFIG" >"$work/bad-kubeconfig"
grep -q "$bad_token" "$work/bad-kubeconfig" || { fail "could not write a kubeconfig with a wrong token"; }
bad_health=$(free_port) bad_ext_port=$(free_port)
start_bg "$work/operator-badtoken.log" "$op_bin" --kubeconfig "$work/bad-kubeconfig" --namespace "$ns" \
  --metrics-addr 0 --health-addr "127.0.0.1:$bad_health"
bad_op=$BG_PID
start_bg "$work/extender-badtoken.log" "$ext_bin" --kubeconfig "$work/bad-kubeconfig" \
  --listen "127.0.0.1:$bad_ext_port"
bad_ext=$BG_PID
unauthorized_logged() { grep -qi 'unauthorized\|401' "$1"; }
wait_until 30 unauthorized_logged "$work/operator-badtoken.log" || true
wait_until 10 unauthorized_logged "$work/extender-badtoken.log" || true
for who in operator extender; do
  f=$work/$who-badtoken.log
  pid=$bad_op readyz=http://127.0.0.1:$bad_health/readyz
  [[ $who == extender ]] && pid=$bad_ext readyz=http://127.0.0.1:$bad_ext_port/readyz
  state_now="running, /readyz $(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$readyz" || true)"
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null && st=0 || st=$?; state_now="exited with status $st"; }
  [[ $state_now == *"/readyz 200"* ]] && fail "$who became ready with a wrong token"
  if unauthorized_logged "$f"; then
    ok "$who with a wrong token: $state_now; log says: $(grep -i -m1 'unauthorized\|401' "$f" | cut -c1-200)"
  else
    fail "$who with a wrong token: $state_now, but no Unauthorized/401 in its log: $(tail -3 "$f" | tr '\n' ' ' | cut -c1-300)"
  fi
  stop_pid "$pid" 5
done
leaks=$(grep -l -e "$bad_token" -e "$NVL72_TOKEN" "$work"/*.log 2>/dev/null || true)
[[ -z $leaks ]] && ok "neither the wrong token nor the admin token appears in any log" ||
  fail "a token appears in: $leaks"

# ------------------------------------------------------------------------------------------------
log "5. SIGKILL of the operator and the extender while jobs are admitted, then restart"
sed -e "s#KUBECONFIG_PATH#$KUBECONFIG#" -e "s#EXTENDER_URL#$url#" -e "s#LEADER_ELECT#false#" \
  "$repo/scheduler-plugin/scheduler-config.yaml" >"$work/nvl72-scheduler.yaml"
start_scheduler() {
  start_bg "$work/nvl72-scheduler.log" "$NVL72_KUBE_SCHEDULER" ${NVL72_FEATURE_GATES:+--feature-gates=$NVL72_FEATURE_GATES} --config="$work/nvl72-scheduler.yaml" \
    --secure-port="$(free_port)" --bind-address=127.0.0.1 --authentication-kubeconfig="$KUBECONFIG" \
    --authorization-kubeconfig="$KUBECONFIG"
  sched_pid=$BG_PID
}
start_scheduler
# start_faults_operator: (re)starts the operator (new health port, no metrics listener); appends to
# operator.log, so the admissions logged before a SIGKILL stay in it.
start_faults_operator() {
  op_health=$(free_port)
  start_bg "$work/operator.log" "$op_bin" --kubeconfig "$KUBECONFIG" --namespace "$ns" \
    --metrics-addr 0 --health-addr "127.0.0.1:$op_health" --admission-resync-seconds 5
  op_pid=$BG_PID
}
start_faults_operator
wait_url 60 "http://127.0.0.1:$op_health/readyz" || { fail "operator not ready"; exit 1; }
# The operator's health listener gets a garbage request line too.
exec 4<>"/dev/tcp/127.0.0.1/$op_health"
printf 'GARBAGE\r\n\r\n' >&4
line=''
IFS= read -r -t 10 line <&4 || true
exec 4<&-
if [[ ${line%$'\r'} == "HTTP/1.1 400"* ]] && wait_url 5 "http://127.0.0.1:$op_health/healthz" && kill -0 "$op_pid"; then
  ok "operator health port: garbage request line -> '${line%$'\r'}', still healthy"
else
  fail "operator health port after garbage: reply '${line%$'\r'}', healthz or process gone"
fi
job() { nvl72_job "$1" "$2"; }  # NAME REPLICAS
jobs_state() { kc -n "$ns" get nvj -o jsonpath='{range .items[*]}{.metadata.name} {.status.state}{"\n"}{end}'; }
# "pod planned-node node phase" of every pod of the namespace
pods_table() {
  kc -n "$ns" get pods -o go-template --template='{{range .items}}{{.metadata.name}} {{index .metadata.annotations "nvl72.dev/node"}} {{or .spec.nodeName "-"}} {{.status.phase}}{{"\n"}}{{end}}'
}
all_running() { # COUNT: COUNT jobs, all Running
  local s; s=$(jobs_state)
  [[ $(grep -c ' Running$' <<<"$s") == "$1" && $(grep -c . <<<"$s") == "$1" ]]
}
ranks() { # "job rank node" of every placed rank
  local j
  for j in $(kc -n "$ns" get nvj -o jsonpath='{.items[*].metadata.name}'); do
    kc -n "$ns" get nvj "$j" -o jsonpath='{range .status.placement.ranks[*]}{.rank} {.node}{"\n"}{end}' | sed "s/^/$j /"
  done
}
job fa 4 | kc -n "$ns" apply -f - >/dev/null
wait_until 90 all_running 1 || fail "fa not Running: $(jobs_state | tr '\n' ' ') $(pods_table | tr '\n' ';')"
ok "job fa Running (4 ranks bound by kube-scheduler + extender)"
ranks | sort >"$work/before"
{ job fb 4; job fc 4; job fd 8; } | kc -n "$ns" apply -f - >/dev/null
admitted_some() { grep -q "admitted $ns/f[bcd]" "$work/operator.log"; }
wait_until 30 admitted_some || true
kill -KILL "$op_pid" "$ext_pid" 2>/dev/null
wait "$op_pid" "$ext_pid" 2>/dev/null || true
log "SIGKILLed operator and extender: $(grep -c "admitted $ns/f[bcd]" "$work/operator.log" || true) of 3 new jobs admitted, $(pods_table | grep -c . || true) pods"
ranks | sort >"$work/at-kill"
sleep 2
start_faults_extender
wait_url 60 "$url/readyz" || fail "extender not ready after restart"
start_faults_operator
wait_url 60 "http://127.0.0.1:$op_health/readyz" || fail "operator not ready after restart"
ok "extender and operator restarted"
if wait_until 120 all_running 4; then
  ok "all 4 jobs Running after the restart"
else
  fail "jobs after restart: $(jobs_state | tr '\n' ' '); pods: $(pods_table | awk '{print $4}' | sort | uniq -c | tr '\n' ' ')"
fi
ranks | sort >"$work/after"
changed=$(join <(awk '{print $1 "/" $2, $3}' "$work/at-kill" | sort) <(awk '{print $1 "/" $2, $3}' "$work/after" | sort) |
  awk '$2 != $3' | wc -l)
[[ $changed == 0 && -s $work/at-kill ]] && ok "$(wc -l <"$work/at-kill") ranks placed before the kill kept their nodes" ||
  fail "$changed ranks moved after the restart (placed before the kill: $(wc -l <"$work/at-kill"))"
[[ $(awk '{print $3}' "$work/after" | sort | uniq -d | wc -l) == 0 ]] && ok "no node holds two ranks" ||
  fail "a node holds two ranks: $(awk '{print $3}' "$work/after" | sort | uniq -d | tr '\n' ' ')"
t=$(pods_table)
n_pods=$(grep -c . <<<"$t" || true)
off=$(awk '$2 != $3' <<<"$t" | wc -l)
[[ $n_pods == 20 && $(awk '{print $1}' <<<"$t" | sort -u | wc -l) == 20 ]] && ok "20 pods for 20 ranks, no duplicates" ||
  fail "$n_pods pods for 20 ranks"
[[ $off == 0 ]] && ok "every pod bound to its planned node" || fail "$off pods off their planned node"
# The restarted extender knows the plans (from the API, not from memory): a filter for rank 0 of fa
# over every node passes only the planned node.
planned=$(awk '$1 == "fa" && $2 == 0 {print $3}' "$work/after")
pod0=$(kc -n "$ns" get pod fa-0 -o json | jq -c '.spec.nodeName = null')
printf '{"Pod":%s,"NodeNames":[%s]}' "$pod0" "$names_json" >"$work/rank0.json"
code=$(post filter "$work/rank0.json")
passed=$(jq -r '.NodeNames | join(",")' "$work/reply" 2>/dev/null || true)
if [[ $code == 200 && $passed == "$planned" ]]; then
  ok "restarted extender: filter for fa-0 passes only its planned node $planned"
elif [[ $code == 200 && -z $passed ]] && ! grep -qx "$planned" <<<"$node_names"; then
  ok "restarted extender: filter for fa-0 passes none of the first 36 nodes ($planned is not among them)"
else
  fail "restarted extender: filter for fa-0 -> HTTP $code passes '$passed', planned $planned"
fi

# ------------------------------------------------------------------------------------------------
log "6. kube-apiserver restart under the running operator, extender and kube-scheduler"
ranks | sort >"$work/before-restart"
"$lc" restart-apiserver --state "$state" >"$work/restart-apiserver.log" 2>&1 || fail "restart-apiserver failed"
job fe 4 | kc -n "$ns" apply -f - >/dev/null
if wait_until 90 all_running 5; then
  ok "a job created after the restart is admitted, bound and Running; the others still Running"
else
  fail "after the apiserver restart: $(jobs_state | tr '\n' ' ')"
fi
ranks | sort >"$work/after-restart"
[[ $(join <(awk '{print $1 "/" $2, $3}' "$work/before-restart" | sort) <(awk '{print $1 "/" $2, $3}' "$work/after-restart" | sort) |
  awk '$2 != $3' | wc -l) == 0 ]] && ok "no placement changed across the restart" || fail "placements changed across the restart"
kill -0 "$op_pid" 2>/dev/null && kill -0 "$ext_pid" 2>/dev/null && wait_url 30 "$url/readyz" &&
  ok "operator and extender alive, extender ready" || fail "operator or extender gone or not ready after the apiserver restart"

# ------------------------------------------------------------------------------------------------
log "7. SIGKILL of the kube-scheduler serving nvl72-scheduler while a job is admitted"
kill -KILL "$sched_pid" 2>/dev/null || fail "kube-scheduler was not running"
job ff 4 | kc -n "$ns" apply -f - >/dev/null
ff_pods() { pods_table | grep '^ff-' || true; }
ff_created() { [[ $(ff_pods | grep -c .) == 4 ]]; }
if wait_until 60 ff_created; then
  sleep 5  # time for any other scheduler to (wrongly) take them
  unbound=$(ff_pods | awk '$3 == "-"' | wc -l)
  [[ $unbound == 4 ]] && ok "job ff admitted, its 4 pods created and left unbound while no nvl72-scheduler runs" ||
    fail "with the scheduler dead $((4 - unbound)) of ff's pods were bound: $(ff_pods | tr '\n' ';')"
else
  fail "ff's pods not created: $(jobs_state | tr '\n' ' ') $(pods_table | tr '\n' ';')"
fi
start_scheduler
if wait_until 90 all_running 6; then
  off_plan=$(ff_pods | awk '$2 != $3' | wc -l)
  [[ $off_plan == 0 ]] && ok "restarted kube-scheduler bound ff's pods to their planned nodes; all 6 jobs Running" ||
    fail "ff pods off their plan: $(ff_pods | tr '\n' ';')"
else
  fail "after the kube-scheduler restart: $(jobs_state | tr '\n' ' ') $(ff_pods | tr '\n' ';')"
fi

e2e_end
