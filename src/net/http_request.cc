#include "net/http_request.h"

#include <algorithm>
#include <cctype>

#include "common/strings.h"

namespace hami::net {
namespace {

// A chunk-size line (size + extensions) longer than this is refused; it is not counted in the
// head budget so that a long body of small chunks stays legal.
constexpr size_t kMaxChunkLine = 4096;

bool IsTchar(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return IsTchar(c); });
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && Lower(a) == Lower(b);
}

// Calls fn(token) for each comma-separated element, trimmed, skipping empty ones.
template <typename Fn>
void ForEachListItem(std::string_view value, Fn fn) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view item = TrimOws(value.substr(0, comma));
    if (!item.empty()) fn(item);
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

}  // namespace

std::optional<std::string_view> Request::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return std::string_view(v);
  }
  return std::nullopt;
}

RequestParser::RequestParser(RequestLimits limits) : limits_(std::move(limits)) {}

void RequestParser::Fail(int status, std::string message) {
  state_ = State::kError;
  error_ = ParseError{status, std::move(message)};
}

void RequestParser::Finish() {
  state_ = State::kDone;
  mode_ = BodyMode::kNone;
}

Request RequestParser::Take() {
  Request out = std::move(request_);
  request_ = Request{};
  state_ = State::kHead;
  mode_ = BodyMode::kNone;
  started_ = false;
  seen_request_line_ = false;
  head_bytes_ = 0;
  body_cap_ = 0;
  remaining_ = 0;
  line_.clear();
  return out;
}

size_t RequestParser::Feed(std::string_view data) {
  size_t used = 0;
  while (used < data.size() && (state_ == State::kHead || state_ == State::kBody)) {
    started_ = true;
    size_t n = state_ == State::kHead ? FeedHead(data.substr(used)) : FeedBody(data.substr(used));
    used += n;
    if (n == 0) break;
  }
  return used;
}

size_t RequestParser::TakeLine(std::string_view data, bool* complete) {
  // The budget: a head line may use what the head has left; a chunk-size or chunk-end line
  // kMaxChunkLine; a trailer line what the head has left.
  const bool head_budget = state_ == State::kHead || mode_ == BodyMode::kTrailer;
  const size_t budget =
      head_budget ? limits_.max_header_bytes - std::min(limits_.max_header_bytes, head_bytes_)
                  : kMaxChunkLine;
  size_t nl = data.find('\n');
  size_t take = nl == std::string_view::npos ? data.size() : nl + 1;
  if (line_.size() + take > budget) {
    if (head_budget) {
      Fail(431, "request header fields: more than " + std::to_string(limits_.max_header_bytes) +
                    " bytes");
    } else {
      Fail(400, "chunk size line: more than " + std::to_string(kMaxChunkLine) + " bytes");
    }
    return 0;
  }
  line_.append(data.substr(0, take));
  *complete = nl != std::string_view::npos;
  if (*complete && head_budget) head_bytes_ += line_.size();
  return take;
}

size_t RequestParser::FeedHead(std::string_view data) {
  bool complete = false;
  size_t n = TakeLine(data, &complete);
  if (state_ == State::kError || !complete) return n;
  std::string line = std::move(line_);
  line_.clear();
  line.pop_back();  // '\n'
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.find('\r') != std::string::npos) {
    Fail(400, "request head: bare CR in line " + Quote(line));
    return n;
  }
  HeadLine(line);
  return n;
}

bool RequestParser::HeadLine(std::string_view line) {
  if (!seen_request_line_) {
    if (line.empty()) return true;  // RFC 9112 §2.2: ignore empty lines before the request line
    seen_request_line_ = true;
    return RequestLine(line);
  }
  if (line.empty()) return EndOfHead();
  return HeaderLine(line);
}

bool RequestParser::RequestLine(std::string_view line) {
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    Fail(400, "request line: want \"METHOD target HTTP/1.x\", got " + Quote(line));
    return false;
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) {
    Fail(400, "request line: method " + Quote(method) + " is not a token");
    return false;
  }
  if (target.empty() || std::any_of(target.begin(), target.end(), [](char c) {
        return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
      })) {
    Fail(400, "request line: target " + Quote(target) + " is empty or has control characters");
    return false;
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      !std::isdigit(static_cast<unsigned char>(version[5])) ||
      !std::isdigit(static_cast<unsigned char>(version[7]))) {
    Fail(400, "request line: version " + Quote(version) + " is not HTTP/x.y");
    return false;
  }
  if (version[5] != '1') {
    Fail(505, "request line: version " + Quote(version) + " is not HTTP/1.x");
    return false;
  }
  request_.method = std::string(method);
  request_.target = std::string(target);
  request_.path = std::string(target.substr(0, target.find('?')));
  request_.minor_version = version[7] - '0';
  return true;
}

bool RequestParser::HeaderLine(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') {
    Fail(400, "header field: obsolete line folding in " + Quote(line));
    return false;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
    Fail(400, "header field: want \"name: value\" with a token name, got " + Quote(line));
    return false;
  }
  std::string_view value = TrimOws(line.substr(colon + 1));
  for (char c : value) {
    unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) {
      Fail(400, "header field " + Quote(line.substr(0, colon)) + ": control character in value");
      return false;
    }
  }
  if (request_.headers.size() >= limits_.max_headers) {
    Fail(431, "request header fields: more than " + std::to_string(limits_.max_headers));
    return false;
  }
  if (mode_ == BodyMode::kTrailer) return true;  // trailers are checked and dropped
  request_.headers.emplace_back(Lower(line.substr(0, colon)), std::string(value));
  return true;
}

bool RequestParser::EndOfHead() {
  bool chunked = false, has_te = false;
  std::optional<uint64_t> length;
  bool close = false, keep_alive = false;
  for (const auto& [name, value] : request_.headers) {
    if (name == "transfer-encoding") {
      has_te = true;
      bool bad = false;
      ForEachListItem(value, [&](std::string_view item) {
        if (EqualsNoCase(item, "chunked") && !chunked) {
          chunked = true;
        } else {
          bad = true;  // gzip, compress, a repeated chunked...
        }
      });
      if (bad) {
        Fail(501, "Transfer-Encoding: only \"chunked\" is supported, got " + Quote(value));
        return false;
      }
    } else if (name == "content-length") {
      bool bad = false;
      ForEachListItem(value, [&](std::string_view item) {
        std::optional<uint64_t> n;
        if (item.size() <= 18 && std::all_of(item.begin(), item.end(), [](char c) {
              return std::isdigit(static_cast<unsigned char>(c));
            })) {
          n = std::stoull(std::string(item));
        }
        if (!n || (length && *length != *n)) bad = true;
        if (n) length = n;
      });
      if (bad || !length) {
        Fail(400, "Content-Length: want one decimal length, got " + Quote(value));
        return false;
      }
    } else if (name == "content-encoding") {
      bool bad = false;
      ForEachListItem(value, [&](std::string_view item) {
        if (!EqualsNoCase(item, "identity")) bad = true;
      });
      if (bad) {
        Fail(415, "Content-Encoding: only identity is accepted, got " + Quote(value));
        return false;
      }
    } else if (name == "connection") {
      ForEachListItem(value, [&](std::string_view item) {
        if (EqualsNoCase(item, "close")) close = true;
        if (EqualsNoCase(item, "keep-alive")) keep_alive = true;
      });
    }
  }
  if (has_te && length) {
    Fail(400, "Transfer-Encoding and Content-Length together");
    return false;
  }
  request_.keep_alive = request_.minor_version >= 1 ? !close : (keep_alive && !close);
  body_cap_ = limits_.body_limit ? limits_.body_limit(request_.method, request_.path)
                                 : limits_.max_body_bytes;
  if (chunked) {
    state_ = State::kBody;
    mode_ = BodyMode::kChunkSize;
    return true;
  }
  if (length && *length > body_cap_) {
    Fail(413, "Content-Length " + std::to_string(*length) + ": over the " +
                  std::to_string(body_cap_) + "-byte limit of " + Quote(request_.path));
    return false;
  }
  if (!length || *length == 0) {
    Finish();
    return true;
  }
  request_.body.reserve(*length);
  remaining_ = *length;
  state_ = State::kBody;
  mode_ = BodyMode::kLength;
  return true;
}

bool RequestParser::ChunkSizeLine(std::string_view line) {
  size_t end = 0;
  uint64_t size = 0;
  while (end < line.size() && std::isxdigit(static_cast<unsigned char>(line[end]))) {
    if (end == 15) {
      Fail(400, "chunk size " + Quote(line) + ": too large");
      return false;
    }
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(line[end])));
    size = size * 16 + static_cast<uint64_t>(
                           std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : c - 'a' + 10);
    ++end;
  }
  std::string_view rest = TrimOws(line.substr(end));
  if (end == 0 || (!rest.empty() && rest.front() != ';')) {
    Fail(400, "chunk size: want hex digits, got " + Quote(line));
    return false;
  }
  if (size == 0) {
    mode_ = BodyMode::kTrailer;
    return true;
  }
  if (request_.body.size() + size > body_cap_) {
    Fail(413, "chunked body: over the " + std::to_string(body_cap_) + "-byte limit of " +
                  Quote(request_.path));
    return false;
  }
  remaining_ = size;
  mode_ = BodyMode::kChunkData;
  return true;
}

size_t RequestParser::FeedBody(std::string_view data) {
  if (mode_ == BodyMode::kLength || mode_ == BodyMode::kChunkData) {
    size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size()));
    request_.body.append(data.substr(0, take));
    remaining_ -= take;
    if (remaining_ == 0) {
      if (mode_ == BodyMode::kLength) {
        Finish();
      } else {
        mode_ = BodyMode::kChunkDataEnd;
      }
    }
    return take;
  }
  bool complete = false;
  size_t n = TakeLine(data, &complete);
  if (state_ == State::kError || !complete) return n;
  std::string line = std::move(line_);
  line_.clear();
  line.pop_back();
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.find('\r') != std::string::npos) {
    Fail(400, "chunked body: bare CR in line " + Quote(line));
    return n;
  }
  switch (mode_) {
    case BodyMode::kChunkSize:
      ChunkSizeLine(line);
      break;
    case BodyMode::kChunkDataEnd:
      if (!line.empty()) {
        Fail(400, "chunked body: want CRLF after the chunk data, got " + Quote(line));
      } else {
        mode_ = BodyMode::kChunkSize;
      }
      break;
    case BodyMode::kTrailer:
      if (line.empty()) {
        Finish();
      } else {
        HeaderLine(line);
      }
      break;
    default:
      break;
  }
  return n;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "";
  }
}

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string FormDecode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%' && i + 2 < in.size() && HexValue(in[i + 1]) >= 0 &&
               HexValue(in[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(in[i + 1]) * 16 + HexValue(in[i + 2]));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

QueryParams ParseQuery(std::string_view target) {
  QueryParams out;
  size_t q = target.find('?');
  if (q == std::string_view::npos) return out;
  std::string_view query = target.substr(q + 1);
  size_t hash = query.find('#');
  if (hash != std::string_view::npos) query = query.substr(0, hash);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string key = FormDecode(item.substr(0, eq));
    std::string value = eq == std::string_view::npos ? "" : FormDecode(item.substr(eq + 1));
    out.emplace(std::move(key), std::move(value));
  }
  return out;
}

std::string QueryValue(const QueryParams& params, const std::string& key) {
  auto it = params.find(key);
  return it == params.end() ? std::string() : it->second;
}

}  // namespace hami::net
