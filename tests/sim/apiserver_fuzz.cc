// Drives the apiserver's resource handlers with arbitrary request bodies (no sockets): every
// answer must be a well-formed client error or success, never a crash or a 5xx.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/clock.h"
#include "sim/apiserver/handlers.h"
#include "sim/apiserver/store.h"

namespace {

constexpr const char* kSlice = R"({"metadata": {"name": "s"}, "spec": {"driver": "d.example.com",
  "nodeName": "n", "pool": {"name": "n", "generation": 0, "resourceSliceCount": 2},
  "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]}})";
constexpr const char* kClaim = R"({"metadata": {"name": "c"}, "spec": {"devices": {"requests": [
  {"name": "gpu", "exactly": {"deviceClassName": "d.example.com"}}]}}})";

struct Fixture {
  hami::FakeClock clock;
  hami::sim::Store store{clock, 1000};
  std::atomic<bool> stopping{false};
  hami::sim::HandlerConfig config{std::chrono::milliseconds(1000), 0, &stopping};
  Fixture() {
    (void)store.Create(hami::sim::NamespaceType(), "", {{"metadata", {{"name", "default"}}}});
    (void)store.Create(*hami::sim::FindResourceType("", "v1", "pods"), "default",
                       {{"metadata", {{"name", "p"}}}});
    // A counter slice "s" and a claim "c" (resource.k8s.io) for the DRA shapes to update.
    (void)store.Create(*hami::sim::FindResourceType("resource.k8s.io", "v1", "resourceslices"), "",
                       hami::sim::Json::parse(kSlice));
    (void)store.Create(*hami::sim::FindResourceType("resource.k8s.io", "v1", "resourceclaims"),
                       "default", hami::sim::Json::parse(kClaim));
  }
};

struct Shape {
  const char* method;
  const char* path;
  const char* content_type;
};

constexpr Shape kShapes[] = {
    {"POST", "/api/v1/namespaces/default/pods", "application/json"},
    {"PUT", "/api/v1/namespaces/default/pods/p", "application/json"},
    {"PUT", "/api/v1/namespaces/default/pods/p/status", "application/json"},
    {"PATCH", "/api/v1/namespaces/default/pods/p", "application/merge-patch+json"},
    {"PATCH", "/api/v1/namespaces/default/pods/p", "application/strategic-merge-patch+json"},
    {"PATCH", "/api/v1/namespaces/default/pods/p", "application/json-patch+json"},
    {"PATCH", "/api/v1/namespaces/default/pods/p/status", "application/merge-patch+json"},
    {"POST", "/api/v1/namespaces/default/pods/p/binding", "application/json"},
    {"POST", "/api/v1/nodes", "application/json"},
    {"POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", "application/json"},
    {"DELETE", "/api/v1/namespaces/default/configmaps/x", "application/json"},
    {"POST", "/api/v1/namespaces/default/secrets", "application/vnd.kubernetes.protobuf"},
    {"PUT", "/api/v1/namespaces/default/secrets/s", "application/vnd.kubernetes.protobuf"},
    {"DELETE", "/api/v1/namespaces/default/secrets/s", "application/vnd.kubernetes.protobuf"},
    // resource.k8s.io (dra_validation.h); appended so the seeds above keep their shapes.
    {"POST", "/apis/resource.k8s.io/v1/resourceslices", "application/json"},
    {"PUT", "/apis/resource.k8s.io/v1/resourceslices/s", "application/json"},
    {"POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", "application/json"},
    {"PATCH", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c/status",
     "application/merge-patch+json"},
    {"POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
     "application/json"},
    {"POST", "/apis/resource.k8s.io/v1/deviceclasses", "application/json"},
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture* f = new Fixture();
  if (size == 0) return 0;
  const Shape& shape = kShapes[data[0] % (sizeof kShapes / sizeof kShapes[0])];
  hami::net::Request http;
  http.method = shape.method;
  http.target = http.path = shape.path;
  http.body.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  http.headers.emplace_back("content-type", shape.content_type);
  hami::net::Response res =
      hami::sim::HandleResourceRequest(f->store, f->config, hami::sim::ApiRequest(std::move(http)));
  if (res.status < 200 || res.status >= 500) std::abort();
  return 0;
}
