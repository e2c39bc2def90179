// What `hami-sim run --manifests FILE` takes from a rendered chart (`helm template` output): the
// RBAC objects to create in the embedded API server, and the ServiceAccount each HAMi component
// runs as (docs/RBAC.md).
#ifndef HAMI_SIM_MANIFESTS_H_
#define HAMI_SIM_MANIFESTS_H_

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hami::sim {

struct ServiceAccountRef {
  std::string ns;
  std::string name;
};

struct ManifestRbac {
  // ServiceAccounts, ClusterRoles, ClusterRoleBindings, Roles and RoleBindings, in file order,
  // each with metadata.namespace set for the namespaced kinds.
  std::vector<nlohmann::json> objects;
  // The serviceAccountName (namespace of the workload, "default" when unset) of the Deployment
  // that runs hami-scheduler and of the DaemonSet that runs the node plugin: hami-device-plugin,
  // or with the chart's dra.enabled hami-dra-plugin (`dra_plugin` true).
  ServiceAccountRef scheduler;
  ServiceAccountRef device_plugin;
  bool dra_plugin = false;
  // The hami-scheduler container's command followed by its args (its flags).
  std::vector<std::string> scheduler_command;
};

// The value of `--name=value` or `--name value` in `args` ("true" for a bare `--name`), or "" when
// absent.
std::string FlagValue(const std::vector<std::string>& args, std::string_view name);

// Reads a multi-document YAML stream. A workload runs a component when one of its pod
// template's containers has `command[0]` (or, without a command, `args[0]`) ending in
// `hami-scheduler` / `hami-device-plugin`. Errors name the document and the field: no
// Deployment running hami-scheduler, a document that is not YAML, an RBAC object without a
// name. `default_ns` fills in a missing metadata.namespace (helm template's -n).
Result<ManifestRbac> ParseManifests(std::string_view yaml_text,
                                    const std::string& default_ns = "default");
Result<ManifestRbac> LoadManifestsFile(const std::string& path,
                                       const std::string& default_ns = "default");

}  // namespace hami::sim

#endif  // HAMI_SIM_MANIFESTS_H_
