// hamictl and kubectl-hami kind "cambricon-dsmlu-profile": the CAMBRICON_DSMLU_PROFILE pod
// annotation the scheduler writes for Cambricon's dynamic-sMLU plugin, "<index>_<cores>_<memory
// units>" (src/device/vendors/cambricon), decoded with the memory in MiB made explicit.
#include <nlohmann/json.hpp>

#include "common/json.h"
#include "device/vendors/cambricon/cambricon.h"
#include "protocol/annotation_kinds.h"

namespace hami::device::cambricon {
namespace {

using Json = nlohmann::ordered_json;

Result<std::string> DecodeProfile(std::string_view value) {
  auto p = cambricon::DecodeDsmluProfile(value);
  if (!p) return std::move(p).take_error();
  Json j{{"index", p->index},
         {"cores", p->cores},
         {"memoryUnits", p->memory_units},
         {"memoryMiB", static_cast<int64_t>(p->memory_units) * cambricon::kMemoryFactor}};
  return j.dump(2);
}

Result<std::string> EncodeProfile(std::string_view text) {
  auto parsed = ParseJson(text);
  if (!parsed) return Error{"cambricon-dsmlu-profile: input is " + parsed.error()};
  const nlohmann::json& j = *parsed;
  auto field = [&](const char* key) -> std::optional<int64_t> {
    if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) return std::nullopt;
    return j[key].get<int64_t>();
  };
  auto index = field("index");
  auto cores = field("cores");
  auto units = field("memoryUnits");
  if (!index || !cores || !units) {
    return Error{
        "cambricon-dsmlu-profile: want {\"index\": <integer>, \"cores\": <integer>, "
        "\"memoryUnits\": <integer>}"};
  }
  std::string out =
      std::to_string(*index) + "_" + std::to_string(*cores) + "_" + std::to_string(*units);
  // What we write must read back.
  if (auto check = cambricon::DecodeDsmluProfile(out); !check) {
    return Error{"cambricon-dsmlu-profile: " + check.error()};
  }
  return out;
}

}  // namespace

HAMI_REGISTER_KIND("cambricon-dsmlu-profile",
                   "Cambricon dynamic-sMLU profile (CAMBRICON_DSMLU_PROFILE pod annotation)",
                   DecodeProfile, EncodeProfile);

}  // namespace hami::device::cambricon
