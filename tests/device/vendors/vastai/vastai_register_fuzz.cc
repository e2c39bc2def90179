// Fuzzes VastAI's register annotation (hami.io/node-va-register: JSON with custominfo die
// strategy and AIC card) through VastaiDevice::NodeDevices and Fit: never throws or crashes;
// it refuses exactly what the common decoder refuses and a device without an id; whatever
// decodes lists the devices the common decoder lists, each with a non-empty id of its own and
// cores 100; Fit keeps its promises (exactly the devices asked for, each a candidate, none
// twice) in whole-card and die mode, with and without mutex.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

#include "device/vendors/vastai/vastai.h"
#include "protocol/node_register.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hami::device;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  static const vastai::VastaiDevice dev{vastai::VastaiConfig{}};
  NodeView node{.name = "n", .annotations = {{"hami.io/node-va-register", std::string(in)}}};
  auto rows = dev.NodeDevices(node);
  auto common = hami::protocol::DecodeNodeRegister(in);
  bool empty_id = common && std::any_of(common->begin(), common->end(),
                                        [](const auto& d) { return d.id.empty(); });
  if (!rows) {
    if (rows.error().empty() || (common && !empty_id)) std::abort();
    return 0;
  }
  if (!common || empty_id || common->size() != rows->size()) std::abort();
  std::vector<const DeviceUsage*> cands;
  std::set<std::string> ids;
  for (size_t i = 0; i < rows->size(); ++i) {
    const DeviceUsage& r = (*rows)[i];
    if (r.id != (*common)[i].id || r.totalcore != 100 || r.vendor != "Vastai") std::abort();
    cands.push_back(&r);
    if (r.id.empty() || !ids.insert(r.id).second) std::abort();
  }
  for (bool mutex : {false, true}) {
    for (int32_t nums : {1, 2, 3}) {
      GpuPolicy policy;
      policy.mutex = mutex;
      DeviceRequest req{.nums = nums, .type = "Vastai", .mem_percentage = 100};
      FitResult fit = dev.Fit(cands, req, FitContext{.policy = policy});
      if (fit.fit && fit.devices.size() != static_cast<size_t>(nums)) std::abort();
      std::set<std::string> seen;
      for (const auto& d : fit.devices) {
        if (!ids.count(d.uuid) || !seen.insert(d.uuid).second) std::abort();
      }
    }
  }
  return 0;
}
