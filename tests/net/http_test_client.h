// A raw-socket HTTP client for the server tests: sends bytes exactly as given (partial heads,
// pipelined requests, oversized bodies) and reads replies under a deadline.
#ifndef HAMI_TESTS_NET_HTTP_TEST_CLIENT_H_
#define HAMI_TESTS_NET_HTTP_TEST_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace hami::net::testing {

struct Reply {
  int status = 0;
  std::string head;
  std::string body;
};

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  // False when the peer closed or reset.
  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // The next reply (Content-Length framed), or nullopt at EOF, reset or timeout.
  std::optional<Reply> Read(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      size_t end = buf_.find("\r\n\r\n");
      if (end != std::string::npos) {
        Reply r;
        r.head = buf_.substr(0, end);
        r.status = std::stoi(r.head.substr(9, 3));
        size_t length = 0;
        size_t cl = r.head.find("Content-Length: ");
        if (cl != std::string::npos) length = std::stoul(r.head.substr(cl + 16));
        if (buf_.size() >= end + 4 + length) {
          r.body = buf_.substr(end + 4, length);
          buf_.erase(0, end + 4 + length);
          return r;
        }
      }
      if (!Fill(deadline)) return std::nullopt;
    }
  }
  // The bytes received up to and including the first `marker` (consumed), or nullopt at EOF,
  // reset or timeout first: reads a streamed (chunked) reply piece by piece.
  std::optional<std::string> ReadUntil(
      std::string_view marker, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      size_t at = buf_.find(marker);
      if (at != std::string::npos) {
        std::string out = buf_.substr(0, at + marker.size());
        buf_.erase(0, at + marker.size());
        return out;
      }
      if (!Fill(deadline)) return std::nullopt;
    }
  }
  // True once the server closed the connection (EOF or reset) before `timeout`; unread replies
  // are discarded.
  bool WaitClosed(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (Fill(deadline)) {
    }
    return closed_;
  }
  bool closed() const { return closed_; }

 private:
  // Reads what arrives before the deadline; false at EOF, reset or timeout.
  bool Fill(std::chrono::steady_clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char b[65536];
    ssize_t n = recv(fd_, b, sizeof(b), 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    buf_.append(b, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string buf_;
};

}  // namespace hami::net::testing

#endif  // HAMI_TESTS_NET_HTTP_TEST_CLIENT_H_
