// Fuzzes the Ascend register decoder (hami.io/node-register-<word>: JSON with customInfo) and what
// reads its result: never throws or crashes; a device without an id is refused; whatever decodes
// agrees with the common decoder on the device list, every device has a non-empty id of its own,
// and its rows feed a Fit that keeps its promises (no more devices than asked,
// only candidates chosen).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

#include "device/vendors/ascend/ascend.h"
#include "protocol/node_register.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hami::device;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto devices = ascend::DecodeRegister(in);
  auto common = hami::protocol::DecodeNodeRegister(in);
  if (!devices) {
    if (devices.error().empty()) std::abort();
    // A missing or empty id is refused before customInfo is read.
    bool empty_id = common && std::any_of(common->begin(), common->end(),
                                          [](const auto& d) { return d.id.empty(); });
    if (empty_id && devices.error().find("field \"id\"") == std::string::npos) std::abort();
    return 0;
  }
  if (!common || common->size() != devices->size()) std::abort();
  std::vector<DeviceUsage> rows;
  for (size_t i = 0; i < devices->size(); ++i) {
    if (!((*devices)[i].info == (*common)[i])) std::abort();
    rows.push_back(UsageFromDeviceInfo((*devices)[i].info, "Ascend910B3"));
  }
  std::vector<ascend::Candidate> cands;
  std::set<std::string> ids;
  for (size_t i = 0; i < rows.size(); ++i) {
    cands.push_back({&rows[i], (*devices)[i].network_id});
    if (rows[i].id.empty() || !ids.insert(rows[i].id).second) std::abort();
  }
  ascend::VnpuConfig config = ascend::DefaultVnpus().configs[2];
  for (int32_t nums : {1, 2, 3}) {
    DeviceRequest req{.nums = nums, .type = "Ascend910B3", .memreq = 1, .mem_percentage = 0};
    FitResult fit = ascend::Fit(config, cands, req, {});
    if (fit.fit && fit.devices.size() != static_cast<size_t>(nums)) std::abort();
    for (const auto& d : fit.devices) {
      if (!ids.count(d.uuid)) std::abort();
    }
  }
  return 0;
}
