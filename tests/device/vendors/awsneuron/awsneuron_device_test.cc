// The AWS Neuron Device class built from the `awsneuron` section: capacity registration with
// the instance type, the webhook, Fit through the Device API and the allocation keys.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "device/config.h"
#include "device/device.h"
#include "device/vendors/awsneuron/awsneuron.h"
#include "support/vendor_test_util.h"

namespace hami::device::awsneuron {
namespace {

using vendor_test::FakeEdit;
using vendor_test::Ptrs;

Registry ChartRegistry(const std::string& section = "awsneuron: {}\n") {
  return vendor_test::ChartRegistry(section);
}

TEST(NeuronDevice, Section) {
  Registry reg = ChartRegistry();
  ASSERT_TRUE(reg.Find("AWSNeuron"));
  EXPECT_EQ(reg.Find("AWSNeuron")->Info().count_resource, "aws.amazon.com/neuron");
  EXPECT_EQ(reg.Find("AWSNeuron")->Info().core_resource, "aws.amazon.com/neuroncore");
  auto bad = LoadDeviceConfig("nvidia: {}\nawsneuron:\n  resourceCoreName: [x]\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("awsneuron.resourceCoreName"), std::string::npos) << bad.error();
}

TEST(NeuronDevice, EndToEnd) {
  Registry reg = ChartRegistry();
  const Device& neuron = *reg.Find("AWSNeuron");
  NodeRegistration published = neuron.EncodeNodeRegistration(
      {protocol::DeviceInfo{.count = 10}, protocol::DeviceInfo{.count = 10},
       protocol::DeviceInfo{.count = 10}, protocol::DeviceInfo{.count = 10}});
  EXPECT_EQ(published.capacity,
            (StringMap{{"aws.amazon.com/neuron", "4"}, {"aws.amazon.com/neuroncore", "8"}}));
  NodeView node{.name = "inf",
                .labels = {{"node.kubernetes.io/instance-type", "inf2.24xlarge"}},
                .capacity = published.capacity};
  auto devs = neuron.NodeDevices(node);
  ASSERT_TRUE(devs) << devs.error();
  ASSERT_EQ(devs->size(), 4u);
  EXPECT_EQ((*devs)[0].custom_info.at("AWSNodeType"), "inf2.24xlarge");
  EXPECT_EQ((*devs)[0].totalcore, 3);
  EXPECT_EQ(neuron.CheckHealth(node, Health{false, false}), (Health{true, true}));
  auto bad =
      neuron.NodeDevices(NodeView{.name = "n", .capacity = {{"aws.amazon.com/neuron", "lots"}}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("aws.amazon.com/neuron"), std::string::npos);

  FakeEdit odd(
      nlohmann::json::parse(R"({"resources":{"limits":{"aws.amazon.com/neuroncore":"3"}}})"));
  auto err = neuron.MutateAdmission(odd);
  ASSERT_FALSE(err);
  EXPECT_NE(err.error().find("must be 1 or a multiple of 2, got 3"), std::string::npos);
  FakeEdit ok(nlohmann::json::parse(R"({"resources":{"limits":{"aws.amazon.com/neuron":2}}})"));
  EXPECT_TRUE(neuron.MutateAdmission(ok).value());
  EXPECT_EQ(ok.Count(), 0);

  // Two whole devices on the Inferentia ring, then one core.
  PodView pod;
  pod.containers = {ContainerView{.name = "a", .limits = {{"aws.amazon.com/neuron", "2"}}}};
  pod.node_name = "inf";
  auto req = neuron.NormalizeRequest(pod.containers[0]);
  ASSERT_TRUE(req);
  FitResult r = neuron.Fit(Ptrs(*devs), *req, FitContext{.pod = &pod});
  ASSERT_TRUE(r.fit) << r.Reason();
  EXPECT_EQ(r.devices[0].uuid, "inf-AWSNeuron-0");
  EXPECT_EQ(r.devices[1].uuid, "inf-AWSNeuron-1");
  StringMap annos = neuron.AllocationAnnotations(pod, {r.devices});
  EXPECT_EQ(annos, (StringMap{{"hami.io/aws-neuron-devices-allocated",
                               "inf-AWSNeuron-0,AWSNeuron,0,3:inf-AWSNeuron-1,AWSNeuron,0,3:;"},
                              {"AWS_NEURON_IDS", "0,1"},
                              {"NEURON_ALLOCATED", "false"},
                              {"aws.amazon.com/predicate-node", "inf"}}));
  // No to-allocate key: the simulated plugin has nothing to consume; the usage index reads the
  // allocated key.
  auto pending = neuron.PodToAllocate(annos);
  ASSERT_TRUE(pending);
  EXPECT_FALSE(pending->has_value());
  auto back = neuron.PodAllocated(annos);
  ASSERT_TRUE(back && *back);
  EXPECT_EQ((*back)->at(0), r.devices);

  PodView core_pod;
  core_pod.annotations = {{"hami.io/vgpu-node", "inf"}};
  core_pod.containers = {
      ContainerView{.name = "b", .limits = {{"aws.amazon.com/neuroncore", "1"}}}};
  auto core_req = neuron.NormalizeRequest(core_pod.containers[0]);
  ASSERT_TRUE(core_req);
  EXPECT_EQ(core_req->nums, 1);
  FitResult c = neuron.Fit(Ptrs(*devs), *core_req, FitContext{.pod = &core_pod});
  ASSERT_TRUE(c.fit) << c.Reason();
  EXPECT_EQ(c.devices[0].uuid, "inf-AWSNeuron-3");
  EXPECT_EQ(c.devices[0].usedcores, 1);
  StringMap core_annos = neuron.AllocationAnnotations(core_pod, {c.devices});
  EXPECT_EQ(core_annos["AWS_NEURON_IDS"], "6");
  EXPECT_EQ(core_annos["NEURON_RESOURCE_TYPE"], "aws.amazon.com/neuroncore");
}

}  // namespace
}  // namespace hami::device::awsneuron
