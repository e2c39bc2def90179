// Fuzzes the enflame.com/gcu-drs-capacity decoder and what reads its result: never throws or
// crashes, and whatever decodes has at least one device, positive capacities, a positive largest
// slice and usage rows that a DRS fit can run on.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "device/vendors/enflame/enflame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hami::device;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto node = enflame::ParseDrsCapacity("n", in);
  if (!node) {
    if (node.error().empty()) std::abort();
    return 0;
  }
  if (node->devices.empty() || node->max_slice <= 0 || node->max_memory_gb <= 0) std::abort();
  for (const auto& d : node->devices) {
    if (d.capacity <= 0 || d.index < 0) std::abort();
  }
  std::vector<DeviceUsage> rows = node->Devices("n");
  std::vector<const DeviceUsage*> ptrs;
  for (const auto& r : rows) ptrs.push_back(&r);
  PodView pod;
  FitContext ctx{.pod = &pod};
  for (int32_t size : {1, 3}) {
    DeviceRequest req{.nums = 1, .type = "Enflame", .memreq = size, .mem_percentage = 0};
    auto pick = enflame::DrsFit(ptrs, req, ctx, node->profiles, node->max_slice);
    if (pick.result.fit && pick.result.devices.size() != 1) std::abort();
  }
  return 0;
}
