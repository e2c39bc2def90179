// For the per-handler fuzzers: a whole HTTP request (head, Content-Length or chunked body,
// Content-Encoding) parsed under --http_bind's limits, as the server does before calling the
// handler. The body goes to the handler only when the parser accepts the request.
#ifndef HAMI_TESTS_SCHEDULER_HTTP_REQUEST_SUPPORT_H_
#define HAMI_TESTS_SCHEDULER_HTTP_REQUEST_SUPPORT_H_

#include <cstdlib>
#include <optional>
#include <string_view>

#include "net/http_request.h"
#include "scheduler/server.h"

namespace hami::scheduler::testing {

// The first complete request in `bytes`, or nullopt when it is refused or incomplete (a refusal
// must carry a 4xx/5xx status and a message).
inline std::optional<net::Request> ParseWholeRequest(std::string_view bytes) {
  static const ServerOptions defaults;
  net::RequestLimits limits;
  limits.body_limit = [](std::string_view, std::string_view path) {
    return path == "/filter" ? defaults.filter_max_body : defaults.max_body;
  };
  net::RequestParser parser(limits);
  parser.Feed(bytes);
  if (parser.state() == net::RequestParser::State::kError) {
    if (parser.error().status < 400 || parser.error().message.empty()) std::abort();
    return std::nullopt;
  }
  if (parser.state() != net::RequestParser::State::kDone) return std::nullopt;
  return parser.Take();
}

}  // namespace hami::scheduler::testing

#endif  // HAMI_TESTS_SCHEDULER_HTTP_REQUEST_SUPPORT_H_
