// YAML (a chart's manifests, a scenario's embedded Kubernetes objects) as the JSON the API
// server stores: plain scalars typed by the YAML 1.2 core schema (null, bool, int, float, else
// string), quoted and block scalars always strings.
#ifndef HAMI_SIM_YAML_JSON_H_
#define HAMI_SIM_YAML_JSON_H_

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

namespace hami::sim {

nlohmann::json YamlToJson(const YAML::Node& node);

}  // namespace hami::sim

#endif  // HAMI_SIM_YAML_JSON_H_
