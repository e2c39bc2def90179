// DRA mode as kubectl-hami shows it (docs/KUBECTL_HAMI.md "DRA mode"): the GPUs hami-dra-plugin
// publishes in ResourceSlices (docs/DRA.md "ResourceSlices") and the shares of them that
// ResourceClaims were allocated (status.allocation.devices.results[]: device, shareID,
// consumedCapacity; status.reservedFor: the pods). Pure functions of the API objects: nothing in
// them is trusted to have the right JSON type, and what does not read is a warning, never thrown.
#ifndef HAMI_CLI_KUBECTL_HAMI_DRA_H_
#define HAMI_CLI_KUBECTL_HAMI_DRA_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace hami::cli {

// hami-dra-plugin's driver, which is also its DeviceClass's name (docs/DRA.md).
inline constexpr std::string_view kDraDriver = "hami-core-gpu.project-hami.io";

// What kubectl-hami lists besides Nodes and Pods; both empty where the cluster has no DRA.
struct DraObjects {
  std::vector<nlohmann::json> slices;  // ResourceSlices (resource.k8s.io/v1)
  std::vector<nlohmann::json> claims;  // ResourceClaims, all namespaces
};

// One allocation result of our driver: a share of a GPU (shareID set) or a whole device.
struct DraShare {
  std::string claim;     // "NS/NAME" of the ResourceClaim
  std::string request;   // the result's request ("gpu", "gpu/small" for a subrequest)
  std::string node;      // the node of the result's pool (the pool's name when no slice says)
  std::string device;    // the result's device ("hami-gpu-0", "hami-gpu-1-mig-1g-10gb-3")
  std::string uuid;      // the GPU's uuid attribute; "" when the device is in no slice
  std::string share_id;  // "" when the result has none
  // consumedCapacity memory (MiB, rounded up) and cores (percent); a result without it took the
  // whole device: its capacity.
  int64_t memory = 0;
  int64_t cores = 0;
  std::vector<std::string> pods;  // status.reservedFor pods as "NS/NAME", in their order
};

// One physical GPU of a node's pool: its shareable device, or its MIG placements.
struct DraGpu {
  int64_t minor = 0;   // attribute minor
  std::string uuid;    // attribute uuid
  std::string type;    // "NVIDIA-" + productName, as the device plugin registers a GPU's type
  std::string mode;    // "hami-core" (shared by capacity) or "mig" (MIG placements)
  bool health = true;  // no NoSchedule/NoExecute taint on any of its devices
  // capacity memory (MiB) and cores; for a GPU in MIG mode, its largest placement's.
  int64_t memory = 0;
  int64_t cores = 0;
  std::vector<DraShare> shares;  // every allocated result on its devices, by claim then request
};

// A ResourceClaim as far as kubectl-hami needs it.
struct DraClaim {
  std::string ns, name, uid;
  bool allocated = false;  // status.allocation is set
  // A result of our driver, or (not allocated yet) a request of our DeviceClass.
  bool ours = false;
  std::vector<DraShare> shares;   // our driver's results, in the claim's order
  std::vector<std::string> pods;  // status.reservedFor pods, "NS/NAME"
  std::string owner_uid;          // the controlling owner reference's uid ("" when none)
  std::string pod_claim_name;     // annotation resource.kubernetes.io/pod-claim-name
};

struct DraView {
  std::map<std::string, std::vector<DraGpu>> gpus;  // by node; each node's by minor
  std::map<std::string, DraClaim> claims;           // by "NS/NAME"
  std::vector<std::string> warnings;                // values that did not read, named
};

// The pools of our driver (per pool only the slices of its highest generation, as
// kube-scheduler reads them; the node is spec.nodeName) and every claim, with each result of
// our driver placed on its GPU.
DraView ReadDra(const DraObjects& objects);

// One entry of a pod's spec.resourceClaims, resolved to its ResourceClaim.
struct PodClaim {
  std::string name;                     // spec.resourceClaims[].name
  std::optional<std::string> claim;     // the ResourceClaim's name; nullopt: not made yet
  const DraClaim* found = nullptr;      // into the DraView; nullptr when not listed
  std::vector<std::string> containers;  // the containers (init first) whose resources.claims
                                        // name it
};

// The pod's claims: resourceClaimName, else status.resourceClaimStatuses, else a claim the pod
// controls with the pod-claim-name annotation (what kube-controller-manager makes from a
// template). Pointers into `dra`, which must outlive the result.
std::vector<PodClaim> PodClaims(const nlohmann::json& pod, const DraView& dra);

// Whether a pod is one of DRA mode's: one of its claims is ours, or it carries the webhook's
// label hami.io/dra=true.
bool IsDraPod(const nlohmann::json& pod, const std::vector<PodClaim>& claims);

// A quantity ("3000Mi", "80Gi", "30") in units of 2^`shift` (20: MiB), rounded up; nullopt
// for what is not a non-negative quantity.
std::optional<int64_t> QuantityCeil(const nlohmann::json& value, int shift);

}  // namespace hami::cli

#endif  // HAMI_CLI_KUBECTL_HAMI_DRA_H_
