/* The shared region ("cache file") v1.2, byte-compatible with HAMi-core.
 *
 * One file per container, mmap'ed MAP_SHARED by every process of the container and read by the
 * node's vGPU monitor. This header is plain C so the monitor (C++) and any C tool can include it;
 * every offset of the v1.2 layout is pinned below by static asserts, and
 * tests/vgpu/region_reader_test.cc checks the same offsets again with an independent reader that
 * reads raw bytes. Layout assumes x86_64/aarch64 glibc (little-endian, natural alignment,
 * sizeof(sem_t) == 32). Fields written concurrently are accessed with __atomic builtins.
 */
#ifndef HAMI_VGPU_SHARED_REGION_H_
#define HAMI_VGPU_SHARED_REGION_H_

#include <semaphore.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#define HAMI_REGION_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define HAMI_REGION_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#define HAMI_REGION_MAX_DEVICES 16
#define HAMI_REGION_MAX_PROCS 1024
#define HAMI_REGION_MAGIC 19920718 /* 0x012FF74E: initialized_flag once the header is valid */
#define HAMI_REGION_MAJOR 1
#define HAMI_REGION_MINOR 2
#define HAMI_REGION_UUID_LEN 96
/* The file is one byte longer than the struct: HAMi-core seeks to sizeof and writes one byte. */
#define HAMI_REGION_FILE_SIZE 2008953

/* Slot status values (the monitor skips slots with status 0). */
#define HAMI_SLOT_INACTIVE 0
#define HAMI_SLOT_RUNNING 1
#define HAMI_SLOT_SUSPENDED 2

typedef struct {
  uint64_t context_size; /* primary-context estimate */
  uint64_t module_size;  /* module and library globals (measured) */
  uint64_t data_size;    /* device allocations; the monitor calls it bufferSize */
  uint64_t offset;       /* always 0 */
  uint64_t total;        /* context_size + module_size + data_size */
  uint64_t unused[3];
} hami_device_memory_t;

typedef struct {
  uint64_t dec_util;
  uint64_t enc_util;
  uint64_t sm_util; /* percent, from NVML process samples */
  uint64_t unused[3];
} hami_device_util_t;

typedef struct {
  int32_t pid;     /* container PID; 0 = free slot */
  int32_t hostpid; /* host PID or 0 when unknown */
  hami_device_memory_t used[HAMI_REGION_MAX_DEVICES];
  uint64_t monitorused[HAMI_REGION_MAX_DEVICES];
  hami_device_util_t device_util[HAMI_REGION_MAX_DEVICES];
  int32_t status;   /* HAMI_SLOT_* */
  uint64_t seqlock; /* odd while the owner updates used[] */
  uint64_t unused[2];
} hami_proc_slot_t;

typedef struct {
  int32_t initialized_flag; /* HAMI_REGION_MAGIC, stored last at creation */
  uint32_t major_version;
  uint32_t minor_version;
  int32_t sm_init_flag;
  uint64_t owner_pid; /* pid holding the region lock, 0 = free (see region.h) */
  sem_t sem;          /* initialised for HAMi-core tools; libvgpu locks with owner_pid */
  uint64_t device_num;
  char uuids[HAMI_REGION_MAX_DEVICES][HAMI_REGION_UUID_LEN];
  uint64_t limit[HAMI_REGION_MAX_DEVICES];    /* bytes, 0 = unlimited */
  uint64_t sm_limit[HAMI_REGION_MAX_DEVICES]; /* percent; 0 or >= 100 = no throttling */
  hami_proc_slot_t procs[HAMI_REGION_MAX_PROCS];
  int32_t proc_num;           /* slots [0, proc_num) may be in use */
  int32_t utilization_switch; /* monitor: 1 = contention, throttle */
  int32_t recent_kernel;      /* lib writes 2 on launches; monitor sets -1 to block */
  int32_t priority;           /* 0 = high, 1 = low */
  uint64_t last_kernel_time;  /* unix seconds */
  sem_t sem_postinit;
} hami_shared_region_t;

HAMI_REGION_STATIC_ASSERT(sizeof(sem_t) == 32, "sem_t must be 32 bytes");
HAMI_REGION_STATIC_ASSERT(sizeof(hami_device_memory_t) == 64, "device memory entry");
HAMI_REGION_STATIC_ASSERT(sizeof(hami_device_util_t) == 48, "device util entry");
HAMI_REGION_STATIC_ASSERT(sizeof(hami_proc_slot_t) == 1960, "process slot size");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_proc_slot_t, pid) == 0, "slot.pid");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_proc_slot_t, hostpid) == 4, "slot.hostpid");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_proc_slot_t, used) == 8, "slot.used");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_device_memory_t, data_size) == 16, "used.data_size");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_device_memory_t, total) == 32, "used.total");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_proc_slot_t, monitorused) == 1032, "slot.monitorused");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_proc_slot_t, device_util) == 1160, "slot.device_util");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_device_util_t, sm_util) == 16, "util.sm_util");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_proc_slot_t, status) == 1928, "slot.status");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_proc_slot_t, seqlock) == 1936, "slot.seqlock");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_proc_slot_t, unused) == 1944, "slot.unused");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, initialized_flag) == 0,
                          "initialized_flag");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, major_version) == 4, "major_version");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, minor_version) == 8, "minor_version");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, sm_init_flag) == 12, "sm_init_flag");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, owner_pid) == 16, "owner_pid");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, sem) == 24, "sem");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, device_num) == 56, "device_num");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, uuids) == 64, "uuids");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, limit) == 1600, "limit");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, sm_limit) == 1728, "sm_limit");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, procs) == 1856, "procs");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, proc_num) == 2008896, "proc_num");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, utilization_switch) == 2008900,
                          "utilization_switch");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, recent_kernel) == 2008904,
                          "recent_kernel");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, priority) == 2008908, "priority");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, last_kernel_time) == 2008912,
                          "last_kernel_time");
HAMI_REGION_STATIC_ASSERT(offsetof(hami_shared_region_t, sem_postinit) == 2008920, "sem_postinit");
HAMI_REGION_STATIC_ASSERT(sizeof(hami_shared_region_t) == 2008952, "sizeof(region)");
HAMI_REGION_STATIC_ASSERT(sizeof(hami_shared_region_t) + 1 == HAMI_REGION_FILE_SIZE, "file size");

#ifdef __cplusplus
}
#endif

#endif /* HAMI_VGPU_SHARED_REGION_H_ */
