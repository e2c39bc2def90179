#include "device/vendor_support.h"

#include "common/strings.h"
#include "device/yaml_error.h"

namespace hami::device {

Status ReadResourceNames(const YAML::Node& section, const std::string& path,
                         std::initializer_list<std::pair<const char*, std::string*>> fields) {
  for (auto [key, field] : fields) {
    YAML::Node value = section[key];
    if (!value || value.IsNull()) continue;
    if (!value.IsScalar() || Trim(value.Scalar()).empty()) {
      return FieldError(path + "." + key, "a resource name", Describe(value));
    }
    *field = value.Scalar();
  }
  return OkStatus();
}

bool LimitsContain(const nlohmann::json& container, const std::string& resource) {
  const nlohmann::json* limits = &container;
  for (const char* key : {"resources", "limits"}) {
    if (!limits->is_object() || !limits->contains(key)) return false;
    limits = &(*limits)[key];
  }
  return limits->is_object() && limits->contains(resource);
}

}  // namespace hami::device
