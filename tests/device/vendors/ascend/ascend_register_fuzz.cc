// Fuzzes the Ascend register decoder (hami.io/node-register-<word>: JSON with customInfo) and what
// reads its result: never throws or crashes; whatever decodes agrees with the common decoder on
// the device list, and its rows feed a Fit that keeps its promises (no more devices than asked,
// only candidates chosen).
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
  if (!devices) {
    if (devices.error().empty()) std::abort();
    return 0;
  }
  auto common = hami::protocol::DecodeNodeRegister(in);
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
    ids.insert(rows[i].id);
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
