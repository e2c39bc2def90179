// The meta.k8s.io Table form of a GET (docs/SIM_APISERVER.md, "Table responses"): what
// `kubectl get` asks for (Accept: application/json;as=Table;v=v1;g=meta.k8s.io), answered for
// pods, nodes and the resource.k8s.io kinds with kube-apiserver's printer columns. Other kinds
// answer their plain JSON, which kubectl prints as NAME and AGE.
#ifndef HAMI_SIM_APISERVER_TABLE_H_
#define HAMI_SIM_APISERVER_TABLE_H_

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "sim/apiserver/resources.h"
#include "sim/apiserver/store.h"

namespace hami::sim {

// The Table version ("v1" or "v1beta1") an Accept header asks for, or nullopt when it asks for
// none (a Table media type must name g=meta.k8s.io).
std::optional<std::string> WantedTableVersion(const std::string& accept);

// Whether `type` has printer columns here (pods, nodes, DeviceClass, ResourceClaim,
// ResourceClaimTemplate, ResourceSlice).
bool HasTableColumns(const ResourceType& type);

// The Table of `items` of `type` (HasTableColumns) in meta.k8s.io/`version`, ages measured at
// `now`. `include_object` is the includeObject parameter: "None", "Object", or else Metadata
// (a PartialObjectMetadata per row, kube-apiserver's default).
nlohmann::json ToTable(const ResourceType& type, const std::vector<ObjectPtr>& items,
                       const std::string& version, const std::string& include_object,
                       SystemTime now, const nlohmann::json& list_metadata);

// Go's duration.HumanDuration (k8s.io/apimachinery/pkg/util/duration), as kubectl's AGE shows it.
std::string HumanDuration(std::chrono::seconds d);

}  // namespace hami::sim

#endif  // HAMI_SIM_APISERVER_TABLE_H_
