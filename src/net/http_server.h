// net::HttpServer: an HTTP/1.1 server for listeners that untrusted clients can reach
// (docs/SECURITY.md). One event-loop thread owns every connection (epoll, non-blocking sockets,
// optional TLS); it reads request heads and bodies under deadlines and caps (RequestParser), so a
// slow or hostile client holds a few kilobytes and a file descriptor, never a thread. Complete
// requests go to a fixed worker pool, except routes marked `inline` (health checks), which the
// loop answers itself and which therefore answer whatever the pool is doing. A handler replies
// through a Responder, at once or later from any thread: a handler that must wait (for a lock,
// for the first sync) keeps its Responder and returns, holding no worker.
//
// A reply may also be a stream (Responder::StartStream): a status and head at once, then chunks
// (chunked transfer encoding) written from any thread as they come, then an end. A streaming
// connection holds no worker and no thread, only its buffered output; the writer learns that the
// peer went away from Stream::open() and Write() turning false. A Kubernetes watch is one.
//
// Per connection, requests are answered in order (pipelining): the next request is parsed only
// once the previous one's reply is queued. Limits: connections (past it, new ones are closed at
// once), header bytes and count, body bytes per route, a header deadline (from the request's
// first byte), a body deadline, an idle keep-alive timeout and a write deadline. Deadlines read
// the injected clock; a test that moves a FakeClock calls Wake().
#ifndef HAMI_NET_HTTP_SERVER_H_
#define HAMI_NET_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <openssl/ssl.h>

#include "common/clock.h"
#include "common/result.h"
#include "net/http_request.h"

namespace hami::net {

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body{};
  int retry_after_seconds = 0;  // > 0: a Retry-After header
};

// A streamed reply (Responder::StartStream). Copyable and thread-safe; copies share the stream.
// When the last copy is destroyed without End() or Abort(), the stream is ended (a dropped
// writer never leaves a client waiting for the last chunk).
class Stream {
 public:
  struct State;
  Stream() = default;
  explicit Stream(std::shared_ptr<State> state) : state_(std::move(state)) {}
  // Queues `data` as one chunk (empty data queues nothing). False, and nothing queued, once the
  // stream ended or was aborted, the peer went away, the server stopped, or the bytes queued and
  // not yet sent would pass HttpServerOptions::max_stream_backlog (the stream is then aborted:
  // a client that does not read is cut off, as kube-apiserver cuts off a slow watcher).
  bool Write(std::string_view data) const;
  // Sends the last chunk; the connection then serves its next request. Idempotent.
  void End() const;
  // Closes the connection after what is queued, without the last chunk: the client sees a
  // truncated stream. Idempotent.
  void Abort() const;
  // False once End() or Abort() was called, the peer closed its side, or the server stopped.
  bool open() const;
  // Bytes written and not yet sent to the peer (what counts against the backlog cap).
  size_t backlog() const;

 private:
  std::shared_ptr<State> state_;
};

// Sends the reply to one request. Copyable; the first Send wins, later ones are ignored. When
// the last copy is destroyed unsent, the client gets 500 (a lost reply never hangs a client).
// Thread-safe; Send after the server stopped or the client left is a no-op.
class Responder {
 public:
  struct State;
  Responder() = default;
  explicit Responder(std::shared_ptr<State> state) : state_(std::move(state)) {}
  void Send(Response response) const;
  // Answers with a stream instead: the head (`status`, `content_type`, chunked encoding; for an
  // HTTP/1.0 client no encoding, and the connection closes at the end) is queued at once. Counts
  // as the reply: a later Send is ignored, and a second StartStream returns a closed Stream.
  Stream StartStream(int status, std::string content_type) const;

 private:
  std::shared_ptr<State> state_;
};

using Handler = std::function<void(Request request, Responder responder)>;

struct HttpServerOptions {
  std::string name = "http";  // in log lines
  size_t workers = 8;
  // At the cap a new connection takes the place of the oldest one that has not sent a byte (so a
  // kubelet probe is answered while idle connections fill the slots); with none, it is refused.
  size_t max_connections = 1024;
  // Connections from one peer address; past it the peer's oldest silent connection makes room,
  // or the new one is refused. 0 = no per-peer limit.
  size_t max_connections_per_peer = 512;
  // Once more than 3/4 of max_connections are open, a new connection must send its first byte
  // (with TLS: finish its handshake) within this instead of the idle or header timeout.
  std::chrono::milliseconds crowded_first_byte_timeout{2000};
  // Bytes of unfinished requests (heads and bodies being received) held across connections;
  // a request that takes the total past it is answered 503 with Retry-After and its connection
  // closed. 0 = no cap.
  size_t max_pending_bytes = 256 << 20;
  RequestLimits limits{};  // limits.body_limit is set from the routes' max_body
  std::chrono::milliseconds header_timeout{10000};  // first byte of a request -> end of head
  std::chrono::milliseconds body_timeout{30000};    // end of head -> end of body
  std::chrono::milliseconds idle_timeout{90000};    // kept-alive connection between requests
  std::chrono::milliseconds write_timeout{30000};   // a reply the client does not read
  // A stream's bytes queued and not yet sent (see Stream::Write).
  size_t max_stream_backlog = 16 << 20;
  // The workers' and the event loop's stack size; 0 = the system's default. A server whose
  // handlers copy or print JSON at the 10,000-level depth limit recursively wants more
  // (docs/INPUT_LIMITS.md).
  size_t worker_stack_bytes = 0;
  // With TLS (TLS 1.2 and later only): called once on the server's SSL_CTX after its defaults
  // are set, to install the certificate (e.g. CertReloader::Install). Empty = plain HTTP.
  std::function<Status(SSL_CTX* ctx)> tls_setup{};
  const Clock* clock = nullptr;  // deadlines; null = RealClock()
};

struct RouteOptions {
  size_t max_body = 1 << 20;
  // Answered on the event loop: the handler must not block (health checks; a filter that needs
  // no API call, which hands itself to a worker with Post() otherwise).
  bool inline_handler = false;
};

// A listen address as the binaries' flags take it: "host:port" or ":port" (host 0.0.0.0), port
// 0-65535. False when there is no colon or the port is not such a number.
bool SplitHostPort(const std::string& bind, std::string* host, int* port);

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // Stop()s
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Before Listen(). A path answers 405 to other methods, an unknown path 404.
  void Route(std::string method, std::string path, RouteOptions options, Handler handler);
  // Before Listen(). Serves every request no route takes (any method, any path; a routed path
  // with an unrouted method too) instead of the 404/405; its body cap is options.max_body.
  void Fallback(RouteOptions options, Handler handler);
  // Binds host:port (port 0 = ephemeral) and starts the loop and the workers; returns the port.
  Result<int> Listen(const std::string& host, int port);
  // Closes the listener and every connection, wakes nothing else: handlers still holding a
  // Responder may Send, which does nothing. Idempotent.
  void Stop();
  // Re-reads the clock at once (after a FakeClock moved).
  void Wake();
  // Runs `task` on a worker (e.g. a reply that was parked until some event). Dropped after
  // Stop(): whatever Responder it holds then answers nothing.
  void Post(std::function<void()> task);

  // Open connections (for tests and metrics).
  size_t connections() const;
  // Requests refused by status (413, 431, 408 for a deadline...): counted for tests.
  uint64_t refused(int status) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::net

#endif  // HAMI_NET_HTTP_SERVER_H_
