// Fuzzes the pod view parser and the scheduling decision behind it: any pod JSON parses or
// fails with a value (the same one from its PodViewFields), and a pod that gets a node gets
// annotations that decode back to devices on that node.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "device/pod_view.h"
#include "device/schedule.h"
#include "device/usage_index.h"

namespace {

using namespace hami::device;

std::vector<NodeUsage> Nodes() {
  std::vector<NodeUsage> nodes;
  for (int n = 0; n < 2; ++n) {
    NodeUsage node{.name = "node" + std::to_string(n)};
    for (int i = 0; i < 2; ++i) {
      node.devices.push_back(DeviceUsage{.id = "GPU-" + std::to_string(n) + std::to_string(i),
                                         .index = static_cast<uint64_t>(i),
                                         .type = "NVIDIA A10",
                                         .vendor = "NVIDIA",
                                         .health = true,
                                         .mode = "hami-core",
                                         .numa = i,
                                         .count = 10,
                                         .used = n,
                                         .totalmem = 24576,
                                         .usedmem = 1000 * n,
                                         .totalcore = 100,
                                         .usedcores = 10 * n});
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Registry registry = MakeRegistry(DefaultDeviceConfig());
  static const std::vector<NodeUsage> nodes = Nodes();
  auto json = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  auto pod = ParsePodView(json);
  // The scheduler's pod informer caches PodViewFields only: it must read as the whole pod.
  auto kept = ParsePodView(PodViewFields(json));
  if (static_cast<bool>(kept) != static_cast<bool>(pod)) std::abort();
  if (pod ? !(*kept == *pod) : kept.error() != pod.error()) std::abort();
  if (!pod) return 0;
  auto decision = Schedule(registry, *pod, nodes, {"ghost"}, ScheduleOptions{});
  if (!decision || !decision->Chosen()) return 0;
  PodView placed = *pod;
  placed.phase = "Running";
  const auto written = AllocationAnnotations(registry, *decision);
  placed.annotations = StringMap(written.begin(), written.end());
  auto allocation = PodAllocationFromPod(registry, placed);
  if (!allocation) std::abort();
  if (*allocation && (*allocation)->node != decision->Chosen()->node) std::abort();
  return 0;
}
