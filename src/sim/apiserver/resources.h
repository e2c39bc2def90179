// The resource types the sim apiserver serves: one table drives routing, storage and discovery.
#ifndef HAMI_SIM_RESOURCES_H_
#define HAMI_SIM_RESOURCES_H_

#include <string>
#include <string_view>
#include <vector>

namespace hami::sim {

struct ResourceType {
  std::string group;  // "" for the core group
  std::string version;
  std::string plural;
  std::string singular;
  std::string kind;
  bool namespaced = true;
  bool has_status = false;  // serves <plural>/status; the main resource keeps status unchanged
  std::vector<std::string> short_names;

  // "v1" for core, "group/version" otherwise.
  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  // "/api/v1" or "/apis/group/version".
  std::string PathPrefix() const {
    return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  }
  // "pods", "leases.coordination.k8s.io": how error messages name the resource.
  std::string QualifiedName() const { return group.empty() ? plural : plural + "." + group; }
};

// Every served type, in a stable order.
const std::vector<ResourceType>& ResourceTypes();

// nullptr when the group/version does not serve `plural`.
const ResourceType* FindResourceType(std::string_view group, std::string_view version,
                                     std::string_view plural);

// The "namespaces" type (existence checks and cascading deletes need it).
const ResourceType& NamespaceType();

}  // namespace hami::sim

#endif  // HAMI_SIM_RESOURCES_H_
