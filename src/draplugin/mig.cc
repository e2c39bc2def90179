#include "draplugin/mig.h"

#include <algorithm>
#include <optional>

#include "common/log.h"
#include "common/strings.h"
#include "deviceplugin/mig_profiles.h"
#include "draplugin/prepare.h"

namespace hami::draplugin {
namespace {

std::string PlacementText(const protocol::MigPlacement& p) {
  return "{start " + std::to_string(p.start) + ", size " + std::to_string(p.size) + "}";
}

bool Overlap(const protocol::MigPlacement& a, const protocol::MigPlacement& b) {
  return a.start < b.start + b.size && b.start < a.start + a.size;
}

std::string Describe(const ClaimMig& m) {
  return "MIG device " + Quote(m.device) + " (" + m.profile + " at " + PlacementText(m.placement) +
         " on GPU " + Quote(m.gpu_uuid) + ")";
}

// Holds the apply lock for one call, waiting for it at most `wait` (MigLockWait).
class LockGuard {
 public:
  LockGuard(deviceplugin::MigApplyLock& lock, const MigLockWait& wait)
      : lock_(lock), status_(lock_.AcquireWithin(wait)) {}
  ~LockGuard() { lock_.Release(); }
  const Status& status() const { return status_; }

 private:
  deviceplugin::MigApplyLock& lock_;
  Status status_ = OkStatus();
};

}  // namespace

std::vector<ClaimMig> ClaimMigDevices(const ClaimAllocation& claim,
                                      const std::vector<GpuFacts>& gpus) {
  std::vector<ClaimMig> out;
  for (const AllocationResult& r : claim.results) {
    if (std::any_of(out.begin(), out.end(),
                    [&](const ClaimMig& m) { return m.device == r.device; }))
      continue;
    for (const GpuFacts& g : gpus) {
      for (const auto& capacity : g.gpu.mig_profiles) {
        for (const auto& placement : capacity.profile.placements) {
          if (MigDeviceName(g.minor(), capacity.profile.name, placement.start) != r.device)
            continue;
          ClaimMig m;
          m.device = r.device;
          m.gpu_index = static_cast<uint32_t>(g.gpu.index);
          m.gpu_uuid = g.gpu.uuid;
          m.profile = capacity.profile.name;
          const int32_t id = deviceplugin::GpuInstanceProfileId(m.profile);
          m.profile_id = id < 0 ? UINT32_MAX : static_cast<uint32_t>(id);
          m.placement = placement;
          out.push_back(std::move(m));
        }
      }
    }
  }
  return out;
}

MigPreparer::MigPreparer(deviceplugin::MigDriver* driver, std::string lock_path, MigLockWait wait)
    : driver_(driver), lock_(std::move(lock_path)), wait_(std::move(wait)) {}

Result<std::vector<ClaimMig>> MigPreparer::Create(std::vector<ClaimMig> wanted) {
  LockGuard guard(lock_, wait_);
  if (!guard.status()) return Error{"MIG apply lock: " + guard.status().error()};
  std::vector<ClaimMig> done;
  auto fail = [&](const ClaimMig& m, const std::string& why) -> Error {
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      if (!it->created) continue;
      if (Status s = driver_->DestroyGpuInstance(it->gpu_index, it->gpu_instance_id); !s) {
        HAMI_ERROR("MIG roll-back: {}: {}", Describe(*it), s.error());
      }
    }
    return Error{Describe(m) + ": " + why};
  };
  for (ClaimMig& m : wanted) {
    if (m.profile_id == UINT32_MAX) return fail(m, "the profile has no known slice count");
    auto enabled = driver_->MigEnabled(m.gpu_index);
    if (!enabled) return fail(m, enabled.error());
    if (!*enabled) return fail(m, "the GPU is not in MIG mode");
    auto instances = driver_->MigInstances(m.gpu_index);
    if (!instances) return fail(m, instances.error());
    std::optional<deviceplugin::MigInstance> inst;
    for (const deviceplugin::MigInstance& i : *instances) {
      if (i.placement == m.placement && i.profile_id == m.profile_id) {
        inst = i;
        break;
      }
      if (Overlap(i.placement, m.placement)) {
        return fail(m, "the placement is taken by GPU instance " +
                           std::to_string(i.gpu_instance_id) + " (profile id " +
                           std::to_string(i.profile_id) + " at " + PlacementText(i.placement) +
                           (i.mig_uuid.empty() ? "" : ", " + i.mig_uuid) + ")");
      }
    }
    m.created = !inst.has_value();
    if (!inst) {
      auto profiles = driver_->GpuInstanceProfiles(m.gpu_index);
      if (!profiles) return fail(m, profiles.error());
      auto p = std::find_if(
          profiles->begin(), profiles->end(),
          [&](const deviceplugin::GpuInstanceProfile& g) { return g.profile_id == m.profile_id; });
      if (p == profiles->end() || std::find(p->placements.begin(), p->placements.end(),
                                            m.placement) == p->placements.end()) {
        return fail(m, "the GPU offers no such placement for the profile");
      }
      auto created = driver_->CreateGpuInstance(m.gpu_index, m.profile_id, m.placement);
      if (!created) return fail(m, created.error());
      inst = *created;
    }
    m.gpu_instance_id = inst->gpu_instance_id;
    if (!inst->compute_instance_id || inst->mig_uuid.empty()) {
      auto ci = driver_->CreateComputeInstance(m.gpu_index, inst->gpu_instance_id);
      if (!ci || ci->mig_uuid.empty()) {
        const std::string why = ci ? "the compute instance has no MIG device" : ci.error();
        if (m.created) (void)driver_->DestroyGpuInstance(m.gpu_index, inst->gpu_instance_id);
        return fail(m, why);
      }
      inst = *ci;
    }
    m.compute_instance_id = inst->compute_instance_id.value_or(0);
    m.mig_uuid = inst->mig_uuid;
    HAMI_INFO("{}: {} {} (GPU instance {}, compute instance {})", Describe(m),
              m.created ? "created" : "adopted", m.mig_uuid, m.gpu_instance_id,
              m.compute_instance_id);
    done.push_back(m);
  }
  return done;
}

Status MigPreparer::Destroy(const std::vector<ClaimMig>& prepared) {
  LockGuard guard(lock_, wait_);
  if (!guard.status()) return Error{"MIG apply lock: " + guard.status().error()};
  for (const ClaimMig& m : prepared) {
    auto instances = driver_->MigInstances(m.gpu_index);
    if (!instances) return Error{Describe(m) + ": " + instances.error()};
    auto it = std::find_if(
        instances->begin(), instances->end(),
        [&](const deviceplugin::MigInstance& i) { return i.gpu_instance_id == m.gpu_instance_id; });
    if (it == instances->end()) continue;  // gone already
    if (it->placement != m.placement || it->profile_id != m.profile_id ||
        (!it->mig_uuid.empty() && it->mig_uuid != m.mig_uuid)) {
      HAMI_WARN("{}: GPU instance {} is now another instance ({}); left alone", Describe(m),
                m.gpu_instance_id, it->mig_uuid);
      continue;
    }
    if (Status s = driver_->DestroyGpuInstance(m.gpu_index, m.gpu_instance_id); !s) {
      return Error{Describe(m) + ": destroy GPU instance " + std::to_string(m.gpu_instance_id) +
                   ": " + s.error()};
    }
    HAMI_INFO("{}: destroyed {} (GPU instance {})", Describe(m), m.mig_uuid, m.gpu_instance_id);
  }
  return OkStatus();
}

}  // namespace hami::draplugin
