#!/usr/bin/env bash
# `kubectl get pods|nodes [-o wide]` against `hami-sim apiserver` prints kube-apiserver's printer
# columns: the server answers the meta.k8s.io Table kubectl asks for (src/sim/apiserver/table.h).
# Other kinds keep kubectl's NAME/AGE fallback.
#
# Usage: kubectl_table_test.sh HAMI_SIM   (exits 77, skipped, when kubectl is absent)
set -euo pipefail

sim=$1
# shellcheck source=tests/support/sim_apiserver.sh
source "${BASH_SOURCE[0]%/*}/../support/sim_apiserver.sh"
sim_require_kubectl
sim_setup
sim_start "$sim"

k() { timeout 60 kubectl "$@"; }
cat > "$work/objects.yaml" <<'YAML'
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: gpu-1, labels: {node-role.kubernetes.io/worker: ""}}
- apiVersion: v1
  kind: Pod
  metadata: {name: p1, namespace: default}
  spec: {nodeName: gpu-1, containers: [{name: c, image: busybox}, {name: d, image: busybox}]}
YAML
k create -f "$work/objects.yaml" > /dev/null
k patch node gpu-1 --subresource=status --type=merge -p '{"status":{
  "conditions":[{"type":"Ready","status":"True"}],
  "addresses":[{"type":"InternalIP","address":"10.0.0.1"}],
  "nodeInfo":{"kubeletVersion":"v1.31.0","osImage":"Debian GNU/Linux 12 (bookworm)",
   "kernelVersion":"6.1.0","containerRuntimeVersion":"containerd://1.7.2"}}}' > /dev/null
k patch pod p1 --subresource=status --type=merge -p '{"status":{"phase":"Running",
  "podIP":"10.1.0.5","containerStatuses":[
   {"name":"c","ready":true,"restartCount":2,"image":"busybox","imageID":"","state":{"running":{}}},
   {"name":"d","ready":false,"restartCount":1,"image":"busybox","imageID":"",
    "state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}}' > /dev/null

# Squeeze the column padding; AGE (a few seconds) is matched as digits and "s".
squeeze() { sed -E 's/  +/|/g'; }
expect() {  # expect NAME GOT WANT_REGEX
  if ! grep -Eqx -- "$3" <<< "$2"; then fail "$1: got"$'\n'"$2"$'\n'"want /$3/"; fi
}
got=$(k get pods | squeeze)
expect "get pods" "$got" $'NAME\\|READY\\|STATUS\\|RESTARTS\\|AGE\np1\\|1/2\\|CrashLoopBackOff\\|3\\|[0-9]+s'
got=$(k get pods -o wide | squeeze)
expect "get pods -o wide" "$got" $'NAME\\|READY\\|STATUS\\|RESTARTS\\|AGE\\|IP\\|NODE\\|NOMINATED NODE\\|READINESS GATES\np1\\|1/2\\|CrashLoopBackOff\\|3\\|[0-9]+s\\|10.1.0.5\\|gpu-1\\|<none>\\|<none>'
got=$(k get pod p1 | squeeze)
expect "get pod p1" "$got" $'NAME\\|READY\\|STATUS\\|RESTARTS\\|AGE\np1\\|1/2\\|CrashLoopBackOff\\|3\\|[0-9]+s'
got=$(k get nodes | squeeze)
expect "get nodes" "$got" $'NAME\\|STATUS\\|ROLES\\|AGE\\|VERSION\ngpu-1\\|Ready\\|worker\\|[0-9]+s\\|v1.31.0'
got=$(k get nodes -o wide | squeeze)
expect "get nodes -o wide" "$got" $'NAME\\|STATUS\\|ROLES\\|AGE\\|VERSION\\|INTERNAL-IP\\|EXTERNAL-IP\\|OS-IMAGE\\|KERNEL-VERSION\\|CONTAINER-RUNTIME\ngpu-1\\|Ready\\|worker\\|[0-9]+s\\|v1.31.0\\|10.0.0.1\\|<none>\\|Debian GNU/Linux 12 \\(bookworm\\)\\|6.1.0\\|containerd://1.7.2'
got=$(k get pods -A | squeeze)
expect "get pods -A" "$got" $'NAMESPACE\\|NAME\\|READY\\|STATUS\\|RESTARTS\\|AGE\ndefault\\|p1\\|1/2\\|CrashLoopBackOff\\|3\\|[0-9]+s'
# Objects still come back whole for -o yaml, and kinds without columns keep NAME/AGE.
k get pod p1 -o jsonpath='{.spec.nodeName}' | grep -qx gpu-1 || fail "-o jsonpath lost the object"
got=$(k get namespace default | squeeze)
expect "get namespace" "$got" $'NAME\\|AGE\ndefault\\|[0-9]+s'
echo "PASS"
