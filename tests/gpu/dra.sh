#!/usr/bin/env bash
# DRA mode on a real GPU (issue 27, docs/DRA.md "Prepare"). Exit status: 0 passed, 1 a check
# failed, 77 skipped (no GPU, or no nvcc to build the test program). Runs in under a minute.
#
# `hami-dra-plugin --prepare-claim` prepares a claim share of GPU 0 (3000Mi of memory, 30 cores,
# as kube-scheduler would allocate it) through the real NVML, then a cudart program runs with the
# CDI spec's edits applied by hand the way the container runtime would (its env, libvgpu and the
# read-only limits file at the hook path, the region file): it must see 3000 MiB of memory and
# get cudaErrorMemoryAllocation (2) past it. Also checks the device the plugin published for
# GPU 0 carries nvidia-smi's uuid. Where a GPU is already in MIG mode, also prepares a claim for
# a MIG device of it (the instance created at a free placement, then destroyed); the script never
# changes a GPU's MIG mode.
#
#   tests/gpu/dra.sh                   # uses build/, builds hami-dra-plugin and libvgpu.so when missing
#   BUILD=build-rel tests/gpu/dra.sh
set -u

# shellcheck source=tests/gpu/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_require_gpu
gpu_require_nvcc "the test program"
LIB="$BUILD/lib/libvgpu.so"
PLUGIN="$BUILD/bin/hami-dra-plugin"
if [[ ! -f "$LIB" || ! -x "$PLUGIN" ]]; then
  echo "building libvgpu.so and hami-dra-plugin in $BUILD"
  gpu_build vgpu hami-dra-plugin || { echo "build failed"; exit 1; }
fi
gpu_workdir hami-gpu-dra
FAILED=0
check() {  # name expected measured PASS|FAIL
  printf '| %-44s | %-18s | %-24s | %-4s |\n' "$1" "$2" "$3" "$4"
  [[ "$4" == FAIL ]] && FAILED=1
  return 0
}

gpu_build_memcheck || { echo "nvcc failed"; exit 1; }

# The share runs on the first GPU not in MIG mode (one in MIG mode publishes MIG devices only).
share_index="$(nvidia-smi --query-gpu=index,mig.mode.current --format=csv,noheader 2>/dev/null |
  awk -F', *' '$2 != "Enabled" { print $1; exit }')"
if [[ -z "$share_index" ]]; then
  echo "claim share: every GPU is in MIG mode, skipped"
else
minor="$(nvidia-smi -q -i "$share_index" | sed -n 's/^ *Minor Number *: *\([0-9]*\).*/\1/p' | head -1)"
uuid="$(nvidia-smi -i "$share_index" --query-gpu=uuid --format=csv,noheader | head -1 | tr -d ' ')"
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
check "answer names the GPU by nvidia-smi's uuid" "$uuid" "$(grep -o 'nvidia.com/gpu=[^"]*' <<<"$answer")" "$r"
spec="$WORK/cdi/hami-core-gpu.project-hami.io-claim_$claim_uid.json"

# The container's view, as the CDI mounts make it: <hook>/vgpu holds libvgpu.so, the read-only
# limits file and the region (here the same directory on the host).
mkdir -p "$HOOK/vgpu"
cp "$LIB" "$HOOK/vgpu/libvgpu.so"
cp "$HOOK/vgpu/claim-limits/$claim_uid.limits" "$HOOK/vgpu/vgpu.limits"
: >"$HOOK/vgpu/$claim_uid.cache"
mapfile -t envs < <(python3 -c 'import json,sys; [print(e) for e in json.load(open(sys.argv[1]))["containerEdits"]["env"]]' "$spec")

out="$(env "${envs[@]}" LD_PRELOAD="$HOOK/vgpu/libvgpu.so" CUDA_VISIBLE_DEVICES="$share_index" \
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
fi

# A MIG device (docs/DRA.md "Prepare"), only where a GPU is already in MIG mode: neither the
# plugin nor this script changes the mode. The claim names a free placement of the GPU's 1g
# profile; prepare creates that instance through NVML, a retry creates nothing, a CUDA program
# given the MIG UUID sees only the instance's memory, and the instance is destroyed afterwards.
mig_index="$(nvidia-smi --query-gpu=index,mig.mode.current --format=csv,noheader 2>/dev/null |
  awk -F', *' '$2 == "Enabled" { print $1; exit }')"
if [[ -z "$mig_index" ]]; then
  echo "MIG: no GPU is in MIG mode, skipped (this script never changes the mode)"
  exit "$FAILED"
fi
# "<profile name> <free start>": the first 1g profile (not +me) with a placement no instance uses.
read -r mig_profile mig_start < <(python3 - "$mig_index" <<'PY'
import re, subprocess, sys
i = sys.argv[1]
run = lambda *a: subprocess.run(["nvidia-smi", "mig", "-i", i, *a], capture_output=True,
                                text=True).stdout
name = pid = None
for line in run("-lgip").splitlines():
    m = re.search(r"MIG\s+(1g\.\d+gb)\s+(\d+)\s+(\d+)/\d+", line)
    if m and int(m.group(3)) > 0:
        name, pid = m.group(1), m.group(2)
        break
if name is None:
    sys.exit(0)
used = []
for line in run("-lgi").splitlines():
    m = re.search(r"MIG\s+\S+\s+\d+\s+\d+\s+(\d+):(\d+)", line)
    if m:
        used.append((int(m.group(1)), int(m.group(2))))
for line in run("-lgipp").splitlines():
    m = re.search(r"Profile ID\s+" + pid + r"\s+Placements:\s*\{([\d,]+)\}:(\d+)", line)
    if not m:
        continue
    size = int(m.group(2))
    for start in map(int, m.group(1).split(",")):
        if all(start + size <= s or s + z <= start for s, z in used):
            print(name, start)
            sys.exit(0)
PY
)
if [[ -z "${mig_profile:-}" ]]; then
  echo "MIG: GPU $mig_index has no free 1g placement, skipped"
  exit "$FAILED"
fi
mig_minor="$(nvidia-smi -q -i "$mig_index" | sed -n 's/^ *Minor Number *: *\([0-9]*\).*/\1/p' | head -1)"
mig_device="hami-gpu-${mig_minor:-$mig_index}-mig-${mig_profile//./-}-$mig_start"
mig_uid="7c9e6679-7425-40de-944b-e07fc1f90ae7"
cat >"$WORK/mig-claim.json" <<JSON
{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
 "metadata": {"name": "mig-test", "namespace": "default", "uid": "$mig_uid"},
 "status": {"allocation": {"devices": {"results": [{"request": "mig",
   "driver": "hami-core-gpu.project-hami.io", "pool": "gpu-node", "device": "$mig_device"}]}}}}
JSON
mig_checkpoint="$WORK/mig-plugins/hami-core-gpu.project-hami.io/checkpoint.json"
destroy_mig() {  # the instance the checkpoint records, if any
  local gi
  gi="$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["claims"]
for e in c.values():
    for m in e.get("migInstances", []): print(m["gpuInstanceID"])' "$mig_checkpoint" 2>/dev/null)"
  for g in $gi; do
    nvidia-smi mig -i "$mig_index" -gi "$g" -dci >/dev/null 2>&1
    nvidia-smi mig -i "$mig_index" -gi "$g" -dgi >/dev/null 2>&1
  done
}
trap 'destroy_mig; rm -rf "$WORK"' EXIT
prepare_mig() {
  "$PLUGIN" --prepare-claim "$WORK/mig-claim.json" --hook-path "$WORK/mig-hook" \
    --cdi-root "$WORK/mig-cdi" --kubelet-plugins-directory-path "$WORK/mig-plugins" \
    --device-plugin-socket none 2>&1
}
instances_before="$(nvidia-smi mig -i "$mig_index" -lgi 2>/dev/null | grep -c 'MIG ')"
mig_answer="$(prepare_mig)"
rc=$?
[[ $rc == 0 ]] && r=PASS || r=FAIL
check "MIG: --prepare-claim $mig_device" "exit 0" "exit $rc" "$r"
[[ $rc == 0 ]] || { echo "$mig_answer"; exit 1; }
mig_uuid="$(grep -o 'nvidia.com/gpu=MIG-[^"]*' <<<"$mig_answer" | head -1 | cut -d= -f2)"
nvidia-smi -L | grep -q "UUID: $mig_uuid)" && r=PASS || r=FAIL
check "MIG: the answer's MIG UUID exists" "in nvidia-smi -L" "${mig_uuid:-none}" "$r"
instances_after="$(nvidia-smi mig -i "$mig_index" -lgi 2>/dev/null | grep -c 'MIG ')"
[[ $instances_after == $((instances_before + 1)) ]] && r=PASS || r=FAIL
check "MIG: GPU instances" "$((instances_before + 1))" "$instances_after" "$r"
again="$(prepare_mig)"
[[ "$(grep -o 'nvidia.com/gpu=MIG-[^"]*' <<<"$again" | head -1 | cut -d= -f2)" == "$mig_uuid" &&
  "$(nvidia-smi mig -i "$mig_index" -lgi 2>/dev/null | grep -c 'MIG ')" == "$instances_after" ]] &&
  r=PASS || r=FAIL
check "MIG: a second prepare creates nothing" "same UUID" "$instances_after instances" "$r"
gpu_total=$(($(nvidia-smi -i "$mig_index" --query-gpu=memory.total --format=csv,noheader,nounits) << 20))
mig_out="$(CUDA_VISIBLE_DEVICES="$mig_uuid" timeout 60 "$WORK/memcheck" 2>&1)"
mig_total="$(sed -n 's/^total=\([0-9]*\).*/\1/p' <<<"$mig_out")"
[[ -n "$mig_total" && "$mig_total" -gt 0 && $((mig_total * 4)) -lt "$gpu_total" ]] && r=PASS || r=FAIL
check "MIG: cudaMemGetInfo total (one 1g slice)" "< 1/4 of the GPU" "${mig_total:-none}" "$r"
destroy_mig
instances_end="$(nvidia-smi mig -i "$mig_index" -lgi 2>/dev/null | grep -c 'MIG ')"
[[ $instances_end == "$instances_before" ]] && r=PASS || r=FAIL
check "MIG: the instance destroyed again" "$instances_before" "$instances_end" "$r"
[[ $FAILED == 0 ]] || echo "$mig_answer"
exit "$FAILED"
