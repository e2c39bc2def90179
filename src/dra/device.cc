// DeviceFromSlice (cel.h): a ResourceSlice's device entry as CEL sees it.
#include <string>
#include <string_view>

#include "dra/cel.h"

namespace hami::dra {
namespace {

// "domain/name" -> {domain, name}; a bare name is in the driver's domain.
std::pair<std::string, std::string> Qualify(const std::string& key, std::string_view driver) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return {std::string(driver), key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

}  // namespace

CelDevice DeviceFromSlice(const nlohmann::json& device, std::string_view driver) {
  CelDevice out;
  out.driver = std::string(driver);
  if (!device.is_object()) return out;
  if (auto it = device.find("allowMultipleAllocations"); it != device.end() && it->is_boolean()) {
    out.allow_multiple_allocations = it->get<bool>();
  }
  if (auto attrs = device.find("attributes"); attrs != device.end() && attrs->is_object()) {
    for (const auto& [key, v] : attrs->items()) {
      if (!v.is_object() || v.size() != 1) continue;
      auto [domain, name] = Qualify(key, driver);
      const auto first = v.begin();  // (items() proxies would dangle here)
      const std::string kind = first.key();
      const nlohmann::json& value = first.value();
      AttributeValue parsed;
      if (kind == "int" && value.is_number_integer()) {
        parsed = value.get<int64_t>();
      } else if (kind == "bool" && value.is_boolean()) {
        parsed = value.get<bool>();
      } else if (kind == "string" && value.is_string()) {
        parsed = value.get<std::string>();
      } else if (kind == "version" && value.is_string()) {
        parsed = Semver{value.get<std::string>()};
      } else {
        continue;
      }
      out.attributes[domain][name] = std::move(parsed);
    }
  }
  if (auto caps = device.find("capacity"); caps != device.end() && caps->is_object()) {
    for (const auto& [key, v] : caps->items()) {
      if (!v.is_object() || !v.contains("value") || !v["value"].is_string()) continue;
      auto q = protocol::ParseQuantity(v["value"].get<std::string>());
      if (!q) continue;
      auto [domain, name] = Qualify(key, driver);
      out.capacity[domain][name] = *q;
    }
  }
  return out;
}

}  // namespace hami::dra
