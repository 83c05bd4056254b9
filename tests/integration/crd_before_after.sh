#!/usr/bin/env bash
# Issue 27 cases 6 and 13 against the CRD before the fix (bc7a51c) and now (HEAD), on a real
# kube-apiserver (a 1-rack local cluster): the name error names metadata.name, and a template change
# of a job holding a placement is refused. Not run by scripts/test (it needs the git history):
#   tests/integration/crd_before_after.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export NVL72_K8S_VERSION=v1.37.2
state=$(mktemp -d /tmp/nvl72-crd.XXXXXX); rmdir "$state"
scripts/local-cluster up --racks 1 --state "$state" >/dev/null || exit 1
source "$state/env"
kc() { "$NVL72_KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
check() {  # REV
  local rev=$1 ns=crd-$(tr "A-Z" "a-z" <<<"$1") out
  git show "$rev:crds/nvl72jobs.nvl72.dev.yaml" | kc apply -f - >/dev/null
  kc wait --for condition=established --timeout=60s crd/nvl72jobs.nvl72.dev >/dev/null
  sleep 2
  kc create namespace "$ns" >/dev/null
  out=$(kc -n "$ns" apply -f tests/e2e/invalid/name-too-long.yaml 2>&1)
  echo "[$rev] case 13, name too long: $(grep -o 'The NVL72Job.*' <<<"$out" | cut -c1-160)"
  [[ $out == *"metadata.name: Invalid value"* ]] && echo "[$rev]   names metadata.name: yes" || echo "[$rev]   names metadata.name: NO"
  printf 'apiVersion: nvl72.dev/v1alpha1\nkind: NVL72Job\nmetadata: {name: t}\nspec:\n  replicas: 1\n  template: {spec: {containers: [{name: c, image: busybox}]}}\n' | kc -n "$ns" apply -f - >/dev/null
  # What the operator writes on admission (the status subresource): a placement.
  kc -n "$ns" patch nvj t --subresource=status --type merge \
    -p '{"status":{"state":"Admitted","placement":{"domains":["d"],"ranks":[{"rank":0,"node":"rack0-node00","pod":"t-0"}]}}}' >/dev/null || echo "[$rev]   status patch failed"
  out=$(kc -n "$ns" patch nvj t --type json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"busybox:1.37"}]' 2>&1)
  echo "[$rev] case 6, template change of an admitted job: $out" | cut -c1-220
  kc delete namespace "$ns" --wait=false >/dev/null
}
check bc7a51c
check HEAD
scripts/local-cluster down --state "$state" >/dev/null
