// net::RequestParser: an incremental HTTP/1.1 request parser with hard caps, for servers that
// face untrusted clients (docs/SECURITY.md). Bytes are fed as they arrive; the parser keeps at
// most one request's head (capped) and its decoded body (capped per route), so what a client can
// make the server hold is bounded whatever it sends:
// - request line + headers: at most `max_header_bytes` bytes and `max_headers` fields (431);
// - body: Content-Length or chunked; the cap counts decoded bytes, chunk extensions and trailers
//   included in the head budget; past the route's cap: 413, decided as soon as it is known (a
//   declared Content-Length over the cap is refused before any body byte is read);
// - Content-Encoding other than identity: 415 (a gzip body is never inflated, so no bomb);
// - Transfer-Encoding other than chunked: 501; Transfer-Encoding with Content-Length, differing
//   Content-Lengths, a malformed length, chunk size or header line: 400.
// A parser in the error state stays there: the server answers the status and closes.
// Not thread-safe; one parser per connection.
#ifndef HAMI_NET_HTTP_REQUEST_H_
#define HAMI_NET_HTTP_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hami::net {

struct Request {
  std::string method;
  std::string target;                                        // as sent, e.g. "/filter?x=1"
  std::string path;                                          // target up to '?'
  int minor_version = 1;                                     // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order
  std::string body;                                          // decoded (chunked removed)
  bool keep_alive = true;  // HTTP/1.1 unless "Connection: close"; 1.0 only with keep-alive
  // Set by the server: the connection is TLS and its client sent a certificate that the
  // server's trust store verified.
  bool peer_verified = false;

  // The first header named `name` (lower case), or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct RequestLimits {
  size_t max_header_bytes = 64 << 10;  // request line + header fields (+ chunk trailers)
  size_t max_headers = 100;
  size_t max_body_bytes = 1 << 20;  // when body_limit is empty
  // The body cap of a request, from its method and path (e.g. a route table); empty = the
  // max_body_bytes for every request.
  std::function<size_t(std::string_view method, std::string_view path)> body_limit{};
};

// Why a request was refused: the status to answer and a message naming what was wrong.
struct ParseError {
  int status = 400;
  std::string message;
};

class RequestParser {
 public:
  enum class State {
    kHead,   // reading the request line and headers (nothing read yet counts here too)
    kBody,   // head complete, reading the body
    kDone,   // a request is complete: take it with Take()
    kError,  // refused: see error()
  };

  explicit RequestParser(RequestLimits limits);

  // Consumes bytes from `data` until a request is complete or an error is found, and returns
  // how many it consumed (the rest belongs to the next, pipelined request: feed it again after
  // Take()). In kDone or kError it consumes nothing.
  size_t Feed(std::string_view data);

  State state() const { return state_; }
  // True once any byte of the current request arrived (a connection between requests is idle).
  bool started() const { return started_; }
  // Precondition: state() == kDone. Hands the request over and resets for the next one.
  Request Take();
  // Precondition: state() == kError.
  const ParseError& error() const { return error_; }
  // Bytes buffered for the current request (head line + decoded body), for tests and accounting.
  size_t buffered() const { return line_.size() + head_bytes_ + request_.body.size(); }

 private:
  enum class BodyMode { kNone, kLength, kChunkSize, kChunkData, kChunkDataEnd, kTrailer };
  size_t FeedHead(std::string_view data);
  size_t FeedBody(std::string_view data);
  // One complete line of the head (without CRLF); false when it set an error.
  bool HeadLine(std::string_view line);
  bool RequestLine(std::string_view line);
  bool HeaderLine(std::string_view line);
  bool EndOfHead();
  // Collects one CRLF-terminated line into line_ from data; returns consumed bytes and sets
  // *complete. Enforces the head budget.
  size_t TakeLine(std::string_view data, bool* complete);
  bool ChunkSizeLine(std::string_view line);
  void Fail(int status, std::string message);
  void Finish();

  const RequestLimits limits_;
  State state_ = State::kHead;
  BodyMode mode_ = BodyMode::kNone;
  bool started_ = false;
  bool seen_request_line_ = false;
  size_t head_bytes_ = 0;  // head bytes consumed so far (request line + headers + trailers)
  size_t body_cap_ = 0;
  uint64_t remaining_ = 0;  // Content-Length or current chunk bytes still to read
  std::string line_;        // a partial line
  Request request_;
  ParseError error_;
};

// The query of a request target ("/p?a=1&b=x%20y" -> {a:1, b:"x y"}), percent-decoded, '+' read
// as a space (form encoding, as Go's url.ParseQuery does). A key without '=' has the value "";
// repeated keys keep every value in order. Malformed escapes are kept as written.
using QueryParams = std::multimap<std::string, std::string>;
QueryParams ParseQuery(std::string_view target);
// The first value of `key` in `params`, or "" when absent.
std::string QueryValue(const QueryParams& params, const std::string& key);

// The standard reason phrase of a status ("OK", "Payload Too Large", ...); "" when unknown.
std::string_view ReasonPhrase(int status);

}  // namespace hami::net

#endif  // HAMI_NET_HTTP_REQUEST_H_
