#!/usr/bin/env bash
# libvgpu's SM limit on a real GPU with mixed kernel sizes (issue 29, docs/vgpu.md "Compute
# limiter"). Exit status: 0 all passed, 1 a check failed, 77 skipped (no GPU, or no nvcc to build
# the kernels). Runs in about 90 s.
#
# A CUDA program alternates cheap big-grid kernels (64 blocks of 256 threads per SM, one add
# each) with 1 ms single-block spin kernels, or runs them in phases of 2 s each, under
# CUDA_DEVICE_SM_LIMIT=30 (FORCE); nvidia-smi samples utilization.gpu every 200 ms from outside
# the preload. Checks: 1 process and 4 processes of one container (one region file) alternating,
# mean over seconds 6-20 within 30 +- 5 %; the phases' mean not above 35 %. The lowest and
# highest 2 s window are printed beside each mean.
#
#   tests/gpu/vgpu_sm.sh                # uses build/lib/libvgpu.so, builds it when missing
#   BUILD=build-rel tests/gpu/vgpu_sm.sh
set -u

# shellcheck source=tests/gpu/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_require_gpu
gpu_require_nvcc "the kernels"
LIB="$BUILD/lib/libvgpu.so"
if [[ ! -f "$LIB" ]]; then
  echo "building libvgpu.so in $BUILD"
  gpu_build vgpu || { echo "build failed"; exit 1; }
fi
gpu_workdir hami-gpu-sm
ROWS=()
FAILED=0

row() {  # name expected measured PASS|FAIL
  ROWS+=("$(printf '| %-44s | %-14s | %-30s | %-4s |' "$1" "$2" "$3" "$4")")
  [[ "$4" == FAIL ]] && FAILED=1
  return 0
}

cat >"$WORK/mixed.cu" <<'CU'
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>

__global__ void touch(float* p) { p[blockIdx.x * blockDim.x + threadIdx.x] += 1.0f; }
__global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

static double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// mixed <alternating|phases> <seconds>
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  bool phases = std::strcmp(argv[1], "phases") == 0;
  double seconds = std::atof(argv[2]);
  int sms = 0, khz = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  int blocks = sms * 64;
  float* p = nullptr;
  if (cudaMalloc(&p, sizeof(float) * blocks * 256) != cudaSuccess) return 3;
  long long ms_cycles = static_cast<long long>(khz);  // kHz = cycles per ms
  double start = Now();
  for (long n = 0; Now() - start < seconds; ++n) {
    bool big = phases ? static_cast<long>((Now() - start) / 2.0) % 2 == 0 : n % 2 == 0;
    if (big) {
      touch<<<blocks, 256>>>(p);
    } else {
      spin<<<1, 32>>>(ms_cycles);
    }
    if (n % 16 == 15) cudaDeviceSynchronize();  // bound the queue like a real app
  }
  cudaDeviceSynchronize();
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
CU
if ! "$NVCC" -O2 -o "$WORK/mixed" "$WORK/mixed.cu" >"$WORK/nvcc.log" 2>&1; then
  echo "tests/gpu/vgpu_sm.sh: nvcc failed:"
  cat "$WORK/nvcc.log"
  exit 1
fi

# Runs `processes` copies of the program in one container (one region file) at 30 %, FORCE, and
# prints "mean low high": NVML's utilisation over seconds 6-20, and the lowest and highest mean
# of 10 consecutive samples (2 s) in that span.
measure() {  # processes mode
  local samples="$WORK/util.$RANDOM" cache="$WORK/$RANDOM$RANDOM.cache" pids=() i
  nvidia-smi -i 0 --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 200 \
    >"$samples" 2>/dev/null &
  local smi=$!
  for ((i = 0; i < $1; ++i)); do
    env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" CUDA_VISIBLE_DEVICES=0 \
      CUDA_DEVICE_SM_LIMIT=30 GPU_CORE_UTILIZATION_POLICY=force LIBCUDA_LOG_LEVEL=0 \
      timeout 40 "$WORK/mixed" "$2" 22 >/dev/null 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
  awk 'NR > 30 && NR <= 100 { v[++n] = $1; s += $1 }
       END {
         if (n < 10) exit
         lo = 101; hi = -1
         for (i = 1; i + 9 <= n; ++i) {
           w = 0; for (j = i; j < i + 10; ++j) w += v[j]; w /= 10
           if (w < lo) lo = w; if (w > hi) hi = w
         }
         printf "%.1f %.1f %.1f", s / n, lo, hi
       }' "$samples"
}

check() {  # name processes mode max_mean min_mean
  local m mean lo hi r
  m="$(measure "$2" "$3")"
  read -r mean lo hi <<<"$m"
  if [[ -n "$mean" ]] && awk -v u="$mean" -v a="$5" -v b="$4" 'BEGIN { exit !(u >= a && u <= b) }'
  then
    r=PASS
  else
    r=FAIL
  fi
  row "$1" "$5-$4 %" "mean ${mean:-none}, 2 s ${lo:-?}..${hi:-?}" "$r"
}

check "SM 30%, 1 process, alternating big/1 ms" 1 alternating 35 25
check "SM 30%, 4 processes, alternating big/1 ms" 4 alternating 35 25
check "SM 30%, 1 process, 2 s phases big/1 ms" 1 phases 35 0

echo
echo "libvgpu SM limit, mixed kernels, on $(nvidia-smi -i 0 --query-gpu=name --format=csv,noheader)"
printf '| %-44s | %-14s | %-30s | %-4s |\n' check expected measured ok
printf '%s\n' "${ROWS[@]}"
exit "$FAILED"
