#!/bin/bash
# docs/MIGRATION.md against `hami-sim apiserver`: a release of HAMi v2.10.0's own chart
# (tests/chart/hami-v2.10.0-chart, unchanged), its hook-made objects created as its Jobs would
# (kube-webhook-certgen's Secret hami-scheduler-tls with keys ca/tls.crt/tls.key, and the caBundle
# patched into the webhook), a GPU pod bound and annotated as HAMi's scheduler does; then
# `helm upgrade` to this chart with HAMi's values file and one --set global.imageRegistry (no
# other step), our hami-scheduler counting that pod's slice so a new pod goes beside it without
# over-commit; then `helm rollback` to HAMi's revision, leaving HAMi's objects working (the Secret
# exists, the webhook's caBundle is its CA, HAMi's containers and images).
#
# Usage: migration_test.sh HAMI_SIM HAMI_SCHEDULER HELM CHART
#   HELM is overridden by $HAMI_HELM. Exits 77 (ctest: skipped) when helm, kubectl, jq or
#   openssl is absent.
set -euo pipefail

sim=$1
scheduler=$2
helm=${HAMI_HELM:-$3}
chart=$4
here=${BASH_SOURCE[0]%/*}
hami_chart=$here/hami-v2.10.0-chart
hami_values=$here/hami-v2.10.0-values.yaml
# shellcheck source=tests/support/sim_apiserver.sh
source "${BASH_SOURCE[0]%/*}/../support/sim_apiserver.sh"
sim_require_helm "$helm"
sim_require_kubectl
for tool in jq openssl curl; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool not on PATH"; exit 77; }
done
sim_setup
sim_start "$sim"
sched_pid=
trap 'if [[ -n $sched_pid ]]; then kill "$sched_pid" 2>/dev/null || true; fi; sim_cleanup' EXIT

ns=kube-system
h() { timeout 120 "$helm" "$@" > "$work/helm.out" 2>&1 || fail "helm $1: $(cat "$work/helm.out")"; }
k() { timeout 60 kubectl "$@"; }
ca_bundle() {
  k get mutatingwebhookconfiguration hami-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}'
}
secret_ca() { k -n "$ns" get secret hami-scheduler-tls -o jsonpath='{.data.ca}'; }
containers() { k -n "$ns" get "$1" -o jsonpath='{.spec.template.spec.containers[*].name}'; }
images() { k -n "$ns" get "$1" -o jsonpath='{.spec.template.spec.containers[*].image}'; }

# 1. HAMi v2.10.0's chart. The sim runs no Jobs, so its hooks are skipped and done by hand below
# exactly as kube-webhook-certgen's `create` and `patch` do them.
h install hami "$hami_chart" -n "$ns" --create-namespace -f "$hami_values" --no-hooks
(
  cd "$work"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 \
    -subj /CN=hami-ca 2> /dev/null
  openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr \
    -subj /CN=hami-scheduler.kube-system.svc 2> /dev/null
  openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days 30 \
    2> /dev/null
) || fail "openssl"
k -n "$ns" create secret generic hami-scheduler-tls --from-file=ca="$work/ca.crt" \
  --from-file=tls.crt="$work/tls.crt" --from-file=tls.key="$work/tls.key" > /dev/null
hami_ca=$(base64 -w0 "$work/ca.crt")
k patch mutatingwebhookconfiguration hami-webhook --type=json \
  -p '[{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"'"$hami_ca"'"}]' > /dev/null
hami_containers=$(containers deploy/hami-scheduler)
[[ $hami_containers == "kube-scheduler vgpu-scheduler-extender" ]] \
  || fail "HAMi's scheduler containers: $hami_containers"
hami_ds_containers=$(containers ds/hami-device-plugin)
hami_images=$(images deploy/hami-scheduler)

# A GPU node and a pod HAMi's scheduler placed on it: 8000 of GPU-1's 10000 MiB. (GPU-1: with
# both GPUs idle the fit takes the last, GPU-1, so only a counted slice moves the new pod away.)
u0=GPU-00000000-0000-0000-0000-000000000000
u1=GPU-11111111-1111-1111-1111-111111111111
register='[{"id":"'$u0'","count":10,"devmem":10000,"devcore":100,"type":"NVIDIA-Tesla T4","numa":0,"mode":"hami-core","health":true},{"id":"'$u1'","index":1,"count":10,"devmem":10000,"devcore":100,"type":"NVIDIA-Tesla T4","numa":0,"mode":"hami-core","health":true}]'
cat > "$work/objects.json" <<JSON
{"apiVersion":"v1","kind":"List","items":[
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"gpu-1","labels":{"gpu":"on"},"annotations":{
   "hami.io/node-nvidia-register":$(jq -Rn --arg v "$register" '$v'),
   "hami.io/node-handshake":"Requesting_2024-01-23 04:30:04"}},
  "status":{"capacity":{"nvidia.com/gpu":"20"},"allocatable":{"nvidia.com/gpu":"20"}}},
 {"apiVersion":"v1","kind":"Pod","metadata":{"name":"old","namespace":"default",
   "labels":{"hami.io/vgpu-node":"gpu-1"},"annotations":{
   "hami.io/vgpu-node":"gpu-1","hami.io/vgpu-time":"1706000000","hami.io/bind-phase":"success",
   "hami.io/bind-time":"1706000000",
   "hami.io/vgpu-devices-allocated":"$u1,NVIDIA,8000,0:;",
   "hami.io/vgpu-devices-to-allocate":";"}},
  "spec":{"nodeName":"gpu-1","schedulerName":"hami-scheduler","containers":[
   {"name":"a","image":"x","resources":{"limits":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"8000"}}}]}}
]}
JSON
k create -f "$work/objects.json" > /dev/null || fail "kubectl create node and pod"
k patch node gpu-1 --subresource=status --type=merge \
  -p '{"status":{"capacity":{"nvidia.com/gpu":"20"},"allocatable":{"nvidia.com/gpu":"20"}}}' \
  > /dev/null || fail "patch node status"
k patch pod old --subresource=status --type=merge -p '{"status":{"phase":"Running"}}' > /dev/null \
  || fail "patch pod status"
echo "HAMi v2.10.0 installed, its certificate made, pod old holds 8000 MiB of $u1"

# 2. The swap: HAMi's values file and one registry, no other step.
h upgrade hami "$chart" -n "$ns" -f "$hami_values" --set global.imageRegistry=registry.example.com
[[ $(containers deploy/hami-scheduler) == "kube-scheduler vgpu-scheduler-extender" ]] \
  || fail "our scheduler containers: $(containers deploy/hami-scheduler)"
[[ $(containers ds/hami-device-plugin) == "device-plugin vgpu-monitor" ]] \
  || fail "our device plugin containers: $(containers ds/hami-device-plugin)"
for image in $(images deploy/hami-scheduler) $(images ds/hami-device-plugin); do
  [[ $image == registry.example.com/* ]] || fail "upgrade: image $image is not in the registry"
done
[[ $(images deploy/hami-scheduler) == *registry.example.com/hami:* ]] \
  || fail "upgrade: the extender runs $(images deploy/hami-scheduler)"
[[ $(k -n "$ns" get deploy hami-scheduler -o jsonpath='{.spec.template.spec.volumes[?(@.name=="tls-config")].secret.secretName}') \
  == hami-scheduler-tls ]] || fail "upgrade: the scheduler does not mount hami-scheduler-tls"
[[ $(secret_ca) == "$hami_ca" ]] || fail "upgrade: the Secret is not HAMi's"
[[ $(ca_bundle) == "$hami_ca" ]] || fail "upgrade: the caBundle is not the Secret's CA"
echo "upgraded to this chart: containers, images, Secret and caBundle as expected"

# Our scheduler against the swapped cluster counts pod old: a new 4000 MiB pod fits only on GPU-0.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$scheduler" --kubeconfig "$KUBECONFIG" --http_bind "127.0.0.1:$port" --leader-elect=false \
  --scheduler-name hami-scheduler --metrics-bind-address 127.0.0.1:0 > "$work/sched.log" 2>&1 &
sched_pid=$!
for _ in $(seq 1 100); do
  curl -fs "http://127.0.0.1:$port/readyz" > /dev/null && break
  sleep 0.1
done
curl -fs "http://127.0.0.1:$port/readyz" > /dev/null || fail "hami-scheduler not ready: $(tail -5 "$work/sched.log")"
new='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"new","namespace":"default"},"spec":{"schedulerName":"hami-scheduler","containers":[{"name":"a","image":"x","resources":{"limits":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"4000"}}}]}}'
echo "$new" | k create -f - > /dev/null
pod=$(k get pod new -o json)
result=$(curl -fs -X POST "http://127.0.0.1:$port/filter" -H 'Content-Type: application/json' \
  -d '{"Pod":'"$pod"',"NodeNames":["gpu-1"]}') || fail "POST /filter: $(tail -5 "$work/sched.log")"
[[ $(jq -c '.NodeNames' <<< "$result") == '["gpu-1"]' ]] || fail "/filter: $result"
placed=$(k get pod new -o jsonpath='{.metadata.annotations.hami\.io/vgpu-devices-allocated}')
[[ $placed == "$u0,NVIDIA,4000,0:;" ]] \
  || fail "new pod placed at '$placed', want GPU-0 (GPU-1 has 2000 MiB left)"
echo "our scheduler counts pod old: new 4000 MiB pod placed on $u0"
kill "$sched_pid"
wait "$sched_pid" 2> /dev/null || true
sched_pid=

# 3. Back to HAMi's revision: its objects work again with no other step.
h rollback hami 1 -n "$ns"
[[ $(secret_ca) == "$hami_ca" ]] || fail "rollback: Secret hami-scheduler-tls is gone or changed"
[[ $(ca_bundle) == "$hami_ca" ]] || fail "rollback: the webhook caBundle '$(ca_bundle | head -c 20)' is not the Secret's CA"
[[ $(containers deploy/hami-scheduler) == "$hami_containers" ]] \
  || fail "rollback: scheduler containers $(containers deploy/hami-scheduler)"
[[ $(containers ds/hami-device-plugin) == "$hami_ds_containers" ]] \
  || fail "rollback: device plugin containers $(containers ds/hami-device-plugin)"
[[ $(images deploy/hami-scheduler) == "$hami_images" ]] \
  || fail "rollback: scheduler images $(images deploy/hami-scheduler)"
[[ -n $(k get pod old -o jsonpath='{.metadata.annotations.hami\.io/vgpu-devices-allocated}') ]] \
  || fail "rollback: pod old lost its allocation"
echo "rolled back to HAMi: Secret, caBundle, containers and images are HAMi's"
