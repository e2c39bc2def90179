#include "deviceplugin/mig_profiles.h"

#include <algorithm>
#include <string>

namespace hami::deviceplugin {
namespace {

// One profile of a geometry: NVML id, slices, instances, SMs (A100-class, H100-class), memory in
// eighths (7-slice GPUs) or quarters (4-slice GPUs) of the GPU, and the placement starts/size.
struct GeometryRow {
  uint32_t id;
  uint32_t slices;
  uint32_t instances;
  uint32_t sms_a100;
  uint32_t sms_h100;
  uint32_t memory_parts;
  uint32_t placement_size;
  std::vector<uint32_t> starts;
};

const std::vector<GeometryRow>& SevenSlice() {
  static const auto* rows = new std::vector<GeometryRow>{
      {0, 1, 7, 14, 16, 1, 1, {0, 1, 2, 3, 4, 5, 6}},
      {1, 2, 3, 28, 32, 2, 2, {0, 2, 4}},
      {2, 3, 2, 42, 60, 4, 4, {0, 4}},
      {3, 4, 1, 56, 64, 4, 4, {0}},
      {4, 7, 1, 98, 132, 8, 8, {0}},
  };
  return *rows;
}

const std::vector<GeometryRow>& FourSlice() {
  static const auto* rows = new std::vector<GeometryRow>{
      {0, 1, 4, 14, 14, 1, 1, {0, 1, 2, 3}},
      {1, 2, 2, 28, 28, 2, 2, {0, 2}},
      {3, 4, 1, 56, 56, 4, 4, {0}},
  };
  return *rows;
}

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

}  // namespace

int32_t GpuInstanceProfileId(std::string_view profile_name) {
  size_t dot = profile_name.find('.');
  std::string_view slices = profile_name.substr(0, dot);
  if (slices == "1g") return 0;
  if (slices == "2g") return 1;
  if (slices == "3g") return 2;
  if (slices == "4g") return 3;
  if (slices == "7g") return 4;
  if (slices == "8g") return 5;
  if (slices == "6g") return 6;
  return -1;
}

std::vector<MigProfileCapacity> MigProfilesFor(
    const std::vector<device::nvidia::MigAllowlistEntry>& allow, std::string_view model,
    const std::vector<GpuInstanceProfile>& offered) {
  std::vector<MigProfileCapacity> out;
  uint32_t full_sms = 0;
  for (const auto& p : offered) full_sms = std::max(full_sms, p.multiprocessors);
  for (const auto& entry : allow) {
    bool match = std::any_of(entry.models.begin(), entry.models.end(),
                             [&](const std::string& m) { return Contains(model, m); });
    if (!match) continue;
    for (const auto& name : entry.profiles) {
      int32_t id = GpuInstanceProfileId(name);
      auto it = std::find_if(offered.begin(), offered.end(), [&](const GpuInstanceProfile& p) {
        return id >= 0 && p.profile_id == static_cast<uint32_t>(id);
      });
      if (it == offered.end()) continue;
      MigProfileCapacity c;
      c.profile.name = name;
      c.profile.memory_mb = it->memory_mib;
      c.profile.slice_count = static_cast<int32_t>(it->slice_count);
      if (full_sms > 0) {
        c.profile.core =
            static_cast<int32_t>((uint64_t{it->multiprocessors} * 100 + full_sms - 1) / full_sms);
      }
      c.profile.placements = it->placements;
      c.instance_count = it->instance_count;
      out.push_back(std::move(c));
    }
    break;
  }
  return out;
}

std::vector<GpuInstanceProfile> SimulatedGpuInstanceProfiles(std::string_view model,
                                                             int64_t memory_mib) {
  const bool four = Contains(model, "A30") || Contains(model, "RTX PRO 6000");
  const bool hopper = Contains(model, "H100") || Contains(model, "H200") ||
                      Contains(model, "H20") || Contains(model, "GH200") || Contains(model, "B200");
  const std::vector<GeometryRow>& rows = four ? FourSlice() : SevenSlice();
  const int64_t parts = four ? 4 : 8;
  std::vector<GpuInstanceProfile> out;
  for (const auto& r : rows) {
    GpuInstanceProfile p;
    p.profile_id = r.id;
    p.slice_count = r.slices;
    p.instance_count = r.instances;
    p.multiprocessors = hopper ? r.sms_h100 : r.sms_a100;
    // What NVML reports is a little under the GPU's share (firmware reserve): 95 %, in 128 MiB
    // steps, e.g. 4864 MiB for 1g of a 40960 MiB A100.
    int64_t share = std::max<int64_t>(memory_mib, 0) * r.memory_parts / parts;
    p.memory_mib = share * 95 / 100 / 128 * 128;
    for (uint32_t start : r.starts) p.placements.push_back({start, r.placement_size});
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace hami::deviceplugin
