// Pieces several vendor backends (src/device/vendors/) share word for word: reading a config
// section's resource-name keys and asking whether a container's limits name a resource. Each
// backend keeps what differs (its own keys, messages and defaults); only the identical shapes
// live here. The messages are pinned by the vendors' tests.
#ifndef HAMI_DEVICE_VENDOR_SUPPORT_H_
#define HAMI_DEVICE_VENDOR_SUPPORT_H_

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "common/result.h"

namespace hami::device {

// Reads each `key` of the map `section` into `*field`, verbatim: a missing or null key keeps the
// field's default; anything but a scalar with non-blank text is
// `<path>.<key>: want a resource name, got "<value>"`.
Status ReadResourceNames(const YAML::Node& section, const std::string& path,
                         std::initializer_list<std::pair<const char*, std::string*>> fields);

// Whether the container JSON's resources.limits is an object holding `resource`.
bool LimitsContain(const nlohmann::json& container, const std::string& resource);

}  // namespace hami::device

#endif  // HAMI_DEVICE_VENDOR_SUPPORT_H_
