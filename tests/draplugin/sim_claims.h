// A ResourceClaim as kube-scheduler leaves it, made in the sim API server for the DRA plugin's
// tests: created for 3000Mi of hami-core-gpu.project-hami.io, then allocated through /status
// to `device` of node-1's pool (share 3f1c6a9e-...-001, cores 100).
#ifndef HAMI_TESTS_DRAPLUGIN_SIM_CLAIMS_H_
#define HAMI_TESTS_DRAPLUGIN_SIM_CLAIMS_H_

#include <string>

#include "common/result.h"
#include "draplugin/publisher.h"
#include "k8s/client.h"

namespace hami::draplugin::testing {

// Claim default/c allocated to `device`; its uid, or the API's answer as the error.
inline Result<std::string> CreateAllocatedClaim(k8s::Client& client, const std::string& device) {
  Json claim = Json::parse(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
      "metadata": {"name": "c", "namespace": "default"},
      "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
          "deviceClassName": "hami-core-gpu.project-hami.io",
          "capacity": {"requests": {"memory": "3000Mi"}}}}]}}})");
  auto created = client.Create(k8s::resources::kResourceClaims, "default", claim);
  if (!created) return created.error().ToError();
  Json allocated = *created;
  allocated["status"] = Json::parse(R"({"allocation": {
      "devices": {"results": [{"request": "gpu", "driver": "hami-core-gpu.project-hami.io",
          "pool": "node-1", "shareID": "3f1c6a9e-0000-4000-8000-000000000001",
          "consumedCapacity": {"memory": "3000Mi", "cores": "100"}}]},
      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
          {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}})");
  allocated["status"]["allocation"]["devices"]["results"][0]["device"] = device;
  auto updated = client.UpdateStatus(k8s::resources::kResourceClaims, allocated);
  if (!updated) return updated.error().ToError();
  return (*updated)["metadata"]["uid"].get<std::string>();
}

}  // namespace hami::draplugin::testing

#endif  // HAMI_TESTS_DRAPLUGIN_SIM_CLAIMS_H_
