// The registration pass against the sim apiserver: a changed inventory string re-registers the
// node (NVIDIA's CheckHealth, whose rules tests/device/vendors/nvidia/nvidia_node_test.cc pins),
// an unchanged healthy node keeps its cached devices, cleanup only touches cached nodes.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "device/config.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "scheduler/registration.h"
#include "sim/apiserver/apiserver.h"
#include "test_env.h"

namespace hami::scheduler {
namespace {

using nlohmann::json;

constexpr const char* kTwoGpus =
    R"([{"id":"GPU-a","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100","health":true},{"id":"GPU-b","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100","health":true}])";
constexpr const char* kOneGpu =
    R"([{"id":"GPU-a","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100","health":true}])";

class RegistrationTest : public testing::RegistrarTest {
 protected:
  RegistrationTest() { registration_options_.record_events = false; }

  void PutNode(const std::string& reg, int allocatable, const json& handshake = nullptr) {
    json n = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-1"}}}};
    n["metadata"]["annotations"]["hami.io/node-nvidia-register"] = reg;
    if (!handshake.is_null()) n["metadata"]["annotations"]["hami.io/node-handshake"] = handshake;
    n["status"]["allocatable"]["nvidia.com/gpu"] = std::to_string(allocatable);
    auto existing = client_->Get(k8s::resources::kNodes, "", "node-1");
    if (existing) {
      n["metadata"]["resourceVersion"] = k8s::ResourceVersion(*existing);
      ASSERT_TRUE(client_->Update(k8s::resources::kNodes, n).ok());
    } else {
      ASSERT_TRUE(client_->Create(k8s::resources::kNodes, "", n).ok());
    }
  }
  std::optional<std::string> Handshake() {
    return k8s::Annotation(*client_->Get(k8s::resources::kNodes, "", "node-1"),
                           "hami.io/node-handshake");
  }
  std::vector<std::string> Devices() {
    std::vector<std::string> ids;
    auto snap = index_.Rows({"node-1"});
    if (snap.nodes.empty()) return ids;
    for (const auto& d : snap.nodes[0].devices) ids.push_back(d.id);
    return ids;
  }
};

TEST_F(RegistrationTest, InventoryChangeReRegistersTheNode) {
  PutNode(kTwoGpus, 20);
  ASSERT_TRUE(registrar_->RunOnce().ok());
  EXPECT_EQ(Devices(), (std::vector<std::string>{"GPU-a", "GPU-b"}));
  // Same allocatable count, pending handshake, new inventory: the cached devices are replaced.
  clock_.Advance(std::chrono::seconds(15));
  PutNode(kOneGpu, 20, *Handshake());
  ASSERT_TRUE(registrar_->RunOnce().ok());
  EXPECT_EQ(Devices(), std::vector<std::string>{"GPU-a"});
  EXPECT_EQ(Handshake(), "Requesting_2026-08-21 10:00:00");  // still pending, not rewritten
}

TEST_F(RegistrationTest, PendingHandshakeWithNothingAllocatableIsNotRegistered) {
  // Written by an earlier scheduler 10 s ago; this process has never seen the node.
  PutNode(kTwoGpus, 0, "Requesting_2026-08-21 09:59:50");
  ASSERT_TRUE(registrar_->RunOnce().ok());
  EXPECT_TRUE(Devices().empty());
  EXPECT_EQ(Handshake(), "Requesting_2026-08-21 09:59:50");
  // Expired, nothing allocatable, but not cached: no cleanup either.
  clock_.Advance(std::chrono::seconds(120));
  ASSERT_TRUE(registrar_->RunOnce().ok());
  EXPECT_TRUE(Devices().empty());
  EXPECT_EQ(Handshake(), "Requesting_2026-08-21 09:59:50");
}

TEST_F(RegistrationTest, ExpiredHandshakeCleansUpACachedNode) {
  PutNode(kTwoGpus, 0);
  ASSERT_TRUE(registrar_->RunOnce().ok());  // writes Requesting_10:00:00, registers
  EXPECT_EQ(Devices().size(), 2u);
  clock_.Advance(std::chrono::seconds(60));  // the window is inclusive
  ASSERT_TRUE(registrar_->RunOnce().ok());
  EXPECT_EQ(Devices().size(), 2u);
  clock_.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(registrar_->RunOnce().ok());
  EXPECT_TRUE(Devices().empty());
  EXPECT_FALSE(Handshake().has_value());  // v2.10 cleanup deletes the key
  // The next pass asks again and the devices come back.
  ASSERT_TRUE(registrar_->RunOnce().ok());
  EXPECT_EQ(Handshake(), "Requesting_2026-08-21 10:01:01");
  EXPECT_EQ(Devices().size(), 2u);
}

// Filters need only the rows: a pass puts every node's row in the index and says so before it
// makes the handshake writes (issue 18: 5,000 throttled PATCHes took 100 s before the first
// filter was served).
TEST_F(RegistrationTest, RowsAreReadyBeforeTheHandshakeWrites) {
  PutNode(kTwoGpus, 20);
  size_t calls = 0;
  auto n = registrar_->RunOnce([&](size_t registered) {
    ++calls;
    EXPECT_EQ(registered, 1u);
    EXPECT_EQ(Devices(), (std::vector<std::string>{"GPU-a", "GPU-b"}));
    EXPECT_FALSE(Handshake().has_value());  // not written yet
  });
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ(calls, 1u);
  EXPECT_EQ(Handshake(), "Requesting_2026-08-21 10:00:00");  // written by the end of the pass
}

// HAMi checks every enabled vendor on every node and asks each handshake vendor whose key is
// absent; a node's keys go in one PATCH (one watch event for every informer of nodes), not one
// per vendor (issue 31: 8,000 PATCHes and watch events at 1,000 nodes during the first filters).
TEST_F(RegistrationTest, ANodesHandshakeWritesAreOnePatch) {
  PutNode(kTwoGpus, 20);
  const uint64_t before =
      k8s::ResourceVersionNumber(*client_->Get(k8s::resources::kNodes, "", "node-1"));
  ASSERT_TRUE(registrar_->RunOnce().ok());
  const json node = *client_->Get(k8s::resources::kNodes, "", "node-1");
  EXPECT_EQ(k8s::ResourceVersionNumber(node), before + 1);
  size_t keys = 0;
  for (const device::Device* dev : registry_.All()) {
    const std::string& key = dev->Info().handshake_key;
    if (key.empty()) continue;
    ++keys;
    EXPECT_EQ(k8s::Annotation(node, key), "Requesting_2026-08-21 10:00:00") << key;
  }
  EXPECT_GE(keys, 5u);
  EXPECT_EQ(Devices(), (std::vector<std::string>{"GPU-a", "GPU-b"}));
}

TEST_F(RegistrationTest, ForgetNodeDropsTheBookkeeping) {
  PutNode(kTwoGpus, 20);
  ASSERT_TRUE(registrar_->RunOnce().ok());
  registrar_->ForgetNode("node-1");
  EXPECT_TRUE(Devices().empty());
  // Seen again as new: the count differs from the forgotten 20, so it registers at once.
  ASSERT_TRUE(registrar_->RunOnce().ok());
  EXPECT_EQ(Devices().size(), 2u);
}

}  // namespace
}  // namespace hami::scheduler
