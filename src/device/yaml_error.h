// Error messages for YAML readers (the device config and the hami-sim scenario). Both name the
// offending field by its path and quote what they found, so a user reads the same shape of
// message whichever file is wrong: `<path>: want <want>, got "<got>"`. The wording is pinned by
// tests; change it only with them.
#ifndef HAMI_DEVICE_YAML_ERROR_H_
#define HAMI_DEVICE_YAML_ERROR_H_

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "common/result.h"

namespace hami::device {

// `<path>: want <want>, got <Quote(got)>`.
Error FieldError(const std::string& path, std::string_view want, std::string_view got);

// What a node holds, for error messages: its scalar text, "<map>", "<sequence>", "<null>", or
// "<missing>" for an undefined node (a key that is not there).
std::string Describe(const YAML::Node& node);

}  // namespace hami::device

#endif  // HAMI_DEVICE_YAML_ERROR_H_
