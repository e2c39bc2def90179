# The preamble the tests/gpu/*.sh scripts share. Source it first:
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# Sets ROOT (the source tree) and BUILD ($BUILD, default $ROOT/build).
# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BUILD:-$ROOT/build}"

# Exits 77 (skipped) unless nvidia-smi lists a GPU.
gpu_require_gpu() {
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "tests/gpu/$(basename "$0"): no NVIDIA GPU on this machine, skipped"
    exit 77
  fi
}

# Sets CUDA_HOME (default /usr/local/cuda) and NVCC (nvcc on PATH, else CUDA_HOME's); false when
# that is not an executable.
gpu_find_nvcc() {
  CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
  NVCC="$(command -v nvcc || echo "$CUDA_HOME/bin/nvcc")"
  [[ -x "$NVCC" ]]
}

# gpu_require_nvcc WHAT: gpu_find_nvcc, else exits 77 (no nvcc to build WHAT).
gpu_require_nvcc() {
  gpu_find_nvcc && return 0
  echo "tests/gpu/$(basename "$0"): no nvcc to build $1, skipped"
  exit 77
}

# gpu_build TARGET...: configures $BUILD (Release, Ninja) and builds the targets, quietly.
gpu_build() {
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$BUILD" --target "$@" >/dev/null
}

# gpu_workdir NAME: WORK, a fresh directory /tmp/NAME.XXXXXX removed when the script exits (a
# script that sets its own EXIT trap removes it there).
gpu_workdir() {
  WORK="$(mktemp -d "/tmp/$1.XXXXXX")"
  trap 'rm -rf "$WORK"' EXIT
}

# Builds $WORK/memcheck with $NVCC: a cudart program that prints "total=<bytes> free=<bytes>"
# (cudaMemGetInfo), then takes 256 MiB with cudaMalloc until a call fails and prints
# "held=<bytes> err=<cudaError_t>". False when nvcc fails.
gpu_build_memcheck() {
  cat >"$WORK/memcheck.cu" <<'CU'
#include <cstdio>
#include <cuda_runtime.h>
int main() {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 3;
  printf("total=%zu free=%zu\n", total_b, free_b);
  size_t chunk = 256u << 20, held = 0;
  void* p;
  cudaError_t err;
  while ((err = cudaMalloc(&p, chunk)) == cudaSuccess) held += chunk;
  printf("held=%zu err=%d\n", held, (int)err);
  return 0;
}
CU
  "$NVCC" -o "$WORK/memcheck" "$WORK/memcheck.cu" >/dev/null 2>&1
}
