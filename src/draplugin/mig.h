// MIG devices of a claim (docs/DRA.md "Prepare: enforcing a claim"): a result naming
// hami-gpu-<minor>-mig-<profile>-<start> gets the GPU instance of that profile at exactly that
// placement, and the compute instance spanning it, through the device plugin's MigDriver
// (NVML's is NvmlDiscovery) under the node's MIG apply lock (deviceplugin/mig_apply_lock.h).
// The DRA allocator hands a placement's counters to one claim at a time, so an instance already
// at exactly that placement (a plugin that restarted between creating it and checkpointing the
// claim) is the claim's and is adopted; an instance overlapping it is refused. MIG mode itself
// is never changed.
#ifndef HAMI_DRAPLUGIN_MIG_H_
#define HAMI_DRAPLUGIN_MIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "deviceplugin/mig_apply_lock.h"
#include "deviceplugin/mig_driver.h"
#include "draplugin/slices.h"

namespace hami::draplugin {

struct ClaimAllocation;

// One MIG device of a claim: what the result asks for, then (once prepared) its instance.
struct ClaimMig {
  std::string device{};  // hami-gpu-0-mig-1g-10gb-3
  uint32_t gpu_index = 0;
  std::string gpu_uuid{};
  std::string profile{};    // "1g.10gb"
  uint32_t profile_id = 0;  // NVML_GPU_INSTANCE_PROFILE_*
  protocol::MigPlacement placement{};
  // The instance, once prepared.
  uint32_t gpu_instance_id = 0;
  uint32_t compute_instance_id = 0;
  std::string mig_uuid{};  // "MIG-..."
  bool created = false;    // by this Prepare (not adopted); not checkpointed
  bool operator==(const ClaimMig&) const = default;
};

// The MIG devices among `claim`'s results, each once, in the order of the results: the profile
// and placement a device of `gpus` publishes under that name (slices.h MigDeviceName). A result
// that names no device of this node is left for PlanClaim to refuse.
std::vector<ClaimMig> ClaimMigDevices(const ClaimAllocation& claim,
                                      const std::vector<GpuFacts>& gpus);

// How long a prepare waits for the node's apply lock (deviceplugin/mig_apply_lock.h): a bounded
// poll, so the gRPC handler, and every claim PreparedClaims serialises behind it, is never held
// for as long as another process keeps the lock; kubelet retries the prepare.
using deviceplugin::MigLockWait;

// Creates and destroys claims' MIG instances. Calls are serialised by the caller
// (PreparedClaims' mutex) and, across processes, by the apply lock.
class MigPreparer {
 public:
  // `driver` must outlive the preparer.
  MigPreparer(deviceplugin::MigDriver* driver,
              std::string lock_path = std::string(deviceplugin::kMigApplyLockPath),
              MigLockWait wait = {});

  // For each wanted device: the instance at exactly its placement, adopted when it exists (its
  // compute instance created when missing), else created. Errors name the device and the
  // driver's answer: a GPU not in MIG mode, a placement the GPU does not offer for the profile, a
  // placement taken by another instance (named), a failing driver call. On an error the
  // instances this call created are destroyed again: nothing is left half-made.
  Result<std::vector<ClaimMig>> Create(std::vector<ClaimMig> wanted);

  // Destroys each prepared instance (compute instances, then the GPU instance) when the GPU
  // still has it: the GPU instance id at the same placement and profile with the same MIG UUID.
  // One that is gone is done; one whose id now names another instance is left alone.
  Status Destroy(const std::vector<ClaimMig>& prepared);

 private:
  deviceplugin::MigDriver* driver_;
  deviceplugin::MigApplyLock lock_;
  MigLockWait wait_;
};

}  // namespace hami::draplugin

#endif  // HAMI_DRAPLUGIN_MIG_H_
