#include "device/vendors/nvidia/mig.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>

#include "common/strings.h"

namespace hami::device::nvidia {
namespace {

bool PreferHighPlacement(std::string_view profile) {
  return profile.starts_with("1g.") || profile.starts_with("3g.");
}

const protocol::MigProfile* FindProfile(const std::vector<protocol::MigProfile>& profiles,
                                        std::string_view name) {
  for (const auto& p : profiles) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

bool OverlapsAny(const protocol::MigPlacement& candidate,
                 const std::vector<protocol::MigPlacement>& occupied) {
  return std::any_of(occupied.begin(), occupied.end(), [&](const protocol::MigPlacement& o) {
    return MigPlacementsOverlap(candidate, o);
  });
}

}  // namespace

bool MigPlacementsOverlap(const protocol::MigPlacement& a, const protocol::MigPlacement& b) {
  // 64-bit sums: a start near UINT32_MAX must not wrap into an overlap (or out of one).
  return uint64_t{a.start} < uint64_t{b.start} + b.size &&
         uint64_t{b.start} < uint64_t{a.start} + a.size;
}

std::vector<protocol::MigPlacement> OrderedMigPlacements(
    std::string_view profile, const std::vector<protocol::MigPlacement>& placements) {
  std::vector<protocol::MigPlacement> out = placements;
  bool high = PreferHighPlacement(profile);
  std::stable_sort(out.begin(), out.end(), [high](const auto& a, const auto& b) {
    return high ? a.start > b.start : a.start < b.start;
  });
  return out;
}

std::optional<protocol::MigPlacement> SelectMigPlacement(
    const std::vector<protocol::MigProfile>& profiles,
    const std::vector<protocol::MigPlacement>& occupied, std::string_view profile) {
  const protocol::MigProfile* p = FindProfile(profiles, profile);
  if (!p) return std::nullopt;
  for (const auto& candidate : OrderedMigPlacements(profile, p->placements)) {
    // An empty placement would overlap nothing and hold nothing: never a real instance.
    if (candidate.size > 0 && !OverlapsAny(candidate, occupied)) return candidate;
  }
  return std::nullopt;
}

bool CanPlaceMigProfiles(const std::vector<protocol::MigProfile>& profiles,
                         const std::vector<protocol::MigPlacement>& occupied,
                         const std::vector<std::string>& requested) {
  if (requested.empty()) return true;
  std::map<std::string, std::vector<protocol::MigPlacement>, std::less<>> placements;
  for (const auto& p : profiles) placements[p.name] = p.placements;
  auto of = [&](const std::string& name) -> const std::vector<protocol::MigPlacement>& {
    static const std::vector<protocol::MigPlacement> kNone;
    auto it = placements.find(name);
    return it == placements.end() ? kNone : it->second;
  };
  // Most constrained first: fewest placements, then the larger instance.
  std::vector<std::string> ordered = requested;
  std::stable_sort(ordered.begin(), ordered.end(), [&](const auto& a, const auto& b) {
    const auto& l = of(a);
    const auto& r = of(b);
    if (l.size() != r.size()) return l.size() < r.size();
    if (l.empty()) return false;
    return l.front().size > r.front().size;
  });
  std::vector<protocol::MigPlacement> used = occupied;
  std::function<bool(size_t)> place = [&](size_t i) {
    if (i == ordered.size()) return true;
    for (const auto& candidate : OrderedMigPlacements(ordered[i], of(ordered[i]))) {
      if (candidate.size == 0 || OverlapsAny(candidate, used)) continue;
      used.push_back(candidate);
      if (place(i + 1)) return true;
      used.pop_back();
    }
    return false;
  };
  return place(0);
}

std::optional<MigChoice> SelectMigInstance(const std::vector<protocol::MigProfile>& profiles,
                                           const std::vector<protocol::MigPlacement>& occupied,
                                           int64_t memory_mib) {
  std::vector<const protocol::MigProfile*> sorted;
  sorted.reserve(profiles.size());
  for (const auto& p : profiles) sorted.push_back(&p);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    if (a->memory_mb != b->memory_mb) return a->memory_mb < b->memory_mb;
    return a->slice_count < b->slice_count;
  });
  for (const protocol::MigProfile* p : sorted) {
    if (p->memory_mb < memory_mib) continue;
    // By name, as HAMi does: with two profiles of one name the first one's placements count.
    if (auto placement = SelectMigPlacement(profiles, occupied, p->name)) {
      return MigChoice{*p, *placement};
    }
  }
  return std::nullopt;
}

std::vector<protocol::MigPlacement> OccupiedMigPlacements(const DeviceUsage& dev) {
  std::vector<protocol::MigPlacement> out;
  out.reserve(dev.mig_in_use.size());
  for (const auto& m : dev.mig_in_use) out.push_back(m.placement);
  return out;
}

bool MigFits(const DeviceUsage& dev, const protocol::ContainerDevices& picked, int64_t memory_mib) {
  std::vector<protocol::MigPlacement> occupied = OccupiedMigPlacements(dev);
  for (const auto& p : picked) {
    if (p.uuid != dev.id) continue;
    auto choice = SelectMigInstance(dev.mig_profiles, occupied, p.usedmem);
    if (!choice) return false;
    occupied.push_back(choice->placement);
  }
  return SelectMigInstance(dev.mig_profiles, occupied, memory_mib).has_value();
}

bool MigRoomLeft(const DeviceUsage& dev, const protocol::ContainerDevices& picked) {
  int64_t taken = dev.used;
  for (const auto& p : picked) taken += p.uuid == dev.id ? 1 : 0;
  return taken < dev.count;
}

std::optional<MigInstance> AddMigUsage(DeviceUsage* dev, protocol::ContainerDevice* chosen) {
  auto choice = SelectMigInstance(dev->mig_profiles, OccupiedMigPlacements(*dev), chosen->usedmem);
  if (!choice) return std::nullopt;
  auto clamp = [](int64_t v) {
    return static_cast<int32_t>(std::clamp<int64_t>(v, 0, std::numeric_limits<int32_t>::max()));
  };
  chosen->usedmem = clamp(choice->profile.memory_mb);
  chosen->usedcores = clamp(choice->profile.core);
  MigInstance instance{choice->profile.name, choice->placement, std::nullopt};
  dev->mig_in_use.push_back(instance);
  dev->used = clamp(int64_t{dev->used} + 1);
  dev->usedmem = clamp(int64_t{dev->usedmem} + chosen->usedmem);
  dev->usedcores = clamp(int64_t{dev->usedcores} + chosen->usedcores);
  return instance;
}

bool IsMigRequest(const DeviceRequest& request, const std::vector<const DeviceUsage*>& candidates,
                  const std::string* vgpu_mode) {
  if (request.type != "NVIDIA") return false;
  if (vgpu_mode && vgpu_mode->find(kMigMode) == std::string::npos) return false;
  return std::any_of(candidates.begin(), candidates.end(),
                     [](const DeviceUsage* d) { return d->mode == kMigMode; });
}

Status ValidateMigProfileAllowlist(const std::vector<MigAllowlistEntry>& allowlist) {
  for (size_t i = 0; i < allowlist.size(); ++i) {
    const MigAllowlistEntry& e = allowlist[i];
    std::string where = "migProfileAllowlist[" + std::to_string(i) + "]";
    if (e.models.empty()) return Error{where + ".models: want at least one model"};
    if (e.profiles.empty()) return Error{where + ".profiles: want at least one profile"};
    for (const auto& profile : e.profiles) {
      // HAMi's rule: a '.' whose left part is at least two characters and ends in 'g'.
      size_t dot = profile.find('.');
      if (dot == std::string::npos || dot < 2 || profile[dot - 1] != 'g') {
        return Error{where + ".profiles: invalid MIG profile " + Quote(profile) +
                     ": want <N>g.<memory>, e.g. \"1g.5gb\""};
      }
    }
  }
  return OkStatus();
}

std::vector<std::string> AllowedMigProfiles(const std::vector<MigAllowlistEntry>& allowlist,
                                            std::string_view model) {
  for (const auto& e : allowlist) {
    for (const auto& m : e.models) {
      if (model.find(m) != std::string_view::npos) return e.profiles;
    }
  }
  return {};
}

}  // namespace hami::device::nvidia
