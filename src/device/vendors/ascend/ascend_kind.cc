// hamictl and kubectl-hami kind "ascend-runtime": the runtime list the scheduler writes for HAMi's
// Ascend plugin (huawei.com/<common word>, e.g. huawei.com/Ascend910B3), with every field explicit
// (src/device/vendors/ascend). Encode writes it as HAMi does (Go's encoding/json, empty fields
// omitted): [{"UUID":"npu-0","temp":"vir05_1c_16g","memory":16384}].
#include <nlohmann/json.hpp>

#include "device/vendors/ascend/ascend.h"
#include "protocol/annotation_kinds.h"

namespace hami::device::ascend {
namespace {

using Json = nlohmann::ordered_json;
constexpr std::string_view kKey = "huawei.com/<common word>";

Result<std::string> DecodeRuntime(std::string_view value) {
  auto entries = device::ascend::DecodeRuntimeEntries(value);
  if (!entries) return Error{std::string(kKey) + ": " + entries.error()};
  Json j = Json::array();
  for (const auto& e : *entries) {
    j.push_back(Json{{"UUID", e.uuid}, {"temp", e.temp}, {"memory", e.memory}, {"core", e.core}});
  }
  return j.dump(2, ' ', false, Json::error_handler_t::replace);
}

// What decode printed (or the annotation itself) reads with the backend's own decoder.
Result<std::string> EncodeRuntime(std::string_view text) {
  auto entries = device::ascend::DecodeRuntimeEntries(text);
  if (!entries) return Error{std::string(kKey) + ": " + entries.error()};
  return device::ascend::EncodeRuntimeEntries(*entries);
}

}  // namespace

HAMI_REGISTER_KIND("ascend-runtime",
                   "Ascend vNPU runtime list for the device plugin (huawei.com/<common word>)",
                   DecodeRuntime, EncodeRuntime);

}  // namespace hami::device::ascend
