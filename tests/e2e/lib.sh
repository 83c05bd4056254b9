# Small, generic helpers for the e2e scripts (source it; bash only, no python/jq needed):
#   e2e_free_port                  a TCP port of 127.0.0.1 that nothing listens on, below the
#                                  ephemeral range (so an outgoing connection cannot take it)
#   e2e_wait_until SECONDS CMD...  runs CMD every 0.2 s until it succeeds; 1 after the deadline
#   e2e_wait_url SECONDS URL       e2e_wait_until for an HTTP 2xx from URL
#   e2e_start LOGFILE CMD...       starts CMD in the background (stdout+stderr appended to LOGFILE),
#                                  sets E2E_PID and remembers it for e2e_stop_all
#   e2e_stop PID [GRACE_S]         SIGTERM, SIGKILL after GRACE_S (default 10), reaps it
#   e2e_stop_all                   e2e_stop for every process e2e_start started (for an EXIT trap)
# shellcheck shell=bash

e2e_free_port() {
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
  echo "e2e_free_port: no free port in $lo-$hi" >&2
  return 1
}

e2e_wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

e2e_wait_url() { e2e_wait_until "$1" curl -sf --max-time 2 -o /dev/null "$2"; }

E2E_PIDS=()
e2e_start() {
  local logfile=$1
  shift
  "$@" >>"$logfile" 2>&1 &
  E2E_PID=$!
  E2E_PIDS+=("$E2E_PID")
}

e2e_stop() {
  local pid=$1 grace=${2:-10} i
  [[ -n $pid ]] || return 0
  if kill -TERM "$pid" 2>/dev/null; then
    for ((i = 0; i < grace * 4; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

e2e_stop_all() {
  local pid
  for pid in "${E2E_PIDS[@]}"; do e2e_stop "$pid" 5; done
  E2E_PIDS=()
}
