// Shared by the scheduler tests: the seed's register annotation, a node and a GPU pod built from
// it, a sim API server on loopback with a client for it (also as a fixture), and a fixture that
// adds a registration pass over the default device config.
#ifndef HAMI_TESTS_SCHEDULER_TEST_ENV_H_
#define HAMI_TESTS_SCHEDULER_TEST_ENV_H_

#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/time_format.h"
#include "device/config.h"
#include "device/usage_index.h"
#include "k8s/client.h"
#include "scheduler/extender.h"
#include "scheduler/registration.h"
#include "sim/apiserver/apiserver.h"

namespace hami::scheduler::testing {

// The seed's hami.io/node-nvidia-register example: two V100s of 32768 MiB, split 10.
inline constexpr const char* kSeedRegister =
    R"([{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true},{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}])";

// A node with register annotation `reg` (none when empty) and 20 allocatable nvidia.com/gpu.
inline nlohmann::json Node(const std::string& name, const std::string& reg = kSeedRegister) {
  nlohmann::json n = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
  if (!reg.empty()) n["metadata"]["annotations"]["hami.io/node-nvidia-register"] = reg;
  n["status"]["allocatable"]["nvidia.com/gpu"] = "20";
  return n;
}

// default/<name>: one container asking for 1 GPU, `mem` MiB and (when > 0) `cores` percent.
inline nlohmann::json GpuPod(const std::string& name, int mem, int cores = 0) {
  nlohmann::json ctr = {{"name", "main"}, {"image", "busybox"}};
  ctr["resources"]["limits"] = {{"nvidia.com/gpu", "1"},
                                {"nvidia.com/gpumem", std::to_string(mem)}};
  if (cores > 0) ctr["resources"]["limits"]["nvidia.com/gpucores"] = std::to_string(cores);
  nlohmann::json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", name}, {"namespace", "default"}};
  pod["spec"]["containers"] = nlohmann::json::array({ctr});
  return pod;
}

// A started sim API server and an unthrottled client for it; both null when it cannot start.
struct SimEnv {
  std::unique_ptr<sim::ApiServer> api;
  std::unique_ptr<k8s::Client> client;
};

inline SimEnv StartSim(sim::ApiServerOptions options = {}) {
  SimEnv env;
  auto api = std::make_unique<sim::ApiServer>(std::move(options));
  if (!api->Start()) return env;
  k8s::RestConfig cfg;
  cfg.server = api->url();
  cfg.qps = 0;
  env.client = std::make_unique<k8s::Client>(cfg);
  env.api = std::move(api);
  return env;
}

// A fixture with a started sim API server (api_) and its client (client_). A derived fixture's
// constructor may set api_options_ (fault injection) before SetUp starts the server.
class SimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SimEnv env = StartSim(std::move(api_options_));
    ASSERT_TRUE(env.client);
    api_ = std::move(env.api);
    client_ = std::move(env.client);
  }

  sim::ApiServerOptions api_options_;
  std::unique_ptr<sim::ApiServer> api_;
  std::unique_ptr<k8s::Client> client_;
};

// A SimTest with the default device registry, an empty usage index, a fake clock at
// 2026-08-21 10:00:00 UTC and a Registrar over them. A derived fixture's constructor may change
// registration_options_ (UTC handshake times by default) before SetUp builds the registrar.
class RegistrarTest : public SimTest {
 protected:
  RegistrarTest() { registration_options_.zone = Zone::Utc(); }

  void SetUp() override {
    SimTest::SetUp();
    if (HasFatalFailure()) return;
    registry_ = device::MakeRegistry(device::DefaultDeviceConfig());
    registrar_ =
        std::make_unique<Registrar>(registry_, index_, *client_, clock_, registration_options_);
  }

  RegistrationOptions registration_options_;
  FakeClock clock_{SystemTime(std::chrono::seconds(1787306400))};
  device::Registry registry_;
  device::UsageIndex index_;
  std::unique_ptr<Registrar> registrar_;
};

// node-1 (the seed's two V100s of 32768 MiB) registered and `extender_` built in SetUp from
// `extender_options_` (UTC, no Events; a derived constructor may change them), with helpers for
// pods in namespace default.
class NodeOneExtenderTest : public RegistrarTest {
 protected:
  NodeOneExtenderTest() {
    registration_options_.record_events = false;
    extender_options_.zone = Zone::Utc();
    extender_options_.record_events = false;
  }

  void SetUp() override {
    RegistrarTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", Node("node-1")).ok());
    ASSERT_TRUE(registrar_->RunOnce().ok());
    extender_ =
        std::make_unique<Extender>(registry_, index_, *client_, clock_, extender_options_, nullptr);
  }

  nlohmann::json Create(const std::string& name, int mem) {
    auto r = client_->Create(k8s::resources::kPods, "default", GpuPod(name, mem));
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : nlohmann::json();
  }
  // The /filter body of `pod` over node-1.
  static std::string FilterBody(const nlohmann::json& pod) {
    return nlohmann::json{{"Pod", pod}, {"NodeNames", {"node-1"}}}.dump();
  }
  // /filter of `pod` over node-1.
  nlohmann::json Filter(const nlohmann::json& pod) {
    HttpReply r = extender_->Filter(FilterBody(pod));
    EXPECT_EQ(r.status, 200);
    return nlohmann::json::parse(r.body);
  }
  nlohmann::json Get(const std::string& name) {
    return *client_->Get(k8s::resources::kPods, "default", name);
  }
  // The memory the usage index counts on node-1's GPUs.
  int64_t UsedMem() {
    int64_t sum = 0;
    const device::UsageIndex::Snapshot snap = index_.Rows({"node-1"});
    for (const auto& d : snap.nodes.at(0).devices) sum += d.usedmem;
    return sum;
  }

  ExtenderOptions extender_options_;
  std::unique_ptr<Extender> extender_;
};

}  // namespace hami::scheduler::testing

#endif  // HAMI_TESTS_SCHEDULER_TEST_ENV_H_
