// hamictl and kubectl-hami kind "metax-sgpu-devices": MetaX's sGPU register annotation
// (metax-tech.com/node-gpu-devices) with every field explicit (src/device/vendors/metax).
// Encode writes it as MetaX's plugin (Go's encoding/json, zero fields omitted) does:
// [{"uuid":"GPU-1","model":"C500","totalDevCount":16,"totalCompute":100,"totalVRam":65536,...}].
#include <nlohmann/json.hpp>

#include "device/vendors/metax/metax.h"
#include "protocol/annotation_kinds.h"

namespace hami::device::metax {
namespace {

using Json = nlohmann::ordered_json;
constexpr std::string_view kKey = "metax-tech.com/node-gpu-devices";

Result<std::string> DecodeSgpuDevices(std::string_view value) {
  auto devices = device::metax::DecodeSDevices(value);
  if (!devices) return Error{std::string(kKey) + ": " + devices.error()};
  Json j = Json::array();
  for (const auto& d : *devices) {
    j.push_back(Json{{"uuid", d.uuid},
                     {"bdf", d.bdf},
                     {"model", d.model},
                     {"totalDevCount", d.total_dev_count},
                     {"totalCompute", d.total_compute},
                     {"totalVRam", d.total_vram},
                     {"availableDevCount", d.available_dev_count},
                     {"availableCompute", d.available_compute},
                     {"availableVRam", d.available_vram},
                     {"numa", d.numa},
                     {"healthy", d.healthy},
                     {"qosPolicy", d.qos_policy},
                     {"linkZone", d.link_zone}});
  }
  return j.dump(2, ' ', false, Json::error_handler_t::replace);
}

// What decode printed (or the annotation itself) reads with the backend's own decoder.
Result<std::string> EncodeSgpuDevices(std::string_view text) {
  auto devices = device::metax::DecodeSDevices(text);
  if (!devices) return Error{std::string(kKey) + ": " + devices.error()};
  return device::metax::EncodeSDevices(*devices);
}

}  // namespace

HAMI_REGISTER_KIND("metax-sgpu-devices", "MetaX sGPU devices (metax-tech.com/node-gpu-devices)",
                   DecodeSgpuDevices, EncodeSgpuDevices);

}  // namespace hami::device::metax
