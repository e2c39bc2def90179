// Whole HTTP requests (request line, headers, chunked or Content-Length bodies, pipelined) into
// the sim API server's request path as it runs on net::HttpServer: the parser with the server's
// caps, then the resource handlers. Every answer must be a client error or a success, never a
// crash or a 5xx (503 for a watch, which needs a live connection, excepted).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "net/http_request.h"
#include "sim/apiserver/handlers.h"
#include "sim/apiserver/store.h"

namespace {

struct Fixture {
  hami::FakeClock clock;
  hami::sim::Store store{clock, 1000};
  std::atomic<bool> stopping{false};
  hami::sim::HandlerConfig config{std::chrono::milliseconds(1000), 0, &stopping};
  Fixture() {
    (void)store.Create(hami::sim::NamespaceType(), "", {{"metadata", {{"name", "default"}}}});
    (void)store.Create(*hami::sim::FindResourceType("", "v1", "pods"), "default",
                       {{"metadata", {{"name", "p"}}}});
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture* f = new Fixture();
  hami::net::RequestLimits limits;
  limits.max_body_bytes = 3 << 20;  // the sim API server's cap
  hami::net::RequestParser parser(limits);
  std::string_view in(reinterpret_cast<const char*>(data), size);
  for (int i = 0; i < 16 && !in.empty(); ++i) {
    in.remove_prefix(parser.Feed(in));
    if (parser.state() == hami::net::RequestParser::State::kError) {
      int status = parser.error().status;
      if (status < 400 || status >= 600) std::abort();
      return 0;
    }
    if (parser.state() != hami::net::RequestParser::State::kDone) return 0;
    hami::sim::ApiRequest req(parser.Take());
    if (hami::sim::IsProxyPath(req.path())) continue;  // would dial the pod
    if (req.path().rfind("/api", 0) != 0) continue;
    hami::net::Response res = hami::sim::HandleResourceRequest(f->store, f->config, req);
    if (res.status < 200 || (res.status >= 500 && res.status != 503)) std::abort();
  }
  return 0;
}
