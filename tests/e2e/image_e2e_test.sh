#!/usr/bin/env bash
# e2e test of the container image (Dockerfile) on this machine's Docker engine, no registry:
#  1. scripts/build-image builds the image, or reuses it when the sources did not change (it is
#     tagged by a hash of the build context), and runs `--version` of every binary in it;
#  2. the image runs as uid 65532 with a read-only root filesystem and holds the three binaries;
#  3. on a local control plane (scripts/local-cluster, 2 NVL72 racks, own state dir) with the chart
#     installed (CRD, ServiceAccounts, RBAC), the operator CONTAINER (host network, a mounted
#     kubeconfig carrying the operator ServiceAccount's token) admits an NVL72Job: status.placement
#     puts all ranks in one NVLink domain and the rank pods are created;
#  4. the extender CONTAINER (its own ServiceAccount's token) serves the verbs, and the real
#     kube-scheduler, run with the chart's KubeSchedulerConfiguration pointed at that container, gets
#     the rank pods bound to exactly their planned nodes (kwok then runs them);
#  5. kubectl-nvl72 from the image shows the gang in the rack map.
# NVL72_IMAGE=<ref> tests that image instead of building one. Exit 77 (ctest: skipped) when no Docker
# engine is reachable.
# Its own 2-rack cluster, never the shared one of $NVL72_CLUSTER_STATE: the operator container watches
# every namespace and its kube-scheduler serves the nvl72-scheduler profile.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
e2e_name=image-e2e
# shellcheck source=lib.sh
source "$here/lib.sh"
lc=$root/scripts/local-cluster
state=$(mktemp -d "${TMPDIR:-/tmp}/nvl72-image-e2e.XXXXXX")
ns=nvl72-system rel=nvl72 jobns=e2e
container=nvl72-image-e2e-$$ ext_container=nvl72-image-e2e-ext-$$
sched_pid=
cleanup() {
  local rc=$? c
  set +e
  if ((failures > 0 || (rc != 0 && rc != 77))); then  # 77: skipped, nothing ran
    for c in "$container" "$ext_container"; do
      if docker inspect "$c" >/dev/null 2>&1; then
        log "--- container $c log (tail)"
        docker logs --tail 30 "$c" >&2 2>&1 || true
      fi
    done
    [[ -f $state/sched.log ]] && { log "--- kube-scheduler log (tail)"; tail -n 20 "$state/sched.log" >&2; }
  fi
  stop_pid "$sched_pid"
  docker rm -f "$container" "$ext_container" >/dev/null 2>&1 || true
  if ! "$lc" down --state "$state" >/dev/null 2>&1; then
    # `down` failed: stop what local-cluster started (pid files) so nothing outlives the state dir.
    local f
    for f in "$state"/run/*.pid; do [[ -f $f ]] && kill -- "-$(<"$f")" 2>/dev/null; done
  fi
  rm -rf "$state"
}
trap cleanup EXIT

if ! command -v docker >/dev/null || ! docker info >/dev/null 2>&1; then
  log "SKIP: no Docker engine reachable"
  exit 77
fi

# --- 1. image ----------------------------------------------------------------------------------------
t=$(date +%s)
if [[ -n ${NVL72_IMAGE:-} ]]; then
  image=$NVL72_IMAGE  # a prebuilt image (e.g. from a release pipeline): test it as it is
  docker image inspect "$image" >/dev/null 2>&1 || { fail "NVL72_IMAGE=$image does not exist"; exit 1; }
else
  image=$("$root/scripts/build-image") || { fail "scripts/build-image"; exit 1; }
fi
size=$(docker image inspect -f '{{.Size}}' "$image")
ok "image $image ready in $(($(date +%s) - t)) s, $((size / 1024 / 1024)) MiB"

# --- 2. what is in it ---------------------------------------------------------------------------------
run() { docker run --rm --network none --read-only "$image" "$@"; }
f=$failures
[[ $(docker image inspect -f '{{.Config.User}}' "$image") == 65532:65532 ]] || fail "image user is not 65532:65532"
[[ $(run /usr/bin/id -u) == 65532 ]] || fail "container does not run as uid 65532"
for b in nvl72-operator nvl72-extender kubectl-nvl72; do
  v=$(run "/usr/local/bin/$b" --version) || { fail "$b --version in the image"; continue; }
  grep -q "[0-9]" <<<"$v" || fail "$b --version printed '$v'"
done
if run /bin/sh -c 'touch /usr/local/bin/x' 2>/dev/null; then fail "root filesystem is writable under --read-only"; fi
if docker run --rm --network none "$image" /bin/sh -c 'touch /usr/local/bin/x' 2>/dev/null; then
  fail "uid 65532 can write /usr/local/bin"
fi
if run /usr/bin/dpkg -s libssl-dev >/dev/null 2>&1 || run /usr/bin/test -e /usr/bin/g++; then
  fail "build tools or -dev packages leaked into the runtime image"
fi
((failures > f)) || ok "image: nvl72-operator, nvl72-extender, kubectl-nvl72 run as uid 65532 read-only; no compilers or -dev packages"

# --- 3. the operator container admits a job ------------------------------------------------------------
"$lc" up --racks 2 --state "$state" >/dev/null || { fail "local-cluster up"; exit 1; }
# shellcheck disable=SC1091
source "$state/env"
ok "local control plane at $NVL72_APISERVER_URL (2 racks)"
# The chart provides the CRD, the ServiceAccounts and RBAC (its Deployments' pods never run here: no
# kube-scheduler places them and kwok runs no containers); the operator runs as a container instead.
helm install "$rel" "$root/charts/nvl72-operator" -n "$ns" --create-namespace --set "image.repository=${image%:*}" \
  --set "image.tag=${image##*:}" >/dev/null || { fail "helm install"; exit 1; }
kubectl wait --for=condition=Established --timeout=30s crd/nvl72jobs.nvl72.dev >/dev/null || { fail "CRD not established"; exit 1; }
kubeconfig_for() { # SA FILE: a kubeconfig carrying a token of ServiceAccount SA
  local sa=$1 f=$2 token
  token=$(kubectl create token "$sa" -n "$ns" --duration=30m) || { fail "kubectl create token $sa"; exit 1; }
  cat >"$f" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $NVL72_APISERVER_URL
    certificate-authority-data: $(base64 -w0 <"$NVL72_CA_FILE")
users:
- name: $sa
  user:
    token: $token
contexts:
- name: local
  context:
    cluster: local
    user: $sa
    namespace: $jobns
current-context: local
EOF
  chmod 644 "$f"  # readable by uid 65532 in the container; a short-lived test token
}
sa=$rel-nvl72-operator
op_kc=$state/operator.kubeconfig
kubeconfig_for "$sa" "$op_kc"
metrics_port=$(free_port) health_port=$(free_port) ext_port=$(free_port) sched_port=$(free_port)
docker run -d --name "$container" --network host --read-only --cap-drop ALL \
  --security-opt no-new-privileges -v "$op_kc:/etc/nvl72/kubeconfig:ro" "$image" \
  /usr/local/bin/nvl72-operator --kubeconfig=/etc/nvl72/kubeconfig \
  --leader-elect --lease-name="$rel-nvl72-operator-leader" --lease-namespace="$ns" \
  --metrics-addr="127.0.0.1:$metrics_port" --health-addr="127.0.0.1:$health_port" >/dev/null \
  || { fail "docker run of the operator"; exit 1; }
ready() { [[ $(curl -s --max-time 2 "http://127.0.0.1:$health_port/readyz") == ok* ]]; }
wait_until 60 ready || { fail "operator container not ready on :$health_port/readyz: $(curl -s "http://127.0.0.1:$health_port/readyz" 2>&1)"; exit 1; }
ok "operator container ready (host network, mounted kubeconfig of ServiceAccount $sa)"

kubectl create namespace "$jobns" >/dev/null
kubectl apply -n "$jobns" -f - >/dev/null <<'EOF' || { fail "kubectl apply NVL72Job"; exit 1; }
apiVersion: nvl72.dev/v1alpha1
kind: NVL72Job
metadata:
  name: gang-8
spec:
  replicas: 8
  gpusPerReplica: 4
  topology: {mode: Required}
  template:
    spec:
      containers:
      - name: trainer
        image: busybox:1.36
        command: ["sleep", "3600"]
EOF
placed() {
  [[ $(kubectl get nvl72job gang-8 -n "$jobns" -o jsonpath='{range .status.placement.ranks[*]}{.node}{"\n"}{end}' 2>/dev/null | grep -c .) == 8 ]]
}
wait_until 60 placed || { fail "NVL72Job gang-8 not placed: $(kubectl get nvl72job gang-8 -n "$jobns" -o jsonpath='{.status}')"; exit 1; }
f=$failures
domains=$(kubectl get nvl72job gang-8 -n "$jobns" -o jsonpath='{range .status.placement.ranks[*]}{.node}{"\n"}{end}' |
  while read -r n; do kubectl get node "$n" -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.clique}{"\n"}'; done | sort -u)
[[ $(grep -c . <<<"$domains") == 1 ]] || fail "gang-8 spans domains: $domains"
pods_made() { [[ $(kubectl get pods -n "$jobns" -l nvl72.dev/job=gang-8 -o name 2>/dev/null | grep -c .) == 8 ]]; }
# Step 4 binds these pods through nvl72-scheduler: without them, stop here.
wait_until 60 pods_made || { fail "the operator did not create 8 rank pods: $(kubectl get pods -n "$jobns" -o name)"; exit 1; }
[[ $(kubectl get pod gang-8-0 -n "$jobns" -o jsonpath='{.spec.schedulerName}') == nvl72-scheduler ]] ||
  { fail "rank pod does not use nvl72-scheduler"; exit 1; }
((failures > f)) || ok "operator container admitted gang-8: 8 ranks in domain $domains, 8 rank pods created"

# --- 4. the extender container + the real kube-scheduler bind the rank pods ----------------------------
ext_kc=$state/extender.kubeconfig
kubeconfig_for "$rel-nvl72-operator-extender" "$ext_kc"
docker run -d --name "$ext_container" --network host --read-only --cap-drop ALL \
  --security-opt no-new-privileges -v "$ext_kc:/etc/nvl72/kubeconfig:ro" "$image" \
  /usr/local/bin/nvl72-extender --kubeconfig=/etc/nvl72/kubeconfig --listen="127.0.0.1:$ext_port" >/dev/null \
  || { fail "docker run of the extender"; exit 1; }
ext_ready() { [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$ext_port/readyz") == 200 ]]; }
wait_until 60 ext_ready || { fail "extender container not ready on :$ext_port/readyz"; exit 1; }
f=$failures
# Read the whole body first: under pipefail, `curl | grep -q` fails when grep exits at its first match
# while curl still writes (SIGPIPE / curl exit 23): that is how this check once failed in CI.
if ! ext_metrics=$(curl -s --max-time 10 "http://127.0.0.1:$ext_port/metrics"); then
  fail "extender /metrics: curl failed"
elif ! grep -q '^nvl72_' <<<"$ext_metrics"; then
  fail "extender /metrics has no nvl72_ series: $(head -c 300 <<<"$ext_metrics")"
fi
sched_kc=$state/scheduler.kubeconfig
kubeconfig_for "$rel-nvl72-operator-scheduler" "$sched_kc"
kubectl get cm "$rel-nvl72-operator-scheduler-config" -n "$ns" -o jsonpath='{.data.config\.yaml}' |
  sed -e 's|^clientConnection:$|clientConnection:\n  kubeconfig: '"$sched_kc"'|' \
      -e 's|urlPrefix: .*|urlPrefix: "http://127.0.0.1:'"$ext_port"'"|' >"$state/sched.yaml"
grep -q "127.0.0.1:$ext_port" "$state/sched.yaml" || { fail "scheduler config not pointed at the extender container"; exit 1; }
"$NVL72_KUBE_SCHEDULER" ${NVL72_FEATURE_GATES:+--feature-gates=$NVL72_FEATURE_GATES} --config="$state/sched.yaml" --secure-port="$sched_port" --bind-address=127.0.0.1 \
  --authentication-kubeconfig="$sched_kc" --authorization-kubeconfig="$sched_kc" \
  --cert-dir="$state/sched-certs" >"$state/sched.log" 2>&1 &
sched_pid=$!
bound_as_planned() {
  local planned actual
  planned=$(kubectl get nvl72job gang-8 -n "$jobns" -o jsonpath='{range .status.placement.ranks[*]}{.pod}={.node}{"\n"}{end}' | sort)
  actual=$(kubectl get pods -n "$jobns" -l nvl72.dev/job=gang-8 -o jsonpath='{range .items[*]}{.metadata.name}={.spec.nodeName}{"\n"}{end}' | sort)
  [[ -n $planned && $planned == "$actual" ]]
}
wait_until 90 bound_as_planned || { fail "rank pods not bound to their planned nodes:
$(kubectl get pods -n "$jobns" -o wide 2>&1)"; exit 1; }
running() { [[ $(kubectl get pods -n "$jobns" -l nvl72.dev/job=gang-8 -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Running$') == 8 ]]; }
wait_until 60 running || fail "rank pods not Running: $(kubectl get pods -n "$jobns" 2>&1)"
((failures > f)) || ok "extender container + kube-scheduler (chart config): 8 rank pods bound to their planned nodes and Running"

# --- 5. kubectl-nvl72 from the image ------------------------------------------------------------------------
f=$failures
if out=$(docker run --rm --network host --read-only -v "$op_kc:/etc/nvl72/kubeconfig:ro" "$image" \
  /usr/local/bin/kubectl-nvl72 --kubeconfig=/etc/nvl72/kubeconfig racks); then
  grep -q '########' <<<"$out" || fail "rack map does not show the 8-rank gang: $out"
  grep -q 'gang-8' <<<"$out" || fail "rack map does not name gang-8: $out"
  printf '%s\n' "$out" | sed 's/^/    /'
else
  fail "kubectl-nvl72 racks in the image"
fi
if out=$(docker run --rm --network host --read-only -v "$op_kc:/etc/nvl72/kubeconfig:ro" "$image" \
  /usr/local/bin/kubectl-nvl72 --kubeconfig=/etc/nvl72/kubeconfig explain gang-8); then
  grep -q 'ranks 0-7' <<<"$out" || fail "explain does not show the placement: $out"
else
  fail "kubectl-nvl72 explain in the image"
fi
((failures > f)) || ok "kubectl-nvl72 racks / explain from the image show the gang"

stop_pid "$sched_pid"; sched_pid=
# A container still running would show exit code 0 below: stop here if docker cannot stop them.
docker stop -t 10 "$container" "$ext_container" >/dev/null || { fail "docker stop"; exit 1; }
f=$failures
for c in "$container" "$ext_container"; do
  code=$(docker inspect -f '{{.State.ExitCode}}' "$c")
  [[ $code == 0 ]] || fail "container $c exited with $code on SIGTERM"
done
((failures > f)) || ok "operator and extender containers stop cleanly on SIGTERM"
e2e_end "$jobns"
