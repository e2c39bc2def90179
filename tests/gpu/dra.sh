#!/usr/bin/env bash
# DRA mode on a real GPU (issue 27, docs/DRA.md "Prepare"). Exit status: 0 passed, 1 a check
# failed, 77 skipped (no GPU, or no nvcc to build the test program). Runs in under a minute.
#
# `hami-dra-plugin --prepare-claim` prepares a claim share of GPU 0 (3000Mi of memory, 30 cores,
# as kube-scheduler would allocate it) through the real NVML, then a cudart program runs with the
# CDI spec's edits applied by hand the way the container runtime would (its env, libvgpu and the
# read-only limits file at the hook path, the region file): it must see 3000 MiB of memory and
# get cudaErrorMemoryAllocation (2) past it. Also checks the device the plugin published for
# GPU 0 carries nvidia-smi's uuid.
#
#   tests/gpu/dra.sh                   # uses build/, builds hami-dra-plugin and libvgpu.so when missing
#   BUILD=build-rel tests/gpu/dra.sh
set -u

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "tests/gpu/dra.sh: no NVIDIA GPU on this machine, skipped"
  exit 77
fi
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
NVCC="$(command -v nvcc || echo "$CUDA_HOME/bin/nvcc")"
if [[ ! -x "$NVCC" ]]; then
  echo "tests/gpu/dra.sh: no nvcc to build the test program, skipped"
  exit 77
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BUILD:-$ROOT/build}"
LIB="$BUILD/lib/libvgpu.so"
PLUGIN="$BUILD/bin/hami-dra-plugin"
if [[ ! -f "$LIB" || ! -x "$PLUGIN" ]]; then
  echo "building libvgpu.so and hami-dra-plugin in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$BUILD" --target vgpu hami-dra-plugin >/dev/null || { echo "build failed"; exit 1; }
fi
WORK="$(mktemp -d /tmp/hami-gpu-dra.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
FAILED=0
check() {  # name expected measured PASS|FAIL
  printf '| %-44s | %-18s | %-24s | %-4s |\n' "$1" "$2" "$3" "$4"
  [[ "$4" == FAIL ]] && FAILED=1
  return 0
}

minor="$(nvidia-smi -q -i 0 | sed -n 's/^ *Minor Number *: *\([0-9]*\).*/\1/p' | head -1)"
uuid="$(nvidia-smi -i 0 --query-gpu=uuid --format=csv,noheader | head -1 | tr -d ' ')"
claim_uid="0f5b1c2e-9d3a-4c47-8f8e-6a1d2b3c4d5e"
cat >"$WORK/claim.json" <<JSON
{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
 "metadata": {"name": "gpu-test", "namespace": "default", "uid": "$claim_uid"},
 "status": {"allocation": {"devices": {"results": [{"request": "gpu",
   "driver": "hami-core-gpu.project-hami.io", "pool": "gpu-node", "device": "hami-gpu-${minor:-0}",
   "shareID": "5a0c8a43-6d0e-4a8b-9c1f-2e3d4c5b6a79",
   "consumedCapacity": {"memory": "3000Mi", "cores": "30"}}]}}}}
JSON
HOOK="$WORK/hook"
answer="$("$PLUGIN" --prepare-claim "$WORK/claim.json" --hook-path "$HOOK" --cdi-root "$WORK/cdi" \
  --kubelet-plugins-directory-path "$WORK/plugins" --device-plugin-socket none 2>&1)"
rc=$?
[[ $rc == 0 ]] && r=PASS || r=FAIL
check "hami-dra-plugin --prepare-claim (NVML)" "exit 0" "exit $rc" "$r"
[[ $rc == 0 ]] || { echo "$answer"; exit 1; }
grep -q "nvidia.com/gpu=$uuid" <<<"$answer" && r=PASS || r=FAIL
check "answer names GPU 0 by nvidia-smi's uuid" "$uuid" "$(grep -o 'nvidia.com/gpu=[^"]*' <<<"$answer")" "$r"
spec="$WORK/cdi/hami-core-gpu.project-hami.io-claim_$claim_uid.json"

# The container's view, as the CDI mounts make it: <hook>/vgpu holds libvgpu.so, the read-only
# limits file and the region (here the same directory on the host).
mkdir -p "$HOOK/vgpu"
cp "$LIB" "$HOOK/vgpu/libvgpu.so"
cp "$HOOK/vgpu/claim-limits/$claim_uid.limits" "$HOOK/vgpu/vgpu.limits"
: >"$HOOK/vgpu/$claim_uid.cache"
mapfile -t envs < <(python3 -c 'import json,sys; [print(e) for e in json.load(open(sys.argv[1]))["containerEdits"]["env"]]' "$spec")

cat >"$WORK/memcheck.cu" <<'CU'
#include <cstdio>
#include <cuda_runtime.h>
int main() {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 3;
  printf("total=%zu\n", total_b);
  size_t chunk = 256u << 20, held = 0;
  void* p;
  cudaError_t err;
  while ((err = cudaMalloc(&p, chunk)) == cudaSuccess) held += chunk;
  printf("held=%zu err=%d\n", held, (int)err);
  return 0;
}
CU
"$NVCC" -o "$WORK/memcheck" "$WORK/memcheck.cu" >/dev/null 2>&1 || { echo "nvcc failed"; exit 1; }
out="$(env "${envs[@]}" LD_PRELOAD="$HOOK/vgpu/libvgpu.so" CUDA_VISIBLE_DEVICES=0 \
  timeout 60 "$WORK/memcheck" 2>&1)"
limit=$((3000 << 20))
total="$(sed -n 's/^total=\([0-9]*\).*/\1/p' <<<"$out")"
held="$(sed -n 's/^held=\([0-9]*\).*/\1/p' <<<"$out")"
err="$(sed -n 's/.*err=\([0-9]*\).*/\1/p' <<<"$out")"
[[ "$total" == "$limit" ]] && r=PASS || r=FAIL
check "claim share: cudaMemGetInfo total" "3000 MiB" "${total:-none}" "$r"
[[ -n "$held" && "$held" -le "$limit" && "$err" == 2 ]] && r=PASS || r=FAIL
check "claim share: cudaMalloc past 3000 MiB" "<=3000 MiB, err 2" "${held:-none} err ${err:-?}" "$r"
[[ $FAILED == 0 ]] || echo "$out"
exit "$FAILED"
