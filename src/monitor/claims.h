// DRA mode's claims as the monitor sees them (docs/MONITOR.md "DRA claims"): hami-dra-plugin
// prepares each claim of this node with one region at <hook>/vgpu/claims/<claimUID>/, shared by
// every container of every pod that uses the claim (docs/DRA.md "Prepare"). What the region says
// is the claim's use; the ResourceClaim (status.allocation, status.reservedFor) says what the
// claim was given and which pods use it; this node's ResourceSlices say which GPU a device name
// is. Pure functions of the API objects; the monitor lists them (monitor.h).
#ifndef HAMI_MONITOR_CLAIMS_H_
#define HAMI_MONITOR_CLAIMS_H_

#include <string>
#include <string_view>
#include <vector>

#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/object.h"

namespace hami::monitor {

// hami-dra-plugin's driver name (docs/DRA.md "ResourceSlices").
inline constexpr std::string_view kDraDriverName = "hami-core-gpu.project-hami.io";

// A claim UID as hami-dra-plugin accepts one for a path: non-empty, at most 63 bytes, letters,
// digits and '-' only. A directory under claims/ with any other name is not a claim's.
bool ValidClaimUid(std::string_view uid);

// One device of this node's pool (a ResourceSlice device of our driver).
struct DraDevice {
  std::string name;         // hami-gpu-<minor>
  std::string uuid;         // attribute uuid
  std::string type;         // HAMi-DRA's device_type: brand + "-" + productName
  std::string index;        // attribute minor (HAMi-DRA: the position in its cache)
  double memory_bytes = 0;  // capacity memory
  double cores = 0;         // capacity cores (100 = the whole GPU)
};

// One allocation result of a claim on this node's pool, for our driver.
struct ClaimShare {
  std::string device;
  double memory_bytes = -1;  // consumedCapacity.memory; -1 = not given (the whole device)
  double cores = -1;         // consumedCapacity.cores; -1 = not given (the whole device)
};

// A pod of status.reservedFor (resource "pods"); the namespace is the claim's.
struct ClaimPod {
  std::string name;
  std::string uid;
};

struct ClaimInfo {
  std::string uid, ns, name;
  std::vector<ClaimShare> shares;  // this node's pool only
  std::vector<ClaimPod> pods;      // in reservedFor's order
};

// The devices of `slices` (ResourceSlice objects) that are our driver's in the pool named
// `node`, in the slices' order. Anything of the wrong JSON type is left out, never thrown.
std::vector<DraDevice> ReadPoolDevices(const std::vector<k8s::ObjectRef>& slices,
                                       std::string_view node);

// A ResourceClaim's UID, namespace, name, our driver's results on pool `node` and its pod
// consumers. Fields of the wrong JSON type and unparsable quantities are left out.
ClaimInfo ReadClaimInfo(const k8s::Json& claim, std::string_view node);

// The monitor's ResourceClaim informer caches every claim of the cluster through this: a claim's
// name, namespace, UID and resourceVersion, and only for a claim with a result of our driver on
// pool `node`, those results and status.reservedFor. ReadClaimInfo reads the same from it.
k8s::Json TrimClaim(k8s::Json claim, std::string_view node);

}  // namespace hami::monitor

#endif  // HAMI_MONITOR_CLAIMS_H_
