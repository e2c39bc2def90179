// AWS Neuron end to end through the real hami-scheduler binary, started on the chart's default
// device-config.yaml (rendered by helm; the test skips without helm) against the sim API
// server: /webhook admits device and core requests and refuses an odd core count in HAMi's
// words; /filter places a contiguous run on an Inferentia node and a single core, with the
// AWS_NEURON_IDS the Neuron plugin reads.
#include "support/vendor_scheduler.h"

namespace hami::device::awsneuron {
namespace {

using nlohmann::json;

class NeuronScheduler : public testing::VendorSchedulerTest {
 protected:
  void SetUp() override { SetUpWithSection("awsneuron:"); }
};

TEST_F(NeuronScheduler, DevicesAndCores) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "inf"}}}};
  node["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "inf2.24xlarge";
  node["status"]["capacity"] = {{"aws.amazon.com/neuron", "4"}, {"aws.amazon.com/neuroncore", "8"}};
  node["status"]["allocatable"] = node["status"]["capacity"];
  CreateNode(node);
  Start();

  json odd = Review(Pod("odd", {{"aws.amazon.com/neuroncore", "3"}}));
  EXPECT_EQ(odd["allowed"], false) << odd;
  EXPECT_NE(odd.dump().find("aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3"),
            std::string::npos)
      << odd;

  json review = Review(Pod("two", {{"aws.amazon.com/neuron", "2"}}));
  EXPECT_EQ(review["allowed"], true) << review;
  EXPECT_EQ(review["pod"]["spec"]["schedulerName"], "hami-scheduler") << review;
  CreatePod(review["pod"]);
  json res = Filter("two", {"inf"});
  EXPECT_EQ(res["NodeNames"], json::array({"inf"})) << res;
  auto annos = k8s::Annotations(GetPod("two"));
  EXPECT_EQ(annos["hami.io/aws-neuron-devices-allocated"],
            "inf-AWSNeuron-0,AWSNeuron,0,3:inf-AWSNeuron-1,AWSNeuron,0,3:;");
  EXPECT_EQ(annos["AWS_NEURON_IDS"], "0,1");
  EXPECT_EQ(annos["aws.amazon.com/predicate-node"], "inf");
  EXPECT_TRUE(testing::SameSecond(annos["NEURON_ALLOC_TIME"], annos["hami.io/vgpu-time"]))
      << annos["NEURON_ALLOC_TIME"];

  CreatePod(Review(Pod("core", {{"aws.amazon.com/neuroncore", "1"}}))["pod"]);
  res = Filter("core", {"inf"});
  EXPECT_EQ(res["NodeNames"], json::array({"inf"})) << res;
  annos = k8s::Annotations(GetPod("core"));
  EXPECT_EQ(annos["NEURON_RESOURCE_TYPE"], "aws.amazon.com/neuroncore");
  EXPECT_FALSE(annos["AWS_NEURON_IDS"].empty());

  // Sixteen devices on a four-device node.
  CreatePod(Review(Pod("many", {{"aws.amazon.com/neuron", "16"}}))["pod"]);
  res = Filter("many", {"inf"});
  EXPECT_EQ(res["NodeNames"], nullptr) << res;
  EXPECT_NE(res["FailedNodes"]["inf"].get<std::string>().find("NodeInsufficientDevice"),
            std::string::npos)
      << res;
}

}  // namespace
}  // namespace hami::device::awsneuron
