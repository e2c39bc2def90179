// The webhook in DRA mode (docs/DRA.md "Webhook, DRA mode"): a pod asking HAMi's resources
// (nvidia.com/gpu, gpumem, gpucores) gets, per container, a claim from a ResourceClaimTemplate of
// its namespace instead, so kube-controller-manager makes the claims owned by the pod and
// deletes them with it, and the stock kube-scheduler allocates them from hami-dra-plugin's
// ResourceSlices. A pure plan: the templates to ensure and the pod's JSON Patch.
#ifndef HAMI_SCHEDULER_DRA_WEBHOOK_H_
#define HAMI_SCHEDULER_DRA_WEBHOOK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "scheduler/http_reply.h"

namespace hami::scheduler {

struct DraWebhookOptions {
  std::string count_resource = "nvidia.com/gpu";
  std::string memory_resource = "nvidia.com/gpumem";
  std::string memory_percentage_resource = "nvidia.com/gpumem-percentage";
  std::string cores_resource = "nvidia.com/gpucores";
  int32_t default_memory = 0;   // MiB when gpumem is not given; 0 = the whole GPU's
  int32_t default_cores = 0;    // percent when gpucores is not given; 0 = no cores request
  int32_t default_gpu_num = 1;  // GPUs when only memory or cores are asked
  std::string device_class = "hami-core-gpu.project-hami.io";
};

// What DRA mode does to one pod.
struct DraPlan {
  // One per distinct request shape the pod asks, in its namespace, with the label
  // hami.io/dra=true; created once and reused by every pod of that shape.
  std::vector<nlohmann::json> templates;
  nlohmann::json patch = nlohmann::json::array();  // RFC 6902 operations on the pod
};

// The plan for `pod` (namespace `ns` when the pod has none). A pod that asks none of the
// resources, or already carries resourceClaims, gets an empty plan. Errors name the container,
// resource and value (`container "main": nvidia.com/gpumem-percentage: not supported in DRA
// mode ...`), or the annotation (`nvidia.com/use-gpuuuid: empty, no GPU could match`).
Result<DraPlan> PlanDraAdmission(const nlohmann::json& pod, const std::string& ns,
                                 const DraWebhookOptions& options);

// "hami-gpu-<count>x<memory>-<cores>[-<selector hash>]", e.g. hami-gpu-1x3000mi-30c,
// hami-gpu-2xall-allc (whole GPUs): the template of a request shape.
std::string DraTemplateName(int32_t count, int64_t memory_mib, int32_t cores,
                            std::string_view selectors_key);

// Creates `template_object` unless it exists; an error names it and the API's answer.
using EnsureTemplate = std::function<Status(const nlohmann::json& template_object)>;

// POST /webhook in DRA mode: an AdmissionReview in, the reply in its version out. The templates
// are ensured before the pod is allowed with the patch; a failure denies the pod with its reason
// (code 500), so no pod refers to a template that does not exist. A pod over its namespace's
// quota on nvidia.com/gpumem or gpucores is denied "exceeding resource quota" first, as in
// device-plugin mode (DRA's own quota counts claims, not memory). Undecodable reviews as in
// HandleAdmissionReview.
// Whether `pod` (as submitted, HAMi's resources still in it) fits its namespace's GPU quota
// (webhook.h PodFitsQuota); empty: no check.
using FitsQuota = std::function<bool(const nlohmann::json& pod, const std::string& ns)>;

HttpReply HandleDraAdmissionReview(std::string_view body, const DraWebhookOptions& options,
                                   const EnsureTemplate& ensure, const FitsQuota& fits_quota = {});

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_DRA_WEBHOOK_H_
