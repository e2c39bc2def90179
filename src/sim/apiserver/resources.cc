#include "sim/apiserver/resources.h"

namespace hami::sim {

const std::vector<ResourceType>& ResourceTypes() {
  // One row per type: group, version, plural, singular, kind, namespaced, has_status, short names.
  // clang-format off
  static const std::vector<ResourceType> types = {
      {"", "v1", "namespaces", "namespace", "Namespace", false, true, {"ns"}},
      {"", "v1", "nodes", "node", "Node", false, true, {"no"}},
      {"", "v1", "pods", "pod", "Pod", true, true, {"po"}},
      {"", "v1", "configmaps", "configmap", "ConfigMap", true, false, {"cm"}},
      {"", "v1", "secrets", "secret", "Secret", true, false, {}},
      {"", "v1", "events", "event", "Event", true, false, {"ev"}},
      {"", "v1", "resourcequotas", "resourcequota", "ResourceQuota", true, true, {"quota"}},
      {"", "v1", "services", "service", "Service", true, true, {"svc"}},
      {"", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, false, {"sa"}},
      {"", "v1", "endpoints", "endpoints", "Endpoints", true, false, {"ep"}},
      {"", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", true,
       true, {"pvc"}},
      {"coordination.k8s.io", "v1", "leases", "lease", "Lease", true, false, {}},
      {"events.k8s.io", "v1", "events", "event", "Event", true, false, {"ev"}},
      // What charts render (helm install needs each kind in discovery and OpenAPI v3): the
      // HAMi chart's kinds, and `helm create`'s (Ingress, HorizontalPodAutoscaler).
      {"apps", "v1", "deployments", "deployment", "Deployment", true, true, {"deploy"}},
      {"apps", "v1", "daemonsets", "daemonset", "DaemonSet", true, true, {"ds"}},
      {"apps", "v1", "statefulsets", "statefulset", "StatefulSet", true, true, {"sts"}},
      {"apps", "v1", "replicasets", "replicaset", "ReplicaSet", true, true, {"rs"}},
      {"rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", false,
       false, {}},
      {"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
       "ClusterRoleBinding", false, false, {}},
      {"rbac.authorization.k8s.io", "v1", "roles", "role", "Role", true, false, {}},
      {"rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", true,
       false, {}},
      {"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
       "mutatingwebhookconfiguration", "MutatingWebhookConfiguration", false, false, {}},
      {"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
       "validatingwebhookconfiguration", "ValidatingWebhookConfiguration", false, false, {}},
      {"policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true,
       true, {"pdb"}},
      {"scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass", false,
       false, {"pc"}},
      {"node.k8s.io", "v1", "runtimeclasses", "runtimeclass", "RuntimeClass", false, false, {}},
      {"networking.k8s.io", "v1", "ingresses", "ingress", "Ingress", true, true, {"ing"}},
      {"autoscaling", "v2", "horizontalpodautoscalers", "horizontalpodautoscaler",
       "HorizontalPodAutoscaler", true, true, {"hpa"}},
      // Dynamic Resource Allocation (docs/DRA.md): stored and validated as kube-apiserver does
      // (dra_validation.h). Upstream gives them no short names.
      {"resource.k8s.io", "v1", "deviceclasses", "deviceclass", "DeviceClass", false, false, {}},
      {"resource.k8s.io", "v1", "resourceclaims", "resourceclaim", "ResourceClaim", true, true,
       {}},
      {"resource.k8s.io", "v1", "resourceclaimtemplates", "resourceclaimtemplate",
       "ResourceClaimTemplate", true, false, {}},
      {"resource.k8s.io", "v1", "resourceslices", "resourceslice", "ResourceSlice", false, false,
       {}},
      // Custom resources the HAMi chart renders when asked (certManager.enabled,
      // serviceMonitor.enabled); stored like any other kind.
      {"cert-manager.io", "v1", "certificates", "certificate", "Certificate", true, true,
       {"cert"}},
      {"cert-manager.io", "v1", "issuers", "issuer", "Issuer", true, true, {}},
      {"monitoring.coreos.com", "v1", "servicemonitors", "servicemonitor", "ServiceMonitor", true,
       false, {"smon"}},
  };
  // clang-format on
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
