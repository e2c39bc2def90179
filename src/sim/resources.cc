#include "sim/resources.h"

namespace hami::sim {

const std::vector<ResourceType>& ResourceTypes() {
  static const std::vector<ResourceType> types = {
      {"", "v1", "namespaces", "namespace", "Namespace", false, true, {"ns"}},
      {"", "v1", "nodes", "node", "Node", false, true, {"no"}},
      {"", "v1", "pods", "pod", "Pod", true, true, {"po"}},
      {"", "v1", "configmaps", "configmap", "ConfigMap", true, false, {"cm"}},
      {"", "v1", "secrets", "secret", "Secret", true, false, {}},
      {"", "v1", "events", "event", "Event", true, false, {"ev"}},
      {"", "v1", "resourcequotas", "resourcequota", "ResourceQuota", true, true, {"quota"}},
      {"", "v1", "services", "service", "Service", true, true, {"svc"}},
      {"coordination.k8s.io", "v1", "leases", "lease", "Lease", true, false, {}},
      {"events.k8s.io", "v1", "events", "event", "Event", true, false, {"ev"}},
  };
  return types;
}

const ResourceType* FindResourceType(std::string_view group, std::string_view version,
                                     std::string_view plural) {
  for (const auto& t : ResourceTypes()) {
    if (t.group == group && t.version == version && t.plural == plural) return &t;
  }
  return nullptr;
}

const ResourceType& NamespaceType() { return ResourceTypes()[0]; }

}  // namespace hami::sim
