// The kube-scheduler loop's client of HAMi's scheduler extender (sim/kube_scheduler.h): the HTTP
// connection it opens and the two calls it makes, POST /filter and POST /bind, in the extender's
// wire format (docs/protocol.md, "Scheduler extender"). Internal to hami-sim.
#ifndef HAMI_SIM_KUBE_SCHEDULER_EXTENDER_H_
#define HAMI_SIM_KUBE_SCHEDULER_EXTENDER_H_

#include <httplib.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/kube_scheduler.h"

namespace hami::sim {

// A /filter reply: transport or HTTP failure and the Error field both land in `error`.
struct FilterReply {
  std::string error;
  std::vector<std::pair<std::string, std::string>> failed;  // FailedNodes
  std::string chosen;                                       // first of NodeNames
};

// A connection to options.extender_url with the loop's timeouts; `keep_alive` for the cycle's
// one busy connection, not for the bind workers' (see the .cc).
std::unique_ptr<httplib::Client> NewExtenderHttp(const KubeSchedulerOptions& options,
                                                 bool keep_alive);

// "" when the call succeeded and the reply has no Error; otherwise what went wrong, prefixed
// "extender <verb>: " for transport and HTTP failures. `body` gets the parsed reply (null when it
// is not JSON).
std::string ExtenderReplyError(const httplib::Result& r, std::string_view verb,
                               nlohmann::json* body);

// ExtenderFilterArgs with the pod and the candidate node names (nodeCacheCapable: no Nodes).
FilterReply ExtenderFilter(httplib::Client& http, const nlohmann::json& pod,
                           std::vector<std::string> node_names);

// ExtenderBindingArgs for the pod onto `node`; "" on success, else the error.
std::string ExtenderBind(httplib::Client& http, const nlohmann::json& pod, const std::string& node);

}  // namespace hami::sim

#endif  // HAMI_SIM_KUBE_SCHEDULER_EXTENDER_H_
