// `kubectl hami explain POD` (docs/KUBECTL_HAMI.md): why a pod is where it is, or pending. Pure:
// built from the pod, the cluster's Node, Pod, Event and ResourceQuota objects and the clock.
//
// The per-node filter outcome is what hami-scheduler records (the PodScheduled=False message and
// its FilteringFailed events) plus, for every node with a HAMi device, the scheduler's own
// decision computed now: usage from the node and pod annotations (device::UsageIndex, as the
// scheduler builds it), then device::FitPodOnNode with the pod's policies. The figures behind
// each reason code come from the backend's Fit run on one device at a time.
#ifndef HAMI_CLI_KUBECTL_HAMI_EXPLAIN_H_
#define HAMI_CLI_KUBECTL_HAMI_EXPLAIN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/kubectl_hami_view.h"
#include "common/clock.h"
#include "common/result.h"
#include "device/config.h"

namespace hami::cli {

// One container's normalised request for one vendor (after the webhook: read from the pod).
struct ExplainRequest {
  std::string container;
  bool init = false;
  std::string vendor;
  int64_t count = 0;
  std::optional<int64_t> memory_mib;      // set when the request names MiB
  std::optional<int64_t> memory_percent;  // set when it names a share of the device's memory
  int64_t cores = 0;                      // percent
};

// The filter outcome on one node with a HAMi device, computed now.
struct ExplainNode {
  std::string name;
  bool fit = false;
  std::string reason;  // the scheduler's reason string ("1/2 CardInsufficientMemory"); "" if fit
  std::string words;   // the reason in words with its figures; when fit, the devices it would get
  std::vector<PodDeviceRow> devices;  // when fit: what the pod would get there
};

struct ExplainLock {
  std::string node;
  std::string value;   // hami.io/mutex.lock as written
  std::string holder;  // "NS/POD"; "" for a legacy or unreadable value
  std::optional<int64_t> age_seconds;
  bool held_by_pod = false;  // the explained pod holds it
};

struct ExplainEvent {
  std::string time;  // RFC 3339, as recorded ("" when unknown)
  std::string type;  // Normal, Warning; "Annotation" for a step read from an annotation
  std::string reason;
  std::string message;  // reason codes spelled out
  std::string source;   // the reporting component
  int64_t count = 1;
};

// DRA mode: one of the pod's claims (spec.resourceClaims) and what it holds.
struct ExplainClaim {
  std::string name;                          // spec.resourceClaims[].name
  std::optional<std::string> claim;          // the ResourceClaim's name; nullopt: not made yet
  std::optional<std::string> template_name;  // resourceClaimTemplateName, when from a template
  // "allocated", "pending" (made, not allocated), "not created" (no claim yet), "not found"
  // (named, not listed), "other driver" (allocated, none of it ours)
  std::string state;
  std::vector<std::string> containers;  // the containers whose resources.claims name it
  std::vector<DraShare> shares;         // its results of our driver
};

// DRA mode: kube-scheduler's allocator (dra::Allocator) run now for the pod's claims that are
// not allocated, on one node that publishes our driver's GPUs.
struct ExplainDraNode {
  std::string name;
  bool fit = false;
  std::string reason;                // kube-scheduler's ("cannot allocate all claims"); "" if fit
  std::vector<std::string> details;  // why not, per claim, request and device; or, when it fits,
                                     // per result what the claim would get
};

struct ExplainView {
  std::string ns, name, phase;
  std::optional<std::string> node;        // spec.nodeName, else hami.io/vgpu-node
  std::optional<std::string> bind_phase;  // hami.io/bind-phase
  std::vector<ExplainRequest> requests;   // containers in order, init first; vendors by key
  std::map<std::string, std::string> annotations;  // the pod's HAMi and vendor annotations
  std::vector<PodDeviceRow> devices;      // what the pod holds (allocated annotations), per UUID
  std::optional<std::string> scheduling;  // the PodScheduled=False message, in words
  std::vector<ExplainNode> nodes;         // every node with a HAMi device, by name
  int64_t other_nodes = 0;                // nodes without a HAMi device
  std::optional<ExplainLock> lock;        // the lock of the pod's node, or one the pod holds
  std::vector<ExplainEvent> history;      // by time
  // DRA mode (the pod has spec.resourceClaims): its claims, and when some are not allocated
  // and the pod is not bound, the allocator per node.
  std::vector<ExplainClaim> claims;
  std::vector<ExplainDraNode> dra_nodes;  // by name
  std::string summary;                    // one or two sentences
  std::vector<std::string> warnings;      // objects skipped
};

struct ExplainInput {
  nlohmann::json pod;
  std::vector<nlohmann::json> nodes;
  std::vector<nlohmann::json> pods;    // all namespaces: usage
  std::vector<nlohmann::json> events;  // at least the pod's
  std::vector<nlohmann::json> quotas;  // ResourceQuotas of the pod's namespace
  device::DeviceConfig config = device::DefaultDeviceConfig();
  // The schedulerName HAMi's webhook writes into the pods it mutates (the chart's
  // schedulerName, --scheduler-name): a pod asking HAMi devices without it and without any
  // hami.io/ annotation was never seen by the webhook.
  std::string scheduler_name = "hami-scheduler";
  SystemTime now{};
  // DRA mode: the cluster's ResourceSlices and ResourceClaims, and its DeviceClasses (the
  // allocator's selectors).
  DraObjects dra;
  std::vector<nlohmann::json> device_classes;
};

// An error only for a pod object that does not parse (naming the field).
Result<ExplainView> BuildExplain(const ExplainInput& input);

// DRA mode's part of BuildExplain (kubectl_hami_explain_dra.cc): fills view->claims and
// view->dra_nodes and, for a pod with claims, the summary; false for a pod without
// spec.resourceClaims (nothing done).
bool ExplainDra(const ExplainInput& input, ExplainView* view);

// The claims and the allocator's verdicts in text, "" when there are none (ExplainText).
std::string ExplainDraText(const ExplainView& view, const TableOptions& options);

// The text form (sections with kubectl-style tables); `colour` marks fit/no fit and warnings
// with ANSI colours.
std::string ExplainText(const ExplainView& view, const TableOptions& options);
// The -o json shape (docs/KUBECTL_HAMI.md), one line plus '\n'.
std::string ExplainJson(const ExplainView& view);

}  // namespace hami::cli

#endif  // HAMI_CLI_KUBECTL_HAMI_EXPLAIN_H_
