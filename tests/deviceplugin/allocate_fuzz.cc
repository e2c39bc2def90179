// Fuzzes the pure Allocate plan: the input's first line is the to-allocate annotation, each
// further line one kubelet container request (its comma-separated device IDs). PlanAllocate and
// PreferReplicas must never crash, and a successful plan must hold one answer per request and a
// remaining value that decodes with no more devices than before.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/strings.h"
#include "deviceplugin/allocate.h"

namespace {

size_t CountDevices(const hami::protocol::PodDevices& pod) {
  size_t n = 0;
  for (const auto& c : pod) n += c.size();
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hami::deviceplugin;
  const std::string input(reinterpret_cast<const char*>(data), size);
  auto lines = hami::Split(input, '\n');
  PodView pod{"ns", "p", "uid", {{"a", false}, {"b", true}}, std::string(lines[0])};
  std::vector<std::vector<std::string>> requests;
  std::vector<int32_t> sizes;
  for (size_t i = 1; i < lines.size() && i < 16; ++i) {
    std::vector<std::string> ids;
    for (auto id : hami::Split(lines[i], ',')) ids.emplace_back(id);
    sizes.push_back(static_cast<int32_t>(ids.size()));
    requests.push_back(std::move(ids));
  }
  int n = 0;
  auto plan = PlanAllocate(pod, requests, AllocateEnv{}, [&] { return std::to_string(++n); });
  if (plan) {
    if (plan->containers.size() != requests.size()) __builtin_trap();
    auto before = hami::protocol::DecodePodDevices(pod.to_allocate);
    auto after = hami::protocol::DecodePodDevices(plan->remaining);
    if (!before || !after) __builtin_trap();
    if (CountDevices(*after) > CountDevices(*before)) __builtin_trap();
    auto prefer = PreferReplicas(*before, requests, sizes);
    if (prefer.size() != requests.size()) __builtin_trap();
  }
  return 0;
}
