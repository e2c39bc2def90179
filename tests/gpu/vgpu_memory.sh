#!/usr/bin/env bash
# GPU checks of libvgpu's memory accounting that need a real NVIDIA GPU and driver (issue 29,
# docs/vgpu.md "Threat model: memory"). Exit status: 0 all passed, 1 a check failed, 77 skipped
# (no GPU, or no nvcc to build the test programs). Runs in under a minute.
#
# Under libvgpu with a 1 GiB limit from a limits file beside the library (as the device plugin
# mounts it):
#   lazy loading   a cudart program whose module has 1.5 GiB of __device__ globals, launched with
#                  CUDA_MODULE_LOADING=LAZY (the default since CUDA 12.2) and EAGER: the load or
#                  the launch fails, and NVML never sees the process hold more than the limit;
#   VMM sharing    (4 GiB limit: two contexts fit) process A creates 2.5 GiB (cuMemCreate, POSIX
#                  fd handle), exports it, passes the fd to process B (SCM_RIGHTS), B imports and
#                  maps it, A releases its handle: A's next 2.5 GiB is refused (the memory is alive
#                  in B), and B's mapping works.
#
#   tests/gpu/vgpu_memory.sh           # uses build/lib/libvgpu.so, builds it when missing
#   BUILD=build-rel tests/gpu/vgpu_memory.sh
set -u

# shellcheck source=tests/gpu/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_require_gpu
gpu_require_nvcc "the test programs"
LIB="$BUILD/lib/libvgpu.so"
if [[ ! -f "$LIB" ]]; then
  echo "building libvgpu.so in $BUILD"
  gpu_build vgpu || { echo "build failed"; exit 1; }
fi
gpu_workdir hami-gpu-mem
ROWS=()
FAILED=0
LIMIT_MIB=1024

row() {  # name expected measured PASS|FAIL|SKIP
  ROWS+=("$(printf '| %-52s | %-26s | %-34s | %-4s |' "$1" "$2" "$3" "$4")")
  [[ "$4" == FAIL ]] && FAILED=1
  return 0
}

# The library in a directory of its own with its limits file, as hami-device-plugin mounts it.
mkdir -p "$WORK/lib"
cp "$LIB" "$WORK/lib/libvgpu.so"
printf 'CUDA_DEVICE_MEMORY_LIMIT=1g\nCUDA_DEVICE_MEMORY_SHARED_CACHE=%s\n' "$WORK/vgpu.cache" \
  >"$WORK/lib/vgpu.limits"
mkdir -p "$WORK/lib4"
cp "$LIB" "$WORK/lib4/libvgpu.so"
printf 'CUDA_DEVICE_MEMORY_LIMIT=4g\nCUDA_DEVICE_MEMORY_SHARED_CACHE=%s\n' "$WORK/vgpu4.cache" \
  >"$WORK/lib4/vgpu.limits"
preload() {  # runs "$@" under libvgpu and the 1 GiB limits file
  env LD_PRELOAD="$WORK/lib/libvgpu.so" CUDA_DEVICE_MEMORY_SHARED_CACHE="$WORK/vgpu.cache" \
    CUDA_VISIBLE_DEVICES=0 LIBCUDA_LOG_LEVEL=0 "$@"
}
preload4() {  # the same with the 4 GiB limits file
  env LD_PRELOAD="$WORK/lib4/libvgpu.so" CUDA_DEVICE_MEMORY_SHARED_CACHE="$WORK/vgpu4.cache" \
    CUDA_VISIBLE_DEVICES=0 LIBCUDA_LOG_LEVEL=0 "$@"
}

# MiB NVML reports for process $1 on GPU 0 (0 when not listed).
nvml_used() {
  nvidia-smi -i 0 --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
    awk -F', *' -v pid="$1" '$1 == pid { print $2; found = 1 } END { if (!found) print 0 }'
}

# ---------------------------------------------------------------- lazy loading
cat >"$WORK/lazy.cu" <<'CU'
#include <cstdio>
#include <unistd.h>
#include <cuda_runtime.h>
// 1.5 GiB of __device__ globals (zero-initialised: not stored in the fatbin; the host shadow
// stays under the 2 GiB a non-PIC relocation reaches).
__device__ char big[3ULL << 29];
__global__ void touch() { big[threadIdx.x] = 1; big[(3ULL << 29) - 1 - threadIdx.x] = 2; }
int main() {
  cudaError_t init = cudaFree(0);
  touch<<<1, 32>>>();
  cudaError_t launch = cudaGetLastError();
  cudaError_t sync = cudaDeviceSynchronize();
  printf("init=%d launch=%d sync=%d\n", (int)init, (int)launch, (int)sync);
  fflush(stdout);
  sleep(3);  // NVML samples the process now
  return 0;
}
CU
if "$NVCC" -o "$WORK/lazy" "$WORK/lazy.cu" >"$WORK/lazy.build" 2>&1; then
  for mode in LAZY EAGER; do
    preload CUDA_MODULE_LOADING="$mode" timeout 60 "$WORK/lazy" >"$WORK/lazy.$mode.out" 2>&1 &
    pid=$!
    max=0
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12; do
      sleep 0.25
      used="$(nvml_used "$pid")"
      [[ "$used" =~ ^[0-9]+$ && "$used" -gt "$max" ]] && max="$used"
    done
    wait "$pid"
    out="$(grep -m1 '^init=' "$WORK/lazy.$mode.out")"
    launched=0
    [[ "$out" == *"launch=0 sync=0"* ]] && launched=1
    if [[ "$max" -le "$LIMIT_MIB" && "$launched" == 0 ]]; then r=PASS; else r=FAIL; fi
    row "1.5 GiB __device__ globals, CUDA_MODULE_LOADING=$mode" "refused, <= $LIMIT_MIB MiB held" \
      "${out:-no output}, max ${max} MiB" "$r"
  done
else
  row "lazy-loading program" "nvcc builds it" "$(tail -c 60 "$WORK/lazy.build" | tr '\n' ' ')" FAIL
fi

# ---------------------------------------------------------------- VMM export/import
cat >"$WORK/vmm_share.cu" <<'CU'
// A: cuMemCreate argv[1] MiB (POSIX fd), export, send the fd to B, wait for B's import, release,
// then try as much again (must be refused while B holds the memory). B: import, map, set access,
// memset, report, wait for A.
#include <cuda.h>
#include <cstdio>
#include <cstring>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
static int send_fd(int sock, int fd) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char buf[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = buf;
  msg.msg_controllen = sizeof(buf);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}
static int recv_fd(int sock) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char buf[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = buf;
  msg.msg_controllen = sizeof(buf);
  if (recvmsg(sock, &msg, 0) != 1) return -1;
  int fd = -1;
  memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(int));
  return fd;
}
static CUmemAllocationProp Prop() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}
#include <cstdlib>
int main(int argc, char** argv) {
  unsigned long long mib = argc > 1 ? strtoull(argv[1], nullptr, 10) : 600;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 3;
  pid_t child = fork();  // before any CUDA call: each process initialises its own driver
  CUcontext ctx;
  cuInit(0);
  cuDevicePrimaryCtxRetain(&ctx, 0);
  cuCtxSetCurrent(ctx);
  CUmemAllocationProp prop = Prop();
  size_t gran = 0;
  cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (gran == 0) gran = 2 << 20;
  size_t size = ((mib << 20) + gran - 1) / gran * gran;
  char ok = 0;
  if (child == 0) {
    int fd = recv_fd(sv[1]);
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    CUresult r = cuMemImportFromShareableHandle(&h, (void*)(long)fd,
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r == CUDA_SUCCESS) r = cuMemAddressReserve(&va, size, 0, 0, 0);
    if (r == CUDA_SUCCESS) r = cuMemMap(va, size, 0, h, 0);
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (r == CUDA_SUCCESS) r = cuMemSetAccess(va, size, &access, 1);
    if (r == CUDA_SUCCESS) r = cuMemsetD8(va, 7, size);
    if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
    printf("importer=%d\n", (int)r);
    fflush(stdout);
    ok = r == CUDA_SUCCESS;
    write(sv[1], &ok, 1);
    read(sv[1], &ok, 1);  // until A is done
    if (va != 0) cuMemUnmap(va, size);
    if (h != 0) cuMemRelease(h);
    return r == CUDA_SUCCESS ? 0 : 1;
  }
  CUmemGenericAllocationHandle a = 0, b = 0;
  CUresult r = cuMemCreate(&a, size, &prop, 0);
  int fd = -1;
  if (r == CUDA_SUCCESS) {
    r = cuMemExportToShareableHandle(&fd, a, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  }
  printf("create=%d\n", (int)r);
  if (r == CUDA_SUCCESS) send_fd(sv[0], fd);
  read(sv[0], &ok, 1);  // B imported and wrote it
  cuMemRelease(a);
  close(fd);
  CUresult again = cuMemCreate(&b, size, &prop, 0);
  printf("again=%d\n", (int)again);
  fflush(stdout);
  if (again == CUDA_SUCCESS) cuMemRelease(b);
  write(sv[0], &ok, 1);
  int status = 0;
  waitpid(child, &status, 0);
  return 0;
}
CU
if "$NVCC" -o "$WORK/vmm_share" "$WORK/vmm_share.cu" -L"$CUDA_HOME/lib64/stubs" -lcuda \
  >"$WORK/vmm.build" 2>&1; then
  out="$(preload4 timeout 60 "$WORK/vmm_share" 2560 2>&1)"
  create="$(sed -n 's/^create=\([0-9]*\).*/\1/p' <<<"$out")"
  importer="$(sed -n 's/^importer=\([0-9]*\).*/\1/p' <<<"$out")"
  again="$(sed -n 's/^again=\([0-9]*\).*/\1/p' <<<"$out")"
  [[ "$create" == 0 && "$importer" == 0 ]] && r=PASS || r=FAIL
  row "VMM: export 2.5 GiB, import + map in a second process" "both succeed" \
    "create=${create:-?} importer=${importer:-?}" "$r"
  [[ "$again" == 2 ]] && r=PASS || r=FAIL
  row "VMM: exporter releases, creates 2.5 GiB again" "refused (2): B holds it" "again=${again:-?}" \
    "$r"
else
  row "VMM sharing program" "nvcc builds it" "$(tail -c 60 "$WORK/vmm.build" | tr '\n' ' ')" FAIL
fi

echo
echo "libvgpu memory, 1 GiB limit ($(nvidia-smi -i 0 --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null))"
printf '| %-52s | %-26s | %-34s | %-4s |\n' check expected measured ok
printf '%s\n' "${ROWS[@]}"
exit "$FAILED"
