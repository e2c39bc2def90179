#include "deviceplugin/mig_manager.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/log.h"
#include "common/strings.h"
#include "deviceplugin/mig_profiles.h"
#include "protocol/keys.h"

namespace hami::deviceplugin {
namespace {

std::string PlacementText(const protocol::MigPlacement& p) {
  return "{start " + std::to_string(p.start) + ", size " + std::to_string(p.size) + "}";
}

bool Names(const protocol::MigAllocation& r, const std::string& gpu_uuid, const MigInstance& i) {
  return r.gpu_uuid == gpu_uuid && r.placement == i.placement &&
         GpuInstanceProfileId(r.profile) == static_cast<int32_t>(i.profile_id);
}

// Holds the in-process mutex and the apply lock for one pass. Another holder of the lock (an
// operator's tool, a second plugin) is waited for at most `wait.timeout`: an Allocate behind it
// then fails naming the lock instead of hanging the kubelet's call.
class ApplyGuard {
 public:
  ApplyGuard(std::mutex& mu, MigApplyLock& lock, const MigLockWait& wait) : hold_(mu), lock_(lock) {
    status_ = lock_.AcquireWithin(wait);
  }
  ~ApplyGuard() { lock_.Release(); }
  const Status& status() const { return status_; }

 private:
  std::lock_guard<std::mutex> hold_;
  MigApplyLock& lock_;
  Status status_ = OkStatus();
};

}  // namespace

Result<std::vector<protocol::MigAllocation>> LiveMigReservations(
    const std::vector<k8s::Json>& pods) {
  std::vector<protocol::MigAllocation> out;
  for (const k8s::Json& pod : pods) {
    const std::string phase = k8s::FieldString(pod, "status.phase");
    if (phase == "Succeeded" || phase == "Failed") continue;
    auto value = k8s::Annotation(pod, protocol::kVgpuMigAllocationsKey);
    if (!value) continue;
    auto decoded = protocol::DecodeMigAllocations(*value);
    if (!decoded) {
      return Error{"pod " + k8s::Namespace(pod) + "/" + k8s::Name(pod) + ": " +
                   std::string(protocol::kVgpuMigAllocationsKey) + ": " + decoded.error()};
    }
    out.insert(out.end(), decoded->begin(), decoded->end());
  }
  return out;
}

MigManager::MigManager(MigDriver* driver, std::vector<MigGpu> gpus, std::string lock_path,
                       MigLockWait wait)
    : driver_(driver),
      gpus_(std::move(gpus)),
      lock_(std::move(lock_path)),
      wait_(std::move(wait)) {}

Result<MigSyncReport> MigManager::Sync(const std::vector<protocol::MigAllocation>& live,
                                       std::optional<uint64_t> listed_at) {
  ApplyGuard guard(mu_, lock_, wait_);
  if (!guard.status()) return Error{guard.status().error()};
  // Handed out by an Ensure the pod list may predate: kept this pass.
  auto recent = [&](uint32_t gpu, uint32_t gi) {
    auto it = handed_out_.find({gpu, gi});
    return listed_at && it != handed_out_.end() && it->second > *listed_at;
  };
  std::erase_if(handed_out_, [&](const auto& h) { return !listed_at || h.second <= *listed_at; });
  MigSyncReport report;
  for (const MigGpu& gpu : gpus_) {
    auto enabled = driver_->MigEnabled(gpu.index);
    if (!enabled) return Error{"GPU " + Quote(gpu.uuid) + ": " + enabled.error()};
    if (!*enabled) continue;
    auto instances = driver_->MigInstances(gpu.index);
    if (!instances) return Error{"GPU " + Quote(gpu.uuid) + ": " + instances.error()};
    for (const MigInstance& inst : *instances) {
      auto named = std::find_if(live.begin(), live.end(), [&](const protocol::MigAllocation& r) {
        return Names(r, gpu.uuid, inst);
      });
      if (named == live.end() && recent(gpu.index, inst.gpu_instance_id)) {
        report.kept.push_back({gpu.uuid, inst});
        continue;
      }
      if (named != live.end()) {
        if (named->runtime && (named->runtime->mig_uuid != inst.mig_uuid ||
                               named->runtime->gpu_instance_id != inst.gpu_instance_id)) {
          report.mismatches.push_back("GPU " + Quote(gpu.uuid) + " " + named->profile + " at " +
                                      PlacementText(inst.placement) + ": annotation names " +
                                      Quote(named->runtime->mig_uuid) + ", the GPU has " +
                                      Quote(inst.mig_uuid));
        }
        report.kept.push_back({gpu.uuid, inst});
        continue;
      }
      if (Status s = driver_->DestroyGpuInstance(gpu.index, inst.gpu_instance_id); !s) {
        return Error{"GPU " + Quote(gpu.uuid) + ": destroy GPU instance " +
                     std::to_string(inst.gpu_instance_id) + ": " + s.error()};
      }
      report.destroyed.push_back({gpu.uuid, inst});
    }
  }
  return report;
}

Result<RealisedMig> MigManager::EnsureOne(const protocol::MigAllocation& r) {
  const std::string where = "MIG reservation " + Quote(r.profile) + " at " +
                            PlacementText(r.placement) + " on GPU " + Quote(r.gpu_uuid);
  auto gpu = std::find_if(gpus_.begin(), gpus_.end(),
                          [&](const MigGpu& g) { return g.uuid == r.gpu_uuid; });
  if (gpu == gpus_.end()) return Error{where + ": not a GPU of this plugin"};
  const int32_t profile_id = GpuInstanceProfileId(r.profile);
  if (profile_id < 0) return Error{where + ": profile has no known slice count"};
  auto enabled = driver_->MigEnabled(gpu->index);
  if (!enabled) return Error{where + ": " + enabled.error()};
  if (!*enabled) return Error{where + ": the GPU is not in MIG mode"};
  auto instances = driver_->MigInstances(gpu->index);
  if (!instances) return Error{where + ": " + instances.error()};
  RealisedMig out;
  out.gpu_index = gpu->index;
  std::optional<MigInstance> inst;
  for (const MigInstance& i : *instances) {
    if (Names(r, gpu->uuid, i)) inst = i;
  }
  if (!inst) {
    auto profiles = driver_->GpuInstanceProfiles(gpu->index);
    if (!profiles) return Error{where + ": " + profiles.error()};
    auto p = std::find_if(profiles->begin(), profiles->end(), [&](const GpuInstanceProfile& g) {
      return g.profile_id == static_cast<uint32_t>(profile_id);
    });
    if (p == profiles->end() ||
        std::find(p->placements.begin(), p->placements.end(), r.placement) == p->placements.end()) {
      return Error{where + ": the GPU offers no such placement for the profile"};
    }
    auto created = driver_->CreateGpuInstance(gpu->index, profile_id, r.placement);
    if (!created) return Error{where + ": " + created.error()};
    inst = *created;
    out.created = true;
  }
  if (!inst->compute_instance_id || inst->mig_uuid.empty()) {
    auto ci = driver_->CreateComputeInstance(gpu->index, inst->gpu_instance_id);
    if (!ci || ci->mig_uuid.empty()) {
      const std::string why = ci ? "the compute instance has no MIG device" : ci.error();
      if (out.created) (void)driver_->DestroyGpuInstance(gpu->index, inst->gpu_instance_id);
      return Error{where + ": " + why};
    }
    inst = *ci;
    out.created = true;
  }
  out.identity = {inst->mig_uuid, inst->gpu_instance_id, inst->compute_instance_id.value_or(0)};
  HAMI_INFO("{}: {} {} (GPU instance {}, compute instance {})", where,
            out.created ? "created" : "reused", out.identity.mig_uuid, out.identity.gpu_instance_id,
            out.identity.compute_instance_id);
  return out;
}

Result<std::vector<RealisedMig>> MigManager::Ensure(
    const std::vector<protocol::MigAllocation>& reservations) {
  ApplyGuard guard(mu_, lock_, wait_);
  if (!guard.status()) return Error{guard.status().error()};
  const uint64_t generation = ++generation_;
  std::vector<RealisedMig> out;
  for (const protocol::MigAllocation& r : reservations) {
    auto one = EnsureOne(r);
    if (!one) {
      if (Status s = ReleaseLocked(out); !s) HAMI_ERROR("MIG roll-back: {}", s.error());
      return std::move(one).take_error();
    }
    handed_out_[{one->gpu_index, one->identity.gpu_instance_id}] = generation;
    out.push_back(std::move(*one));
  }
  return out;
}

Status MigManager::ReleaseLocked(const std::vector<RealisedMig>& realised) {
  Status result = OkStatus();
  for (auto it = realised.rbegin(); it != realised.rend(); ++it) {
    if (!it->created) continue;
    handed_out_.erase({it->gpu_index, it->identity.gpu_instance_id});
    if (Status s = driver_->DestroyGpuInstance(it->gpu_index, it->identity.gpu_instance_id); !s) {
      result = Error{"destroy " + Quote(it->identity.mig_uuid) + ": " + s.error()};
    }
  }
  return result;
}

Status MigManager::Release(const std::vector<RealisedMig>& realised) {
  ApplyGuard guard(mu_, lock_, wait_);
  if (!guard.status()) return guard.status();
  return ReleaseLocked(realised);
}

MigReconciler::MigReconciler(MigManager* manager, ListPods list_pods, const Clock& clock,
                             std::chrono::milliseconds interval)
    : manager_(manager),
      list_pods_(std::move(list_pods)),
      clock_(clock),
      interval_(interval),
      next_(clock.Now() + interval) {}

Result<MigSyncReport> MigReconciler::RunOnce() {
  // Read before the list: what an Allocate hands out while it runs is not destroyed.
  const uint64_t listed_at = manager_->generation();
  auto pods = list_pods_();
  if (!pods) return Error{"MIG reconcile: list pods: " + pods.error()};
  auto live = LiveMigReservations(*pods);
  if (!live) return Error{"MIG reconcile: " + live.error()};
  auto report = manager_->Sync(*live, listed_at);
  if (!report) return Error{"MIG reconcile: " + report.error()};
  for (const MigInstanceRef& d : report->destroyed) {
    HAMI_INFO("MIG reconcile: destroyed GPU instance {} ({}) on {}: no live pod references it",
              d.instance.gpu_instance_id, d.instance.mig_uuid, d.gpu_uuid);
  }
  for (const std::string& m : report->mismatches) HAMI_WARN("MIG reconcile: {}", m);
  return report;
}

Result<std::optional<MigSyncReport>> MigReconciler::Tick() {
  const SystemTime now = clock_.Now();
  if (now < next_) return std::optional<MigSyncReport>();
  next_ = now + interval_;
  auto report = RunOnce();
  if (!report) return std::move(report).take_error();
  return std::optional<MigSyncReport>(std::move(*report));
}

}  // namespace hami::deviceplugin
