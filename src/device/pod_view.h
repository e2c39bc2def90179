// A small parsed view of a Pod (and of a Node's annotations): just what request normalisation,
// fit and the usage index read, so the pure functions never touch raw JSON.
#ifndef HAMI_DEVICE_POD_VIEW_H_
#define HAMI_DEVICE_POD_VIEW_H_

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"

namespace hami::device {

// Resource lists, labels and annotations: the same type as k8s::StringMap (this module does not
// depend on k8s). The transparent comparator makes a lookup by std::string_view allocate nothing,
// which the per-device fit path relies on.
using StringMap = std::map<std::string, std::string, std::less<>>;

// The value under `key`, or null.
inline const std::string* FindValue(const StringMap& m, std::string_view key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

struct ContainerView {
  std::string name{};
  // resources.limits / resources.requests: resource name -> quantity text as written ("3k").
  StringMap limits{};
  StringMap requests{};
  bool operator==(const ContainerView&) const = default;
};

struct PodView {
  std::string name{};
  std::string namespace_name{};
  std::string uid{};
  std::string node_name{};  // spec.nodeName
  std::string phase{};      // status.phase
  bool deleting = false;    // metadata.deletionTimestamp set
  StringMap annotations{};
  StringMap labels{};
  std::vector<ContainerView> init_containers{};
  std::vector<ContainerView> containers{};
  // Every init container has terminated with exit code 0 (status.initContainerStatuses); false
  // when there are no init containers.
  bool init_done = false;
  bool operator==(const PodView&) const = default;

  // Init containers then regular containers: the positional index space of PodDevices.
  std::vector<const ContainerView*> AllContainers() const;
  // "namespace/name".
  std::string Key() const;
};

// Reads a core/v1 Pod. Tolerant where Kubernetes is (missing metadata, resources or status are
// empty), strict where a wrong type would hide a request: a non-object pod, a containers field
// that is not a list, or a quantity that is neither a string nor a number is an error naming
// the field, e.g. `spec.containers[1].resources.limits["nvidia.com/gpu"]: want a quantity, got
// [1]`. Integer JSON numbers are rendered as decimal text.
Result<PodView> ParsePodView(const nlohmann::json& pod);

// The parts of a Pod that ParsePodView reads, everything else dropped: metadata name, namespace,
// uid, resourceVersion, annotations, labels and deletionTimestamp; spec nodeName and each
// (init) container's name and resources limits/requests; status phase and each init container
// status's state.terminated.exitCode. For ParsePodView the result reads exactly as the pod
// (the same view, or the same error: a value of the wrong type is kept as it is). An informer
// transform (k8s::InformerOptions::transform) for caches that only feed the usage index: a
// real pod's managedFields, env, volumes and conditions are most of its size.
nlohmann::json PodViewFields(nlohmann::json pod);

// metadata.name of any object; "" when absent or not a string.
std::string ObjectName(const nlohmann::json& obj);

// metadata.annotations of any object (node or pod); non-string values are skipped.
StringMap ObjectAnnotations(const nlohmann::json& obj);

}  // namespace hami::device

#endif  // HAMI_DEVICE_POD_VIEW_H_
