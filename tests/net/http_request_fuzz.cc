// Fuzzes the request parser with whole byte streams (heads, chunked bodies, pipelined
// requests), fed in two pieces split at the first byte's value: it never crashes, never holds
// more than its caps, and parses the same requests however the bytes are split.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "net/http_request.h"

namespace {

constexpr size_t kHeaderCap = 2048;
constexpr size_t kBodyCap = 4096;

std::vector<std::string> ParseAll(std::string_view in, size_t split) {
  hami::net::RequestLimits limits;
  limits.max_header_bytes = kHeaderCap;
  limits.max_headers = 16;
  limits.max_body_bytes = kBodyCap;
  hami::net::RequestParser parser(limits);
  std::vector<std::string> out;
  std::string_view pieces[2] = {in.substr(0, split), in.substr(split)};
  for (std::string_view piece : pieces) {
    while (!piece.empty()) {
      size_t used = parser.Feed(piece);
      piece.remove_prefix(used);
      if (parser.buffered() > kHeaderCap + kBodyCap + 4096) std::abort();
      if (parser.state() == hami::net::RequestParser::State::kDone) {
        hami::net::Request r = parser.Take();
        if (r.body.size() > kBodyCap) std::abort();
        out.push_back(r.method + " " + r.target + " " + std::to_string(r.headers.size()) + " " +
                      r.body);
      } else if (parser.state() == hami::net::RequestParser::State::kError) {
        if (parser.error().status < 400 || parser.error().message.empty()) std::abort();
        out.push_back("error " + std::to_string(parser.error().status));
        return out;
      } else if (used == 0) {
        std::abort();  // neither progress nor a verdict
      }
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t split = size == 0 ? 0 : data[0] % (size + 1);
  if (ParseAll(in, split) != ParseAll(in, size)) std::abort();
  return 0;
}
