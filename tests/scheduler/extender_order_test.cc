// The extender's own writes against late informer events: the usage index orders a pod's events
// by resourceVersion, so the copy of a pod from before its filter decision (a watch that lags the
// patch, an informer resync) cannot take the decision out of the index and let a second pod onto
// a full GPU. The over-commit the fault-injection run found (issue 7) came from exactly this.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "device/config.h"
#include "k8s/object.h"
#include "scheduler/extender.h"
#include "scheduler/registration.h"
#include "sim/apiserver/apiserver.h"
#include "test_env.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;

// node-1 (two V100s of 32768 MiB) registered, and an extender; no Events.
using ExtenderOrderTest = testing::NodeOneExtenderTest;

TEST_F(ExtenderOrderTest, LateEventsDoNotUndoTheDecision) {
  // Two V100s of 32768 MiB: two pods of 20000 MiB fit, one per GPU; a third does not.
  json a = Create("a", 20000);
  json b = Create("b", 20000);
  json c = Create("c", 20000);
  ASSERT_EQ(Filter(a)["NodeNames"], json::array({"node-1"}));
  registrar_->OnPod(a);  // the creation event, delivered after the decision was written
  EXPECT_EQ(UsedMem(), 20000);
  ASSERT_EQ(Filter(b)["NodeNames"], json::array({"node-1"}));
  registrar_->OnPod(b);
  registrar_->OnPod(a);  // and a resync replaying the informer's old copy
  EXPECT_EQ(UsedMem(), 40000);
  json third = Filter(c);
  EXPECT_TRUE(third["NodeNames"].is_null() || third["NodeNames"].empty()) << third.dump();
  EXPECT_NE(third["FailedNodes"].value("node-1", ""), "") << third.dump();

  // The watch events of the writes themselves apply (same version as the patch answer), and a
  // later one wins: a finishes.
  registrar_->OnPod(Get("a"));
  registrar_->OnPod(Get("b"));
  EXPECT_EQ(UsedMem(), 40000);
  json done = Get("a");
  done["status"]["phase"] = "Succeeded";
  auto updated = client_->UpdateStatus(k8s::resources::kPods, done);
  ASSERT_TRUE(updated.ok());
  registrar_->OnPod(*updated);
  EXPECT_EQ(UsedMem(), 20000);
  registrar_->OnPod(Get("b"));
  registrar_->OnPod(a);  // the stale creation copy again: a stays finished
  EXPECT_EQ(UsedMem(), 20000);
  EXPECT_EQ(Filter(c)["NodeNames"], json::array({"node-1"}));
}

// A re-filter whose write fails leaves the pod's earlier decision counted (the annotations still
// say so), even when a stale event for the pod arrives meanwhile.
TEST_F(ExtenderOrderTest, FailedRewriteKeepsTheAnnotatedDecision) {
  json a = Create("a", 20000);
  ASSERT_EQ(Filter(a)["NodeNames"], json::array({"node-1"}));
  registrar_->OnPod(Get("a"));
  EXPECT_EQ(UsedMem(), 20000);
  // The pod is deleted behind the scheduler's back: the re-filter's patch gets 404.
  ASSERT_TRUE(client_->Delete(k8s::resources::kPods, "default", "a").ok());
  json res = Filter(a);
  EXPECT_NE(res.value("Error", ""), "");
  EXPECT_EQ(UsedMem(), 20000);  // until the informer says the pod is gone
  registrar_->OnPodDeleted(a);
  EXPECT_EQ(UsedMem(), 0);
}

// Transient API errors around /bind: the writes are retried, and a bind that fails anyway still
// releases its node lock (a lock left behind blocks the node's binds for 5 minutes).
class BindFaultTest : public ExtenderOrderTest {
 protected:
  BindFaultTest() {
    api_options_.fail_request = [this](const std::string& method, const std::string& path) {
      std::lock_guard<std::mutex> lock(mu_);
      int& left = fail_[method + " " + path];
      if (left == 0) return false;
      ++failed_[method + " " + path];
      if (left > 0) --left;  // < 0: fail every time
      if (on_fail_) on_fail_(method + " " + path);
      return true;
    };
  }

  // The hook's state goes before the server the base owns: stop the server first.
  ~BindFaultTest() override {
    if (api_) api_->Stop();
  }

  void SetUp() override {
    ExtenderOrderTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(Filter(Create("demo", 3000))["NodeNames"], json::array({"node-1"}));
  }
  void Fail(const std::string& request, int times) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_[request] = times;
  }
  int Failed(const std::string& request) {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_[request];
  }
  json Bind() {
    HttpReply r = extender_->Bind(
        json{{"PodName", "demo"}, {"PodNamespace", "default"}, {"Node", "node-1"}}.dump());
    return json::parse(r.body);
  }
  std::optional<std::string> Lock() {
    return k8s::Annotation(*client_->Get(k8s::resources::kNodes, "", "node-1"),
                           "hami.io/mutex.lock");
  }

  std::mutex mu_;
  std::map<std::string, int> fail_;
  std::map<std::string, int> failed_;
  std::function<void(const std::string&)> on_fail_;  // called under mu_ after a failure
};

TEST_F(BindFaultTest, TransientErrorsAreRetried) {
  Fail("PATCH /api/v1/namespaces/default/pods/demo", 2);
  Fail("POST /api/v1/namespaces/default/pods/demo/binding", 1);
  EXPECT_EQ(Bind(), json::parse(R"({"Error":""})"));
  EXPECT_EQ(Failed("PATCH /api/v1/namespaces/default/pods/demo"), 2);
  EXPECT_EQ(Failed("POST /api/v1/namespaces/default/pods/demo/binding"), 1);
  auto pod = client_->Get(k8s::resources::kPods, "default", "demo");
  EXPECT_EQ(pod->at("spec").value("nodeName", ""), "node-1");
  EXPECT_TRUE(Lock());  // held for the device plugin's Allocate
}

TEST_F(BindFaultTest, FailedBindReleasesTheLockDespiteTransientErrors) {
  Fail("POST /api/v1/namespaces/default/pods/demo/binding", -1);
  {
    // Once the binding has failed (the lock is held), the release's read and write each fail
    // twice before they get through.
    std::lock_guard<std::mutex> lock(mu_);
    on_fail_ = [this](const std::string& request) {
      if (request != "POST /api/v1/namespaces/default/pods/demo/binding") return;
      fail_["GET /api/v1/nodes/node-1"] = 2;
      fail_["PATCH /api/v1/nodes/node-1"] = 2;
    };
  }
  json res = Bind();
  EXPECT_NE(res.value("Error", ""), "");
  EXPECT_EQ(Failed("POST /api/v1/namespaces/default/pods/demo/binding"), 4);
  EXPECT_EQ(Failed("GET /api/v1/nodes/node-1"), 2);
  EXPECT_EQ(Failed("PATCH /api/v1/nodes/node-1"), 2);
  EXPECT_FALSE(Lock()) << *Lock();
}

}  // namespace
}  // namespace hami::scheduler
