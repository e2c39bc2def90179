#!/usr/bin/env bash
# GPU checks that need a real NVIDIA GPU and driver. Exit status: 0 all passed, 1 a check
# failed, 77 skipped (no GPU here). Runs in well under 5 minutes.
#
# libvgpu section: a cudart program and PyTorch under LD_PRELOAD=libvgpu.so with
# CUDA_DEVICE_MEMORY_LIMIT=4g (reported total, OOM past the limit, NVML view), and the SM limit
# (30 %, FORCE) measured with NVML on a busy loop. Prints a summary table.
# Escape attempts (issue 20, docs/vgpu.md): under libvgpu with a 1 GiB limit from a limits file
# beside the library (as the device plugin mounts it), every allocation path of the issue and
# every way around the hooks (tests/vgpu/driver_app.cc `attack`, `setenv`, `tamper`); each path is
# listed as refused, held (succeeded without the process holding more than the limit), skipped
# (not in this driver), or ESCAPED/ERROR/CRASHED, which fail the run.
# Device plugin section: NVML discovery (`hami-device-plugin --print-register`) against
# nvidia-smi's uuid, memory.total and name; where a GPU is already in MIG mode, its registered
# MIG profiles against `nvidia-smi mig -lgip` (read-only: no setting changed, no instance made).
#
#   tests/gpu/run.sh                # uses build/lib/libvgpu.so, builds it when missing
#   BUILD=build-rel tests/gpu/run.sh
#   tests/gpu/run.sh --escapes-only # the escape attempts only
#   HAMI_GPU_FAKE_DRIVER=build/tests/vgpu-fakes tests/gpu/run.sh --escapes-only
#                                   # the escape attempts against the fake driver (no GPU needed)
set -u
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ESCAPES_ONLY=0
[[ "${1:-}" == --escapes-only ]] && ESCAPES_ONLY=1
FAKE_DRIVER="${HAMI_GPU_FAKE_DRIVER:-}"
if [[ -n "$FAKE_DRIVER" ]]; then
  FAKE_DRIVER="$(cd "$FAKE_DRIVER" && pwd)" || exit 1
  ESCAPES_ONLY=1
else
  gpu_require_gpu
fi

LIB="$BUILD/lib/libvgpu.so"
if [[ ! -f "$LIB" ]]; then
  echo "building libvgpu.so in $BUILD"
  gpu_build vgpu || { echo "build failed"; exit 1; }
fi
gpu_workdir hami-gpu
GIB=$((1 << 30))
LIMIT_BYTES=$((4 * GIB))
ROWS=()
ESCAPE_ROWS=()
FAILED=0

row() {  # name expected measured PASS|FAIL|SKIP
  ROWS+=("$(printf '| %-44s | %-16s | %-22s | %-4s |' "$1" "$2" "$3" "$4")")
  [[ "$4" == FAIL ]] && FAILED=1
  return 0
}

preload() {  # runs "$@" under libvgpu with a fresh region file per call
  local cache="$WORK/$RANDOM$RANDOM.cache"
  env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" CUDA_VISIBLE_DEVICES=0 \
    LIBCUDA_LOG_LEVEL=0 "$@"
}

print_tables() {
  if [[ ${#ROWS[@]} -gt 0 ]]; then
    echo
    echo "libvgpu on $(nvidia-smi -i 0 --query-gpu=name --format=csv,noheader 2>/dev/null)"
    printf '| %-44s | %-16s | %-22s | %-4s |\n' check expected measured ok
    printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..18})" \
      "$(printf -- '-%.0s' {1..24})" "------"
    printf '%s\n' "${ROWS[@]}"
  fi
  if [[ ${#ESCAPE_ROWS[@]} -gt 0 ]]; then
    echo
    local on="fake driver"
    [[ -z "$FAKE_DRIVER" ]] &&
      on="$(nvidia-smi -i 0 --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
    echo "libvgpu escape attempts, 1 GiB limit ($on)"
    printf '| %-80s | %-8s | %s |\n' path verdict detail
    printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..82})" "$(printf -- '-%.0s' {1..10})" "--------"
    printf '%s\n' "${ESCAPE_ROWS[@]}"
  fi
}

escape_row() {  # path verdict detail
  ESCAPE_ROWS+=("$(printf '| %-80s | %-8s | %s |' "$1" "$2" "$3")")
  case "$2" in ESCAPED | ERROR | CRASHED) FAILED=1 ;; esac
  return 0
}

# ---------------------------------------------------------------- escape attempts (issue 20)
APP="$BUILD/tests/vgpu_driver_app"
PROBE="$BUILD/tests/vgpu-fakes/libvgpu_escape_probe.so"
if [[ ! -x "$APP" || ! -f "$PROBE" ]]; then
  gpu_build vgpu_driver_app vgpu_escape_probe
fi
if [[ -x "$APP" && -f "$PROBE" ]]; then
  ESC="$WORK/escape"
  mkdir -p "$ESC/lib" "$ESC/probe"
  # The library in a directory of its own with its limits file, as hami-device-plugin mounts it;
  # the probe (a library between the program and libcuda) in another, so that libcuda.so.1 is the
  # real driver, or the fake one with HAMI_GPU_FAKE_DRIVER.
  cp "$LIB" "$ESC/lib/libvgpu.so"
  cp "$PROBE" "$ESC/probe/"
  printf 'CUDA_DEVICE_MEMORY_LIMIT=1g\nCUDA_DEVICE_MEMORY_SHARED_CACHE=%s\n' "$ESC/vgpu.cache" \
    >"$ESC/lib/vgpu.limits"
  escape_run() {  # args...: driver_app under libvgpu and the limits file
    env LD_PRELOAD="$ESC/lib/libvgpu.so" VGPU_LIB_PATH="$ESC/lib/libvgpu.so" \
      LD_LIBRARY_PATH="$ESC/probe${FAKE_DRIVER:+:$FAKE_DRIVER}" CUDA_VISIBLE_DEVICES=0 \
      CUDA_DEVICE_MEMORY_SHARED_CACHE="$ESC/vgpu.cache" LIBCUDA_LOG_LEVEL=0 \
      timeout 180 "$APP" "$@"
  }
  # One process per group: a driver that crashes on one path (dlmopen of a second driver copy)
  # costs that group only.
  for group in hooks dlmopen arrays contexts limits modules graph import vmm pool untested; do
    out="$(escape_run attack "$GIB" "$group" 2>"$ESC/$group.err")"
    status=$?
    n=0
    while IFS= read -r line; do
      if [[ "$line" =~ ^attack:\ (.*):\ (refused|held|skipped|ESCAPED|ERROR)\ \((.*)\)$ ]]; then
        escape_row "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}"
        n=$((n + 1))
      fi
    done <<<"$out"
    if [[ "$status" -gt 1 || "$n" == 0 ]]; then
      escape_row "group $group" CRASHED \
        "exit status $status after $n paths: $(tail -c 300 "$ESC/$group.err" | tr '\n' ' ')"
    fi
  done
  # The limits in the environment lifted and the region pointed elsewhere before the first CUDA
  # call; the region's limits zeroed by the program. The allocation of 2 GiB must still fail.
  for scenario in setenv tamper; do
    escape_run "$scenario" $((2 * GIB)) >/dev/null 2>"$ESC/$scenario.err"
    status=$?
    case "$scenario" in
      setenv) path="setenv of limits, policy and region path before the first CUDA call" ;;
      tamper) path="limit[] zeroed in the mapped region file" ;;
    esac
    case "$status" in
      0) escape_row "$path" refused "cuMemAlloc_v2 of 2 GiB: CUDA_ERROR_OUT_OF_MEMORY" ;;
      1) escape_row "$path" ESCAPED "$(grep -m1 CHECK "$ESC/$scenario.err")" ;;
      *) escape_row "$path" CRASHED "exit status $status: $(tail -c 300 "$ESC/$scenario.err" | tr '\n' ' ')" ;;
    esac
  done
else
  escape_row "escape attempts" ERROR "vgpu_driver_app or the escape probe did not build"
fi
if [[ "$ESCAPES_ONLY" == 1 ]]; then
  print_tables
  exit "$FAILED"
fi

# ---------------------------------------------------------------- cudart program
CUDART_BIN=""
gpu_find_nvcc && gpu_build_memcheck && CUDART_BIN="$WORK/memcheck"
if [[ -n "$CUDART_BIN" ]]; then
  out="$(preload CUDA_DEVICE_MEMORY_LIMIT=4g timeout 60 "$CUDART_BIN" 2>&1)"
  total="$(sed -n 's/^total=\([0-9]*\).*/\1/p' <<<"$out")"
  held="$(sed -n 's/^held=\([0-9]*\).*/\1/p' <<<"$out")"
  err="$(sed -n 's/.*err=\([0-9]*\).*/\1/p' <<<"$out")"
  [[ "$total" == "$LIMIT_BYTES" ]] && r=PASS || r=FAIL
  row "cudart: cudaMemGetInfo total" "4 GiB" "${total:-none}" "$r"
  [[ -n "$held" && "$held" -le "$LIMIT_BYTES" && "$err" == 2 ]] && r=PASS || r=FAIL
  row "cudart: cudaMalloc past 4 GiB -> error 2" "<=4 GiB, err 2" "${held:-none} err ${err:-?}" "$r"
else
  row "cudart program" "nvcc available" "no nvcc" SKIP
fi

# ---------------------------------------------------------------- NVML view (nvidia-smi)
smi_total="$(preload CUDA_DEVICE_MEMORY_LIMIT=4g timeout 30 nvidia-smi -i 0 \
  --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -d ' ')"
[[ "$smi_total" == 4096 ]] && r=PASS || r=FAIL
row "NVML (nvidia-smi) memory.total" "4096 MiB" "${smi_total:-none} MiB" "$r"

# ---------------------------------------------------------------- PyTorch
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  cat >"$WORK/torch_mem.py" <<'PY'
import torch
free, total = torch.cuda.mem_get_info()
print(f"total={total}")
held, blocks = 0, []
try:
    while True:
        blocks.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
        held += 256 << 20
except torch.cuda.OutOfMemoryError:
    print(f"oom=1 held={held}")
PY
  out="$(preload CUDA_DEVICE_MEMORY_LIMIT=4g timeout 120 python3 "$WORK/torch_mem.py" 2>&1)"
  total="$(sed -n 's/^total=\([0-9]*\)/\1/p' <<<"$out")"
  held="$(sed -n 's/^oom=1 held=\([0-9]*\)/\1/p' <<<"$out")"
  [[ "$total" == "$LIMIT_BYTES" ]] && r=PASS || r=FAIL
  row "torch.cuda.mem_get_info() total" "4 GiB" "${total:-none}" "$r"
  [[ -n "$held" && "$held" -le "$LIMIT_BYTES" ]] && r=PASS || r=FAIL
  row "torch: allocating past 4 GiB raises OOM" "OutOfMemoryError" "${held:+held $held}" "$r"
  TORCH=1
else
  row "PyTorch checks" "torch with CUDA" "not installed" SKIP
  TORCH=0
fi

# ---------------------------------------------------------------- SM limit 30 %
# Mean GPU utilisation (NVML, sampled every 200 ms by nvidia-smi outside the preload) over
# seconds 6-20 of a busy loop running under CUDA_DEVICE_SM_LIMIT=30, policy FORCE.
measure_util() {  # command...
  local samples="$WORK/util.$RANDOM"
  nvidia-smi -i 0 --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 200 \
    >"$samples" 2>/dev/null &
  local smi=$!
  preload CUDA_DEVICE_SM_LIMIT=30 GPU_CORE_UTILIZATION_POLICY=force timeout 40 "$@" \
    >/dev/null 2>&1
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
  # 5 samples per second: skip the first 30 (6 s of calibration), average the next 70.
  awk 'NR > 30 && NR <= 100 { s += $1; n++ } END { if (n) printf "%.1f", s / n }' "$samples"
}
if [[ "$TORCH" == 1 ]]; then
  cat >"$WORK/matmul.py" <<'PY'
import time, torch
a = torch.randn(4096, 4096, device="cuda")
b = torch.randn(4096, 4096, device="cuda")
end = time.time() + 22
while time.time() < end:
    for _ in range(10):
        c = a @ b
    torch.cuda.synchronize()
PY
  util="$(measure_util python3 "$WORK/matmul.py")"
  if [[ -n "$util" ]] && awk -v u="$util" 'BEGIN { exit !(u >= 25 && u <= 35) }'; then
    r=PASS
  else
    r=FAIL
  fi
  row "SM limit 30% (FORCE), torch matmul loop" "30 +- 5 %" "${util:-none} %" "$r"
else
  row "SM limit 30% measurement" "torch with CUDA" "not installed" SKIP
fi

# ---------------------------------------------------------------- device plugin: NVML discovery
# `hami-device-plugin --print-register` discovers through the real libnvidia-ml.so.1 and prints
# hami.io/node-nvidia-register; each GPU's object must carry nvidia-smi's uuid, memory.total
# (MiB; chart default deviceMemoryScaling 1) and name ("NVIDIA-" prefixed unless it starts with
# NVIDIA), with count 10 and devcore 100 (chart defaults).
DP="$BUILD/bin/hami-device-plugin"
if [[ ! -x "$DP" ]]; then
  gpu_build hami-device-plugin
fi
if [[ -x "$DP" ]]; then
  reg="$(timeout 60 "$DP" --print-register --node-config-file /nonexistent 2>"$WORK/dp.err")"
  objects="$(sed 's/},{/}\n{/g' <<<"$reg")"
  n_smi=0
  n_ok=0
  while IFS=, read -r uuid mem name; do
    uuid="$(xargs <<<"$uuid")"
    mem="$(xargs <<<"${mem% MiB}")"
    name="$(sed 's/^ *//; s/ *$//' <<<"$name")"
    [[ "$name" == NVIDIA* ]] && want_type="$name" || want_type="NVIDIA-$name"
    n_smi=$((n_smi + 1))
    obj="$(grep -F "\"id\":\"$uuid\"" <<<"$objects")"
    if grep -qF "\"devmem\":$mem," <<<"$obj" && grep -qF "\"type\":\"$want_type\"" <<<"$obj" &&
      grep -qF '"count":10,' <<<"$obj" && grep -qF '"devcore":100,' <<<"$obj" &&
      grep -qF '"health":true' <<<"$obj"; then
      n_ok=$((n_ok + 1))
    else
      echo "register annotation lacks $uuid / $mem MiB / $want_type: ${obj:-no object}"
    fi
  done < <(nvidia-smi --query-gpu=uuid,memory.total,name --format=csv,noheader)
  n_reg="$(grep -c '"id":' <<<"$objects")"
  [[ "$n_smi" -gt 0 && "$n_ok" == "$n_smi" && "$n_reg" == "$n_smi" ]] && r=PASS || r=FAIL
  [[ "$r" == FAIL ]] && { echo "register: $reg"; cat "$WORK/dp.err"; }
  row "device plugin: NVML register = nvidia-smi" "$n_smi GPUs match" "$n_ok of $n_reg match" "$r"
else
  row "device plugin: NVML register" "binary built" "build failed" FAIL
fi

# ---------------------------------------------------------------- device plugin: MIG profiles
# Read-only, and only where a lent GPU is already in MIG mode: never changes the MIG mode or any
# other setting, creates no instance. `--print-register` in operatingmode mig (config.json) must
# register each MIG-mode GPU whose model the allowlist names with "mode":"mig", and each
# registered profile must match the `nvidia-smi mig -lgip` row of its slice count (memory within
# 0.01 GiB); `count` is the largest instance total of those rows.
mig_gpus="$(nvidia-smi --query-gpu=index,uuid,mig.mode.current --format=csv,noheader 2>/dev/null |
  awk -F', *' '$3 == "Enabled" { print $1 "," $2 }')"
if [[ -z "$mig_gpus" ]]; then
  row "device plugin: MIG profiles = nvidia-smi" "a GPU in MIG mode" "none in MIG mode" SKIP
elif [[ ! -x "$DP" ]] || ! command -v python3 >/dev/null 2>&1; then
  row "device plugin: MIG profiles = nvidia-smi" "plugin + python3" "missing" SKIP
else
  printf '{"nodeconfig":[{"name":"gpu-check","operatingmode":"mig"}]}' >"$WORK/mig-node.json"
  timeout 60 "$DP" --print-register --node-name gpu-check \
    --node-config-file "$WORK/mig-node.json" >"$WORK/mig-reg.json" 2>"$WORK/dp-mig.err"
  n_mig=0
  n_ok=0
  while IFS=, read -r idx uuid; do
    n_mig=$((n_mig + 1))
    nvidia-smi mig -lgip -i "$idx" >"$WORK/lgip.$idx" 2>&1 </dev/null
    if python3 - "$WORK/mig-reg.json" "$WORK/lgip.$idx" "$uuid" <<'PY'; then
import json, re, sys
reg, lgip, uuid = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), sys.argv[3]
rows = {}  # "1g" -> (GiB, total instances), plain profiles only (no +me/+gfx variants)
for m in re.finditer(r"MIG (\d+g)\.\S*?\s+\d+\s+\d+/(\d+)\s+([\d.]+)", lgip):
    if "+" not in m.group(0).split()[1]:
        rows.setdefault(m.group(1), (float(m.group(3)), int(m.group(2))))
gpu = [d for d in reg if d.get("id") == uuid]
if not gpu:
    sys.exit("not registered (its model matches no migProfileAllowlist entry?)")
gpu, bad, totals = gpu[0], [], []
if gpu.get("mode") != "mig" or not gpu.get("migProfiles"):
    sys.exit(f"registered without MIG profiles: {gpu}")
for p in gpu["migProfiles"]:
    want = rows.get(p["name"].split(".")[0])
    if want is None or abs(p["memoryMB"] / 1024 - want[0]) > 0.01:
        bad.append(f'{p["name"]} {p["memoryMB"]} MB vs nvidia-smi {want}')
    else:
        totals.append(want[1])
if totals and gpu["count"] != max(totals):
    bad.append(f'count {gpu["count"]} vs {max(totals)}')
sys.exit("; ".join(bad) if bad else 0)
PY
      n_ok=$((n_ok + 1))
    else
      echo "MIG register of $uuid:"
      cat "$WORK/mig-reg.json" "$WORK/dp-mig.err"
    fi
  done <<<"$mig_gpus"
  [[ "$n_ok" == "$n_mig" ]] && r=PASS || r=FAIL
  row "device plugin: MIG profiles = nvidia-smi" "$n_mig GPUs match" "$n_ok match" "$r"
fi

# Issue 29's scenarios and DRA mode's (issue 27), each its own script (exit 77 where it cannot run, e.g. without nvcc).
for extra in vgpu_memory vgpu_sm dra; do
  BUILD="$BUILD" bash "$ROOT/tests/gpu/$extra.sh" >"$WORK/$extra.log" 2>&1
  rc=$?
  case $rc in
    0) r=PASS ;; 77) r=SKIP ;; *) r=FAIL ;;
  esac
  row "tests/gpu/$extra.sh" "exit 0" "exit $rc" "$r"
  [[ $r == PASS ]] || tail -20 "$WORK/$extra.log"
done

print_tables
exit "$FAILED"
