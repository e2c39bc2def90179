// nodelock::Release against the in-process sim apiserver: the conditional release (one JSON patch
// whose `test` op checks the value the caller read) removes only the lock it saw; the fallback
// (GET, owner check, merge patch conditional on the resourceVersion) never removes a lock taken
// between its read and its write; transient errors are retried.
#include "nodelock/release.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "k8s/client.h"
#include "k8s/object.h"
#include "sim/apiserver.h"

namespace hami::nodelock {
namespace {

using k8s::Json;
namespace res = k8s::resources;

constexpr const char* kNode = "node-1";
constexpr const char* kNodeGet = "GET /api/v1/nodes/node-1";
constexpr const char* kNodePatch = "PATCH /api/v1/nodes/node-1";
constexpr const char* kLockKey = "hami.io/mutex.lock";
constexpr const char* kOurs = "2026-08-21T10:00:05Z,default,demo";
constexpr const char* kOursLater = "2026-08-21T10:01:00Z,default,demo";
constexpr const char* kTheirs = "2026-08-21T10:00:09Z,default,other";
constexpr const char* kLegacy = "2026-08-21T10:00:05Z";

class ReleaseTest : public ::testing::Test {
 protected:
  ReleaseTest() {
    sim::ApiServerOptions options;
    options.fail_request = [this](const std::string& method, const std::string& path) {
      std::function<void()> before;
      {
        std::lock_guard<std::mutex> lock(mu_);
        const std::string request = method + " " + path;
        ++seen_[request];
        if (request == kNodePatch && before_patch_ && !in_hook_) {
          before = before_patch_;
          in_hook_ = true;
        }
        int& left = fail_[request];
        if (!before && left != 0) {
          if (left > 0) --left;  // < 0: fail every time
          return true;
        }
      }
      if (before) {
        before();  // its own PATCH passes through this hook without recursing
        std::lock_guard<std::mutex> lock(mu_);
        in_hook_ = false;
      }
      return false;
    };
    server_ = std::make_unique<sim::ApiServer>(options);
  }
  // The hook's state outlives the server: stop it first (the client first, so the server does
  // not wait out its kept-alive connections).
  ~ReleaseTest() override {
    client_.reset();
    server_->Stop();
  }

  void SetUp() override {
    ASSERT_TRUE(server_->Start());
    k8s::RestConfig cfg;
    cfg.server = server_->url();
    cfg.qps = 0;
    client_ = std::make_unique<k8s::Client>(cfg);
    Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}};
    ASSERT_TRUE(client_->Create(res::kNodes, "", node));
  }

  void SetLock(std::optional<std::string> value) {
    Json patch;
    patch["metadata"]["annotations"][kLockKey] = value ? Json(*value) : Json(nullptr);
    ASSERT_TRUE(client_->Patch(res::kNodes, "", kNode, k8s::PatchType::kMerge, patch));
  }
  std::optional<std::string> Lock() {
    auto node = client_->Get(res::kNodes, "", kNode);
    EXPECT_TRUE(node);
    return node ? k8s::Annotation(*node, kLockKey) : std::nullopt;
  }
  // Requests "METHOD path" are answered 500 `times` more times (< 0: always).
  void Fail(const std::string& request, int times) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_[request] = times;
  }
  // Runs `fn` before each PATCH of the node reaches the store (a racing writer).
  void BeforePatch(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    before_patch_ = std::move(fn);
  }
  int Seen(const std::string& request) {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_[request];
  }

  std::mutex mu_;
  std::map<std::string, int> fail_;
  std::map<std::string, int> seen_;
  std::function<void()> before_patch_;
  bool in_hook_ = false;
  std::unique_ptr<sim::ApiServer> server_;
  std::unique_ptr<k8s::Client> client_;
};

TEST_F(ReleaseTest, ReleasesOnlyWhatThePodOwns) {
  struct Case {
    const char* name;
    std::optional<std::string> current;  // the lock on the node at release time
    std::string seen;                    // what the caller read earlier ("" = nothing)
    std::optional<std::string> left;     // the lock afterwards
  };
  const Case cases[] = {
      {"unchanged, ours: removed by the conditional patch", kOurs, kOurs, std::nullopt},
      {"unchanged legacy value: removed", kLegacy, kLegacy, std::nullopt},
      {"taken by another pod since: left", kTheirs, kOurs, kTheirs},
      {"re-taken by the same pod since: removed by the fallback", kOursLater, kOurs, std::nullopt},
      {"nothing seen, ours now: removed by the fallback", kOurs, "", std::nullopt},
      {"nothing seen, theirs now: left", kTheirs, "", kTheirs},
      {"seen theirs (not ours to release), theirs now: left", kTheirs, kTheirs, kTheirs},
      {"already gone: fine", std::nullopt, kOurs, std::nullopt},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SetLock(c.current);
    EXPECT_TRUE(Release(*client_, kNode, "default", "demo", c.seen));
    EXPECT_EQ(Lock(), c.left);
  }
}

TEST_F(ReleaseTest, TheConditionalPatchNeedsNoGet) {
  SetLock(std::string(kOurs));
  const int gets = Seen(kNodeGet);
  EXPECT_TRUE(Release(*client_, kNode, "default", "demo", kOurs));
  EXPECT_EQ(Seen(kNodeGet), gets);
  EXPECT_EQ(Lock(), std::nullopt);
}

// The fallback's write is conditional too: a lock another pod takes between its GET and its
// PATCH makes the PATCH a 409, and the re-read leaves that lock alone.
TEST_F(ReleaseTest, FallbackLeavesALockTakenBetweenReadAndWrite) {
  SetLock(std::string(kOurs));
  BeforePatch([this] {
    BeforePatch(nullptr);
    SetLock(std::string(kTheirs));
  });
  EXPECT_TRUE(Release(*client_, kNode, "default", "demo"));
  EXPECT_EQ(Lock(), kTheirs);
}

TEST_F(ReleaseTest, FallbackReleasesALockTheSamePodRetookMeanwhile) {
  SetLock(std::string(kOurs));
  BeforePatch([this] {
    BeforePatch(nullptr);
    SetLock(std::string(kOursLater));
  });
  EXPECT_TRUE(Release(*client_, kNode, "default", "demo"));
  EXPECT_EQ(Lock(), std::nullopt);
}

TEST_F(ReleaseTest, EndlessConflictsAreAnErrorAndLeaveTheLock) {
  SetLock(std::string(kOurs));
  int writes = 0;
  BeforePatch([&] {  // the same pod keeps re-taking it: each time a new value and version
    SetLock("2026-08-21T10:0" + std::to_string(++writes) + ":00Z,default,demo");
  });
  const int patches = Seen(kNodePatch);
  Status s = Release(*client_, kNode, "default", "demo");
  BeforePatch(nullptr);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), "release lock on \"node-1\": 409 Conflict 5 times in a row");
  EXPECT_EQ(writes, 5);
  EXPECT_EQ(Seen(kNodePatch) - patches, 10);  // 5 of the release, 5 racing writes
  EXPECT_TRUE(Lock());
}

TEST_F(ReleaseTest, TransientErrorsAreRetried) {
  SetLock(std::string(kOurs));
  Fail(kNodePatch, 2);
  EXPECT_TRUE(Release(*client_, kNode, "default", "demo", kOurs));  // the conditional patch
  EXPECT_EQ(Lock(), std::nullopt);

  SetLock(std::string(kOurs));
  Fail(kNodeGet, 2);
  Fail(kNodePatch, 2);
  EXPECT_TRUE(Release(*client_, kNode, "default", "demo"));  // GET + merge patch
  EXPECT_EQ(Lock(), std::nullopt);
}

TEST_F(ReleaseTest, APersistentErrorNamesTheNodeAndTheCall) {
  SetLock(std::string(kOurs));
  Fail(kNodeGet, -1);
  Status s = Release(*client_, kNode, "default", "demo");
  Fail(kNodeGet, 0);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().rfind("get node \"node-1\": ", 0), 0u) << s.error();
  EXPECT_NE(s.error().find("500"), std::string::npos) << s.error();
  EXPECT_EQ(Lock(), kOurs);

  Fail(kNodePatch, -1);
  s = Release(*client_, kNode, "default", "demo", kOurs);
  Fail(kNodePatch, 0);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().rfind("release lock on \"node-1\": ", 0), 0u) << s.error();
  EXPECT_EQ(Lock(), kOurs);
}

}  // namespace
}  // namespace hami::nodelock
