#include "sim/yaml_json.h"

#include <regex>
#include <string>

#include "common/strings.h"

namespace hami::sim {

using nlohmann::json;

namespace {

// A plain (unquoted) scalar under the YAML 1.2 core schema.
json PlainScalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (std::regex_match(s, kInt)) {
    if (auto v = ParseInt64(s[0] == '+' ? s.substr(1) : s)) return *v;
    return s;
  }
  if (std::regex_match(s, kFloat)) return std::stod(s);
  return s;
}

}  // namespace

json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      // yaml-cpp tags quoted and block scalars "!": they are strings whatever they spell.
      return node.Tag() == "!" ? json(node.Scalar()) : PlainScalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const YAML::Node& item : node) out.push_back(YamlToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return out;
    }
  }
  return nullptr;
}

}  // namespace hami::sim
