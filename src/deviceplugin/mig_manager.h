// The device plugin's MIG instances in `operatingmode: mig` (docs/MIG.md "Device plugin"): the
// scheduler reserves a profile at a placement of a GPU for each container device
// (`hami.io/vgpu-mig-allocations`); this module makes the node's GPU and compute instances
// match the reservations of the live pods. It keeps no instance list of its own: every pass
// reads the instances from the driver, so a restarted plugin adopts what its predecessor created.
//
// Rules: an instance is referenced when a live reservation names its GPU, its profile (by slice
// count) and its exact placement. A referenced instance is never destroyed, nor is one that
// Ensure handed out after the pass listed the pods (its pod may not be in the list yet). Sync
// (at start and every 5 s) destroys the others on every GPU of the plugin that is in MIG mode;
// Ensure (Allocate) creates the reserved instance, or reuses it when it already exists. Both hold
// the MIG apply lock (mig_apply_lock.h) and an in-process mutex while they apply. MIG mode itself
// is never changed: a GPU not in MIG mode is left alone, and a reservation on one fails.
#ifndef HAMI_DEVICEPLUGIN_MIG_MANAGER_H_
#define HAMI_DEVICEPLUGIN_MIG_MANAGER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "deviceplugin/mig_apply_lock.h"
#include "deviceplugin/mig_driver.h"
#include "k8s/object.h"
#include "protocol/mig_allocations.h"

namespace hami::deviceplugin {

inline constexpr std::chrono::seconds kMigReconcileInterval{5};

// A GPU of the plugin (after the config's filters): NVML index and UUID.
struct MigGpu {
  uint32_t index = 0;
  std::string uuid{};
  bool operator==(const MigGpu&) const = default;
};

// The reservations of the live pods among `pods` (objects as the API server returns them): a pod
// is live until its phase is Succeeded or Failed (a terminating pod's containers may still
// run). Errors name the pod when its annotation does not decode: callers then destroy nothing.
Result<std::vector<protocol::MigAllocation>> LiveMigReservations(
    const std::vector<k8s::Json>& pods);

// One instance a pass kept or destroyed.
struct MigInstanceRef {
  std::string gpu_uuid{};
  MigInstance instance{};
  bool operator==(const MigInstanceRef&) const = default;
};

struct MigSyncReport {
  std::vector<MigInstanceRef> kept{};       // referenced by a live reservation
  std::vector<MigInstanceRef> destroyed{};  // referenced by none
  // A kept instance whose runtime identity differs from the one its reservation records.
  std::vector<std::string> mismatches{};
};

// An instance Ensure handed out for a reservation.
struct RealisedMig {
  uint32_t gpu_index = 0;
  protocol::MigRuntimeIdentity identity{};
  bool created = false;  // by this call (Release destroys only these)
  bool operator==(const RealisedMig&) const = default;
};

class MigManager {
 public:
  // `driver` must outlive the manager. `lock_path`: the apply lock's file; `wait`: how long a
  // pass waits for another holder of it before failing (MigLockWait, 10 s).
  MigManager(MigDriver* driver, std::vector<MigGpu> gpus,
             std::string lock_path = std::string(kMigApplyLockPath), MigLockWait wait = {});

  // Keeps the referenced instances of `live` and destroys every other instance on the MIG-mode
  // GPUs of the plugin. Errors name the GPU and the failing driver call; instances destroyed
  // before the error stay destroyed (the next pass continues).
  // `listed_at`: generation() read before `live` was listed. An instance Ensure handed out
  // after that (created or reused for a pod the list may not show yet) is kept too.
  Result<MigSyncReport> Sync(const std::vector<protocol::MigAllocation>& live,
                             std::optional<uint64_t> listed_at = std::nullopt);

  // For each reservation, in order: the instance at its placement, created (GPU instance, then
  // its compute instance) when missing, reused when present. A placement the GPU does not offer
  // for the profile, an unknown GPU or profile, or a GPU not in MIG mode is an error; on any
  // error the instances this call created are destroyed again.
  Result<std::vector<RealisedMig>> Ensure(const std::vector<protocol::MigAllocation>& reservations);

  // Destroys the instances Ensure created (`created`), e.g. when Allocate fails afterwards.
  Status Release(const std::vector<RealisedMig>& realised);

  const std::vector<MigGpu>& gpus() const { return gpus_; }
  // Bumped by every Ensure call. Thread-safe.
  uint64_t generation() const { return generation_.load(); }

 private:
  Result<RealisedMig> EnsureOne(const protocol::MigAllocation& r);
  Status ReleaseLocked(const std::vector<RealisedMig>& realised);

  MigDriver* driver_;
  const std::vector<MigGpu> gpus_;
  std::mutex mu_;  // serialises passes in this process; lock_ across processes
  MigApplyLock lock_;
  const MigLockWait wait_;
  std::atomic<uint64_t> generation_{0};
  // (GPU index, GPU instance id) -> the generation of the Ensure that last handed it out;
  // forgotten once a pass listed after it. Guarded by mu_.
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> handed_out_;
};

// The periodic pass: every `interval` (5 s) lists the node's pods and Syncs with their live
// reservations. A failed list or an undecodable annotation skips the pass (destroys nothing).
class MigReconciler {
 public:
  using ListPods = std::function<Result<std::vector<k8s::Json>>()>;
  // `manager` and `clock` must outlive the reconciler. The first pass is due one interval after
  // construction (the plugin Syncs once itself at start).
  MigReconciler(MigManager* manager, ListPods list_pods, const Clock& clock,
                std::chrono::milliseconds interval = kMigReconcileInterval);

  // Runs a pass when due. Returns the pass's report, or nothing when none was due.
  Result<std::optional<MigSyncReport>> Tick();
  // Runs a pass now (the start-up adoption).
  Result<MigSyncReport> RunOnce();

 private:
  MigManager* manager_;
  ListPods list_pods_;
  const Clock& clock_;
  const std::chrono::milliseconds interval_;
  SystemTime next_;
};

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_MIG_MANAGER_H_
