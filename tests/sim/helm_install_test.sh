#!/bin/bash
# helm install --create-namespace, two helm upgrades and helm uninstall of a chart against
# `hami-sim apiserver`, checked with kubectl (docs/SIM_APISERVER.md says what the server serves
# for helm). After each step every object of the release's manifest is live with exactly the
# rendered fields, so the server's strategic merge of helm's three-way patches is proved too.
# Then a release in DRA mode (dra.enabled) and the chart `helm create` writes.
#
# Usage: helm_install_test.sh HAMI_SIM HELM CHART
#   HELM is overridden by $HAMI_HELM. Exits 77 (ctest: skipped) when helm or kubectl is absent.
set -euo pipefail

sim=$1
helm=${HAMI_HELM:-$2}
chart=$3
# shellcheck source=tests/support/sim_apiserver.sh
source "${BASH_SOURCE[0]%/*}/../support/sim_apiserver.sh"
sim_require_helm "$helm"
sim_require_kubectl
sim_setup
sim_log_tail=40
sim_start "$sim"
echo "$line"

ns=hami-helm-test
rel=hami
h() { timeout 120 "$helm" "$@"; }
k() { timeout 60 kubectl "$@"; }

# Every object of the deployed manifest, live, with the fields the chart renders (the server adds
# only metadata and status). kubectl's client-side dry run prints the rendered side.
one='{.kind}/{.metadata.name}: {.spec} {.data} {.rules} {.subjects} {.roleRef} {.webhooks} {.type}{"\n"}'
check_live_equals_rendered() {  # STEP [RELEASE NAMESPACE]
  h get manifest "${2:-$rel}" -n "${3:-$ns}" > "$work/manifest.yaml"
  k get -n "${3:-$ns}" -f "$work/manifest.yaml" -o jsonpath="{range .items[*]}$one{end}" > "$work/live.txt" \
    || fail "$1: not every object of the manifest is live"
  k create --dry-run=client -n "${3:-$ns}" -f "$work/manifest.yaml" -o jsonpath="$one" > "$work/rendered.txt"
  if ! diff -u "$work/rendered.txt" "$work/live.txt"; then
    fail "$1: live objects differ from the rendered manifest (above: - rendered, + live)"
  fi
  echo "$1: $(wc -l < "$work/live.txt") objects live as rendered"
}

ca_bundle() {
  k get mutatingwebhookconfigurations -o jsonpath='{.items[*].webhooks[*].clientConfig.caBundle}'
}

# 1. install, creating the namespace.
h install "$rel" "$chart" -n "$ns" --create-namespace > "$work/install.out" \
  || fail "helm install: $(cat "$work/install.out")"
k get namespace "$ns" > /dev/null || fail "--create-namespace did not create $ns"
listed=$(k get daemonsets,deployments,mutatingwebhookconfigurations -A) || fail "kubectl get"
echo "$listed"
for kind in daemonset.apps/ deployment.apps/ mutatingwebhookconfiguration.admissionregistration.k8s.io/; do
  grep -q "$kind" <<< "$listed" || fail "kubectl get lists no $kind"
done
check_live_equals_rendered install
ca=$(ca_bundle)
[[ -n $ca ]] || fail "the webhook has no caBundle"

# 2. two upgrades. The first changes container flags and a ConfigMap and adds the monitor (a
# second DaemonSet container, a Service); the second removes them again, scales the scheduler
# and adds a RuntimeClass.
h upgrade "$rel" "$chart" -n "$ns" \
  --set scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy=binpack \
  --set devicePlugin.deviceSplitCount=4 --set devicePlugin.monitor.enabled=true \
  > "$work/upgrade1.out" || fail "helm upgrade 1: $(cat "$work/upgrade1.out")"
check_live_equals_rendered "upgrade 1"
k get deployments -n "$ns" -o jsonpath='{.items[*].spec.template.spec.containers[*].command}' \
  | grep -q 'gpu-scheduler-policy=binpack' || fail "upgrade 1: the new scheduler flags are not live"
[[ $(k get daemonsets -n "$ns" -o jsonpath='{.items[*].spec.template.spec.containers[*].name}' \
  | wc -w) == 2 ]] || fail "upgrade 1: the DaemonSet should have 2 containers"
h upgrade "$rel" "$chart" -n "$ns" --reuse-values --set devicePlugin.monitor.enabled=false \
  --set scheduler.replicas=2 --set devicePlugin.createRuntimeClass=true \
  --set devicePlugin.runtimeClassName=nvidia > "$work/upgrade2.out" \
  || fail "helm upgrade 2: $(cat "$work/upgrade2.out")"
check_live_equals_rendered "upgrade 2"
[[ $(k get daemonsets -n "$ns" -o jsonpath='{.items[*].spec.template.spec.containers[*].name}' \
  | wc -w) == 1 ]] || fail "upgrade 2: the monitor container is still in the DaemonSet"
k get runtimeclasses nvidia > /dev/null || fail "upgrade 2: no RuntimeClass nvidia"
[[ $(ca_bundle) == "$ca" ]] || fail "the webhook caBundle changed across the upgrades"
echo "caBundle unchanged across 2 upgrades (${#ca} bytes)"
history=$(h history "$rel" -n "$ns")
echo "$history"
[[ $(grep -c superseded <<< "$history") == 2 && $(grep -c deployed <<< "$history") == 1 ]] \
  || fail "helm history should show 2 superseded revisions and 1 deployed"

# 3. uninstall: the objects and the release Secrets go.
h get manifest "$rel" -n "$ns" > "$work/last.yaml"
h uninstall "$rel" -n "$ns" > /dev/null || fail "helm uninstall"
left=$(k get -n "$ns" -f "$work/last.yaml" -o name --ignore-not-found)
[[ -z $left ]] || fail "helm uninstall left: $left"
secrets=$(k get secrets -A -l owner=helm -o name)
[[ -z $secrets ]] || fail "release Secrets left: $secrets"
echo "uninstall: no object and no release Secret left"

# 4. DRA mode (dra.enabled, docs/DRA.md "Deploying"): the DRA plugin's DaemonSet, RBAC and the
# resource.k8s.io/v1 DeviceClass install and live as rendered; no device-plugin DaemonSet.
h install dra "$chart" -n hami-dra --create-namespace --set dra.enabled=true \
  --set dra.extendedResourceName=nvidia.com/gpu > "$work/dra.out" \
  || fail "helm install dra.enabled=true: $(cat "$work/dra.out")"
check_live_equals_rendered "dra.enabled" dra hami-dra
[[ $(k get daemonsets -n hami-dra -o jsonpath='{.items[*].metadata.name}') == dra-hami-dra-plugin ]] \
  || fail "dra.enabled: the DaemonSets should be dra-hami-dra-plugin alone: $(k get daemonsets -A -o name)"
[[ $(k get deviceclasses hami-core-gpu.project-hami.io -o jsonpath='{.spec.extendedResourceName}') \
  == nvidia.com/gpu ]] || fail "dra.enabled: no DeviceClass with extendedResourceName nvidia.com/gpu"
h uninstall dra -n hami-dra > /dev/null || fail "helm uninstall dra"
[[ -z $(k get deviceclasses -o name) ]] || fail "helm uninstall dra left the DeviceClass"

# 5. the chart a new user starts from (`helm create`), with its optional Ingress and
# HorizontalPodAutoscaler on.
(cd "$work" && h create demo > /dev/null)
h install demo "$work/demo" -n demo --create-namespace --set ingress.enabled=true \
  --set autoscaling.enabled=true > "$work/demo.out" || fail "helm install demo: $(cat "$work/demo.out")"
check_live_equals_rendered "helm create's chart" demo demo
h uninstall demo -n demo > /dev/null || fail "helm uninstall demo"
echo PASS
