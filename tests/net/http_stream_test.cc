// Streamed replies (Responder::StartStream): chunked framing, the next pipelined request after
// the end, no worker held while streaming, the writer learning that the peer left, the backlog
// cap on a client that does not read, Abort, HTTP/1.0, and the fallback route.
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "http_test_client.h"
#include "net/http_server.h"

namespace hami::net {
namespace {

using testing::RawClient;

class HttpStreamTest : public ::testing::Test {
 protected:
  void Start(HttpServerOptions options = {}) {
    server_ = std::make_unique<HttpServer>(std::move(options));
    server_->Route("GET", "/stream", RouteOptions{}, [this](Request, Responder r) {
      Stream s = r.StartStream(200, "application/json;stream=watch");
      std::lock_guard<std::mutex> lock(mu_);
      streams_.push_back(std::move(s));  // written by the test: no worker is held meanwhile
      cv_.notify_all();
    });
    server_->Route("POST", "/echo", RouteOptions{64, false}, [](Request q, Responder r) {
      r.Send(Response{200, "text/plain", q.body});
    });
    server_->Fallback(RouteOptions{128, false}, [](Request q, Responder r) {
      r.Send(Response{200, "text/plain", q.method + " " + q.path + " " + q.body});
    });
    auto port = server_->Listen("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.error();
    port_ = *port;
  }
  void TearDown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      streams_.clear();
    }
    if (server_) server_->Stop();
  }
  // Waits until `n` streams were started; returns how many there are.
  size_t WaitStreams(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return streams_.size() >= n; });
    return streams_.size();
  }
  Stream StreamAt(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_.at(i);
  }
  // Polls `cond` up to 5 s.
  template <typename F>
  static bool Eventually(F cond) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!cond()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // poll interval only
    }
    return true;
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Stream> streams_;
};

TEST_F(HttpStreamTest, WritesChunksThenServesThePipelinedRequest) {
  Start();
  RawClient c(port_);
  ASSERT_TRUE(
      c.Send("GET /stream HTTP/1.1\r\nHost: s\r\n\r\n"
             "POST /echo HTTP/1.1\r\nContent-Length: 4\r\n\r\nnext"));
  ASSERT_EQ(WaitStreams(1), 1u);
  auto head = c.ReadUntil("\r\n\r\n");
  ASSERT_TRUE(head);
  EXPECT_NE(head->find("HTTP/1.1 200 OK"), std::string::npos) << *head;
  EXPECT_NE(head->find("Transfer-Encoding: chunked"), std::string::npos) << *head;
  EXPECT_NE(head->find("Content-Type: application/json;stream=watch"), std::string::npos);
  EXPECT_EQ(head->find("Content-Length"), std::string::npos) << *head;
  Stream s = StreamAt(0);
  ASSERT_TRUE(s.open());
  ASSERT_TRUE(s.Write("{\"a\":1}\n"));
  auto chunk = c.ReadUntil("}\n\r\n");
  ASSERT_TRUE(chunk);
  EXPECT_EQ(*chunk, "8\r\n{\"a\":1}\n\r\n");
  ASSERT_TRUE(s.Write(std::string(300, 'x')));
  chunk = c.ReadUntil(std::string(300, 'x') + "\r\n");
  ASSERT_TRUE(chunk);
  EXPECT_EQ(chunk->substr(0, 5), "12c\r\n");
  s.End();
  EXPECT_FALSE(s.open());
  EXPECT_FALSE(s.Write("late"));
  auto end = c.ReadUntil("0\r\n\r\n");
  ASSERT_TRUE(end);
  EXPECT_EQ(*end, "0\r\n\r\n");
  auto next = c.Read();  // the pipelined request waited for the stream's end
  ASSERT_TRUE(next);
  EXPECT_EQ(next->body, "next");
}

TEST_F(HttpStreamTest, OpenStreamsHoldNoWorker) {
  HttpServerOptions options;
  options.workers = 1;
  Start(options);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 100; ++i) {
    clients.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(clients.back()->Send("GET /stream HTTP/1.1\r\n\r\n"));
  }
  ASSERT_EQ(WaitStreams(100), 100u);
  RawClient c(port_);
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nContent-Length: 2\r\n\r\nok"));
  auto r = c.Read(std::chrono::seconds(1));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "ok");
  for (size_t i = 0; i < 100; ++i) EXPECT_TRUE(StreamAt(i).Write("event\n"));
  for (auto& cl : clients) EXPECT_TRUE(cl->ReadUntil("event\n\r\n"));
}

TEST_F(HttpStreamTest, TheWriterLearnsThatThePeerLeft) {
  Start();
  auto c = std::make_unique<RawClient>(port_);
  ASSERT_TRUE(c->Send("GET /stream HTTP/1.1\r\n\r\n"));
  ASSERT_EQ(WaitStreams(1), 1u);
  Stream s = StreamAt(0);
  ASSERT_TRUE(c->ReadUntil("\r\n\r\n"));
  EXPECT_TRUE(s.open());
  c.reset();  // the client goes away without a word
  EXPECT_TRUE(Eventually([&] { return !s.open(); }));
  EXPECT_FALSE(s.Write("nobody reads this\n"));
  EXPECT_TRUE(Eventually([&] { return server_->connections() == 0; }));
}

TEST_F(HttpStreamTest, AClientThatDoesNotReadIsCutOffAtTheBacklogCap) {
  HttpServerOptions options;
  options.max_stream_backlog = 256 << 10;
  Start(options);
  RawClient c(port_);
  int small = 4096;  // a small receive buffer, so the kernel holds little for the client
  setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  ASSERT_TRUE(c.Send("GET /stream HTTP/1.1\r\n\r\n"));
  ASSERT_EQ(WaitStreams(1), 1u);
  Stream s = StreamAt(0);
  const std::string block(64 << 10, 'x');
  size_t written = 0;
  // Sent data leaves the backlog as the kernel takes it; the socket buffers hold a few MB at
  // most, so well before 64 MB the backlog fills up and Write turns false.
  for (int i = 0; i < 1024 && s.Write(block); ++i) written += block.size();
  EXPECT_LT(written, size_t{64} << 20);
  EXPECT_FALSE(s.open());
  // Cut off at once: what it did not read is dropped, not sent first.
  EXPECT_TRUE(Eventually([&] { return server_->connections() == 0; }));
}

TEST_F(HttpStreamTest, AbortClosesWithoutTheLastChunk) {
  Start();
  RawClient c(port_);
  ASSERT_TRUE(c.Send("GET /stream HTTP/1.1\r\n\r\n"));
  ASSERT_EQ(WaitStreams(1), 1u);
  Stream s = StreamAt(0);
  ASSERT_TRUE(s.Write("one\n"));
  s.Abort();
  EXPECT_FALSE(s.open());
  auto got = c.ReadUntil("one\n\r\n");
  ASSERT_TRUE(got);
  EXPECT_FALSE(c.ReadUntil("0\r\n\r\n", std::chrono::seconds(2)));
  EXPECT_TRUE(c.closed());
}

TEST_F(HttpStreamTest, ADroppedStreamIsEnded) {
  Start();
  RawClient c(port_);
  ASSERT_TRUE(c.Send("GET /stream HTTP/1.1\r\n\r\n"));
  ASSERT_EQ(WaitStreams(1), 1u);
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.clear();  // the last copy
  }
  EXPECT_TRUE(c.ReadUntil("0\r\n\r\n"));
}

TEST_F(HttpStreamTest, Http10GetsTheRawBytesAndAClose) {
  Start();
  RawClient c(port_);
  ASSERT_TRUE(c.Send("GET /stream HTTP/1.0\r\n\r\n"));
  ASSERT_EQ(WaitStreams(1), 1u);
  auto head = c.ReadUntil("\r\n\r\n");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->find("chunked"), std::string::npos) << *head;
  EXPECT_NE(head->find("Connection: close"), std::string::npos) << *head;
  Stream s = StreamAt(0);
  ASSERT_TRUE(s.Write("raw\n"));
  EXPECT_TRUE(c.ReadUntil("raw\n"));
  s.End();
  EXPECT_TRUE(c.WaitClosed());
}

TEST_F(HttpStreamTest, SendAfterStartStreamIsIgnoredAndASecondStreamIsClosed) {
  HttpServer server(HttpServerOptions{});
  server.Route("GET", "/x", RouteOptions{}, [](Request, Responder r) {
    Stream s = r.StartStream(200, "text/plain");
    r.Send(Response{500, "text/plain", "ignored"});
    Stream again = r.StartStream(200, "text/plain");
    EXPECT_FALSE(again.open());
    EXPECT_FALSE(again.Write("no"));
    s.Write("first");
    s.End();
  });
  auto port = server.Listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  RawClient c(*port);
  ASSERT_TRUE(c.Send("GET /x HTTP/1.1\r\n\r\n"));
  auto all = c.ReadUntil("0\r\n\r\n");
  ASSERT_TRUE(all);
  EXPECT_NE(all->find("200 OK"), std::string::npos);
  EXPECT_NE(all->find("5\r\nfirst\r\n"), std::string::npos) << *all;
  EXPECT_EQ(all->find("ignored"), std::string::npos);
}

TEST_F(HttpStreamTest, TheFallbackServesUnroutedPathsAndMethodsUnderItsOwnCap) {
  Start();
  RawClient c(port_);
  ASSERT_TRUE(c.Send("PUT /any/path?x=1 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"));
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "PUT /any/path abc");
  ASSERT_TRUE(c.Send("GET /echo HTTP/1.1\r\n\r\n"));  // a routed path, an unrouted method
  r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "GET /echo ");
  RawClient big(port_);
  ASSERT_TRUE(big.Send("POST /other HTTP/1.1\r\nContent-Length: 129\r\n\r\n"));
  r = big.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
}

TEST(ParseQueryTest, DecodesFormEncodingAndKeepsRepeats) {
  QueryParams q = ParseQuery("/api/v1/pods?labelSelector=a+in+%28x%2Cy%29&watch&w=1&w=2&bad=%zz#f");
  EXPECT_EQ(QueryValue(q, "labelSelector"), "a in (x,y)");
  EXPECT_EQ(q.count("watch"), 1u);
  EXPECT_EQ(QueryValue(q, "watch"), "");
  EXPECT_EQ(q.count("w"), 2u);
  EXPECT_EQ(QueryValue(q, "w"), "1");
  EXPECT_EQ(QueryValue(q, "bad"), "%zz");
  EXPECT_EQ(QueryValue(q, "missing"), "");
  EXPECT_TRUE(ParseQuery("/no/query").empty());
}

}  // namespace
}  // namespace hami::net
