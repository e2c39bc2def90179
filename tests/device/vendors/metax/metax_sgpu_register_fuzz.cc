// Fuzzes the Metax sGPU register decoder (metax-tech.com/node-gpu-devices) and what reads its
// result: never throws or crashes; whatever decodes re-encodes to text that decodes to the same
// devices, has non-empty unique UUIDs and non-negative totals, and its rows feed an sGPU fit that
// keeps its promises (no more devices than asked, only candidates chosen).
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

#include "device/vendors/metax/metax.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hami::device;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto devices = metax::DecodeSDevices(in);
  if (!devices) {
    if (devices.error().empty()) std::abort();
    return 0;
  }
  auto again = metax::DecodeSDevices(metax::EncodeSDevices(*devices));
  if (!again || !(*again == *devices)) std::abort();
  std::set<std::string> ids;
  for (const auto& d : *devices) {
    if (d.uuid.empty() || !ids.insert(d.uuid).second) std::abort();
    if (d.total_dev_count < 0 || d.total_compute < 0 || d.total_vram < 0) std::abort();
  }
  std::vector<DeviceUsage> rows = metax::SgpuRows(*devices);
  std::vector<const DeviceUsage*> ptrs;
  for (const auto& r : rows) ptrs.push_back(&r);
  for (int32_t cores : {30, 100}) {
    DeviceRequest req{
        .nums = 2, .type = "Metax-SGPU", .memreq = 1, .mem_percentage = 0, .coresreq = cores};
    FitResult fit = metax::SgpuFit(ptrs, req, {}, false);
    if (fit.fit && fit.devices.size() != 2) std::abort();
    for (const auto& d : fit.devices) {
      if (!ids.count(d.uuid)) std::abort();
    }
  }
  return 0;
}
