// HTTP handlers of the sim apiserver's resource API (internal to src/sim).
#ifndef HAMI_SIM_HANDLERS_H_
#define HAMI_SIM_HANDLERS_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "net/http_request.h"
#include "net/http_server.h"
#include "sim/apiserver/store.h"

namespace hami::sim {

class WatchHub;

// One API request as the handlers read it: the HTTP request and its decoded query.
struct ApiRequest {
  net::Request http;
  net::QueryParams params;

  explicit ApiRequest(net::Request request)
      : http(std::move(request)), params(net::ParseQuery(http.target)) {}
  const std::string& method() const { return http.method; }
  const std::string& path() const { return http.path; }
  const std::string& body() const { return http.body; }
  std::string Param(const std::string& key) const { return net::QueryValue(params, key); }
  bool HasParam(const std::string& key) const { return params.count(key) != 0; }
  // The first header `name` (any case), or "".
  std::string Header(std::string_view name) const;
};

struct HandlerConfig {
  std::chrono::milliseconds bookmark_interval{1000};
  int drop_watch_every = 0;
  const std::atomic<bool>* stopping = nullptr;  // no new watch starts once it turns true
  // Serves the open watches; without one (handler tests, the fuzzer) a watch gets 503.
  WatchHub* watches = nullptr;
  // A mutating admission webhook for pod creates (`hami-sim run --serve`): the pod to store, or
  // the error to answer (a denial). Unset: pods are stored as sent.
  std::function<k8s::ApiResult<nlohmann::json>(const nlohmann::json& pod)> admit_pod = nullptr;
};

// Serves every /api/... and /apis/... resource request (not discovery) and answers through
// `reply`. Always answers: unknown paths get a 404 Status, malformed bodies a 400 Status. A
// watch (GET ...?watch=true) answers with a stream that the hub feeds.
void HandleResourceRequest(Store& store, const HandlerConfig& config, const ApiRequest& req,
                           const net::Responder& reply);
// The same for callers that want the answer as a value (tests, the fuzzer): a watch gets 503.
net::Response HandleResourceRequest(Store& store, const HandlerConfig& config,
                                    const ApiRequest& req);

// The proxy subresource (docs/SIM_APISERVER.md):
//   /api/v1/namespaces/{ns}/pods/{name}[:{port}]/proxy[/{path}]
//   /api/v1/namespaces/{ns}/services/{name}[:{port}]/proxy[/{path}]
// forwarded over plain HTTP to the pod's status.podIP (a service: its first selected pod with
// an IP) and the port (a number or a container port's name; default the pod's first container
// port, a service's first port), the reply's status, content type and body passed back. 503
// when nothing answers, 404 when the pod or service does not exist.
bool IsProxyPath(std::string_view path);
net::Response HandleProxy(Store& store, const ApiRequest& req);

// The JSON response `body` with `code`.
net::Response JsonResponse(int code, std::string body);
// A metav1.Status failure for `e`.
net::Response ErrorResponse(const k8s::ApiError& e);

// The open watches (GET ...?watch=true): each is a stream on its connection, fed by one thread
// per watched resource type, so that a watch holds a connection and never a worker or a thread
// of its own. A watch ends when the client goes, timeoutSeconds passes, the hub stops, or (fault
// injection) after drop_watch_every events.
class WatchHub {
 public:
  WatchHub(Store& store, std::chrono::milliseconds bookmark_interval, int drop_watch_every);
  ~WatchHub();  // Stop()s
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // Starts the watch of `type` in `ns` ("" = all) that `req` asks for, answering through
  // `reply`: a 400 for bad parameters, else the stream (initial events for resourceVersion ""
  // or "0", then every change; 410 Expired as an ERROR event once history is gone).
  void Serve(const ResourceType& type, const std::string& ns, ListFilter filter,
             const ApiRequest& req, const net::Responder& reply);
  // Ends every open watch (with its last chunk) and joins the threads. Idempotent.
  void Stop();
  // Open watches (for tests).
  size_t open() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_HANDLERS_H_
