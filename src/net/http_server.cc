#include "net/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/strings.h"

namespace hami::net {
namespace {

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
constexpr size_t kReadChunk = 16 << 10;
// After a reply that closes the connection (an error while the client may still be sending),
// the server stops writing and discards input for a short while so that the client reads the
// reply instead of a reset; at most this much and this long.
constexpr size_t kMaxDrainBytes = 8 << 20;
constexpr std::chrono::milliseconds kDrainTime{1000};

// A reply to HEAD (`head`) carries the headers GET's reply would, Content-Length included, and
// no body (RFC 9110 9.3.2): a keep-alive client reads nothing past the blank line.
std::string FormatResponse(const Response& r, bool close, bool head) {
  std::string_view reason = ReasonPhrase(r.status);
  std::string out;
  out.reserve(128 + r.body.size());
  out += "HTTP/1.1 " + std::to_string(r.status) + " " +
         std::string(reason.empty() ? "Status" : reason) + "\r\n";
  if (!r.body.empty() || r.status != 204) {
    if (!r.content_type.empty()) out += "Content-Type: " + r.content_type + "\r\n";
    out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  }
  if (r.retry_after_seconds > 0) {
    out += "Retry-After: " + std::to_string(r.retry_after_seconds) + "\r\n";
  }
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  if (!head) out += r.body;
  return out;
}

std::string FormatStreamHead(const Response& r, bool chunked, bool close) {
  std::string_view reason = ReasonPhrase(r.status);
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " +
                    std::string(reason.empty() ? "Status" : reason) + "\r\n";
  if (!r.content_type.empty()) out += "Content-Type: " + r.content_type + "\r\n";
  if (chunked) out += "Transfer-Encoding: chunked\r\n";
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  return out;
}

void AppendChunk(std::string& out, std::string_view data) {
  char size[32];
  int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  out.append(size, static_cast<size_t>(n));
  out.append(data);
  out += "\r\n";
}

}  // namespace

// What a stream's writers and the loop share: whether the connection is gone, and how many of
// its bytes wait (posted and not yet delivered to the connection, or delivered and not sent).
struct StreamShared {
  std::atomic<bool> closed{false};
  std::atomic<size_t> pending{0};
  std::atomic<size_t> unsent{0};
};

// Replies travel from any thread to the loop through the mailbox; it outlives the server while a
// Responder holds it, and is closed (Send does nothing) once the server stops.
struct Mailbox {
  enum class Kind { kReply, kHead, kChunk, kEnd, kAbort, kCut };
  struct Letter {
    uint64_t conn = 0;
    uint64_t seq = 0;
    Response response{};  // kReply; kHead: status and content type
    Kind kind = Kind::kReply;
    std::string data{};                      // kChunk
    std::shared_ptr<StreamShared> stream{};  // kHead
  };
  std::mutex mu;
  std::vector<Letter> letters;
  bool closed = false;
  int wake_fd = -1;

  // False once the server stopped (nothing will be delivered).
  bool Post(Letter letter) {
    std::lock_guard<std::mutex> lock(mu);
    if (closed) return false;
    letters.push_back(std::move(letter));
    uint64_t one = 1;
    ssize_t n = write(wake_fd, &one, sizeof(one));
    (void)n;
    return true;
  }
};

struct Responder::State {
  std::shared_ptr<Mailbox> mailbox;
  uint64_t conn = 0;
  uint64_t seq = 0;
  size_t max_stream_backlog = 0;
  std::atomic<bool> sent{false};

  ~State() {
    if (!sent.exchange(true)) {
      mailbox->Post({conn, seq, Response{500, "text/plain", "no reply from the handler\n"}});
    }
  }
};

void Responder::Send(Response response) const {
  if (!state_ || state_->sent.exchange(true)) return;
  state_->mailbox->Post({state_->conn, state_->seq, std::move(response)});
}

struct Stream::State {
  std::shared_ptr<Mailbox> mailbox;
  uint64_t conn = 0;
  uint64_t seq = 0;
  size_t max_backlog = 0;
  std::shared_ptr<StreamShared> shared = std::make_shared<StreamShared>();
  std::mutex mu;  // orders the letters of concurrent writers
  std::atomic<bool> finished{false};

  ~State() {
    if (!finished.exchange(true)) {
      Mailbox::Letter l{conn, seq};
      l.kind = Mailbox::Kind::kEnd;
      mailbox->Post(std::move(l));
    }
  }
  // Under mu.
  void Finish(Mailbox::Kind kind) {
    finished = true;
    Mailbox::Letter l{conn, seq};
    l.kind = kind;
    mailbox->Post(std::move(l));
  }
};

Stream Responder::StartStream(int status, std::string content_type) const {
  auto st = std::make_shared<Stream::State>();
  if (!state_ || state_->sent.exchange(true)) {
    st->finished = true;
    return Stream(std::move(st));
  }
  st->mailbox = state_->mailbox;
  st->conn = state_->conn;
  st->seq = state_->seq;
  st->max_backlog = state_->max_stream_backlog;
  Mailbox::Letter head{st->conn, st->seq, Response{status, std::move(content_type), ""}};
  head.kind = Mailbox::Kind::kHead;
  head.stream = st->shared;
  if (!st->mailbox->Post(std::move(head))) st->finished = true;
  return Stream(std::move(st));
}

bool Stream::Write(std::string_view data) const {
  if (!state_) return false;
  std::lock_guard<std::mutex> lock(state_->mu);
  StreamShared& shared = *state_->shared;
  if (state_->finished || shared.closed) return false;
  if (data.empty()) return true;
  if (shared.pending + shared.unsent + data.size() > state_->max_backlog) {
    shared.closed = true;
    state_->Finish(Mailbox::Kind::kCut);  // what it has not read is dropped
    return false;
  }
  shared.pending += data.size();
  Mailbox::Letter l{state_->conn, state_->seq};
  l.kind = Mailbox::Kind::kChunk;
  l.data.assign(data);
  if (!state_->mailbox->Post(std::move(l))) {
    state_->finished = true;
    shared.closed = true;
    return false;
  }
  return true;
}

void Stream::End() const {
  if (!state_) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->finished) state_->Finish(Mailbox::Kind::kEnd);
}

void Stream::Abort() const {
  if (!state_) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->finished) state_->Finish(Mailbox::Kind::kAbort);
}

size_t Stream::backlog() const {
  return state_ ? state_->shared->pending + state_->shared->unsent : 0;
}

bool Stream::open() const { return state_ && !state_->finished && !state_->shared->closed; }

class HttpServer::Impl {
 public:
  explicit Impl(HttpServerOptions options)
      : options_(std::move(options)),
        clock_(options_.clock != nullptr ? *options_.clock : RealClock()),
        mailbox_(std::make_shared<Mailbox>()) {}
  ~Impl() { Stop(); }

  void Route(std::string method, std::string path, RouteOptions opts, Handler handler) {
    routes_[std::move(path)][std::move(method)] = RouteEntry{opts, std::move(handler)};
  }
  void Fallback(RouteOptions opts, Handler handler) {
    fallback_ = RouteEntry{opts, std::move(handler)};
  }

  Result<int> Listen(const std::string& host, int port);
  void Stop();
  void Wake() {
    uint64_t one = 1;
    ssize_t n = write(mailbox_->wake_fd, &one, sizeof(one));
    (void)n;
  }
  void Post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(work_mu_);
    if (stopping_) return;
    work_.push_back(std::move(task));
    work_cv_.notify_one();
  }
  size_t connections() const { return open_.load(); }
  uint64_t refused(int status) const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    auto it = refused_.find(status);
    return it == refused_.end() ? 0 : it->second;
  }

 private:
  struct RouteEntry {
    RouteOptions options;
    Handler handler;
  };
  enum class Phase { kIdle, kHead, kBody, kBusy, kWriting, kDraining };
  struct Conn {
    explicit Conn(RequestLimits limits) : parser(std::move(limits)) {}
    uint64_t id = 0;
    int fd = -1;
    SSL* ssl = nullptr;
    bool handshaking = false;
    bool ssl_wants_write = false;
    RequestParser parser;
    std::string in;
    std::string out;
    size_t out_off = 0;
    bool busy = false;
    bool keep_alive = true;
    int minor_version = 1;
    // Answering with a stream (Responder::StartStream): busy until its end.
    bool streaming = false;
    bool chunked = true;
    std::shared_ptr<StreamShared> stream;
    bool close_after_write = false;
    // The request being answered is a HEAD: its reply goes out without a body.
    bool head = false;
    std::string peer;  // the client's address, for the per-peer limit
    size_t held = 0;   // bytes of an unfinished request counted in pending_bytes_
    size_t drained = 0;
    uint64_t seq = 0;
    uint32_t events = 0;
    Phase phase = Phase::kIdle;
    SystemTime deadline{};
  };

  void Loop();
  void Accept();
  void OnEvent(Conn& c, uint32_t events);
  bool Handshake(Conn& c);
  // Reads and parses until a request is dispatched, the socket is drained, or it closed.
  void ReadAndParse(Conn& c);
  void ProcessInput(Conn& c);
  void Dispatch(Conn& c, Request request);
  void Queue(Conn& c, const Response& r, bool close);
  void Refuse(Conn& c, int status, const std::string& message);
  bool Flush(Conn& c);
  void Drain(Conn& c);
  void Deliver();
  void CheckDeadlines();
  void Rearm(Conn& c);
  void UpdateInterest(Conn& c);
  void Close(uint64_t id);
  void Count(int status) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++refused_[status];
  }
  std::chrono::milliseconds TimeoutOf(Phase p) const;
  void Work();

  const HttpServerOptions options_;
  const Clock& clock_;
  std::map<std::string, std::map<std::string, RouteEntry>> routes_;
  std::optional<RouteEntry> fallback_;
  RequestLimits limits_;
  size_t max_connections_ = 0;
  std::shared_ptr<Mailbox> mailbox_;
  SSL_CTX* ctx_ = nullptr;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 2;
  std::atomic<size_t> open_{0};
  std::unordered_map<std::string, size_t> peers_;  // open connections per peer address
  size_t pending_bytes_ = 0;                       // sum of Conn::held
  // The oldest connection (of `peer`, or any when empty) that has sent nothing yet; null if none.
  Conn* OldestSilent(const std::string& peer);
  // Re-counts what `c` holds of an unfinished request; false when that takes the server past
  // max_pending_bytes (the caller refuses the request).
  bool AccountHeld(Conn& c);
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
  pthread_t loop_{};
  bool loop_started_ = false;

  std::mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<std::function<void()>> work_;
  std::vector<pthread_t> workers_;

  mutable std::mutex stats_mu_;
  std::map<int, uint64_t> refused_;
};

Result<int> HttpServer::Impl::Listen(const std::string& host, int port) {
  limits_ = options_.limits;
  std::map<std::string, size_t> caps;
  for (const auto& [path, methods] : routes_) {
    size_t cap = 0;
    for (const auto& [m, entry] : methods) cap = std::max(cap, entry.options.max_body);
    caps[path] = cap;
  }
  const size_t default_cap = limits_.max_body_bytes;
  const std::optional<size_t> fallback_cap =
      fallback_ ? std::optional<size_t>(fallback_->options.max_body) : std::nullopt;
  limits_.body_limit = [caps, default_cap, fallback_cap](std::string_view, std::string_view path) {
    auto it = caps.find(std::string(path));
    if (fallback_cap) return it == caps.end() ? *fallback_cap : std::max(*fallback_cap, it->second);
    // An unknown path gets 404 after its body: read at most a small one.
    return it == caps.end() ? std::min<size_t>(default_cap, 64 << 10) : it->second;
  };
  // Past the descriptor limit accept() fails and the listener stays readable: keep headroom.
  rlimit rl{};
  max_connections_ = options_.max_connections;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 128) {
    max_connections_ = std::min<size_t>(max_connections_, rl.rlim_cur - 64);
  }

  if (options_.tls_setup) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    if (ctx_ == nullptr) return Error{options_.name + ": cannot create the TLS context"};
    SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(ctx_, SSL_OP_NO_RENEGOTIATION);
    Status st = options_.tls_setup(ctx_);
    if (!st) return std::move(st).take_error();
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port_text = std::to_string(port);
  // "[::1]" (the bracketed form of host:port) names the address inside the brackets.
  std::string name = host.size() > 2 && host.front() == '[' && host.back() == ']'
                         ? host.substr(1, host.size() - 2)
                         : host;
  int rc = getaddrinfo(name.empty() ? nullptr : name.c_str(), port_text.c_str(), &hints, &res);
  if (rc != 0) {
    return Error{options_.name + ": cannot resolve " + Quote(host) + ": " + gai_strerror(rc)};
  }
  std::string why = "no address";
  for (addrinfo* ai = res; ai != nullptr && listen_fd_ < 0; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
      why = std::strerror(errno);
      close(fd);
      continue;
    }
    listen_fd_ = fd;
  }
  freeaddrinfo(res);
  if (listen_fd_ < 0) {
    return Error{options_.name + ": cannot listen on " + Quote(host + ":" + port_text) + ": " +
                 why};
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  int bound = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);

  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  mailbox_->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || mailbox_->wake_fd < 0) {
    return Error{options_.name + ": epoll/eventfd: " + std::strerror(errno)};
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = kWakeId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, mailbox_->wake_fd, &ev);

  // pthreads rather than std::thread: the stack size is an option.
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (options_.worker_stack_bytes > 0) {
    pthread_attr_setstacksize(&attr, std::max<size_t>(options_.worker_stack_bytes, 1 << 16));
  }
  for (size_t i = 0; i < std::max<size_t>(1, options_.workers); ++i) {
    pthread_t t;
    int rc = pthread_create(
        &t, &attr,
        [](void* self) -> void* {
          static_cast<Impl*>(self)->Work();
          return nullptr;
        },
        this);
    if (rc != 0) {
      pthread_attr_destroy(&attr);
      return Error{options_.name + ": cannot start a worker: " + std::strerror(rc)};
    }
    workers_.push_back(t);
  }
  // The loop runs inline handlers, so it gets the workers' stack too.
  const int loop_rc = pthread_create(
      &loop_, &attr,
      [](void* self) -> void* {
        static_cast<Impl*>(self)->Loop();
        return nullptr;
      },
      this);
  pthread_attr_destroy(&attr);
  if (loop_rc != 0) {
    return Error{options_.name + ": cannot start the event loop: " + std::strerror(loop_rc)};
  }
  loop_started_ = true;
  return bound;
}

void HttpServer::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(work_mu_);
    stopping_ = true;  // under the lock: no Post() lands after the workers are gone
  }
  if (loop_started_) {
    Wake();
    pthread_join(loop_, nullptr);
    loop_started_ = false;
  }
  {
    std::lock_guard<std::mutex> lock(work_mu_);
    work_cv_.notify_all();
  }
  for (pthread_t t : workers_) pthread_join(t, nullptr);
  workers_.clear();
  work_.clear();  // the Responders dropped here post 500s that nobody delivers
  {
    std::lock_guard<std::mutex> lock(mailbox_->mu);
    mailbox_->closed = true;
    mailbox_->letters.clear();
  }
  for (auto& [id, c] : conns_) {
    if (c->stream) c->stream->closed = true;
    if (c->ssl != nullptr) SSL_free(c->ssl);
    close(c->fd);
  }
  conns_.clear();
  open_ = 0;
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  {
    // The wake fd stays open while a Responder may still post to it; the mailbox is closed, so
    // nothing writes to it any more.
    std::lock_guard<std::mutex> lock(mailbox_->mu);
    if (mailbox_->wake_fd >= 0) close(mailbox_->wake_fd);
    mailbox_->wake_fd = -1;
  }
  listen_fd_ = epoll_fd_ = -1;
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  ctx_ = nullptr;
}

void HttpServer::Impl::Work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(work_mu_);
      work_cv_.wait(lock, [&] { return stopping_.load() || !work_.empty(); });
      if (stopping_) return;
      task = std::move(work_.front());
      work_.pop_front();
    }
    task();
  }
}

std::chrono::milliseconds HttpServer::Impl::TimeoutOf(Phase p) const {
  switch (p) {
    case Phase::kIdle:
      return options_.idle_timeout;
    case Phase::kHead:
      return options_.header_timeout;
    case Phase::kBody:
      return options_.body_timeout;
    case Phase::kWriting:
      return options_.write_timeout;
    case Phase::kDraining:
      return kDrainTime;
    case Phase::kBusy:
      return std::chrono::milliseconds::zero();
  }
  return options_.idle_timeout;
}

void HttpServer::Impl::Loop() {
  // Every socket write happens on this thread. Plain sends pass MSG_NOSIGNAL, but OpenSSL writes
  // through its socket BIO with write(2): a peer gone mid-handshake or mid-reply would raise
  // SIGPIPE and kill the process. Blocked here, the write fails with EPIPE instead (and the
  // signal stays pending on this thread only), whatever the process does with SIGPIPE.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  std::vector<epoll_event> events(128);
  while (!stopping_) {
    // Sleep until the nearest deadline, at most a second (a FakeClock's move is seen by Wake()).
    std::chrono::milliseconds wait{1000};
    const SystemTime now = clock_.Now();
    for (const auto& [id, c] : conns_) {
      if (c->phase == Phase::kBusy) continue;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c->deadline - now);
      wait = std::max(std::chrono::milliseconds(0),
                      std::min(wait, left + std::chrono::milliseconds(1)));
    }
    int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                       static_cast<int>(wait.count()));
    if (stopping_) break;
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kListenerId) {
        Accept();
      } else if (id == kWakeId) {
        uint64_t v;
        while (read(mailbox_->wake_fd, &v, sizeof(v)) > 0) {
        }
      } else {
        auto it = conns_.find(id);
        if (it != conns_.end()) OnEvent(*it->second, events[i].events);
      }
    }
    Deliver();
    CheckDeadlines();
  }
}

void HttpServer::Impl::Accept() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof(addr);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &addr_len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        HAMI_WARN("{}: accept: {}", options_.name, std::strerror(errno));
      }
      return;
    }
    char host[INET6_ADDRSTRLEN] = "";
    if (addr.ss_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, host, sizeof(host));
    } else if (addr.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, host, sizeof(host));
    }
    const std::string peer = host;
    // Full (for this peer, or at all): the oldest connection that never sent a byte makes room.
    bool refused = false;
    if (options_.max_connections_per_peer > 0 && !peer.empty() &&
        peers_[peer] >= options_.max_connections_per_peer) {
      Conn* victim = OldestSilent(peer);
      if (victim != nullptr) {
        Close(victim->id);
      } else {
        refused = true;
      }
    }
    if (!refused && conns_.size() >= max_connections_) {
      Conn* victim = OldestSilent("");
      if (victim != nullptr) {
        Close(victim->id);
      } else {
        refused = true;
      }
    }
    if (refused) {
      Count(503);
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Conn>(limits_);
    c->id = next_id_++;
    c->fd = fd;
    c->peer = peer;
    ++peers_[peer];
    if (ctx_ != nullptr) {
      c->ssl = SSL_new(ctx_);
      if (c->ssl == nullptr) {
        close(fd);
        continue;
      }
      SSL_set_fd(c->ssl, fd);
      SSL_set_accept_state(c->ssl);
      c->handshaking = true;
      c->phase = Phase::kHead;
      c->deadline = clock_.Now() + options_.header_timeout;
    } else {
      c->phase = Phase::kIdle;
      c->deadline = clock_.Now() + options_.idle_timeout;
    }
    if (conns_.size() + 1 > max_connections_ / 4 * 3) {
      c->deadline = std::min(c->deadline, clock_.Now() + options_.crowded_first_byte_timeout);
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = c->id;
    c->events = EPOLLIN;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    conns_.emplace(c->id, std::move(c));
    open_ = conns_.size();
  }
}

void HttpServer::Impl::OnEvent(Conn& c, uint32_t events) {
  const uint64_t id = c.id;
  // A streaming connection reads nothing until the stream ends: a hang-up is the peer leaving.
  if (c.streaming && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
    Close(id);
    return;
  }
  if ((events & (EPOLLERR | EPOLLHUP)) != 0 && (events & EPOLLIN) == 0) {
    Close(id);
    return;
  }
  if (c.handshaking && !Handshake(c)) {
    Close(id);
    return;
  }
  if (!c.handshaking) {
    if (c.out_off < c.out.size() && !Flush(c)) {
      Close(id);
      return;
    }
    if (c.stream) c.stream->unsent = c.out.size() - c.out_off;
    if (c.phase == Phase::kDraining) {
      Drain(c);
    } else if (c.out.empty()) {
      ReadAndParse(c);
    }
  }
  if (conns_.count(id) == 0) return;
  Rearm(c);
  UpdateInterest(c);
}

bool HttpServer::Impl::Handshake(Conn& c) {
  ERR_clear_error();
  int r = SSL_accept(c.ssl);
  if (r == 1) {
    c.handshaking = false;
    c.ssl_wants_write = false;
    return true;
  }
  int err = SSL_get_error(c.ssl, r);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    c.ssl_wants_write = err == SSL_ERROR_WANT_WRITE;
    return true;
  }
  HAMI_VLOG(4, "{}: TLS handshake failed: {}", options_.name,
            ERR_error_string(ERR_get_error(), nullptr));
  return false;
}

void HttpServer::Impl::ReadAndParse(Conn& c) {
  const uint64_t id = c.id;
  char buf[kReadChunk];
  for (;;) {
    ProcessInput(c);
    if (conns_.count(id) == 0) return;
    // The next request waits for this reply; after a closing reply nothing more is read.
    if (c.busy || !c.out.empty() || c.close_after_write) return;
    ssize_t n;
    if (c.ssl != nullptr) {
      ERR_clear_error();
      int r = SSL_read(c.ssl, buf, sizeof(buf));
      if (r > 0) {
        n = r;
      } else {
        int err = SSL_get_error(c.ssl, r);
        if (err == SSL_ERROR_WANT_READ) return;
        if (err == SSL_ERROR_WANT_WRITE) {
          c.ssl_wants_write = true;
          return;
        }
        n = err == SSL_ERROR_ZERO_RETURN ? 0 : -1;
        if (n < 0) errno = ECONNRESET;
      }
    } else {
      n = recv(c.fd, buf, sizeof(buf), 0);
    }
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      if (!AccountHeld(c)) {
        Refuse(c, 503, "the server holds too many unfinished requests; retry");
        return;
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    Close(id);  // EOF or error: an unfinished request is dropped with the connection
    return;
  }
}

HttpServer::Impl::Conn* HttpServer::Impl::OldestSilent(const std::string& peer) {
  Conn* oldest = nullptr;
  for (auto& [id, c] : conns_) {
    const bool silent = c->seq == 0 && c->in.empty() && !c->parser.started() && !c->busy &&
                        c->out.empty() && (c->phase == Phase::kIdle || c->phase == Phase::kHead);
    if (!silent || (!peer.empty() && c->peer != peer)) continue;
    if (oldest == nullptr || c->id < oldest->id) oldest = c.get();
  }
  return oldest;
}

bool HttpServer::Impl::AccountHeld(Conn& c) {
  const size_t now = c.in.size() + c.parser.buffered();
  pending_bytes_ = pending_bytes_ - c.held + now;
  const bool grew = now > c.held;
  c.held = now;
  return !grew || options_.max_pending_bytes == 0 || pending_bytes_ <= options_.max_pending_bytes;
}

void HttpServer::Impl::ProcessInput(Conn& c) {
  while (!c.busy && c.out.empty() && !c.close_after_write && !c.in.empty()) {
    size_t used = c.parser.Feed(c.in);
    c.in.erase(0, used);
    AccountHeld(c);
    switch (c.parser.state()) {
      case RequestParser::State::kDone:
        Dispatch(c, c.parser.Take());
        AccountHeld(c);  // the request left the parser: it is no longer pending
        break;
      case RequestParser::State::kError:
        Refuse(c, c.parser.error().status, c.parser.error().message);
        return;
      default:
        return;  // more bytes needed
    }
  }
}

void HttpServer::Impl::Refuse(Conn& c, int status, const std::string& message) {
  Count(status);
  HAMI_VLOG(3, "{}: refused with {}: {}", options_.name, status, message);
  c.in.clear();
  c.head = false;
  pending_bytes_ -= c.held;  // nothing more of this request is read (the rest is drained)
  c.held = 0;
  Response r{status, "text/plain", message + "\n"};
  if (status == 503) r.retry_after_seconds = 1;
  Queue(c, r, /*close=*/true);
  if (conns_.count(c.id) != 0 && !Flush(c)) Close(c.id);
}

void HttpServer::Impl::Dispatch(Conn& c, Request request) {
  // HEAD is served as GET (a route may still register HEAD itself) and answered without a body.
  c.head = request.method == "HEAD";
  if (c.head) {
    auto route = routes_.find(request.path);
    if (route == routes_.end() || route->second.count("HEAD") == 0) request.method = "GET";
  }
  const RouteEntry* entry = nullptr;
  auto route = routes_.find(request.path);
  if (route == routes_.end()) {
    if (!fallback_) {
      Queue(c, Response{404, "text/plain", "no route for " + Quote(request.path) + "\n"},
            !request.keep_alive);
      return;
    }
    entry = &*fallback_;
  } else {
    auto it = route->second.find(request.method);
    if (it != route->second.end()) {
      entry = &it->second;
    } else if (fallback_) {
      entry = &*fallback_;
    } else {
      Queue(c, Response{405, "text/plain", "method " + Quote(request.method) + " not allowed\n"},
            !request.keep_alive);
      return;
    }
  }
  if (c.ssl != nullptr) {
    X509* peer = SSL_get_peer_certificate(c.ssl);
    request.peer_verified = peer != nullptr && SSL_get_verify_result(c.ssl) == X509_V_OK;
    X509_free(peer);
  }
  c.busy = true;
  c.keep_alive = request.keep_alive;
  c.minor_version = request.minor_version;
  ++c.seq;
  auto state = std::make_shared<Responder::State>();
  state->mailbox = mailbox_;
  state->conn = c.id;
  state->seq = c.seq;
  state->max_stream_backlog = options_.max_stream_backlog;
  Responder responder(std::move(state));
  const Handler& handler = entry->handler;
  if (entry->options.inline_handler) {
    // Its reply is delivered by the loop after this read: delivering it here would parse the
    // next pipelined request from inside this call, a recursion as deep as the client likes.
    handler(std::move(request), std::move(responder));
    return;
  }
  std::lock_guard<std::mutex> lock(work_mu_);
  work_.push_back([&handler, r = std::move(request), responder]() mutable {
    handler(std::move(r), std::move(responder));
  });
  work_cv_.notify_one();
}

void HttpServer::Impl::Queue(Conn& c, const Response& r, bool close) {
  c.close_after_write = c.close_after_write || close;
  c.out += FormatResponse(r, c.close_after_write, c.head);
  c.head = false;  // one reply per request
}

bool HttpServer::Impl::Flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    const char* p = c.out.data() + c.out_off;
    size_t len = c.out.size() - c.out_off;
    ssize_t n;
    if (c.ssl != nullptr) {
      ERR_clear_error();
      int r = SSL_write(c.ssl, p, static_cast<int>(std::min<size_t>(len, 1 << 20)));
      if (r <= 0) {
        int err = SSL_get_error(c.ssl, r);
        if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
          c.ssl_wants_write = err == SSL_ERROR_WANT_WRITE;
          return true;
        }
        return false;
      }
      n = r;
    } else {
      n = send(c.fd, p, len, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
        return false;
      }
    }
    c.out_off += static_cast<size_t>(n);
    // A stream is cut off when the client stops reading, not when it reads slowly.
    if (c.streaming && n > 0) c.deadline = clock_.Now() + options_.write_timeout;
  }
  c.out.clear();
  c.out_off = 0;
  c.ssl_wants_write = false;
  if (c.close_after_write) {
    if (c.ssl != nullptr) return false;  // TLS: close at once (a reset loses nothing sent)
    // Plain: stop writing, then read and discard what the client is still sending for a
    // moment, so it reads our reply rather than a reset.
    shutdown(c.fd, SHUT_WR);
    c.phase = Phase::kDraining;
    c.deadline = clock_.Now() + kDrainTime;
  }
  return true;
}

void HttpServer::Impl::Drain(Conn& c) {
  char buf[kReadChunk];
  for (;;) {
    ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      c.drained += static_cast<size_t>(n);
      if (c.drained <= kMaxDrainBytes) continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return;
    }
    Close(c.id);
    return;
  }
}

void HttpServer::Impl::Deliver() {
  std::vector<Mailbox::Letter> letters;
  {
    std::lock_guard<std::mutex> lock(mailbox_->mu);
    letters.swap(mailbox_->letters);
  }
  for (Mailbox::Letter& l : letters) {
    auto it = conns_.find(l.conn);
    if (it == conns_.end()) continue;
    Conn& c = *it->second;
    if (!c.busy || c.seq != l.seq) continue;
    switch (l.kind) {
      case Mailbox::Kind::kReply:
        if (c.streaming) continue;
        c.busy = false;
        Queue(c, l.response, !c.keep_alive);
        break;
      case Mailbox::Kind::kHead:
        if (c.streaming) continue;
        c.streaming = true;
        c.stream = std::move(l.stream);
        c.chunked = c.minor_version >= 1;
        if (!c.chunked) c.keep_alive = false;  // HTTP/1.0: the end of the body is the close
        c.out += FormatStreamHead(l.response, c.chunked, !c.keep_alive);
        break;
      case Mailbox::Kind::kChunk:
        if (!c.streaming) continue;
        c.stream->pending -= l.data.size();
        if (c.chunked) {
          AppendChunk(c.out, l.data);
        } else {
          c.out += l.data;
        }
        break;
      case Mailbox::Kind::kCut:
        if (!c.streaming) continue;
        Close(c.id);
        continue;
      case Mailbox::Kind::kEnd:
      case Mailbox::Kind::kAbort:
        if (!c.streaming) continue;
        const bool abort = l.kind == Mailbox::Kind::kAbort;
        if (c.chunked && !abort) c.out += "0\r\n\r\n";
        c.stream->closed = true;
        c.stream.reset();
        c.streaming = false;
        c.busy = false;
        if (abort || !c.keep_alive) c.close_after_write = true;
        break;
    }
    if (!Flush(c)) {
      Close(c.id);
      continue;
    }
    if (c.stream) c.stream->unsent = c.out.size() - c.out_off;
    // Pipelined requests.
    if (!c.busy && c.phase != Phase::kDraining && c.out.empty()) ReadAndParse(c);
    if (conns_.count(l.conn) == 0) continue;
    Rearm(c);
    UpdateInterest(c);
  }
}

void HttpServer::Impl::Rearm(Conn& c) {
  if (c.phase == Phase::kDraining) return;
  Phase p = Phase::kIdle;
  if (!c.out.empty()) {
    p = Phase::kWriting;
  } else if (c.busy) {
    p = Phase::kBusy;
  } else if (c.handshaking ||
             (c.parser.started() && c.parser.state() == RequestParser::State::kHead)) {
    p = Phase::kHead;
  } else if (c.parser.state() == RequestParser::State::kBody) {
    p = Phase::kBody;
  }
  if (p == c.phase) return;
  c.phase = p;
  c.deadline = clock_.Now() + TimeoutOf(p);
}

void HttpServer::Impl::CheckDeadlines() {
  const SystemTime now = clock_.Now();
  std::vector<uint64_t> expired;
  for (const auto& [id, c] : conns_) {
    if (c->phase != Phase::kBusy && now >= c->deadline) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    Conn& c = *conns_[id];
    if ((c.phase == Phase::kHead || c.phase == Phase::kBody) && !c.handshaking) {
      Count(408);
      Queue(c,
            Response{408, "text/plain",
                     c.phase == Phase::kHead ? "request head not complete in time\n"
                                             : "request body not complete in time\n"},
            true);
      if (!Flush(c) || c.phase != Phase::kDraining) {
        Close(id);  // the reply did not fit the socket buffer: give up on it
        continue;
      }
      UpdateInterest(c);
      continue;
    }
    if (c.phase == Phase::kHead) Count(408);
    Close(id);
  }
}

void HttpServer::Impl::UpdateInterest(Conn& c) {
  uint32_t want = 0;
  const bool reading = c.handshaking || c.phase == Phase::kDraining || (!c.busy && c.out.empty());
  if (reading) want |= EPOLLIN;
  if (c.streaming) want |= EPOLLRDHUP;
  if (c.out_off < c.out.size() || c.ssl_wants_write) want |= EPOLLOUT;
  if (want == c.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
  c.events = want;
}

void HttpServer::Impl::Close(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (c.stream) c.stream->closed = true;
  pending_bytes_ -= c.held;
  if (auto p = peers_.find(c.peer); p != peers_.end() && --p->second == 0) peers_.erase(p);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  if (c.ssl != nullptr) SSL_free(c.ssl);
  close(c.fd);
  conns_.erase(it);
  open_ = conns_.size();
}

HttpServer::HttpServer(HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
HttpServer::~HttpServer() { impl_->Stop(); }
void HttpServer::Route(std::string method, std::string path, RouteOptions options,
                       Handler handler) {
  impl_->Route(std::move(method), std::move(path), options, std::move(handler));
}
void HttpServer::Fallback(RouteOptions options, Handler handler) {
  impl_->Fallback(options, std::move(handler));
}
Result<int> HttpServer::Listen(const std::string& host, int port) {
  return impl_->Listen(host, port);
}
void HttpServer::Stop() { impl_->Stop(); }
void HttpServer::Wake() { impl_->Wake(); }
void HttpServer::Post(std::function<void()> task) { impl_->Post(std::move(task)); }
size_t HttpServer::connections() const { return impl_->connections(); }
uint64_t HttpServer::refused(int status) const { return impl_->refused(status); }

bool SplitHostPort(const std::string& bind, std::string* host, int* port) {
  size_t colon = bind.rfind(':');
  if (colon == std::string::npos) return false;
  *host = bind.substr(0, colon);
  if (host->empty()) *host = "0.0.0.0";
  std::optional<int32_t> p = ParseInt32(bind.substr(colon + 1));
  if (!p || *p < 0 || *p > 65535) return false;
  *port = *p;
  return true;
}

}  // namespace hami::net
