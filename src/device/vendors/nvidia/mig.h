// Dynamic MIG placement for the NVIDIA backend (docs/MIG.md; HAMi v2.10 mig_topology.go and
// device.go selectMigCandidate/AddResourceUsage): which profile and which slice placement a
// request gets on a GPU in "mig" mode, given the instances already reserved on it.
//
// A GPU in MIG mode registers the profiles it offers (`migProfiles` of the register JSON: name,
// memory, compute share, slice count and the legal placements NVML reports). The scheduler
// reserves one placement per requested device; reservations on a GPU never overlap (two
// placements overlap when their slice ranges [start, start+size) intersect).
//
// Everything here is pure and deterministic.
#ifndef HAMI_DEVICE_VENDORS_NVIDIA_MIG_H_
#define HAMI_DEVICE_VENDORS_NVIDIA_MIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "device/usage.h"
#include "device/vendors/nvidia/nvidia_config.h"
#include "protocol/node_register.h"
#include "protocol/pod_devices.h"

namespace hami::device::nvidia {

// The device mode of a GPU split into MIG instances.
inline constexpr std::string_view kMigMode = "mig";

// True when the slice ranges [start, start+size) intersect.
bool MigPlacementsOverlap(const protocol::MigPlacement& a, const protocol::MigPlacement& b);

// `placements` in the order they are tried for `profile`: highest start first for "1g." and
// "3g." profiles (they pack from the top, leaving the low slices to the larger profiles), lowest
// start first for the others. Stable for equal starts.
std::vector<protocol::MigPlacement> OrderedMigPlacements(
    std::string_view profile, const std::vector<protocol::MigPlacement>& placements);

// The first placement of the profile named `profile` (in OrderedMigPlacements order) that
// overlaps nothing in `occupied` (never one of size 0); nullopt when the GPU does not offer the
// profile or every placement is taken.
std::optional<protocol::MigPlacement> SelectMigPlacement(
    const std::vector<protocol::MigProfile>& profiles,
    const std::vector<protocol::MigPlacement>& occupied, std::string_view profile);

// Whether every profile in `requested` can get a placement at once, none overlapping `occupied`
// or each other (backtracking; the profiles with fewest placements first, then the larger).
bool CanPlaceMigProfiles(const std::vector<protocol::MigProfile>& profiles,
                         const std::vector<protocol::MigPlacement>& occupied,
                         const std::vector<std::string>& requested);

// The profile and placement a request of `memory_mib` gets: the profiles sorted by memory, then
// slice count (stable), and the first with memory >= the request and a free placement wins.
struct MigChoice {
  protocol::MigProfile profile{};
  protocol::MigPlacement placement{};
  bool operator==(const MigChoice&) const = default;
};
std::optional<MigChoice> SelectMigInstance(const std::vector<protocol::MigProfile>& profiles,
                                           const std::vector<protocol::MigPlacement>& occupied,
                                           int64_t memory_mib);

// The placements reserved on `dev` (its mig_in_use).
std::vector<protocol::MigPlacement> OccupiedMigPlacements(const DeviceUsage& dev);

// HAMi CustomFilterRule in MIG mode (Fit check 15): whether `dev` can take one more instance of
// `memory_mib` after the instances already reserved on it and those `picked` for the same
// container on the same GPU (each re-derived from its memory, as AddMigUsage will choose it).
bool MigFits(const DeviceUsage& dev, const protocol::ContainerDevices& picked, int64_t memory_mib);

// Whether `dev` may hold one more instance than it holds plus those `picked` on it (its count is
// the largest instance count of its profiles). Bounds how often Fit revisits a MIG GPU.
bool MigRoomLeft(const DeviceUsage& dev, const protocol::ContainerDevices& picked);

// HAMi AddResourceUsage in MIG mode: chooses the instance for `chosen` (its usedmem is the
// request) on `dev`, rewrites chosen's memory and cores to the profile's, adds the instance to
// dev's mig_in_use and the usage (used + 1, memory and cores of the profile). nullopt (nothing
// changed) when no profile fits.
std::optional<MigInstance> AddMigUsage(DeviceUsage* dev, protocol::ContainerDevice* chosen);

// HAMi isMIGRequest: an NVIDIA request on candidates of which one is in MIG mode, unless the
// pod's nvidia.com/vgpu-mode annotation (`vgpu_mode`, nullptr when absent) excludes "mig". Such
// a request may take several instances of one GPU, so asking for more devices than there are
// GPUs is not refused early.
bool IsMigRequest(const DeviceRequest& request, const std::vector<const DeviceUsage*>& candidates,
                  const std::string* vgpu_mode);

// HAMi ValidateMigProfileAllowlist: every entry names at least one model and one profile, and
// every profile reads `<N>g.<rest>` with a non-empty N. The error names the entry and quotes the
// profile.
Status ValidateMigProfileAllowlist(const std::vector<MigAllowlistEntry>& allowlist);

// The profiles the allowlist permits for a GPU of model `model`: those of the first entry with a
// model that is a (case-sensitive) substring of `model`, as HAMi's plugin matches; empty when no
// entry matches.
std::vector<std::string> AllowedMigProfiles(const std::vector<MigAllowlistEntry>& allowlist,
                                            std::string_view model);

}  // namespace hami::device::nvidia

#endif  // HAMI_DEVICE_VENDORS_NVIDIA_MIG_H_
