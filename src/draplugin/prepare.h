// Prepare = enforce (docs/DRA.md "Prepare"): from a ResourceClaim's allocation on this node to
// what its containers get. A pure plan (PlanClaim): the claim's limits file, region and limiter
// files, and one CDI spec whose devices are the claim's allocation results; kubelet's answer
// lists, per result, its CDI device ids. The claim's containers see the same layout a
// device-plugin vGPU container sees (docs/vgpu.md): libvgpu at <hook>/vgpu/libvgpu.so, the
// read-only limits file beside it, the region as a file mount of its own, /etc/ld.so.preload.
// One region per claim: every container of every pod that shares the claim shares its memory
// and cores, as the claim does.
#ifndef HAMI_DRAPLUGIN_PREPARE_H_
#define HAMI_DRAPLUGIN_PREPARE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "draplugin/mig.h"
#include "draplugin/slices.h"

namespace hami::draplugin {

// One entry of status.allocation.devices.results for our driver.
struct AllocationResult {
  std::string request{};
  std::string pool{};
  std::string device{};
  std::string share_id{};     // "" for a device allocated whole (no allowMultipleAllocations)
  int64_t memory_bytes = -1;  // consumedCapacity.memory; -1 = not given
  int64_t cores = -1;         // consumedCapacity.cores; -1 = not given
  bool operator==(const AllocationResult&) const = default;
};

struct ClaimAllocation {
  std::string uid{}, ns{}, name{};
  std::vector<AllocationResult> results{};  // our driver's, in the claim's order
  bool operator==(const ClaimAllocation&) const = default;
};

// Reads a ResourceClaim (resource.k8s.io/v1 JSON): metadata.uid/namespace/name and the results
// of status.allocation.devices.results whose driver is ours. Errors name the field and value
// (`status.allocation.devices.results[1].consumedCapacity.memory: want a quantity, got "x"`);
// a claim without an allocation is an error.
Result<ClaimAllocation> ReadClaimAllocation(const Json& claim);

// Where the plan puts things.
struct PrepareEnv {
  std::string hook_path = "/usr/local";  // HOOK_PATH, as the device plugin's
  std::string cdi_dir = "/var/run/cdi";  // where the container runtime reads CDI specs
  std::string libvgpu_host_path{};       // "" = <hook>/vgpu/libvgpu.so
  // A CDI kind whose device "<kind>=<GPU UUID>" the runtime also injects for each GPU (the
  // NVIDIA Container Toolkit's, for the driver's libraries); "" = none.
  std::string nvidia_cdi_kind = "nvidia.com/gpu";
};

// A file the plan writes; `create_only`: made (empty) when absent and never overwritten, since
// a running container of another pod sharing the claim may be using it (the region).
struct PlannedFile {
  std::string host_path{};
  std::string content{};
  unsigned mode = 0644;
  bool create_only = false;
  bool operator==(const PlannedFile&) const = default;
};

// One device of kubelet's NodePrepareResources answer.
struct PreparedDevice {
  std::vector<std::string> requests{};
  std::string pool{};
  std::string device{};
  std::string share_id{};
  std::vector<std::string> cdi_device_ids{};
  bool operator==(const PreparedDevice&) const = default;
};

struct ClaimPlan {
  std::string claim_dir{};           // <hook>/vgpu/claims/<uid>: the claim's writable directory
  std::vector<PlannedFile> files{};  // the limits file, region, limiter side file, CDI spec
  std::vector<PreparedDevice> devices{};
  Json cdi_spec{};
  bool operator==(const ClaimPlan&) const = default;
};

// The CDI kind of our specs and the spec file of a claim.
inline constexpr std::string_view kCdiKind = "hami-core-gpu.project-hami.io/claim";
std::string CdiSpecPath(const PrepareEnv& env, std::string_view claim_uid);
// <hook>/vgpu/claims/<uid> and <hook>/vgpu/claim-limits/<uid>.limits (outside the claim's
// writable directory).
std::string ClaimHostDir(const PrepareEnv& env, std::string_view claim_uid);
std::string ClaimLimitsHostPath(const PrepareEnv& env, std::string_view claim_uid);

// The plan for `claim` on a node with `gpus`. Each result's device must be one of ours on this
// node: hami-gpu-<minor>, or a MIG device of it whose instance `migs` holds (MigPreparer made
// it). Results on one GPU (two shares of one GPU in a claim) add up to one CUDA device with the
// sum of their memory and cores (at most the GPU's). A MIG device is one CUDA device, its MIG
// UUID in NVIDIA_VISIBLE_DEVICES, without libvgpu limits (the hardware isolates it). A claim
// whose every GPU is whole (no capacity below the GPU's) or MIG gets them without libvgpu.
Result<ClaimPlan> PlanClaim(const ClaimAllocation& claim, const std::vector<GpuFacts>& gpus,
                            const PrepareEnv& env, const std::vector<ClaimMig>& migs = {});

}  // namespace hami::draplugin

#endif  // HAMI_DRAPLUGIN_PREPARE_H_
