// AWS Neuron's allocation annotations written with the scheduler's decision: the chosen node as
// aws.amazon.com/predicate-node and NEURON_ALLOC_TIME (Unix nanoseconds) from the caller's
// clock, as HAMi v2.10's PatchAnnotations writes them (pkg/device/awsneuron/device.go).
#include <gtest/gtest.h>

#include <chrono>

#include "device/config.h"
#include "device/device.h"
#include "device/schedule.h"
#include "device/vendors/awsneuron/awsneuron.h"

namespace hami::device::awsneuron {
namespace {

TEST(NeuronAllocation, NodeAndTimeFromTheDecision) {
  auto config = LoadDeviceConfig("nvidia: {}\nawsneuron: {}\n");
  ASSERT_TRUE(config) << config.error();
  Registry r = MakeRegistry(*config);
  NodeView view{.name = "inf",
                .labels = {{"node.kubernetes.io/instance-type", "inf2.24xlarge"}},
                .capacity = {{"aws.amazon.com/neuron", "2"}, {"aws.amazon.com/neuroncore", "4"}}};
  auto row = NodeUsageFromView(r, view);
  ASSERT_TRUE(row) << row.error();
  PodView pod{.name = "p", .namespace_name = "default"};
  pod.containers = {ContainerView{.name = "a", .limits = {{"aws.amazon.com/neuron", "1"}}}};
  auto d = Schedule(r, pod, {*row}, {}, ScheduleOptions{});
  ASSERT_TRUE(d) << d.error();
  ASSERT_NE(d->Chosen(), nullptr) << d->nodes[0].reason;
  const SystemTime now{std::chrono::seconds(1700000000) + std::chrono::nanoseconds(7)};
  auto annos = AllocationAnnotations(r, pod, *d, now);
  EXPECT_EQ(annos.at(std::string(kPredicateTimeKey)), "1700000000000000007");
  EXPECT_EQ(annos.at(std::string(kAssignedNodeKey)), "inf");
  EXPECT_EQ(annos.at("NEURON_ALLOCATED"), "false");
  EXPECT_EQ(annos.at("hami.io/vgpu-node"), "inf");
  EXPECT_EQ(AllocationAnnotations(r, pod, *d).count(std::string(kPredicateTimeKey)), 0u);
  // The node comes from the decision even when the device ids name another.
  const Device& neuron = *r.Find("AWSNeuron");
  StringMap moved =
      neuron.AllocationAnnotations(AllocationContext{.pod = &pod, .node = "trn", .now = now},
                                   {{{"inf-AWSNeuron-0", "AWSNeuron", 0, 3}}});
  EXPECT_EQ(moved.at(std::string(kAssignedNodeKey)), "trn");
  EXPECT_EQ(moved.at(std::string(kPredicateTimeKey)), "1700000000000000007");
}

}  // namespace
}  // namespace hami::device::awsneuron
