#!/usr/bin/env bash
# kubectl against `hami-sim apiserver` with the DRA kinds (resource.k8s.io/v1, docs/DRA.md):
# `kubectl get resourceslices,resourceclaims` prints kube-apiserver's columns, an invalid slice is
# refused with the field path, and a claim's status.allocation is written through /status only.
#
# Usage: kubectl_dra_test.sh HAMI_SIM   (exits 77, skipped, when kubectl is absent)
set -euo pipefail

sim=$1
# shellcheck source=tests/support/sim_apiserver.sh
source "${BASH_SOURCE[0]%/*}/../support/sim_apiserver.sh"
sim_require_kubectl
sim_setup
sim_start "$sim"

k() { timeout 60 kubectl "$@"; }
squeeze() { sed -E 's/  +/|/g'; }
expect() {  # expect NAME GOT WANT_REGEX
  if ! grep -Eqx -- "$3" <<< "$2"; then fail "$1: got"$'\n'"$2"$'\n'"want /$3/"; fi
}

# Discovery: the four kinds, no short names (as upstream), claims namespaced.
got=$(k api-resources --api-group=resource.k8s.io --no-headers | squeeze | sort)
expect "api-resources" "$got" $'deviceclasses\\|resource.k8s.io/v1\\|false\\|DeviceClass\nresourceclaims\\|resource.k8s.io/v1\\|true\\|ResourceClaim\nresourceclaimtemplates\\|resource.k8s.io/v1\\|true\\|ResourceClaimTemplate\nresourceslices\\|resource.k8s.io/v1\\|false\\|ResourceSlice'

cat > "$work/dra.yaml" <<'YAML'
apiVersion: v1
kind: List
items:
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata: {name: hami-core-gpu.project-hami.io}
  spec:
    selectors:
    - cel: {expression: 'device.driver == "hami-core-gpu.project-hami.io"'}
- apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  metadata: {name: node1-hami-core-gpu}
  spec:
    driver: hami-core-gpu.project-hami.io
    nodeName: node1
    pool: {name: node1, generation: 1, resourceSliceCount: 1}
    devices:
    - name: hami-gpu-0
      allowMultipleAllocations: true
      attributes:
        type: {string: hami-gpu}
        minor: {int: 0}
      capacity:
        memory:
          value: 80Gi
          requestPolicy: {default: 80Gi, validRange: {min: 1Mi, max: 80Gi, step: 1Mi}}
        cores:
          value: "100"
          requestPolicy: {default: "100", validRange: {min: "0", max: "100", step: "1"}}
- apiVersion: resource.k8s.io/v1
  kind: ResourceClaimTemplate
  metadata: {name: hami-gpu-1x3000mi-30c, namespace: default}
  spec:
    spec:
      devices:
        requests:
        - name: gpu
          exactly:
            deviceClassName: hami-core-gpu.project-hami.io
            capacity: {requests: {memory: 3000Mi, cores: "30"}}
- apiVersion: resource.k8s.io/v1
  kind: ResourceClaim
  metadata: {name: p1-gpu, namespace: default}
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: hami-core-gpu.project-hami.io
          capacity: {requests: {memory: 3000Mi, cores: "30"}}
  status:
    allocation: {devices: {results: []}}
YAML
k create -f "$work/dra.yaml" > /dev/null

got=$(k get resourceslices,resourceclaims | squeeze)
expect "get resourceslices,resourceclaims" "$got" $'NAME\\|NODE\\|DRIVER\\|POOL\\|AGE\nresourceslice.resource.k8s.io/node1-hami-core-gpu\\|node1\\|hami-core-gpu.project-hami.io\\|node1\\|[0-9]+s\n\nNAME\\|STATE\\|AGE\nresourceclaim.resource.k8s.io/p1-gpu\\|pending\\|[0-9]+s'
got=$(k get resourceclaimtemplates,deviceclasses -A | squeeze)
expect "get resourceclaimtemplates,deviceclasses -A" "$got" $'NAMESPACE\\|NAME\\|AGE\ndefault\\|resourceclaimtemplate.resource.k8s.io/hami-gpu-1x3000mi-30c\\|[0-9]+s\n\nNAME\\|AGE\ndeviceclass.resource.k8s.io/hami-core-gpu.project-hami.io\\|[0-9]+s'
# Defaults as kube-apiserver applies them; the status sent with the create was dropped.
k get resourceclaim p1-gpu -o jsonpath='{.spec.devices.requests[0].exactly.allocationMode}/{.spec.devices.requests[0].exactly.count}' |
  grep -qx 'ExactCount/1' || fail "claim not defaulted"
[[ -z $(k get resourceclaim p1-gpu -o jsonpath='{.status}') ]] || fail "create kept the status"
# A field selector on the slice's node, as a DRA driver lists its own slices.
k get resourceslices --field-selector spec.nodeName=node1 -o name | grep -qx 'resourceslice.resource.k8s.io/node1-hami-core-gpu' ||
  fail "field selector spec.nodeName"

# An invalid slice: kubectl shows kube-apiserver's 422 with the field path and value.
cat > "$work/bad.yaml" <<'YAML'
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node1-bad}
spec:
  driver: hami-core-gpu.project-hami.io
  nodeName: node1
  pool: {name: node1, generation: 1, resourceSliceCount: 0}
  devices:
  - name: hami-gpu-0
    allowMultipleAllocations: true
    capacity:
      memory:
        value: 80Gi
        requestPolicy: {default: 1500Ki, validRange: {min: 1Mi, max: 80Gi, step: 1Mi}}
YAML
if out=$(k create -f "$work/bad.yaml" 2>&1); then fail "invalid slice was created: $out"; fi
grep -q 'ResourceSlice "node1-bad" is invalid: \[spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero, spec.devices\[0\].capacity\[memory\].requestPolicy.validRange.step: Invalid value: "1500Ki": value is not a multiple of a given step (1Mi) from (1Mi)\]' <<< "$out" ||
  fail "invalid slice message: $out"

# status.allocation goes through /status only: a patch of the main resource leaves it unset.
alloc='{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"hami-core-gpu.project-hami.io","pool":"node1","device":"hami-gpu-0","shareID":"0f7e3c1a-5b2d-4c6e-9a8b-7d1e2f3a4b5c","consumedCapacity":{"memory":"3000Mi","cores":"30"}}]}},"reservedFor":[{"resource":"pods","name":"p1","uid":"0b1c"}]}}'
k patch resourceclaim p1-gpu --type=merge -p "$alloc" > /dev/null
[[ -z $(k get resourceclaim p1-gpu -o jsonpath='{.status}') ]] || fail "main resource wrote status"
k patch resourceclaim p1-gpu --subresource=status --type=merge -p "$alloc" > /dev/null
got=$(k get resourceclaim p1-gpu | squeeze)
expect "allocated claim" "$got" $'NAME\\|STATE\\|AGE\np1-gpu\\|allocated,reserved\\|[0-9]+s'
# ... and once set it cannot change.
if out=$(k patch resourceclaim p1-gpu --subresource=status --type=json \
  -p '[{"op":"replace","path":"/status/allocation/devices/results/0/device","value":"hami-gpu-1"}]' 2>&1); then
  fail "allocation changed: $out"
fi
grep -q 'status.allocation: Invalid value: .*field is immutable' <<< "$out" || fail "reallocation message: $out"
# The claim's spec is immutable too.
if out=$(k patch resourceclaim p1-gpu --type=merge \
  -p '{"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"other"}}]}}}' 2>&1); then
  fail "claim spec changed: $out"
fi
grep -q 'ResourceClaim "p1-gpu" is invalid: spec: Invalid value: .*field is immutable' <<< "$out" ||
  fail "claim spec message: $out"
echo "PASS"
