// The mutating admission webhook (docs/protocol.md#webhook) as a pure
// function: an AdmissionReview (admission.k8s.io/v1 or v1beta1) in, the AdmissionReview reply in
// the same version out, with a minimal JSON Patch (base64 in `response.patch`).
//
// Decision order (docs/protocol.md#webhook): undecodable review -> HTTP 400; no containers ->
// denied "pod has no containers"; another scheduler assigned -> allowed untouched; per init
// container then container, every backend's Device::MutateAdmission in registry order (an error,
// e.g. NVIDIA's gpumem-percentage outside 0..100 -> code 500); a privileged container in a pod with
// a device request -> denied "container <name> is privileged"; schedulerName set when configured,
// and a pod with spec.nodeName -> denied "pod has node assigned"; quota pre-check -> denied
// "exceeding resource quota"; else allowed with the patch (if any). No vendor is named here.
#ifndef HAMI_SCHEDULER_WEBHOOK_H_
#define HAMI_SCHEDULER_WEBHOOK_H_

#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "device/device.h"
#include "device/quota.h"
#include "scheduler/http_reply.h"

namespace hami::scheduler {

struct WebhookOptions {
  std::string scheduler_name{};                   // --scheduler-name; "" = never rewritten
  bool force_overwrite_default_scheduler = true;  // --force-overwrite-default-scheduler
};

// The quota of a namespace (limits and usage), for the pre-check; may be empty.
using QuotaLookup = std::function<device::NamespaceQuota(const std::string& namespace_name)>;

// The quota pre-check (docs/protocol.md#webhook, step 7): true when `pod`'s device memory and
// cores fit its namespace's quota (`ns` when the pod names none), or cannot be judged.
bool PodFitsQuota(const device::Registry& registry, const nlohmann::json& pod,
                  const std::string& ns, const QuotaLookup& quota);

// Handles one POST /webhook body. `quota` may be empty (no quota check).
HttpReply HandleAdmissionReview(std::string_view body, const device::Registry& registry,
                                const WebhookOptions& options, const QuotaLookup& quota);

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_WEBHOOK_H_
