#!/usr/bin/env bash
# A stand-in exec credential plugin (client.authentication.k8s.io/v1) for exec_plugin_e2e, in the
# role `aws eks get-token` plays on EKS: each run issues a real service-account token with
# `kubectl create token`, bound to a Secret the run creates (deleting that Secret revokes the
# token, as a cloud revokes a session), and reports it as expiring after $PLUGIN_DIR/ttl seconds
# (default 20: much sooner than the token itself, so clients run the plugin again early).
#
# Env (set by the kubeconfig's exec env): PLUGIN_DIR, PLUGIN_KUBECTL, PLUGIN_ADMIN_KUBECONFIG,
# PLUGIN_NAMESPACE, PLUGIN_SA. PLUGIN_MODE=fail|garbage|hang makes it misbehave.
# Appends "<run> <epoch> <secret> <interactive> <cluster server>" to $PLUGIN_DIR/runs and the token
# to $PLUGIN_DIR/tokens (so the test can check that no log shows one).
set -euo pipefail
dir=$PLUGIN_DIR
case ${PLUGIN_MODE:-} in
  fail) echo "the SSO session expired: run 'login' again" >&2; exit 4 ;;
  garbage) echo "token=not-json"; exit 0 ;;
  hang) sleep 600 ;;
esac
exec 9>>"$dir/lock"
flock 9
run=$(($(wc -l <"$dir/runs" 2>/dev/null || echo 0) + 1))
secret=exec-bound-$run
k() { "$PLUGIN_KUBECTL" --kubeconfig "$PLUGIN_ADMIN_KUBECONFIG" -n "$PLUGIN_NAMESPACE" "$@"; }
k create secret generic "$secret" >/dev/null
token=$(k create token "$PLUGIN_SA" --duration 10m --bound-object-kind Secret --bound-object-name "$secret")
ttl=$(cat "$dir/ttl" 2>/dev/null || echo 20)
expiry=$(date -u -d "+$ttl seconds" +%Y-%m-%dT%H:%M:%SZ)
info=${KUBERNETES_EXEC_INFO:-{\}}
echo "$run $(date +%s) $secret $(jq -r '.spec.interactive' <<<"$info") $(jq -r '.spec.cluster.server // "-"' <<<"$info")" >>"$dir/runs"
echo "$token" >>"$dir/tokens"
jq -n --arg t "$token" --arg e "$expiry" \
  '{apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential",
    status: {token: $t, expirationTimestamp: $e}}'
