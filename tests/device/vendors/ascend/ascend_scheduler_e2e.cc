// Ascend end to end through the real hami-scheduler binary, started on the chart's default
// device-config.yaml (rendered by helm; the test skips without helm) against the sim API server:
// /webhook rounds a vNPU memory request up to its template and pairs 910C requests, /filter in
// the NodeNames form places pods with the allocation keys and the huawei.com/<word> runtime list
// HAMi writes, and reports HAMi's reasons.
#include "support/vendor_scheduler.h"

namespace hami::device::ascend {
namespace {

using nlohmann::json;

class AscendScheduler : public testing::VendorSchedulerTest {
 protected:
  void SetUp() override { SetUpWithSection("vnpus:"); }
};

// `n` NPUs with indices 0, step, 2 x step, ...
json AscendNode(const std::string& name, const std::string& word, int n, int mem, int step = 1) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
  std::string reg = "[";
  for (int k = 0; k < n; ++k) {
    int i = k * step;
    if (k > 0) reg += ",";
    reg += R"({"id":")" + name + "-npu-" + std::to_string(i) + R"(","index":)" + std::to_string(i) +
           R"(,"count":4,"devmem":)" + std::to_string(mem) + R"(,"devcore":100,"type":")" + word +
           R"(","health":true})";
  }
  node["metadata"]["annotations"]["hami.io/node-register-" + word] = reg + "]";
  node["status"]["capacity"]["huawei.com/" + word] = std::to_string(n * 4);
  node["status"]["allocatable"]["huawei.com/" + word] = std::to_string(n * 4);
  return node;
}

TEST_F(AscendScheduler, TemplatesAndRuntimeList) {
  CreateNode(AscendNode("b3-node", "Ascend910B3", 2, 65536));
  Start();

  json review = Review(
      Pod("vnpu", {{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "9000"}}));
  ASSERT_EQ(review["allowed"], true) << review;
  json res_limits = review["pod"]["spec"]["containers"][0]["resources"];
  EXPECT_EQ(res_limits["limits"]["huawei.com/Ascend910B3-memory"], "16384") << review;
  EXPECT_EQ(res_limits["requests"]["huawei.com/Ascend910B3-memory"], "16384") << review;
  EXPECT_EQ(review["pod"]["spec"]["schedulerName"], "hami-scheduler") << review;
  CreatePod(review["pod"]);
  json res = Filter("vnpu", {"b3-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"b3-node"})) << res;
  auto annos = k8s::Annotations(GetPod("vnpu"));
  EXPECT_EQ(annos["hami.io/Ascend910B3-devices-to-allocate"],
            "b3-node-npu-1,Ascend910B3,16384,0:;");
  EXPECT_EQ(annos["hami.io/Ascend910B3-devices-allocated"],
            annos["hami.io/Ascend910B3-devices-to-allocate"]);
  EXPECT_EQ(annos["huawei.com/Ascend910B3"],
            R"([{"UUID":"b3-node-npu-1","temp":"vir05_1c_16g","memory":16384}])");
  // HAMi's predicate-time: Unix seconds of the decision, the instant of hami.io/vgpu-time.
  EXPECT_FALSE(annos["predicate-time"].empty());
  EXPECT_EQ(annos["predicate-time"], annos["hami.io/vgpu-time"]);

  // Hard split refuses a -core request; the webhook answers code 500 with HAMi's words.
  json core =
      Review(Pod("core", {{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-core", "5"}}));
  EXPECT_EQ(core["allowed"], false) << core;
  EXPECT_NE(core.dump().find("is only supported in hami-core (soft split) mode"), std::string::npos)
      << core;

  // A soft-split pod on a node without hami-vnpu-core: ModeNotFit.
  json soft =
      Pod("soft", {{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "1000"}});
  soft["metadata"]["annotations"]["huawei.com/vnpu-mode"] = "hami-core";
  CreatePod(Review(soft)["pod"]);
  res = Filter("soft", {"b3-node"});
  EXPECT_TRUE(res["NodeNames"].empty()) << res;
  EXPECT_EQ(res["FailedNodes"]["b3-node"], "1/2 ModeNotFit") << res;
}

TEST_F(AscendScheduler, Ascend910CPairs) {
  CreateNode(AscendNode("c-node", "Ascend910C", 3, 65536));
  CreateNode(AscendNode("gap-node", "Ascend910C", 3, 65536, 2));
  Start();
  json review = Review(Pod("pair", {{"huawei.com/Ascend910C", "1"}}));
  ASSERT_EQ(review["allowed"], true) << review;
  EXPECT_EQ(review["pod"]["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend910C"],
            "2")
      << review;
  json odd = Review(Pod("odd", {{"huawei.com/Ascend910C", "3"}}));
  EXPECT_EQ(odd["allowed"], false) << odd;
  EXPECT_NE(odd.dump().find("Ascend910C device request must be 1 or 2*n, got 3"), std::string::npos)
      << odd;
  CreatePod(review["pod"]);
  json res = Filter("pair", {"c-node"});
  EXPECT_EQ(res["NodeNames"], json::array({"c-node"})) << res;
  EXPECT_EQ(k8s::Annotations(GetPod("pair"))["hami.io/Ascend910C-devices-allocated"],
            "c-node-npu-1,Ascend910C,65536,0:c-node-npu-0,Ascend910C,65536,0:;");
  // Four NPUs on a node of three: HAMi's early reason.
  CreatePod(Review(Pod("four", {{"huawei.com/Ascend910C", "4"}}))["pod"]);
  res = Filter("four", {"c-node"});
  EXPECT_TRUE(res["NodeNames"].empty()) << res;
  EXPECT_EQ(res["FailedNodes"]["c-node"], "NodeInsufficientDevice") << res;
  // NPUs 0, 2 and 4 make no whole module.
  CreatePod(Review(Pod("gap", {{"huawei.com/Ascend910C", "2"}}))["pod"]);
  res = Filter("gap", {"gap-node"});
  EXPECT_TRUE(res["NodeNames"].empty()) << res;
  EXPECT_EQ(res["FailedNodes"]["gap-node"], "3/2 AllocatedCardsInsufficientRequest") << res;
}

}  // namespace
}  // namespace hami::device::ascend
