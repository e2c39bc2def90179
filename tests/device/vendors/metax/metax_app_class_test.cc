// MetaX sGPU app classes (metax-tech.com/sgpu-app-class: online/offline): the fit's mismatch
// rule, the online pod's device preference and its node score, over the per-device counts of
// online and offline pods the usage index keeps (DeviceUsage::pod_tags). Vectors from HAMi v2.10
// pkg/device/metax/sdevice_test.go (TestCheckAppClass, TestMetaxSDevices_Fit,
// TestPrioritizeOnlineDevices, TestScoreOnlineDevices; test names in the comments): each HAMi
// PodInfos list is written as its counts of online and offline pods.
#include <gtest/gtest.h>

#include "device/config.h"
#include "device/device.h"
#include "device/usage_index.h"
#include "device/vendors/metax/metax.h"
#include "support/vendor_test_util.h"

namespace hami::device::metax {
namespace {

using vendor_test::Ptrs;

// A device with `used` slots taken, `online` and `offline` of them by such pods.
struct Dev {
  const char* id = "";
  int32_t used = 0;
  int32_t online = 0;
  int32_t offline = 0;
};

DeviceUsage Row(const Dev& d) {
  DeviceUsage row{.id = d.id,
                  .type = "Metax-SGPU",
                  .vendor = "Metax-SGPU",
                  .health = true,
                  .count = 100,
                  .used = d.used,
                  .totalmem = 128,
                  .totalcore = 100};
  if (d.online > 0) row.pod_tags[std::string(kOnline)] = d.online;
  if (d.offline > 0) row.pod_tags[std::string(kOffline)] = d.offline;
  return row;
}

std::vector<DeviceUsage> Rows(const std::vector<Dev>& devs) {
  std::vector<DeviceUsage> out;
  for (const Dev& d : devs) out.push_back(Row(d));
  return out;
}

StringMap Class(std::string_view c) {
  if (c.empty()) return {};
  return {{std::string(kAppClassKey), std::string(c)}};
}

Registry Load() {
  auto config = LoadDeviceConfig("metax:\n  sgpuTopologyAware: false\n");
  EXPECT_TRUE(config) << config.error();
  auto registry = BuildRegistry(*config);
  EXPECT_TRUE(registry) << registry.error();
  return std::move(*registry);
}

TEST(MetaxAppClass, Fits) {  // TestCheckAppClass
  struct Case {
    const char* name;
    std::string_view request;
    Dev dev;
    bool fits;
  };
  const Case cases[] = {
      {"idle device fit", kOnline, {"GPU-123", 0}, true},
      {"normal task unfit online device", "", {"GPU-123", 1, 1, 0}, false},
      {"normal task unfit offline device", "", {"GPU-123", 1, 0, 1}, false},
      {"normal task fit normal device", "", {"GPU-123", 1}, true},
      {"online task unfit normal device", kOnline, {"GPU-123", 1}, false},
      {"online task fit online/offline device", kOnline, {"GPU-123", 2, 1, 1}, true},
      {"offline task unfit online device", kOffline, {"GPU-123", 2, 1, 1}, false},
      // Ours: an offline pod joins offline pods; an online one joins offline-only devices (it
      // only avoids them when it has a choice).
      {"offline task fit offline device", kOffline, {"GPU-123", 1, 0, 1}, true},
      {"online task fit offline device", kOnline, {"GPU-123", 1, 0, 1}, true},
      {"offline task unfit normal device", kOffline, {"GPU-123", 1}, false},
      // A value other than online/offline reads as none (the webhook refuses it anyway).
      {"other value is a normal task", "Online", {"GPU-123", 1}, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(SgpuAppClassFits(c.request, Row(c.dev)), c.fits) << c.name;
  }
}

TEST(MetaxAppClass, FitReasons) {  // TestMetaxSDevices_Fit
  struct Case {
    const char* name;
    Dev dev;
    std::string_view request;
    std::string_view reason;
  };
  const Case cases[] = {
      {"fit fail: online task, app class unfit", {"dev-0", 1}, kOnline, "1/1 CardAppClassMismatch"},
      {"fit fail: normal task, app class unfit",
       {"dev-0", 1, 1, 0},
       "",
       "1/1 CardAppClassMismatch"},
      {"offline task on a device running an online pod",
       {"dev-0", 2, 1, 1},
       kOffline,
       "1/1 CardAppClassMismatch"},
      {"online task on a device running online pods", {"dev-0", 1, 1, 0}, kOnline, ""},
  };
  for (const Case& c : cases) {
    DeviceUsage row = Row(c.dev);
    row.usedmem = 64;
    row.usedcores = 10;
    DeviceRequest req{.nums = 1, .type = "Metax-SGPU", .memreq = 64, .coresreq = 50};
    FitResult r = SgpuFit({&row}, req, Class(c.request), false);
    EXPECT_EQ(r.fit, c.reason.empty()) << c.name;
    EXPECT_EQ(r.Reason(), c.reason) << c.name;
  }
}

TEST(MetaxAppClass, PrioritizeOnline) {  // TestPrioritizeOnlineDevices (one device asked)
  struct Case {
    const char* name;
    std::vector<Dev> candidates;
    std::string_view want;
  };
  const Case cases[] = {
      {"prioritize idle device",
       {{"GPU-1"},
        {"GPU-2", 0, 1, 0},
        {"GPU-3", 0, 2, 0},
        {"GPU-4", 0, 1, 1},
        {"GPU-5", 0, 2, 1},
        {"GPU-6", 0, 0, 1},
        {"GPU-7", 0, 0, 2}},
       "GPU-1"},
      {"prioritize onlyOnline device",
       {{"GPU-1", 0, 1, 0}, {"GPU-2", 0, 2, 0}, {"GPU-3", 0, 3, 1}, {"GPU-4", 0, 0, 2}},
       "GPU-1"},
      {"prioritize online&offline device",
       {{"GPU-1", 0, 3, 0},
        {"GPU-2", 0, 1, 1},
        {"GPU-3", 0, 2, 1},
        {"GPU-4", 0, 0, 1},
        {"GPU-5", 0, 0, 2}},
       "GPU-2"},
      {"prioritize onlyOffline device", {{"GPU-1", 0, 0, 1}, {"GPU-2", 0, 0, 2}}, "GPU-1"},
  };
  for (const Case& c : cases) {
    std::vector<DeviceUsage> rows = Rows(c.candidates);
    auto best = PrioritizeOnline(Ptrs(rows), 1);
    ASSERT_EQ(best.size(), 1u) << c.name;
    EXPECT_EQ(best[0]->id, c.want) << c.name;
  }
  // The whole order: only-offline devices last; ties keep the scan order.
  std::vector<DeviceUsage> rows = Rows({{"off", 0, 0, 1},
                                        {"two", 0, 2, 0},
                                        {"one-b", 0, 1, 0},
                                        {"one-a", 0, 1, 0},
                                        {"mixed", 0, 1, 3},
                                        {"idle"}});
  std::vector<std::string> order;
  for (const DeviceUsage* d : PrioritizeOnline(Ptrs(rows), 5)) order.push_back(d->id);
  EXPECT_EQ(order, (std::vector<std::string>{"idle", "one-b", "one-a", "mixed", "two"}));
  EXPECT_EQ(PrioritizeOnline(Ptrs(rows), 6).size(), 6u);
}

// Through SgpuFit: only an online pod with more passing devices than asked reorders them; the
// scan runs from the last candidate.
TEST(MetaxAppClass, FitPrefersDevicesForOnlinePods) {
  std::vector<DeviceUsage> rows =
      Rows({{"a", 2, 2, 0}, {"b", 1, 0, 1}, {"c", 2, 1, 1}, {"d", 1, 1, 0}, {"e", 1, 1, 0}});
  DeviceRequest req{.nums = 1, .type = "Metax-SGPU", .memreq = 8, .coresreq = 10};
  auto pick = [&](std::string_view cls, std::vector<const DeviceUsage*> cands) {
    FitResult r = SgpuFit(cands, req, Class(cls), false);
    EXPECT_TRUE(r.fit) << r.Reason();
    return r.devices.empty() ? std::string() : r.devices[0].uuid;
  };
  // Scan order e, d, c, b, a; e and d tie on one online pod: e (met first).
  EXPECT_EQ(pick(kOnline, Ptrs(rows)), "e");
  // Without d and e: c (one online) before a (two) and b (offline only).
  EXPECT_EQ(pick(kOnline, {&rows[0], &rows[1], &rows[2]}), "c");
  EXPECT_EQ(pick(kOnline, {&rows[0], &rows[1]}), "a");
  // An offline pod takes the first passing device of the scan: only b runs no online pod.
  EXPECT_EQ(pick(kOffline, Ptrs(rows)), "b");
  FitResult none = SgpuFit(Ptrs(rows), req, {}, false);
  EXPECT_EQ(none.Reason(), "5/5 CardAppClassMismatch");
}

TEST(MetaxAppClass, OnlineScore) {  // TestScoreOnlineDevices
  struct Case {
    const char* name;
    Dev dev;
    int want;
  };
  const Case cases[] = {
      {"test idle device", {"GPU-123"}, 0},
      {"test only online device", {"GPU-123", 2, 2, 0}, -40},
      {"test only offline device", {"GPU-123", 2, 0, 2}, -200},
      {"test online/offline device", {"GPU-123", 4, 2, 2}, -44},
  };
  const protocol::PodDevices picks = {{{"GPU-123", "Metax-SGPU", 0, 0}}};
  for (const Case& c : cases) {
    EXPECT_EQ(SgpuOnlineScore(picks, {Row(c.dev)}), c.want) << c.name;
  }
  // Only the devices the pod took count, each once.
  std::vector<DeviceUsage> node = Rows({{"g0", 1, 1, 0}, {"g1", 1, 0, 1}, {"g2", 3, 3, 0}});
  EXPECT_EQ(SgpuOnlineScore({{{"g0", "Metax-SGPU", 0, 0}}, {{"g1", "Metax-SGPU", 0, 0}}}, node),
            -20 - 100);
  EXPECT_EQ(SgpuOnlineScore({{{"g2", "Metax-SGPU", 0, 0}}, {{"g2", "Metax-SGPU", 0, 0}}}, node),
            -60);
}

// HAMi ScoreNode: an online pod that took devices scores scoreOnlineDevices, weighted 10000
// under binpack and -10000 under spread; without picks, or for other pods, 0.
TEST(MetaxAppClass, ScoreNode) {
  Registry r = Load();
  const Device& sgpu = *r.Find("Metax-SGPU");
  NodeUsage node{.name = "n", .devices = Rows({{"g0", 1, 1, 0}, {"g1", 2, 0, 2}})};
  protocol::PodDevices on_g0 = {{{"g0", "Metax-SGPU", 8, 0}}};
  protocol::PodDevices on_g1 = {{{"g1", "Metax-SGPU", 8, 0}}};
  protocol::PodDevices none = {{}};
  PodView online{.annotations = Class(kOnline)};
  PodView offline{.annotations = Class(kOffline)};
  auto score = [&](const protocol::PodDevices& picks, NodePolicy policy, const PodView& pod) {
    return sgpu.ScoreNode(
        ScoreContext{.node = &node, .picks = &picks, .policy = policy, .pod = &pod});
  };
  EXPECT_EQ(score(on_g0, NodePolicy::kBinpack, online), -200000);
  EXPECT_EQ(score(on_g1, NodePolicy::kBinpack, online), -2000000);
  EXPECT_EQ(score(on_g0, NodePolicy::kSpread, online), 200000);
  EXPECT_EQ(score(none, NodePolicy::kBinpack, online), 0);
  EXPECT_EQ(score(on_g1, NodePolicy::kBinpack, offline), 0);
}

TEST(MetaxAppClass, UsageTag) {
  Registry r = Load();
  const Device& sgpu = *r.Find("Metax-SGPU");
  EXPECT_EQ(sgpu.UsageTag(Class(kOnline)), "online");
  EXPECT_EQ(sgpu.UsageTag(Class(kOffline)), "offline");
  EXPECT_EQ(sgpu.UsageTag(Class("Online")), "");
  EXPECT_EQ(sgpu.UsageTag({}), "");
  EXPECT_EQ(r.Find("Metax-GPU")->UsageTag(Class(kOnline)), "");
}

// From pod annotations through the usage index to the rows SgpuFit reads: the app classes of
// the pods on each device follow pods added, changed (a new class) and deleted.
TEST(MetaxAppClass, IndexCountsThePodsClasses) {
  Registry r = Load();
  NodeView view{.name = "n1"};
  view.annotations["metax-tech.com/node-gpu-devices"] =
      R"([{"uuid":"GPU-1","totalDevCount":16,"totalCompute":100,"totalVRam":65536,"healthy":true},)"
      R"({"uuid":"GPU-2","totalDevCount":16,"totalCompute":100,"totalVRam":65536,"healthy":true}])";
  auto node = NodeUsageFromView(r, view);
  ASSERT_TRUE(node) << node.error();
  UsageIndex index;
  index.SetNode(*node);
  auto upsert = [&](const std::string& name, std::string_view cls, const std::string& allocated) {
    PodView pod{.name = name, .namespace_name = "ns", .annotations = Class(cls)};
    pod.annotations["hami.io/vgpu-node"] = "n1";
    pod.annotations["hami.io/metax-sgpu-devices-allocated"] = allocated;
    auto a = PodAllocationFromPod(r, pod);
    ASSERT_TRUE(a) << a.error();
    ASSERT_TRUE(a->has_value());
    index.UpsertPod(std::move(**a));
  };
  auto tags = [&](size_t device) { return index.Rows({"n1"}).nodes.at(0).devices.at(device); };
  using Tags = std::map<std::string, int32_t, std::less<>>;
  upsert("on", kOnline, "GPU-1,Metax-SGPU,1024,0:;");
  // Two containers on GPU-1: two entries, as HAMi lists the pod once per device entry.
  upsert("off", kOffline, "GPU-1,Metax-SGPU,1024,10:;GPU-1,Metax-SGPU,1024,10:;");
  upsert("plain", "", "GPU-2,Metax-SGPU,1024,10:;");
  EXPECT_EQ(tags(0).pod_tags, (Tags{{"offline", 2}, {"online", 1}}));
  EXPECT_EQ(tags(0).used, 3);
  EXPECT_TRUE(tags(1).pod_tags.empty());
  EXPECT_EQ(tags(1).used, 1);
  // An offline pod no longer fits GPU-1 (an online pod runs there) nor GPU-2 (ordinary pods).
  DeviceRequest req{.nums = 1, .type = "Metax-SGPU", .memreq = 1024, .coresreq = 10};
  auto rows = index.Rows({"n1"}).nodes.at(0).devices;
  EXPECT_EQ(SgpuFit(Ptrs(rows), req, Class(kOffline), false).Reason(), "2/2 CardAppClassMismatch");
  // "on" becomes offline (its annotation changed): GPU-1 runs offline pods only.
  upsert("on", kOffline, "GPU-1,Metax-SGPU,1024,0:;");
  EXPECT_EQ(tags(0).pod_tags, (Tags{{"offline", 3}}));
  rows = index.Rows({"n1"}).nodes.at(0).devices;
  FitResult fit = SgpuFit(Ptrs(rows), req, Class(kOffline), false);
  ASSERT_TRUE(fit.fit) << fit.Reason();
  EXPECT_EQ(fit.devices[0].uuid, "GPU-1");
  // Deleted pods take their counts with them.
  EXPECT_TRUE(index.RemovePod("ns/off"));
  EXPECT_EQ(tags(0).pod_tags, (Tags{{"offline", 1}}));
  index.ForgetPod("ns/on");
  EXPECT_TRUE(tags(0).pod_tags.empty());
  EXPECT_EQ(tags(0).used, 0);
}

}  // namespace
}  // namespace hami::device::metax
