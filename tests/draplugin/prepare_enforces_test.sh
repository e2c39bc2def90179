#!/usr/bin/env bash
# Prepare = enforce, end to end without a GPU (docs/DRA.md "Prepare"): hami-dra-plugin
# --prepare-claim prepares a 3000Mi share of GPU 0 through NVML (the fake libnvidia-ml.so.1),
# then a CUDA program runs with the CDI spec's env and the container's view of <hook>/vgpu
# (libvgpu.so, the read-only limits file, the region) under the fake libcuda.so.1: it must see
# 3000 MiB and be refused one byte past it. tests/gpu/dra.sh does the same on a real GPU.
#   prepare_enforces_test.sh PLUGIN LIBVGPU FAKE_NVML_DIR FAKE_CUDA_DIR DRIVER_APP
set -euo pipefail
plugin=$1 lib=$2 fake_nvml=$3 fake_cuda=$4 app=$5
work="$(mktemp -d /tmp/hami-dra-enforce.XXXXXX)"
trap 'rm -rf "$work"' EXIT
uid=0f5b1c2e-9d3a-4c47-8f8e-6a1d2b3c4d5e
cat >"$work/claim.json" <<JSON
{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
 "metadata": {"name": "c", "namespace": "default", "uid": "$uid"},
 "status": {"allocation": {"devices": {"results": [{"request": "gpu",
   "driver": "hami-core-gpu.project-hami.io", "pool": "node-1", "device": "hami-gpu-0",
   "shareID": "5a0c8a43-6d0e-4a8b-9c1f-2e3d4c5b6a79",
   "consumedCapacity": {"memory": "3000Mi", "cores": "30"}}]}}}}
JSON
hook="$work/hook"
LD_LIBRARY_PATH="$fake_nvml" HAMI_FAKE_NVML_DEVICES="GPU-x|NVIDIA H200|143771|00000000:3B:00.0" \
  "$plugin" --prepare-claim "$work/claim.json" --hook-path "$hook" --cdi-root "$work/cdi" \
  --kubelet-plugins-directory-path "$work/plugins" --device-plugin-socket none >"$work/answer.json"
grep -q '"nvidia.com/gpu=GPU-x"' "$work/answer.json" || { cat "$work/answer.json"; exit 1; }
# The container's <hook>/vgpu as the spec's mounts make it.
cp "$lib" "$hook/vgpu/libvgpu.so"
cp "$hook/vgpu/claim-limits/$uid.limits" "$hook/vgpu/vgpu.limits"
: >"$hook/vgpu/$uid.cache"
mapfile -t envs < <(python3 -c 'import json, sys
for e in json.load(open(sys.argv[1]))["containerEdits"]["env"]: print(e)' \
  "$work/cdi/hami-core-gpu.project-hami.io-claim_$uid.json")
limit=$((3000 << 20))
run() { env -i "${envs[@]}" LD_PRELOAD="$hook/vgpu/libvgpu.so" LD_LIBRARY_PATH="$fake_cuda" "$app" "$@"; }
run info 0 "$limit"  # cuMemGetInfo and cuDeviceTotalMem report the share
run oom "$limit"     # filled to exactly the share; one byte more is CUDA_ERROR_OUT_OF_MEMORY
echo "prepare_enforces: ok"
