#!/usr/bin/env bash
# `hami-sim run examples/demo.yaml --serve` is live: a pod kubectl applies goes through HAMi's
# webhook (Runner::AdmitApiPods), is scheduled and started, or is reported unschedulable with
# HAMi's reason; deleting it frees its slice. Each wait is a poll with a 5 s deadline.
#
# Usage: serve_kubectl_test.sh HAMI_SIM DEMO_YAML   (exits 77, skipped, without kubectl)
set -euo pipefail

sim=$1
demo=$2
# shellcheck source=tests/support/sim_apiserver.sh
source "${BASH_SOURCE[0]%/*}/../support/sim_apiserver.sh"
sim_require_kubectl
sim_setup
"$sim" run "$demo" --serve --no-color > "$work/out" 2> "$work/sim.log" &
sim_pid=$!
for _ in $(seq 1200); do
  grep -q '^  export KUBECONFIG=' "$work/out" && break
  kill -0 "$sim_pid" 2> /dev/null || fail "hami-sim run exited"
  sleep 0.05
done
KUBECONFIG=$(sed -n 's/^  export KUBECONFIG=//p' "$work/out")
[[ -n $KUBECONFIG ]] || fail "no export KUBECONFIG line"
export KUBECONFIG

k() { timeout 60 kubectl "$@"; }
# poll DESCRIPTION COMMAND...: until COMMAND succeeds, at most 5 s.
poll() {
  local what=$1 deadline=$((SECONDS + 5))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || { echo "$what: not within 5 s" >&2; return 1; }
    sleep 0.05
  done
}
pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  containers:
  - name: c
    image: busybox
    resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: $2}}
YAML
}
pod fits 3000 | k apply -f - > /dev/null
pod too-big 900000 | k apply -f - > /dev/null

running() {
  [[ $(k get pod fits -o jsonpath='{.status.phase}') == Running ]]
}
poll "fits Running" running
k get pod fits -o jsonpath='{.spec.schedulerName}' | grep -qx hami-scheduler ||
  fail "fits did not meet the webhook"
k get pod fits -o jsonpath='{.metadata.annotations.hami\.io/vgpu-devices-allocated}' |
  grep -q ',NVIDIA,3000,' || fail "fits has no HAMi allocation annotation"

unschedulable() {
  local c
  c=$(k get pod too-big -o \
    jsonpath='{range .status.conditions[?(@.type=="PodScheduled")]}{.status}/{.reason}/{.message}{end}')
  [[ $c == False/Unschedulable/*CardInsufficientMemory* ]]
}
poll "too-big Unschedulable" unschedulable

# Deleting fits, then a new pod of the same size starts. (Re-creating the SAME name stays
# bound-but-Pending: the simulated kubelet remembers names; not fixed here.)
k delete pod fits --wait=false > /dev/null
gone() { ! k get pod fits > /dev/null 2>&1; }
poll "fits deleted" gone
pod fits-2 3000 | k apply -f - > /dev/null
running2() { [[ $(k get pod fits-2 -o jsonpath='{.status.phase}') == Running ]]; }
poll "fits-2 Running" running2
echo PASS
