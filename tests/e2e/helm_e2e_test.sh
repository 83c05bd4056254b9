#!/usr/bin/env bash
# e2e test of charts/nvl72-operator against a real API server (scripts/local-cluster, own state dir):
#  1. the chart's CRDs are in sync with crds/; `helm lint --strict` (defaults, and everything on);
#  2. `helm template | kubectl apply --dry-run=server` (defaults, and everything on, with stub
#     Prometheus Operator CRDs so the ServiceMonitor / PrometheusRule are validated too);
#  3. `helm install`: every object exists, pods run non-root with a read-only root filesystem, no
#     capabilities and seccomp RuntimeDefault;
#  4. RBAC with `kubectl auth can-i --as=system:serviceaccount:NS:SA`: the verbs each component needs
#     are allowed, Secrets and node deletion are denied;
#  5. the real kube-scheduler runs with the chart's KubeSchedulerConfiguration under the scheduler
#     ServiceAccount's token and takes its own Lease (proves config + RBAC);
#  6. `helm upgrade` changes replicas and flags; `helm uninstall` leaves nothing of the release
#     behind (the CRD stays, by design: docs/helm.md).
# With OPERATOR_BINARY and EXTENDER_BINARY (host builds), after install and after upgrade: both
# binaries accept every flag the chart renders for their container.
#
#   tests/e2e/helm_e2e_test.sh [OPERATOR_BINARY EXTENDER_BINARY]
# Needs: scripts/build-tools components (built on demand by local-cluster). No container runs.
# Its own 1-rack cluster, never the shared one of $NVL72_CLUSTER_STATE: the chart's CRDs, ClusterRoles
# and the kube-scheduler with the nvl72-scheduler profile would meet the other tests' objects there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
e2e_name=helm-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"
lc=$root/scripts/local-cluster
# shellcheck source=../../scripts/versions.env
source "$root/scripts/versions.env"
chart=$root/charts/nvl72-operator
state=$(mktemp -d "${TMPDIR:-/tmp}/nvl72-helm-e2e.XXXXXX")
ns=nvl72-system rel=nvl72
op_bin=${1:-} ext_bin=${2:-}
sched_pid=
cleanup() {
  local rc=$?
  set +e
  if ((failures > 0 || rc != 0)) && [[ -f $state/sched.log ]]; then
    log "--- tail of kube-scheduler log"; tail -n 20 "$state/sched.log" >&2
  fi
  stop_pid "$sched_pid"
  if ! "$lc" down --state "$state" >/dev/null 2>&1; then
    # `down` failed: stop what local-cluster started (pid files) so nothing outlives the state dir.
    local f
    for f in "$state"/run/*.pid; do [[ -f $f ]] && kill -- "-$(<"$f")" 2>/dev/null; done
  fi
  rm -rf "$state"
}
trap cleanup EXIT
# check_rendered_flags WHEN: runs the host binaries with the args of their installed Deployment,
# $(POD_NAME) and $(POD_NAMESPACE) made literal. `--version` must exit 0 (every flag name known, every
# value of the right type); a missing kubeconfig must give exit 1, not 2: both binaries check all
# flag values (the operator skips those checks under --version) before they read the kubeconfig, and
# start nothing before that.
check_rendered_flags() {
  [[ -n $op_bin && -n $ext_bin ]] || { ok "no binaries given: rendered flags not run ($1)"; return; }
  local comp deploy b rc out f=$failures
  local -a flags
  for comp in operator extender; do
    deploy=$rel-nvl72-operator b=$op_bin
    [[ $comp == extender ]] && deploy=$rel-nvl72-operator-extender b=$ext_bin
    mapfile -t flags < <(kubectl get deploy "$deploy" -n "$ns" \
      -o jsonpath='{range .spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}' |
      sed -e "s/\$(POD_NAME)/$deploy-e2e/g" -e "s/\$(POD_NAMESPACE)/$ns/g")
    ((${#flags[@]} >= 5)) || { fail "$1: $deploy renders only ${#flags[@]} args: ${flags[*]}"; continue; }
    [[ ${flags[*]} != *'$('* ]] || { fail "$1: $deploy args reference an unknown variable: ${flags[*]}"; continue; }
    out=$("$b" "${flags[@]}" --version 2>&1) || { fail "$1: $comp refuses the chart's args: $out (args: ${flags[*]})"; continue; }
    rc=0
    out=$("$b" "${flags[@]}" --kubeconfig="$state/no-such-kubeconfig" 2>&1) || rc=$?
    ((rc == 1)) || fail "$1: $comp with the chart's args and no kubeconfig exits $rc, wanted 1 (2: a value refused): $out (args: ${flags[*]})"
  done
  ((failures > f)) || ok "$1: nvl72-operator and nvl72-extender accept every arg the chart renders"
}

# --- 1. static checks --------------------------------------------------------------------------
if "$root/scripts/sync-chart-crds" --check; then
  ok "chart CRDs match crds/"
else
  fail "charts/nvl72-operator/crds is out of sync with crds/ (run scripts/sync-chart-crds)"
fi

"$lc" up --racks 1 --state "$state" >/dev/null || { fail "local-cluster up"; exit 1; }
# shellcheck disable=SC1091
source "$state/env"
command -v helm >/dev/null || { fail "no helm on PATH after sourcing $state/env"; exit 1; }
ok "local control plane at $NVL72_APISERVER_URL, $(helm version --short)"

all_on=(--set monitoring.serviceMonitor.enabled=true --set monitoring.prometheusRule.enabled=true
  --set monitoring.dashboard.enabled=true --set extender.tls.enabled=true
  --set extender.tls.secretName=nvl72-extender-tls --set imagePullSecrets='{regcred}'
  --set operator.metricsTLS.enabled=true --set operator.metricsTLS.secretName=nvl72-metrics-tls
  --set operator.metricsTLS.clientAuth=true --set monitoring.serviceMonitor.clientCertSecret=prometheus-client)
f=$failures
lint=$(helm lint --strict "$chart" 2>&1) || fail "helm lint --strict: $lint"
lint=$(helm lint --strict "$chart" "${all_on[@]}" 2>&1) || fail "helm lint --strict (everything on): $lint"
((failures > f)) || ok "helm lint --strict (defaults, everything on)"
f=$failures
if helm template x "$chart" --set placement.sparesPerDomain=-1 >/dev/null 2>&1; then
  fail "values.schema.json accepted placement.sparesPerDomain=-1"
fi
if helm template x "$chart" --set placement.spareReserve=firm >/dev/null 2>&1; then
  fail "values.schema.json accepted placement.spareReserve=firm"
fi
if helm template x "$chart" --set extender.tls.enabled=true >/dev/null 2>&1; then
  fail "extender.tls.enabled without a secretName rendered"
fi
((failures > f)) || ok "values.schema.json and required values reject bad input"

# --- 2. server-side dry run ----------------------------------------------------------------------
kubectl create namespace "$ns" >/dev/null
for kind in ServiceMonitor:servicemonitors PrometheusRule:prometheusrules; do
  kubectl apply -f - >/dev/null <<EOF || { fail "stub CRD ${kind#*:}"; exit 1; }
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ${kind#*:}.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ${kind%%:*}, plural: ${kind#*:}, listKind: ${kind%%:*}List}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
EOF
done
kubectl wait --for=condition=Established --timeout=30s crd/servicemonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com >/dev/null
for variant in defaults everything-on; do
  args=(); [[ $variant == everything-on ]] && args=("${all_on[@]}")
  out=$(helm template "$rel" "$chart" -n "$ns" --include-crds "${args[@]}" |
    kubectl apply --dry-run=server -f - 2>&1) || { fail "kubectl apply --dry-run=server ($variant): $out"; continue; }
  n=$(grep -c 'created (server dry run)' <<<"$out" || true)
  ((n >= 20)) || { fail "server dry run ($variant) created only $n objects: $out"; continue; }
  ok "helm template | kubectl apply --dry-run=server ($variant): $n objects accepted"
done

# --- 3. install ------------------------------------------------------------------------------------
out=$(helm install "$rel" "$chart" -n "$ns" --set monitoring.dashboard.enabled=true 2>&1) || { fail "helm install: $out"; exit 1; }
f=$failures
grep -q "STATUS: deployed" <<<"$out" || fail "helm install did not report deployed: $out"
grep -q "kubectl nvl72 racks" <<<"$out" || fail "NOTES.txt not shown: $out"
kubectl wait --for=condition=Established --timeout=30s crd/nvl72jobs.nvl72.dev >/dev/null || fail "NVL72Job CRD not established"
sel=app.kubernetes.io/instance=$rel
count() { kubectl get "$@" -l "$sel" -o name 2>/dev/null | grep -c . || true; }
# What follows reads the three Deployments: without them, stop here.
[[ $(count deploy -n "$ns") == 3 ]] || { fail "expected 3 Deployments: $(kubectl get deploy -n "$ns" -o name)"; exit 1; }
[[ $(count svc -n "$ns") == 2 ]] || fail "expected 2 Services: $(kubectl get svc -n "$ns" -o name)"
[[ $(count sa -n "$ns") == 3 ]] || fail "expected 3 ServiceAccounts"
[[ $(count cm -n "$ns") == 2 ]] || fail "expected 2 ConfigMaps (scheduler config, dashboard)"
[[ $(count clusterrole) == 4 ]] || fail "expected 4 ClusterRoles (operator, extender, NVL72Job view and edit)"
[[ $(count clusterrolebinding) == 4 ]] || fail "expected 4 ClusterRoleBindings"
[[ $(count rolebinding -n kube-system) == 1 ]] || fail "expected the auth-reader RoleBinding in kube-system"
[[ $(kubectl get deploy "$rel-nvl72-operator" -n "$ns" -o jsonpath='{.spec.replicas}') == 2 ]] || fail "operator replicas != 2"
args=$(kubectl get deploy "$rel-nvl72-operator" -n "$ns" -o jsonpath='{.spec.template.spec.containers[0].args}')
for want in --leader-elect=true "--lease-name=$rel-nvl72-operator-leader" "--lease-namespace=$ns" --spares-per-domain=2 --spare-reserve=soft; do
  grep -q -- "$want" <<<"$args" || fail "operator args lack $want: $args"
done
for d in "$rel-nvl72-operator" "$rel-nvl72-operator-extender" "$rel-nvl72-operator-scheduler"; do
  sc=$(kubectl get deploy "$d" -n "$ns" -o jsonpath='{.spec.template.spec.securityContext.runAsNonRoot} {.spec.template.spec.securityContext.seccompProfile.type} {.spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem} {.spec.template.spec.containers[0].securityContext.capabilities.drop} {.spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation} {.spec.template.spec.containers[0].readinessProbe.httpGet.path} {.spec.template.spec.containers[0].resources.requests.cpu}')
  [[ $sc == 'true RuntimeDefault true ["ALL"] false /readyz 100m' ]] || fail "$d security context / probes / resources: $sc"
done
cfg=$(kubectl get cm "$rel-nvl72-operator-scheduler-config" -n "$ns" -o jsonpath='{.data.config\.yaml}')
grep -q "schedulerName: nvl72-scheduler" <<<"$cfg" || fail "scheduler profile missing: $cfg"
grep -q "urlPrefix: \"http://$rel-nvl72-operator-extender.$ns.svc:8888\"" <<<"$cfg" || fail "extender URL: $cfg"
grep -q "resourceName: $rel-nvl72-operator-scheduler" <<<"$cfg" || fail "scheduler lease: $cfg"
((failures > f)) || ok "helm install: 3 Deployments, 2 Services, 3 ServiceAccounts, RBAC, scheduler config; pods non-root, read-only, no caps, seccomp"
check_rendered_flags install

# --- 4. RBAC ---------------------------------------------------------------------------------------
can() { # SA VERB RESOURCE [extra kubectl auth can-i args]: exit 0 if allowed
  local sa=$1; shift
  kubectl auth can-i --as="system:serviceaccount:$ns:$sa" "$@" >/dev/null 2>&1
}
expect() { # yes|no SA VERB RESOURCE [args]
  local want=$1; shift
  if can "$@"; then [[ $want == yes ]] || fail "$1 may $2 $3 ${*:4} (must not)"
  else [[ $want == no ]] || fail "$1 may not $2 $3 ${*:4} (needs to)"; fi
}
op=$rel-nvl72-operator ext=$rel-nvl72-operator-extender sch=$rel-nvl72-operator-scheduler
f=$failures
for v in get list watch update patch; do expect yes "$op" "$v" nvl72jobs.nvl72.dev -A; done
expect yes "$op" update nvl72jobs.nvl72.dev --subresource=status -n team-a
expect yes "$op" update nvl72jobs.nvl72.dev --subresource=finalizers -n team-a
for v in create delete list watch get; do expect yes "$op" "$v" pods -n team-a; done
for v in create delete get; do expect yes "$op" "$v" services -n team-a; done
expect yes "$op" create pods --subresource=eviction -n team-a
expect yes "$op" create events -n team-a
expect yes "$op" create events.events.k8s.io -n team-a
for v in get list watch; do expect yes "$op" "$v" nodes; expect yes "$op" "$v" priorityclasses.scheduling.k8s.io; done
expect yes "$op" create leases.coordination.k8s.io -n "$ns"
expect yes "$op" update "leases.coordination.k8s.io/$rel-nvl72-operator-leader" -n "$ns"
expect no "$op" update leases.coordination.k8s.io/kube-scheduler -n kube-system
expect no "$op" update nodes
expect no "$op" delete nvl72jobs.nvl72.dev -n team-a
for v in list watch get; do
  expect yes "$ext" "$v" nodes; expect yes "$ext" "$v" pods -A; expect yes "$ext" "$v" nvl72jobs.nvl72.dev -A
done
expect yes "$ext" create pods --subresource=binding -n team-a
expect yes "$ext" create events -n team-a
expect no "$ext" create pods -n team-a
expect no "$ext" update nvl72jobs.nvl72.dev -n team-a
expect yes "$sch" create pods --subresource=binding -n team-a
expect yes "$sch" list nodes
expect yes "$sch" watch persistentvolumeclaims -A
expect yes "$sch" get "leases.coordination.k8s.io/$rel-nvl72-operator-scheduler" -n "$ns"
expect yes "$sch" update "leases.coordination.k8s.io/$rel-nvl72-operator-scheduler" -n "$ns"
for sa in "$op" "$ext" "$sch"; do
  for v in get list watch; do expect no "$sa" "$v" secrets -A; expect no "$sa" "$v" secrets -n "$ns"; done
  expect no "$sa" delete nodes
  expect no "$sa" create clusterrolebindings.rbac.authorization.k8s.io
done
((failures > f)) || ok "RBAC: needed verbs allowed; secrets, node deletion, escalation denied (auth can-i as each ServiceAccount)"

# Namespace users: kube-controller-manager's clusterrole-aggregation controller copies the chart's
# NVL72Job rules into the standard edit, admin and view roles, so a user bound to edit submits jobs.
kubectl create namespace team-u >/dev/null
kubectl create serviceaccount editor -n team-u >/dev/null
kubectl create serviceaccount viewer -n team-u >/dev/null
kubectl create rolebinding editor --clusterrole=edit --serviceaccount=team-u:editor -n team-u >/dev/null
kubectl create rolebinding viewer --clusterrole=view --serviceaccount=team-u:viewer -n team-u >/dev/null
user_can() { kubectl auth can-i --as="system:serviceaccount:team-u:$1" "${@:2}" -n team-u >/dev/null 2>&1; }
for _ in $(seq 60); do user_can editor create nvl72jobs.nvl72.dev && break; sleep 0.5; done
f=$failures
user_can editor create nvl72jobs.nvl72.dev || fail "a user bound to edit cannot create NVL72Jobs (aggregated roles)"
user_can editor delete nvl72jobs.nvl72.dev || fail "a user bound to edit cannot delete NVL72Jobs"
user_can editor update nvl72jobs.nvl72.dev --subresource=status && fail "a user bound to edit may write NVL72Job status"
user_can viewer list nvl72jobs.nvl72.dev || fail "a user bound to view cannot list NVL72Jobs"
user_can viewer create nvl72jobs.nvl72.dev && fail "a user bound to view may create NVL72Jobs"
((failures > f)) || ok "RBAC: namespace users bound to edit submit NVL72Jobs and to view read them (aggregated ClusterRoles)"

# Everything else denied: what `kubectl auth can-i --list` grants the operator and the extender, minus
# what every ServiceAccount may do (a bare one's list: discovery, self-reviews), must be exactly the
# allow-list below, in an application namespace and in the release namespace. This list is the
# specification (what the code calls), not read from the chart.
kubectl create serviceaccount nvl72-rbac-baseline -n "$ns" >/dev/null
kubectl create namespace team-b >/dev/null 2>&1 || true
rbac_list() { # SA NAMESPACE -> one "resource|resourceName|nonResourceURL|verb" per line
  kubectl auth can-i --list --as="system:serviceaccount:$ns:$1" -n "$2" 2>/dev/null | python3 -c '
import re, sys
for line in sys.stdin.read().splitlines()[1:]:
    m = re.match(r"^\s*(\S+)?\s*\[([^\]]*)\]\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s*$", line)
    if not m:
        print("UNPARSED|" + line); continue
    res, urls, names, verbs = m.group(1) or "", m.group(2).split(), m.group(3).split(), m.group(4).split()
    for v in verbs:
        for u in urls or [""]:
            for n in names or [""]:
                print(f"{res}|{n}|{u}|{v}")' | sort -u
}
expected_rbac() { # WHO WHERE(app|release) -> the allow-list lines
  local who=$1 where=$2 r v
  case $who in
    operator)
      for v in get list watch update patch; do echo "nvl72jobs.nvl72.dev|||$v"; done
      for v in get update patch; do echo "nvl72jobs.nvl72.dev/status|||$v"; done
      echo "nvl72jobs.nvl72.dev/finalizers|||update"
      for v in get list watch create delete; do echo "pods|||$v"; echo "services|||$v"; done
      echo "pods/eviction|||create"
      for v in get list watch; do echo "nodes|||$v"; echo "priorityclasses.scheduling.k8s.io|||$v"; done
      # stock gang scheduling (--pod-groups): a Workload and PodGroups per job
      for r in workloads podgroups; do for v in get list create delete; do echo "$r.scheduling.k8s.io|||$v"; done; done
      # multi-node NVLink (--compute-domains): a ComputeDomain per segment, its channel template
      for v in get list create delete; do echo "computedomains.resource.nvidia.com|||$v"; done
      echo "resourceclaimtemplates.resource.k8s.io|||get"
      for r in events events.events.k8s.io; do for v in create patch update; do echo "$r|||$v"; done; done
      if [[ $where == release ]]; then
        echo "leases.coordination.k8s.io|||create"
        for v in get watch update patch; do echo "leases.coordination.k8s.io|$rel-nvl72-operator-leader||$v"; done
      fi ;;
    extender)
      for v in get list watch; do echo "nodes|||$v"; echo "pods|||$v"; echo "nvl72jobs.nvl72.dev|||$v"; done
      echo "pods/binding|||create"
      for r in events events.events.k8s.io; do for v in create patch update; do echo "$r|||$v"; done; done ;;
  esac | sort -u
}
for who in operator extender; do
  sa=$op; [[ $who == extender ]] && sa=$ext
  f=$failures
  for where in app release; do
    nsx=team-b; [[ $where == release ]] && nsx=$ns
    granted=$(comm -23 <(rbac_list "$sa" "$nsx") <(rbac_list nvl72-rbac-baseline "$nsx"))
    [[ -n $granted ]] || { fail "kubectl auth can-i --list as $sa in $nsx returned nothing"; continue; }
    grep -q '^UNPARSED' <<<"$granted" && { fail "cannot read kubectl auth can-i --list: $(grep '^UNPARSED' <<<"$granted")"; continue; }
    extra=$(comm -23 <(echo "$granted") <(expected_rbac "$who" "$where"))
    missing=$(comm -13 <(echo "$granted") <(expected_rbac "$who" "$where"))
    [[ -z $extra ]] || fail "the $who may do more than it needs in namespace $nsx: $(tr '\n' ' ' <<<"$extra")"
    [[ -z $missing ]] || fail "the $who lacks in namespace $nsx: $(tr '\n' ' ' <<<"$missing")"
  done
  ((failures > f)) || ok "RBAC: the $who's grants (kubectl auth can-i --list, minus a bare ServiceAccount's) equal its allow-list of $(expected_rbac "$who" release | grep -c .) resource/verb pairs; everything else is denied"
done
kubectl delete serviceaccount nvl72-rbac-baseline -n "$ns" >/dev/null
kubectl delete namespace team-b --wait=false >/dev/null 2>&1 || true

# --- 5. the real kube-scheduler with the chart's config, as the scheduler ServiceAccount -------------
token=$(kubectl create token "$sch" -n "$ns" --duration=10m) || { fail "kubectl create token $sch"; exit 1; }
cat >"$state/sched.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$NVL72_APISERVER_URL", certificate-authority: "$NVL72_CA_FILE"}}]
users: [{name: u, user: {token: "$token"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
EOF
# The in-cluster config of the pod becomes clientConnection.kubeconfig here; everything else as rendered.
echo "$cfg" | sed 's|^clientConnection:$|clientConnection:\n  kubeconfig: '"$state"'/sched.kubeconfig|' >"$state/sched.yaml"
grep -q "kubeconfig: $state/sched.kubeconfig" "$state/sched.yaml" ||
  { fail "could not point the scheduler config at its kubeconfig: $(cat "$state/sched.yaml")"; exit 1; }
port=$(free_port)
"$NVL72_KUBE_SCHEDULER" ${NVL72_FEATURE_GATES:+--feature-gates=$NVL72_FEATURE_GATES} --config="$state/sched.yaml" --secure-port="$port" --bind-address=127.0.0.1 \
  --authentication-kubeconfig="$state/sched.kubeconfig" --authorization-kubeconfig="$state/sched.kubeconfig" \
  --cert-dir="$state/sched-certs" >"$state/sched.log" 2>&1 &
sched_pid=$!
holder() { kubectl get lease "$sch" -n "$ns" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null | grep -q .; }
wait_until 60 holder || { fail "kube-scheduler did not take lease $ns/$sch"; exit 1; }
f=$failures
sleep 2
kill -0 "$sched_pid" 2>/dev/null || fail "kube-scheduler exited"
if grep -iE 'forbidden|is not authorized' "$state/sched.log" | grep -v 'extension-apiserver-authentication' >"$state/forbidden.log"; then
  fail "kube-scheduler hit RBAC denials: $(head -n 5 "$state/forbidden.log")"
fi
stop_pid "$sched_pid"; sched_pid=
kubectl delete lease "$sch" -n "$ns" >/dev/null
((failures > f)) || ok "kube-scheduler $K8S_VERSION ran with the chart's config as $sch: took lease $ns/$sch, no RBAC denials"

# --- 6. upgrade and uninstall -----------------------------------------------------------------------
op_args=$(kubectl get deploy "$op" -n "$ns" -o jsonpath='{.spec.template.spec.containers[0].args}')
f=$failures
for flag in --cordoned-ranks=keep --defrag=true --defrag-max-concurrent-moves=2 --defrag-grace-seconds=30; do
  [[ $op_args == *"\"$flag\""* ]] || fail "install: operator args lack $flag: $op_args"
done
[[ $op_args != *--recovery-wait-seconds* ]] || fail "install: --recovery-wait-seconds set although recovery.waitSeconds is null"
out=$(helm upgrade "$rel" "$chart" -n "$ns" --set operator.replicas=3 --set placement.sparesPerDomain=1 \
  --set scheduler.image.tag=v1.34.5 --set operator.recovery.waitSeconds=45 --set operator.defrag.enabled=false \
  2>&1) || { fail "helm upgrade: $out"; exit 1; }
[[ $(helm status "$rel" -n "$ns" -o json | grep -o '"version":[0-9]*' | head -n 1) == '"version":2' ]] || fail "release revision is not 2"
[[ $(kubectl get deploy "$op" -n "$ns" -o jsonpath='{.spec.replicas}') == 3 ]] || fail "upgrade: operator replicas != 3"
kubectl get deploy "$op" -n "$ns" -o jsonpath='{.spec.template.spec.containers[0].args}' | grep -q -- --spares-per-domain=1 || fail "upgrade: operator flag not changed"
kubectl get deploy "$ext" -n "$ns" -o jsonpath='{.spec.template.spec.containers[0].args}' | grep -q -- --spares-per-domain=1 || fail "upgrade: extender flag not changed"
op_args=$(kubectl get deploy "$op" -n "$ns" -o jsonpath='{.spec.template.spec.containers[0].args}')
[[ $op_args == *'"--recovery-wait-seconds=45"'* && $op_args == *'"--defrag=false"'* ]] ||
  fail "upgrade: recovery / defrag values not passed: $op_args"
[[ $(count cm -n "$ns") == 1 ]] || fail "upgrade: the dashboard ConfigMap (now disabled) was not removed"
((failures > f)) || ok "helm upgrade: revision 2, replicas and flags changed, disabled objects removed"
check_rendered_flags upgrade

out=$(helm uninstall "$rel" -n "$ns" --wait --timeout 60s 2>&1) || { fail "helm uninstall: $out"; exit 1; }
f=$failures
left=""
for kind in deploy svc sa cm role rolebinding secret; do
  left+=$(kubectl get "$kind" -A -l "$sel" -o name 2>/dev/null)
done
left+=$(kubectl get clusterrole,clusterrolebinding -l "$sel" -o name 2>/dev/null)
[[ -z $left ]] || fail "left behind after uninstall: $left"
# What kube-controller-manager puts into every namespace is not the chart's.
rest=$(kubectl get all,cm,secret,sa,role,rolebinding,lease -n "$ns" -o name 2>/dev/null |
  grep -vx -e 'serviceaccount/default' -e 'configmap/kube-root-ca.crt' || true)
[[ -z $rest ]] || fail "namespace $ns not empty after uninstall: $rest"
kubectl get crd nvl72jobs.nvl72.dev >/dev/null 2>&1 || fail "helm uninstall removed the CRD (it must keep it, and the users' NVL72Jobs)"
((failures > f)) || ok "helm uninstall: nothing of the release left (CRD kept by design)"
# No NVL72Job is created here (the chart's operator never runs): the stuck check of $ns finds none.
e2e_end
