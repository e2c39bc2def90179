// A gtest fixture for code that talks to the API server about one node: the sim API server
// in-process (server_), an unthrottled client for it (client_) and the node kNode, with request
// fault injection through the server's fail_request hook: answer a request 500, run a racing
// write before it, and count requests. Include as "support/sim_node_test.h".
#ifndef HAMI_TESTS_SUPPORT_SIM_NODE_TEST_H_
#define HAMI_TESTS_SUPPORT_SIM_NODE_TEST_H_

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "k8s/client.h"
#include "sim/apiserver/apiserver.h"
#include "support/allocate_env.h"

namespace hami::test_support {

// Requests are named "METHOD /path" (no query), as these two for the node.
inline constexpr const char* kGetNode = "GET /api/v1/nodes/node-1";
inline constexpr const char* kPatchNode = "PATCH /api/v1/nodes/node-1";

class SimNodeTest : public ::testing::Test {
 protected:
  SimNodeTest() {
    sim::ApiServerOptions options;
    options.fail_request = [this](const std::string& method, const std::string& path) {
      return OnRequest(method + " " + path);
    };
    server_ = std::make_unique<sim::ApiServer>(std::move(options));
  }
  // The client goes first (the server does not wait out its kept-alive connections), the server
  // before the hook's state.
  ~SimNodeTest() override {
    client_.reset();
    server_->Stop();
  }

  void SetUp() override {
    ASSERT_TRUE(server_->Start());
    client_ = NewClient(server_->url());
    ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", BareNode()));
  }

  // The next `times` of `request` are answered 500 (< 0: every one; 0: none from now on).
  void Fail(const std::string& request, int times) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_[request] = times;
  }
  // Runs `fn` before each `request` reaches the store (nullptr: no longer), e.g. a racing write;
  // requests made meanwhile, `fn`'s own included, pass without it. Such a request is not failed.
  void Before(const std::string& request, std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    before_[request] = std::move(fn);
  }
  // How many of `request` the server has received since it started.
  int Hits(const std::string& request) {
    std::lock_guard<std::mutex> lock(mu_);
    return hits_[request];
  }

  std::unique_ptr<sim::ApiServer> server_;
  std::unique_ptr<k8s::Client> client_;

 private:
  // The hook: true answers the request 500.
  bool OnRequest(const std::string& request) {
    std::function<void()> before;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++hits_[request];
      auto it = before_.find(request);
      if (it != before_.end() && it->second && !in_before_) {
        before = it->second;
        in_before_ = true;
      } else if (int& left = fail_[request]; left != 0) {
        if (left > 0) --left;
        return true;
      }
    }
    if (before) {
      before();
      std::lock_guard<std::mutex> lock(mu_);
      in_before_ = false;
    }
    return false;
  }

  std::mutex mu_;
  std::map<std::string, int> fail_;
  std::map<std::string, std::function<void()>> before_;
  std::map<std::string, int> hits_;
  bool in_before_ = false;
};

}  // namespace hami::test_support

#endif  // HAMI_TESTS_SUPPORT_SIM_NODE_TEST_H_
