// HTTP handlers of the sim apiserver's resource API (internal to src/sim).
#ifndef HAMI_SIM_HANDLERS_H_
#define HAMI_SIM_HANDLERS_H_

#include <atomic>
#include <chrono>
#include <string>

#include <httplib.h>

#include "sim/store.h"

namespace hami::sim {

struct HandlerConfig {
  std::chrono::milliseconds bookmark_interval{1000};
  int drop_watch_every = 0;
  const std::atomic<bool>* stopping = nullptr;  // watches end when it turns true
};

// Serves every /api/... and /apis/... resource request (not discovery). Always answers:
// unknown paths get a 404 Status, malformed bodies a 400 Status.
void HandleResourceRequest(Store& store, const HandlerConfig& config, const httplib::Request& req,
                           httplib::Response& res);

// Serves GET ...?watch=true: a chunked stream of {"type","object"} lines until the client goes,
// timeoutSeconds passes, the server stops, or (fault injection) drop_watch_every events.
void ServeWatch(Store& store, const HandlerConfig& config, const ResourceType& type,
                const std::string& ns, ListFilter filter, const httplib::Request& req,
                httplib::Response& res);

// Writes `body` as the JSON response with `code`.
void ReplyJson(httplib::Response& res, int code, const std::string& body);
// Writes a metav1.Status failure for `e`.
void ReplyError(httplib::Response& res, const k8s::ApiError& e);

}  // namespace hami::sim

#endif  // HAMI_SIM_HANDLERS_H_
