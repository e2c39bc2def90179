// The request parser: each cap and each refusal, byte-at-a-time feeding, pipelining.
#include "net/http_request.h"

#include <string>

#include <gtest/gtest.h>

namespace hami::net {
namespace {

RequestLimits Small() {
  RequestLimits l;
  l.max_header_bytes = 256;
  l.max_headers = 4;
  l.max_body_bytes = 32;
  return l;
}

// Feeds `in` whole; returns the parser for inspection.
RequestParser Parse(std::string_view in, RequestLimits limits = Small()) {
  RequestParser p(std::move(limits));
  while (!in.empty()) {
    size_t n = p.Feed(in);
    if (n == 0) break;
    in.remove_prefix(n);
  }
  return p;
}

int ErrorOf(std::string_view in, RequestLimits limits = Small()) {
  RequestParser p = Parse(in, std::move(limits));
  return p.state() == RequestParser::State::kError ? p.error().status : 0;
}

TEST(RequestParserTest, ParsesAContentLengthRequest) {
  RequestParser p = Parse("POST /filter?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
  ASSERT_EQ(p.state(), RequestParser::State::kDone);
  Request r = p.Take();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/filter?x=1");
  EXPECT_EQ(r.path, "/filter");
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(r.Header("host"), "a");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(p.state(), RequestParser::State::kHead);
  EXPECT_FALSE(p.started());
}

TEST(RequestParserTest, DecodesChunkedBodiesFedOneByteAtATime) {
  std::string in =
      "POST /bind HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;name=v\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n";
  RequestParser p(Small());
  for (char c : in) ASSERT_EQ(p.Feed(std::string_view(&c, 1)), 1u);
  ASSERT_EQ(p.state(), RequestParser::State::kDone);
  Request r = p.Take();
  EXPECT_EQ(r.body, "hello world");
  EXPECT_FALSE(r.Header("x-trailer"));  // trailers are dropped
}

TEST(RequestParserTest, StopsAtTheEndOfARequestSoPipelinedOnesFollow) {
  std::string in = "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nConnection: close\r\n\r\n";
  RequestParser p(Small());
  size_t used = p.Feed(in);
  ASSERT_EQ(p.state(), RequestParser::State::kDone);
  EXPECT_EQ(p.Take().path, "/a");
  EXPECT_EQ(p.Feed(std::string_view(in).substr(used)), in.size() - used);
  ASSERT_EQ(p.state(), RequestParser::State::kDone);
  Request b = p.Take();
  EXPECT_EQ(b.path, "/b");
  EXPECT_FALSE(b.keep_alive);
}

TEST(RequestParserTest, Http10KeepsAliveOnlyWhenAsked) {
  RequestParser a = Parse("GET / HTTP/1.0\r\n\r\n");
  ASSERT_EQ(a.state(), RequestParser::State::kDone);
  EXPECT_FALSE(a.Take().keep_alive);
  RequestParser b = Parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  ASSERT_EQ(b.state(), RequestParser::State::kDone);
  EXPECT_TRUE(b.Take().keep_alive);
}

TEST(RequestParserTest, RefusesADeclaredLengthOverTheCapBeforeTheBody) {
  RequestParser p = Parse("POST /x HTTP/1.1\r\nContent-Length: 33\r\n\r\n");
  ASSERT_EQ(p.state(), RequestParser::State::kError);
  EXPECT_EQ(p.error().status, 413);
  EXPECT_NE(p.error().message.find("33"), std::string::npos) << p.error().message;
}

TEST(RequestParserTest, CountsDecodedChunkedBytesAgainstTheCap) {
  // 3 chunks of 12 bytes: 36 decoded bytes > 32, refused at the third size line.
  std::string in = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) in += "c\r\n0123456789ab\r\n";
  RequestParser p = Parse(in);
  ASSERT_EQ(p.state(), RequestParser::State::kError);
  EXPECT_EQ(p.error().status, 413);
  EXPECT_LE(p.buffered(), 32u + 256u);
}

TEST(RequestParserTest, AppliesThePerRouteBodyLimit) {
  RequestLimits l = Small();
  l.body_limit = [](std::string_view, std::string_view path) -> size_t {
    return path == "/big" ? 100 : 4;
  };
  EXPECT_EQ(ErrorOf("POST /big HTTP/1.1\r\nContent-Length: 50\r\n\r\n", l), 0);
  EXPECT_EQ(ErrorOf("POST /small HTTP/1.1\r\nContent-Length: 5\r\n\r\n", l), 413);
}

TEST(RequestParserTest, CapsHeaderBytesAndCount) {
  EXPECT_EQ(ErrorOf("GET / HTTP/1.1\r\nX: " + std::string(300, 'a') + "\r\n\r\n"), 431);
  // An endless header without a newline is refused at the cap, not buffered.
  RequestParser p = Parse("GET / HTTP/1.1\r\nX: " + std::string(10000, 'a'));
  ASSERT_EQ(p.state(), RequestParser::State::kError);
  EXPECT_EQ(p.error().status, 431);
  EXPECT_LE(p.buffered(), 256u);
  EXPECT_EQ(ErrorOf("GET / HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\n\r\n"), 431);
  // Blank lines before the request line count in the head budget too.
  EXPECT_EQ(ErrorOf(std::string(300, '\n')), 431);
}

TEST(RequestParserTest, RefusesContentEncodingWith415) {
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 1\r\n\r\n"), 415);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nContent-Encoding: identity\r\nContent-Length: 1\r\n\r\nx"),
            0);
}

TEST(RequestParserTest, RefusesAmbiguousFraming) {
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), 400);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\n"), 400);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"), 400);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n"),
            400);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), 400);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n"), 400);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n"),
            400);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\n"), 0);  // incomplete, not bad
}

TEST(RequestParserTest, RefusesMalformedHeads) {
  EXPECT_EQ(ErrorOf("GET /\r\n\r\n"), 400);
  EXPECT_EQ(ErrorOf("GET  / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(ErrorOf("GET / HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(ErrorOf("G(T / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(ErrorOf("GET / HTTP/1.1\r\nNo colon\r\n\r\n"), 400);
  EXPECT_EQ(ErrorOf("GET / HTTP/1.1\r\nName : v\r\n\r\n"), 400);
  EXPECT_EQ(ErrorOf("GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n"), 400);
  EXPECT_EQ(ErrorOf("GET / HTTP/1.1\r\nA: 1\r2\r\n\r\n"), 400);
  EXPECT_EQ(ErrorOf(std::string("GET / HTTP/1.1\r\nA: 1\0\r\n\r\n", 24)), 400);
}

TEST(RequestParserTest, StaysInTheErrorState) {
  RequestParser p = Parse("BAD\r\n");
  ASSERT_EQ(p.state(), RequestParser::State::kError);
  EXPECT_EQ(p.Feed("GET / HTTP/1.1\r\n\r\n"), 0u);
  EXPECT_EQ(p.state(), RequestParser::State::kError);
}

}  // namespace
}  // namespace hami::net
