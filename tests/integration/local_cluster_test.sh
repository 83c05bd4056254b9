#!/usr/bin/env bash
# Integration test of scripts/local-cluster: brings up a cluster with 2 fake NVL72 racks in a temp
# state dir (the Kubernetes release of NVL72_K8S_VERSION, default v1.37.2), checks the versions, the
# 36 nodes (clique label, Ready, untainted), kube-controller-manager (default ServiceAccount; a node
# whose kubelet stops is marked Unknown and tainted, and is Ready and untainted again once it starts),
# that kwok runs a bound pod, that the default kube-scheduler binds a GPU pod, that the apiserver
# restarts on the same port (and kwok's watch survives it), and that `down` leaves no process behind.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
lc=$root/scripts/local-cluster
source "$root/scripts/versions.env"
state=$(mktemp -d "${TMPDIR:-/tmp}/nvl72-local-cluster-test.XXXXXX")
t0=$(date +%s)
ok() { printf '[local_cluster_test +%ss] ok: %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
fail() {
  printf '[local_cluster_test +%ss] FAIL: %s\n' "$(( $(date +%s) - t0 ))" "$*" >&2
  for f in "$state"/logs/*.log; do [[ -f $f ]] && { echo "--- tail of $f" >&2; tail -n 15 "$f" >&2; }; done
  exit 1
}
cleanup() {
  "$lc" down --state "$state" >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT
# alive PID: the process exists and is not a zombie (its reaper may be slow)
alive() { [[ -r /proc/$1/stat ]] && [[ $(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) != Z ]]; }
# wait_until TIMEOUT_S CMD...: polls CMD every 0.25 s
wait_until() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do (( $(date +%s) < deadline )) || return 1; sleep 0.25; done
}

"$lc" up --racks 2 --state "$state" || fail "local-cluster up --racks 2"
[[ -f $state/env ]] || fail "no $state/env"
# shellcheck disable=SC1091
source "$state/env"
ok "cluster up at $NVL72_APISERVER_URL"
[[ $KUBECONFIG == "$state/kubeconfig" && $NVL72_KUBECONFIG == "$state/kubeconfig" ]] || fail "env: KUBECONFIG=$KUBECONFIG"
[[ $("$lc" kubeconfig --state "$state") == "$state/kubeconfig" ]] || fail "kubeconfig subcommand"
[[ $(command -v kubectl) == "$NVL72_KUBECTL" && $NVL72_KUBECTL != /usr/bin/kubectl ]] || fail "kubectl on PATH is $(command -v kubectl), not the built $NVL72_KUBECTL"
versions=$(kubectl version -o json) || fail "kubectl version"
[[ $(grep -c "\"gitVersion\": \"$K8S_VERSION\"" <<<"$versions") == 2 ]] || fail "kubectl/apiserver version is not $K8S_VERSION: $versions"
ok "built kubectl $K8S_VERSION talks to kube-apiserver $K8S_VERSION"

# 36 nodes, 2 cliques of 18, all Ready with 4 GPUs.
node_report() {
  kubectl get nodes -l nvidia.com/gpu.clique -o go-template --template='{{range .items}}{{.metadata.name}} {{index .metadata.labels "nvidia.com/gpu.clique"}} {{index .status.allocatable "nvidia.com/gpu"}} {{range .status.conditions}}{{if eq .type "Ready"}}{{.status}}{{end}}{{end}}{{"\n"}}{{end}}'
}
nodes_ready() { [[ $(node_report | awk '$3 == "4" && $4 == "True"' | wc -l) == 36 ]]; }
wait_until 30 nodes_ready || fail "expected 36 Ready nodes with 4 GPUs and the clique label, got:
$(node_report)"
[[ $(node_report | awk '{ print $2 }' | sort | uniq -c | awk '$1 == 18' | wc -l) == 2 ]] \
  || fail "expected 2 cliques of 18 nodes: $(node_report | awk '{ print $2 }' | sort | uniq -c)"
grep -q '^rack1-node17 ' <<<"$(node_report)" || fail "no node rack1-node17"
ok "36 Ready nodes in 2 cliques of 18"

# kube-controller-manager: same release, its controllers at work.
kcm_version=$("$NVL72_KUBE_CONTROLLER_MANAGER" --version) || fail "kube-controller-manager --version"
[[ $kcm_version == "Kubernetes $K8S_VERSION" ]] || fail "kube-controller-manager is '$kcm_version', not $K8S_VERSION"
[[ $(curl -sk "$NVL72_KCM_URL/healthz") == ok ]] || fail "kube-controller-manager /healthz at '$NVL72_KCM_URL'"
[[ -z $(kubectl get nodes -o jsonpath='{.items[*].spec.taints}') ]] || fail "nodes still tainted: $(kubectl get nodes -o jsonpath='{.items[*].spec.taints}')"
kubectl -n default get serviceaccount default >/dev/null || fail "no default ServiceAccount (serviceaccount controller)"
ok "kube-controller-manager $K8S_VERSION runs: new nodes untainted, default ServiceAccount made"
ready_of() { kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }
taints_of() { kubectl get node "$1" -o jsonpath='{range .spec.taints[*]}{.key}:{.effect} {end}'; }
marked_down() { [[ $(ready_of rack1-node16) == Unknown && $(taints_of rack1-node16) == *unreachable:NoExecute* ]]; }
healthy_again() { [[ $(ready_of rack1-node16) == True && -z $(taints_of rack1-node16) ]]; }
"$lc" kubelet stop rack1-node16 --state "$state" || fail "kubelet stop"
wait_until 60 marked_down || fail "rack1-node16 is Ready='$(ready_of rack1-node16)' with taints '$(taints_of rack1-node16)' 60 s after its kubelet stopped"
ok "kubelet of rack1-node16 stopped: Ready=Unknown, taints $(taints_of rack1-node16)"
"$lc" kubelet start rack1-node16 --state "$state" || fail "kubelet start"
wait_until 60 healthy_again || fail "rack1-node16 is Ready='$(ready_of rack1-node16)' with taints '$(taints_of rack1-node16)' 60 s after its kubelet started"
ok "kubelet of rack1-node16 started: Ready=True, untainted"

# A pod bound by spec.nodeName: kwok runs it.
bound_pod() { # NAME NODE
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  nodeName: $2
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {limits: {nvidia.com/gpu: 1}}
YAML
}
phase() { kubectl get pod "$1" -o 'jsonpath={.status.phase}' 2>/dev/null; }
running() { [[ $(phase "$1") == Running ]]; }
bound_pod lc-bound rack1-node17 || fail "create pod lc-bound"
wait_until 60 running lc-bound || fail "pod lc-bound is '$(phase lc-bound)', not Running, after 60 s"
ok "pod bound to rack1-node17 is Running (kwok)"

# The default kube-scheduler binds a pod that asks for a whole tray.
"$lc" scheduler start --state "$state" || fail "scheduler start"
kubectl apply -f - >/dev/null <<YAML || fail "create pod lc-scheduled"
apiVersion: v1
kind: Pod
metadata: {name: lc-scheduled, namespace: default}
spec:
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {limits: {nvidia.com/gpu: 4}}
YAML
wait_until 60 running lc-scheduled || fail "pod lc-scheduled is '$(phase lc-scheduled)', not Running, after 60 s"
ok "kube-scheduler bound lc-scheduled to $(kubectl get pod lc-scheduled -o 'jsonpath={.spec.nodeName}')"
"$lc" scheduler stop --state "$state" || fail "scheduler stop"

# restart-apiserver: same URL, data kept, a new process; kwok keeps working afterwards.
read -r old_pid _ <"$state/run/kube-apiserver.pid"
"$lc" restart-apiserver --state "$state" || fail "restart-apiserver"
read -r new_pid _ <"$state/run/kube-apiserver.pid"
[[ $old_pid != "$new_pid" ]] || fail "apiserver pid did not change ($old_pid)"
! alive "$old_pid" || fail "old apiserver pid $old_pid still running"
[[ $(kubectl get --raw /readyz) == ok ]] || fail "/readyz after restart"
running lc-bound || fail "pod lc-bound lost after the apiserver restart"
bound_pod lc-after-restart rack0-node00 || fail "create pod after restart"
wait_until 90 running lc-after-restart || fail "kwok did not run a pod created after the apiserver restart (90 s)"
ok "apiserver restarted (pid $old_pid -> $new_pid), data kept, kwok still runs pods"

"$lc" status --state "$state" >/dev/null || fail "status reports a problem"
pids=$(awk '{ print $1 }' "$state"/run/*.pid) # run/NAME.pid: "PID STARTTIME"
"$lc" down --state "$state" || fail "down"
[[ ! -e $state ]] || fail "state dir $state still exists after down"
for p in $pids; do ! alive "$p" || fail "pid $p still runs after down"; done
if pgrep -f -- "$state" >/dev/null; then fail "processes still reference $state: $(pgrep -af -- "$state")"; fi
ok "down stopped everything and removed the state dir"
echo "PASS local_cluster_test in $(( $(date +%s) - t0 )) s"
