#include "device/yaml_error.h"

#include "common/strings.h"

namespace hami::device {

Error FieldError(const std::string& path, std::string_view want, std::string_view got) {
  return Error{path + ": want " + std::string(want) + ", got " + Quote(got)};
}

std::string Describe(const YAML::Node& node) {
  if (!node) return "<missing>";
  if (node.IsScalar()) return node.Scalar();
  if (node.IsMap()) return "<map>";
  if (node.IsSequence()) return "<sequence>";
  return "<null>";
}

}  // namespace hami::device
