#include "sim/kube_scheduler_extender.h"

#include <chrono>

#include "common/json.h"
#include "k8s/object.h"
#include "scheduler/extender_args.h"

namespace hami::sim {

using nlohmann::json;

std::unique_ptr<httplib::Client> NewExtenderHttp(const KubeSchedulerOptions& options,
                                                 bool keep_alive) {
  auto http = std::make_unique<httplib::Client>(
      options.extender_url_source ? options.extender_url_source() : options.extender_url);
  http->set_connection_timeout(std::chrono::seconds(5));
  http->set_read_timeout(options.http_timeout);
  http->set_write_timeout(options.http_timeout);
  // Bind workers open a connection per request: a worker may sit idle past the extender's idle
  // timeout, or across a restart of hami-scheduler, and cpp-httplib 0.11 cannot tell a kept
  // socket the server has closed, so that worker's next bind would fail (kube-scheduler's Go
  // transport retries such a request). Kept for the binds, no gain showed beyond noise
  // (docs/PERFORMANCE.md, 2026-12-07). The cycle's one connection is busy back to back, so it
  // is kept (no connect + accept per pod on the serial path).
  http->set_keep_alive(keep_alive);
  // The request goes out as headers then body: with Nagle the body waits for the extender's
  // delayed ACK (~40 ms per call).
  http->set_tcp_nodelay(true);
  return http;
}

std::string ExtenderReplyError(const httplib::Result& r, std::string_view verb, json* body) {
  const std::string what = "extender " + std::string(verb);
  if (!r) return what + ": " + httplib::to_string(r.error());
  if (r->status != 200) return what + ": HTTP " + std::to_string(r->status);
  *body = ParseJsonOrNull(r->body);
  if (!body->is_object()) return what + ": response is not a JSON object";
  const json* e = scheduler::FindKeyInsensitive(*body, "Error");
  return e != nullptr && e->is_string() ? e->get<std::string>() : "";
}

namespace {

FilterReply ParseFilterReply(const httplib::Result& r) {
  FilterReply out;
  json body;
  out.error = ExtenderReplyError(r, "/filter", &body);
  if (!body.is_object()) return out;
  const json* names = scheduler::FindKeyInsensitive(body, "NodeNames");
  if (names != nullptr && names->is_array() && !names->empty() && (*names)[0].is_string()) {
    out.chosen = (*names)[0].get<std::string>();
  }
  const json* fails = scheduler::FindKeyInsensitive(body, "FailedNodes");
  if (fails != nullptr && fails->is_object()) {
    for (const auto& [n, why] : fails->items()) {
      out.failed.emplace_back(n, why.is_string() ? why.get<std::string>() : why.dump());
    }
  }
  return out;
}

}  // namespace

FilterReply ExtenderFilter(httplib::Client& http, const json& pod,
                           std::vector<std::string> node_names) {
  json args = {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", std::move(node_names)}};
  return ParseFilterReply(http.Post("/filter", args.dump(), "application/json"));
}

std::string ExtenderBind(httplib::Client& http, const json& pod, const std::string& node) {
  json args = {{"PodName", k8s::Name(pod)},
               {"PodNamespace", k8s::Namespace(pod)},
               {"PodUID", k8s::Uid(pod)},
               {"Node", node}};
  json body;
  return ExtenderReplyError(http.Post("/bind", args.dump(), "application/json"), "/bind", &body);
}

}  // namespace hami::sim
