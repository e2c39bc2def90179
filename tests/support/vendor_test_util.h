// What the vendor backends' unit tests (tests/device/vendors/<vendor>/) build again and again: a
// NodeView, containers with limits, rows and requests of the shared shapes, a recording
// AdmissionEdit, a table of Fit cases, the registry of a device-config.yaml, and the checks of
// the to-allocate / allocated keys. Each vendor's test keeps its own upstream vectors; only the
// scaffolding lives here. Wire strings (annotation keys) stay in the tests, so a changed key
// fails them. Include as "support/vendor_test_util.h".
#ifndef HAMI_TESTS_SUPPORT_VENDOR_TEST_UTIL_H_
#define HAMI_TESTS_SUPPORT_VENDOR_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "device/config.h"
#include "device/device.h"
#include "device/schedule.h"

namespace hami::device::vendor_test {

// ---- nodes and containers ----

// A node named `name` with only a register annotation set (or several).
inline NodeView Node(StringMap annotations, std::string name = "n") {
  return NodeView{.name = std::move(name), .annotations = std::move(annotations)};
}

// A node that registers through status.capacity (and, when given, status.allocatable).
inline NodeView CapacityNode(StringMap capacity, StringMap allocatable = {},
                             std::string name = "n") {
  return NodeView{.name = std::move(name),
                  .capacity = std::move(capacity),
                  .allocatable = std::move(allocatable)};
}

// A container named `name` with these resource limits and requests.
inline ContainerView NamedCtr(std::string name, StringMap limits, StringMap requests = {}) {
  return ContainerView{
      .name = std::move(name), .limits = std::move(limits), .requests = std::move(requests)};
}

// A container named "main" (the name the upstream vectors' error messages carry).
inline ContainerView Ctr(StringMap limits, StringMap requests = {}) {
  return NamedCtr("main", std::move(limits), std::move(requests));
}

// A pod of these containers with these annotations.
inline PodView Pod(std::vector<ContainerView> containers, StringMap annotations = {},
                   std::string name = "p") {
  PodView pod;
  pod.name = std::move(name);
  pod.annotations = std::move(annotations);
  pod.containers = std::move(containers);
  return pod;
}

// The JSON of pod "p" whose one container "c" has these resource limits (and the pod these
// annotations), for FakeEdit::ForPod.
inline nlohmann::json PodWith(nlohmann::json limits,
                              nlohmann::json annotations = nlohmann::json::object()) {
  using nlohmann::json;
  return {{"metadata", {{"name", "p"}, {"annotations", std::move(annotations)}}},
          {"spec",
           {{"containers",
             json::array({{{"name", "c"}, {"resources", {{"limits", std::move(limits)}}}}})}}}};
}

// ---- device rows and requests ----

// A healthy-by-default row of the share shape (cambricon, hygon, iluvatar, mthreads): cores out
// of 100, `count` time slices, `used` of them taken.
inline DeviceUsage ShareDev(std::string type, std::string id, int32_t used, int32_t totalmem,
                            int32_t usedcores, bool health = true, int32_t count = 100,
                            std::string mode = "") {
  return DeviceUsage{.id = std::move(id),
                     .type = type,
                     .vendor = std::move(type),
                     .health = health,
                     .mode = std::move(mode),
                     .count = count,
                     .used = used,
                     .totalmem = totalmem,
                     .usedmem = 0,
                     .totalcore = 100,
                     .usedcores = usedcores};
}

// A request of the share shape: `nums` devices of `type`, memory in MiB (or a percentage of
// totalmem when mem is 0) and cores.
inline DeviceRequest ShareReq(std::string type, int32_t nums, int32_t mem, int32_t cores,
                              int32_t pct = 0) {
  return DeviceRequest{.nums = nums,
                       .type = std::move(type),
                       .memreq = mem,
                       .mem_percentage = pct,
                       .coresreq = cores};
}

// A request for `nums` whole devices of `type` (biren, vastai).
inline DeviceRequest WholeReq(std::string type, int32_t nums) {
  return DeviceRequest{.nums = nums, .type = std::move(type), .mem_percentage = 100};
}

// Fit's candidate list over `devs` (which must outlive it).
inline std::vector<const DeviceUsage*> Ptrs(const std::vector<DeviceUsage>& devs) {
  std::vector<const DeviceUsage*> out;
  for (const auto& d : devs) out.push_back(&d);
  return out;
}

// The uuids Fit chose, in pick order.
inline std::vector<std::string> Ids(const FitResult& r) {
  std::vector<std::string> ids;
  for (const auto& d : r.devices) ids.push_back(d.uuid);
  return ids;
}

// ---- the webhook's edit ----

// An AdmissionEdit over a pod (spec.containers[0] under review) or a bare container (the pod is
// {}), which applies every edit to its JSON and records it.
class FakeEdit : public AdmissionEdit {
 public:
  enum Kind { kSet, kAppend, kSetPod };
  struct Edit {
    Kind kind;
    std::vector<std::string> path;
    nlohmann::json value;
  };

  // `container` is the container under review; the pod is {}.
  explicit FakeEdit(nlohmann::json container) : ctr_(std::move(container)) {}
  explicit FakeEdit(const char* container) : FakeEdit(nlohmann::json::parse(container)) {}
  // The pod's spec.containers[0] is under review.
  static FakeEdit ForPod(nlohmann::json pod) {
    FakeEdit e(nlohmann::json::object());
    e.pod_ = std::move(pod);
    e.in_pod_ = true;
    return e;
  }

  const nlohmann::json& Pod() const override { return pod_; }
  // The pod as edited so far, for the test to read (operator[] included).
  nlohmann::json& pod() { return pod_; }
  const nlohmann::json& Container() const override {
    return in_pod_ ? pod_["spec"]["containers"][0] : ctr_;
  }
  bool IsInitContainer() const override { return false; }
  void Set(const std::vector<std::string>& path, const nlohmann::json& value) override {
    *At(ContainerRef(), path) = value;
    edits_.push_back({kSet, path, value});
  }
  void Append(const std::vector<std::string>& path, const nlohmann::json& value) override {
    At(ContainerRef(), path)->push_back(value);
    edits_.push_back({kAppend, path, value});
  }
  void SetPod(const std::vector<std::string>& path, const nlohmann::json& value) override {
    *At(pod_, path) = value;
    edits_.push_back({kSetPod, path, value});
  }

  // Every edit, in order.
  const std::vector<Edit>& edits() const { return edits_; }
  // How many edits were made, in all.
  int Count() const { return static_cast<int>(edits_.size()); }
  // How many edits of `kind` were made.
  int Count(Kind kind) const {
    int n = 0;
    for (const Edit& e : edits_) n += e.kind == kind;
    return n;
  }
  // The edits of `kind`, in order.
  std::vector<Edit> Of(Kind kind) const {
    std::vector<Edit> out;
    for (const Edit& e : edits_) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }
  // The edits of `kind` by path, "/"-joined ("/resources/limits/x"); the last one wins.
  std::map<std::string, nlohmann::json> ByPath(Kind kind) const {
    std::map<std::string, nlohmann::json> out;
    for (const Edit& e : edits_) {
      if (e.kind != kind) continue;
      std::string key;
      for (const auto& p : e.path) key += "/" + p;
      out[key] = e.value;
    }
    return out;
  }
  // The container Set edits by path (ByPath(kSet)).
  std::map<std::string, nlohmann::json> Sets() const { return ByPath(kSet); }

 private:
  nlohmann::json& ContainerRef() { return in_pod_ ? pod_["spec"]["containers"][0] : ctr_; }
  static nlohmann::json* At(nlohmann::json& root, const std::vector<std::string>& path) {
    nlohmann::json* at = &root;
    for (const auto& k : path) at = &(*at)[k];
    return at;
  }

  nlohmann::json pod_ = nlohmann::json::object();
  nlohmann::json ctr_;
  bool in_pod_ = false;
  std::vector<Edit> edits_;
};

// ---- Fit tables ----

// One upstream Fit vector: the candidates, the request, the pod's annotations and the mutex
// policy; whether it fits, the uuids chosen (checked when it fits) and the reason.
struct FitCase {
  const char* name;
  std::vector<DeviceUsage> devices;
  DeviceRequest request;
  StringMap annos;
  bool mutex;
  bool want_fit;
  std::vector<std::string> want_ids;
  const char* want_reason;
};

// Whether a fitting case's reason is checked too (it is always checked when the case does not
// fit), as each upstream table does.
enum class ReasonCheck { kAlways, kWhenUnfit };

// Runs every case through `dev.Fit` with a pod carrying the case's annotations.
inline void ExpectFits(const Device& dev, const std::vector<FitCase>& cases, ReasonCheck check) {
  for (const auto& c : cases) {
    PodView pod;
    pod.annotations = c.annos;
    GpuPolicy policy;
    policy.mutex = c.mutex;
    FitResult r = dev.Fit(Ptrs(c.devices), c.request, FitContext{.pod = &pod, .policy = policy});
    EXPECT_EQ(r.fit, c.want_fit) << c.name;
    if (check == ReasonCheck::kAlways || !c.want_fit) {
      EXPECT_EQ(r.Reason(), c.want_reason) << c.name;
    }
    if (c.want_fit) {
      EXPECT_EQ(Ids(r), c.want_ids) << c.name;
    }
  }
}

// ---- register errors ----

// A register annotation value a decoder must refuse, and its whole error.
struct RegisterErrorCase {
  const char* name;
  const char* value;
  std::string error;
};

// `decode(value)` (a Result) fails with exactly each case's error.
template <typename Decode>
void ExpectRegisterErrors(const Decode& decode, const std::vector<RegisterErrorCase>& cases) {
  for (const auto& c : cases) {
    auto r = decode(std::string(c.value));
    ASSERT_FALSE(r) << c.name;
    EXPECT_EQ(r.error(), c.error) << c.name;
  }
}

// The id rule of the JSON register decoder (protocol::DecodeNodeRegister with require_id):
// an entry without an id, with a null or an empty one, and an id listed twice, each refused with
// the decoder's error after `prefix` (the vendor's own, e.g. "annotation <register key>: ").
inline std::vector<RegisterErrorCase> IdRuleCases(const std::string& prefix) {
  const std::string at = prefix + "node register: device ";
  return {
      {"missing id", R"([{"id":"a","count":1},{"count":1}])", at + R"(1: field "id": missing)"},
      {"null id", R"([{"ID":null,"count":1}])", at + R"(0: field "id": missing)"},
      {"empty id", R"([{"id":"","count":1}])", at + R"(0: field "id": must not be empty, got "")"},
      {"duplicate id", R"([{"id":"a"},{"Id":"a"}])",
       at + R"(1: field "id": duplicate "a" (a GPU listed twice))"},
  };
}

// ---- configuration ----

// The registry MakeRegistry builds from "nvidia: {}\n" + `sections` (a load error fails the
// test).
inline Registry ChartRegistry(const std::string& sections) {
  auto config = LoadDeviceConfig("nvidia: {}\n" + sections);
  EXPECT_TRUE(config) << config.error();
  return config ? MakeRegistry(*config) : Registry{};
}

// The scheduler's way in: with `sections` in device-config.yaml, BuildRegistry finds every one
// of `keys`; with only the nvidia section, none of them.
inline void ExpectActiveWithSection(const std::string& sections,
                                    const std::vector<std::string>& keys) {
  auto config = LoadDeviceConfig("nvidia: {}\n" + sections);
  ASSERT_TRUE(config) << config.error();
  auto registry = BuildRegistry(*config);
  ASSERT_TRUE(registry) << registry.error();
  auto without = BuildRegistry(*LoadDeviceConfig("nvidia: {}\n"));
  ASSERT_TRUE(without) << without.error();
  for (const auto& key : keys) {
    EXPECT_NE(registry->Find(key), nullptr) << key;
    EXPECT_EQ(without->Find(key), nullptr) << key;
  }
}

// ---- the allocate keys ----

// Schedules `pod` onto `node` alone and returns the decision's allocation annotations; no
// decision, or no chosen node, fails the test and returns {}.
inline StringMap ScheduleAnnotations(const Registry& registry, const NodeUsage& node,
                                     const PodView& pod) {
  auto d = Schedule(registry, pod, std::vector<NodeUsage>{node}, {}, ScheduleOptions{});
  EXPECT_TRUE(d) << d.error();
  if (!d) return {};
  EXPECT_NE(d->Chosen(), nullptr);
  if (d->Chosen() == nullptr) return {};
  auto annos = AllocationAnnotations(registry, *d);
  return StringMap(annos.begin(), annos.end());
}

// Both allocate keys (spelled out by the test) hold `want`.
inline void ExpectAllocateKeys(const StringMap& annos, const std::string& to_allocate_key,
                               const std::string& allocated_key, const std::string& want) {
  auto value = [&](const std::string& key) {
    auto it = annos.find(key);
    return it == annos.end() ? std::string("<absent>") : it->second;
  };
  EXPECT_EQ(value(to_allocate_key), want) << to_allocate_key;
  EXPECT_EQ(value(allocated_key), want) << allocated_key;
}

}  // namespace hami::device::vendor_test

#endif  // HAMI_TESTS_SUPPORT_VENDOR_TEST_UTIL_H_
