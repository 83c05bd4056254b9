#!/usr/bin/env bash
# e2e of exec credential plugins (docs/kube-client.md), the way EKS, GKE, AKS and OKE kubeconfigs
# authenticate, on the real local control plane. The plugin is tests/e2e/exec-credential-plugin.sh:
# real service-account tokens (`kubectl create token`, bound to a Secret per run) that it says
# expire after a few seconds.
#  1. `kubectl nvl72 racks` with a kubeconfig whose user is that plugin works; the plugin ran once,
#     not interactively, and got the cluster's server (provideClusterInfo);
#  2. a missing plugin, a failing one, one printing garbage and one that hangs give clear errors
#     naming the plugin (with the install hint when missing), and no crash;
#  3. nvl72-operator --kubeconfig (that kubeconfig) admits a job; the plugin runs again after each
#     expiry (20 s) while the operator keeps working;
#  4. the plugin's current token revoked (its Secret deleted) while the plugin says it is good for an
#     hour: the API server answers 401 (once its token cache, up to 10 s, lets go), the plugin runs
#     again, and the operator admits the next job and finalizes the deletions;
#  5. no token appears in the operator's log or in kubectl-nvl72's output.
#
#   tests/e2e/exec_plugin_e2e_test.sh OPERATOR KUBECTL_NVL72
# Env: NVL72_CLUSTER_STATE=DIR reuses a running cluster.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
op_bin=${1:?usage: exec_plugin_e2e_test.sh OPERATOR KUBECTL_NVL72}
cli_bin=${2:?usage: exec_plugin_e2e_test.sh OPERATOR KUBECTL_NVL72}
e2e_name=exec-plugin-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"

e2e_cluster "$repo"
ns=exec-e2e-$(date +%s)
sa=exec-user
workdir=$(mktemp -d /tmp/nvl72-exec-e2e.XXXXXX)
op_pid=
cleanup() {
  stop_pid "$op_pid"
  kc delete clusterrolebinding "$ns-$sa" --wait=false >/dev/null 2>&1 || true
  e2e_release_namespace "$ns"
  if ((failures > 0)); then
    log "plugin runs:"; cat "$workdir/runs" >&2 2>/dev/null || true
    tail_logs "$workdir" 30
  fi
  e2e_cluster_down "$repo"
  rm -rf "$workdir"
}
trap cleanup EXIT

e2e_namespace "$repo" "$ns" || { fail "namespace $ns not ready"; exit 1; }
kc -n "$ns" create serviceaccount "$sa" >/dev/null
kc create clusterrolebinding "$ns-$sa" --clusterrole cluster-admin --serviceaccount "$ns:$sa" >/dev/null

# exec_kubeconfig FILE COMMAND [MODE]: a kubeconfig whose user runs COMMAND (PLUGIN_MODE=MODE).
exec_kubeconfig() {
  cat >"$1" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $NVL72_APISERVER_URL
    certificate-authority: $NVL72_CA_FILE
contexts:
- name: exec@local
  context: {cluster: local, user: exec, namespace: $ns}
current-context: exec@local
users:
- name: exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: $2
      args: []
      env:
      - {name: PLUGIN_DIR, value: $workdir}
      - {name: PLUGIN_KUBECTL, value: $NVL72_KUBECTL}
      - {name: PLUGIN_ADMIN_KUBECONFIG, value: $KUBECONFIG}
      - {name: PLUGIN_NAMESPACE, value: $ns}
      - {name: PLUGIN_SA, value: $sa}
      - {name: PLUGIN_MODE, value: "${3:-}"}
      installHint: |
        The exec plugin of this kubeconfig is missing.
        Install it with: apt install nvl72-test-plugin
      interactiveMode: IfAvailable
      provideClusterInfo: true
YAML
}
runs() { wc -l <"$workdir/runs" 2>/dev/null || echo 0; }
last_run() { tail -n 1 "$workdir/runs"; }
kc_exec=$workdir/kubeconfig-exec
exec_kubeconfig "$kc_exec" "$here/exec-credential-plugin.sh"

# --- 1. kubectl nvl72 through the plugin ---------------------------------------------------------
f=$failures
echo 3600 >"$workdir/ttl"
if out=$("$cli_bin" --kubeconfig "$kc_exec" racks </dev/null 2>&1); then
  grep -q '^DOMAIN .*LARGEST GANG' <<<"$out" || fail "no rack map: $out"
  [[ $(runs) == 1 ]] || fail "the plugin ran $(runs) times for one command, not once"
  read -r _ _ _ interactive server <<<"$(last_run)"
  [[ $interactive == false ]] || fail "a run without a terminal was interactive: $(last_run)"
  [[ $server == "$NVL72_APISERVER_URL" ]] || fail "KUBERNETES_EXEC_INFO had server '$server'"
  cli_out=$out
else
  fail "kubectl nvl72 racks with the exec kubeconfig: $out"
fi
((failures > f)) || ok "kubectl nvl72 racks through the exec plugin (1 run, not interactive, cluster info given)"

# --- 2. plugins that misbehave ----------------------------------------------------------------
f=$failures
# expect_error NAME PATTERN KUBECONFIG: kubectl-nvl72 fails (not a crash) with PATTERN in its message.
expect_error() {
  local out rc=0
  out=$(timeout 120 "$cli_bin" --kubeconfig "$3" racks </dev/null 2>&1) || rc=$?
  if ((rc == 0 || rc >= 124)); then
    fail "$1: exit code $rc: $out"
  elif ! grep -q -- "$2" <<<"$out"; then
    fail "$1: no '$2' in: $out"
  else
    log "  $1: $(head -n 1 <<<"$out")"
  fi
}
exec_kubeconfig "$workdir/kc-missing" "nvl72-no-such-plugin"
expect_error missing "apt install nvl72-test-plugin" "$workdir/kc-missing"
for mode in fail garbage; do
  exec_kubeconfig "$workdir/kc-$mode" "$here/exec-credential-plugin.sh" "$mode"
done
expect_error failing "failed with exit code 4: the SSO session expired" "$workdir/kc-fail"
expect_error garbage "printed no ExecCredential JSON" "$workdir/kc-garbage"
exec_kubeconfig "$workdir/kc-hang" "$here/exec-credential-plugin.sh" hang
t0=$SECONDS
expect_error hanging "no answer within 30.0 s" "$workdir/kc-hang"
log "  the hanging plugin was killed after $((SECONDS - t0)) s"
((failures > f)) || ok "missing, failing, garbage-printing and hanging plugins: clear errors that name the plugin"

# --- 3. the operator through the plugin; runs again on expiry ----------------------------------
f=$failures
echo 20 >"$workdir/ttl"
KUBECONFIG=$kc_exec start_operator "$op_bin" "$ns" "$workdir/operator.log" --leader-elect \
  --lease-namespace "$ns" </dev/null || { fail "operator with the exec kubeconfig not ready"; exit 1; }
submit() {  # NAME: a 2-rank Required job
  kc -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: nvl72.dev/v1alpha1
kind: NVL72Job
metadata: {name: $1}
spec:
  replicas: 2
  gpusPerReplica: 4
  topology: {mode: Required}
  template:
    spec:
      containers: [{name: c, image: busybox:1.36, command: [sleep, "3600"]}]
YAML
}
admitted() { [[ $(job_json "$1" | jq '.status.placement.ranks // [] | length') == 2 ]]; }
submit exec-a
wait_until 60 admitted exec-a || fail "the operator did not admit exec-a through the plugin"
before=$(runs)
wait_until 60 eval '(( $(runs) >= before + 2 ))' ||
  fail "the plugin did not run again after its 20-s expiry: $(runs) runs, $before before"
read -r _ t1 _ < <(tail -n 2 "$workdir/runs" | head -n 1)
read -r _ t2 _ < <(last_run)
result "exec_plugin_rerun_interval_s $((t2 - t1))"
((t2 - t1 >= 19)) || fail "the plugin ran again after $((t2 - t1)) s, before its 20-s expiry"
submit exec-b
wait_until 60 admitted exec-b || fail "the operator did not admit exec-b after the token changed"
((failures > f)) || ok "operator --kubeconfig through the plugin: admitted 2 jobs, the plugin ran again after each 20-s expiry ($(runs) runs)"

# --- 4. revoked token: 401, the plugin runs again at once --------------------------------------
f=$failures
echo 3600 >"$workdir/ttl"
# the next run (at the current credential's expiry) says it is good for an hour
n=$(runs)
wait_until 60 eval '(( $(runs) > n ))' || fail "no run after the 20-s expiry"
sleep 2
n=$(runs)
read -r _ _ secret _ <<<"$(last_run)"
t0=$(now_ns)
kc -n "$ns" delete secret "$secret" >/dev/null
if wait_until 60 eval '(( $(runs) > n ))'; then
  result "exec_plugin_rerun_after_revocation_ms $(ms_since "$t0")"
else
  fail "the plugin did not run again after its token was revoked ($secret deleted)"
fi
submit exec-c
wait_until 60 admitted exec-c || fail "the operator did not admit exec-c after the revocation"
# The operator (through the plugin) finalizes the deletion: no scheduler serves these pods here.
kc -n "$ns" delete nvj --all --wait=true --timeout=60s >/dev/null || fail "the jobs were not deleted"
((failures > f)) || ok "revoked token: the API server's 401 ran the plugin again; the operator admitted exec-c and deleted the jobs"

# --- 5. no token in any output ----------------------------------------------------------------
f=$failures
while read -r token; do
  [[ -n $token ]] || continue
  grep -qF "${token: -24}" "$workdir/operator.log" && fail "a token is in the operator's log"
  grep -qF "${token: -24}" <<<"${cli_out:-}" && fail "a token is in kubectl-nvl72's output"
done <"$workdir/tokens"
((failures > f)) || ok "no token in the operator's log or kubectl-nvl72's output ($(wc -l <"$workdir/tokens") tokens checked)"

e2e_end
