// Issue 27 item 6: DRA mode's claims in hami-vgpu-monitor. hami-dra-plugin prepares each claim
// with one region at <hook>/vgpu/claims/<claimUID>/ (docs/DRA.md "Prepare"); the monitor reads it
// through the same hardened reader as a container's region (docs/SECURITY.md), names the pods
// that use the claim from the ResourceClaim's status.reservedFor, exports HAMi-DRA's allocation
// series and the claim's use (docs/MONITOR.md "DRA claims"), and never removes a claim's files.
#include "monitor/claims.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "common/log.h"
#include "k8s/client.h"
#include "k8s/object.h"
#include "monitor/metrics.h"
#include "monitor/monitor.h"
#include "monitor/region_writer.h"
#include "scheduler/test_env.h"
#include "sim/apiserver/apiserver.h"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;
using k8s::Json;
using testing::kV1;
using testing::RegionWriter;

constexpr const char* kUuid = "GPU-a4d27439-566b-841c-428f-d87e73e4134e";
const SystemTime kNow{std::chrono::seconds(1787306400)};

TEST(ClaimsRead, ClaimUidsAreLettersDigitsAndDashes) {
  EXPECT_TRUE(ValidClaimUid("3f1c6a9e-0000-4000-8000-000000000001"));
  EXPECT_TRUE(ValidClaimUid("abc"));
  for (const char* bad : {"", ".", "..", "a_b", "a/b", "a b", "a.b", "a\n"}) {
    EXPECT_FALSE(ValidClaimUid(bad)) << bad;
  }
  EXPECT_FALSE(ValidClaimUid(std::string(64, 'a')));
}

Json Slice(const std::string& node, const std::string& driver = std::string(kDraDriverName)) {
  return Json::parse(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
      "metadata": {"name": ")" +
                     node + R"(-hami-core-gpu-0"},
      "spec": {"driver": ")" +
                     driver + R"(", "nodeName": ")" + node + R"(",
        "pool": {"name": ")" +
                     node + R"(", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "hami-gpu-1",
          "attributes": {"uuid": {"string": ")" +
                     kUuid + R"("}, "minor": {"int": 1},
                         "brand": {"string": "NVIDIA"}, "productName": {"string": "A30"}},
          "capacity": {"memory": {"value": "24Gi"}, "cores": {"value": "100"}}}]}})");
}

// A claim's status as kube-scheduler and kubelet leave it: allocated on `node`'s pool, reserved
// for `pods`.
Json ClaimStatus(const std::string& node,
                 const std::vector<std::pair<std::string, std::string>>& pods,
                 const std::string& memory = "1Gi", const std::string& cores = "30") {
  Json status = Json::parse(R"({"allocation": {"devices": {"results": [
      {"request": "gpu", "driver": "hami-core-gpu.project-hami.io", "pool": ")" +
                            node + R"(",
       "device": "hami-gpu-1", "shareID": "3f1c6a9e-0000-4000-8000-000000000001",
       "consumedCapacity": {"memory": ")" +
                            memory + R"(", "cores": ")" + cores + R"("}},
      {"request": "gpu", "driver": "other.example.com", "pool": ")" +
                            node + R"(",
       "device": "hami-gpu-1"}]},
      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
          {"key": "metadata.name", "operator": "In", "values": [")" +
                            node + R"("]}]}]}}})");
  status["reservedFor"] = Json::array();
  for (const auto& [name, uid] : pods) {
    status["reservedFor"].push_back({{"resource", "pods"}, {"name", name}, {"uid", uid}});
  }
  return status;
}

TEST(ClaimsRead, ClaimSharesOnThisNodesPoolAndItsPods) {
  Json claim = {{"metadata", {{"uid", "u1"}, {"namespace", "team-a"}, {"name", "c"}}}};
  claim["status"] = ClaimStatus("node-a", {{"p1", "uid-1"}, {"p2", "uid-2"}});
  claim["status"]["reservedFor"].push_back(
      {{"apiGroup", "batch"}, {"resource", "jobs"}, {"name", "j"}, {"uid", "uid-3"}});
  const ClaimInfo info = ReadClaimInfo(claim, "node-a");
  EXPECT_EQ(info.uid, "u1");
  EXPECT_EQ(info.ns, "team-a");
  EXPECT_EQ(info.name, "c");
  ASSERT_EQ(info.shares.size(), 1u);  // the other driver's result is not ours
  EXPECT_EQ(info.shares[0].device, "hami-gpu-1");
  EXPECT_EQ(info.shares[0].memory_bytes, 1073741824.0);
  EXPECT_EQ(info.shares[0].cores, 30.0);
  ASSERT_EQ(info.pods.size(), 2u);  // the Job is not a pod
  EXPECT_EQ(info.pods[0].name, "p1");
  EXPECT_EQ(info.pods[1].uid, "uid-2");
  EXPECT_TRUE(ReadClaimInfo(claim, "node-b").shares.empty());  // another node's pool
  // Wrong JSON types are left out, never thrown.
  claim["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["memory"] = 5;
  claim["status"]["reservedFor"] = "p1";
  const ClaimInfo odd = ReadClaimInfo(claim, "node-a");
  ASSERT_EQ(odd.shares.size(), 1u);
  EXPECT_EQ(odd.shares[0].memory_bytes, -1.0);
  EXPECT_TRUE(odd.pods.empty());
  EXPECT_NO_THROW(ReadClaimInfo(Json("x"), "node-a"));
}

// The informer's cache: identity for every claim, results and consumers for this node's only.
TEST(ClaimsRead, TrimClaimKeepsWhatTheMonitorReads) {
  Json claim = {{"metadata",
                 {{"uid", "u1"},
                  {"namespace", "team-a"},
                  {"name", "c"},
                  {"resourceVersion", "7"},
                  {"managedFields", Json::array({Json::object()})}}},
                {"spec", {{"devices", Json::object()}}}};
  claim["status"] = ClaimStatus("node-a", {{"p1", "uid-1"}});
  claim["status"]["allocation"]["devices"]["results"].push_back({{"driver", 5}, {"pool", true}});
  const Json mine = TrimClaim(claim, "node-a");
  EXPECT_EQ(
      mine["metadata"],
      Json({{"uid", "u1"}, {"namespace", "team-a"}, {"name", "c"}, {"resourceVersion", "7"}}));
  EXPECT_FALSE(mine.contains("spec"));
  ASSERT_EQ(mine["status"]["allocation"]["devices"]["results"].size(), 1u);
  EXPECT_EQ(mine["status"]["reservedFor"], claim["status"]["reservedFor"]);
  const ClaimInfo a = ReadClaimInfo(claim, "node-a"), b = ReadClaimInfo(mine, "node-a");
  ASSERT_EQ(b.shares.size(), 1u);
  EXPECT_EQ(b.shares[0].memory_bytes, a.shares[0].memory_bytes);
  ASSERT_EQ(b.pods.size(), 1u);
  EXPECT_EQ(b.pods[0].name, "p1");
  const Json other = TrimClaim(claim, "node-b");
  EXPECT_EQ(other, Json({{"metadata", mine["metadata"]}}));
  EXPECT_EQ(TrimClaim(Json("x"), "node-a"), Json::object());
}

TEST(ClaimsRead, PoolDevicesOfThisNodeAndDriverOnly) {
  const std::vector<k8s::ObjectRef> slices = {
      std::make_shared<const Json>(Slice("node-a")), std::make_shared<const Json>(Slice("node-b")),
      std::make_shared<const Json>(Slice("node-a", "gpu.nvidia.com")),
      std::make_shared<const Json>(Json::array())};
  const std::vector<DraDevice> devices = ReadPoolDevices(slices, "node-a");
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].name, "hami-gpu-1");
  EXPECT_EQ(devices[0].uuid, kUuid);
  EXPECT_EQ(devices[0].type, "NVIDIA-A30");
  EXPECT_EQ(devices[0].index, "1");
  EXPECT_EQ(devices[0].memory_bytes, 25769803776.0);
  EXPECT_EQ(devices[0].cores, 100.0);
}

RegionUsage Usage(uint64_t used, uint64_t sm) {
  RegionUsage r;
  r.version = 1;
  DeviceUsage d;
  d.uuid = kUuid;
  d.limit = 1073741824;
  d.total = used;
  d.sm_util = sm;
  r.devices.push_back(d);
  r.device_index.push_back(0);
  return r;
}

TEST(RenderMetrics, DraClaimSeries) {
  MetricsInput in;
  in.node = "node-a";
  in.dra_devices = {{"hami-gpu-1", kUuid, "NVIDIA-A30", "1", 25769803776.0, 100}};
  // Two pods share one claim with a region; a second claim on the same GPU without a consumer
  // and without a region yet (only allocation); a claim whose region outlived its API object.
  ClaimUsage shared;
  shared.claim = {
      "u1", "team-a", "c1", {{"hami-gpu-1", 1073741824.0, 30}}, {{"p1", ""}, {"p2", ""}}};
  shared.has_region = true;
  shared.region = Usage(524288000, 25);
  ClaimUsage idle;
  idle.claim = {"u2", "team-a", "c2", {{"hami-gpu-1", 2147483648.0, 20}}, {}};
  ClaimUsage orphan;
  orphan.claim.uid = "u3";
  orphan.has_region = true;
  orphan.region = Usage(1048576, 0);
  in.claims = {shared, idle, orphan};
  const std::string text = RenderMetrics(in, false, kNow);
  const std::string dev =
      R"({device_index="1",device_name="hami-gpu-1",device_type="NVIDIA-A30",device_uuid=")" +
      std::string(kUuid) + R"(",node="node-a"})";
  for (const std::string& line : std::vector<std::string>{
           "# HELP hami_dra_gpu_memory_limit_bytes Device memory limit for a certain GPU\n"
           "# TYPE hami_dra_gpu_memory_limit_bytes gauge\n"
           "hami_dra_gpu_memory_limit_bytes" +
               dev + " 2.5769803776e+10\n",
           "# HELP hami_dra_gpu_core_limit_ratio Device core limit for a certain GPU\n"
           "# TYPE hami_dra_gpu_core_limit_ratio gauge\n"
           "hami_dra_gpu_core_limit_ratio" +
               dev + " 1\n",
           "# HELP hami_dra_gpu_memory_allocated_bytes Device memory allocated for a certain GPU\n"
           "# TYPE hami_dra_gpu_memory_allocated_bytes gauge\n"
           "hami_dra_gpu_memory_allocated_bytes" +
               dev + " 3.221225472e+09\n",
           "# HELP hami_dra_gpu_core_allocated_ratio Device core allocated for a certain GPU\n"
           "# TYPE hami_dra_gpu_core_allocated_ratio gauge\n"
           "hami_dra_gpu_core_allocated_ratio" +
               dev + " 0.5\n",
           "# HELP hami_dra_vgpu_memory_allocated_bytes vGPU Device memory allocated for a "
           "container\n"
           "# TYPE hami_dra_vgpu_memory_allocated_bytes gauge\n"
           "hami_dra_vgpu_memory_allocated_bytes{device_uuid=\"" +
               std::string(kUuid) +
               "\",namespace=\"team-a\",node=\"node-a\",pod=\"p1\"} 1.073741824e+09\n"
               "hami_dra_vgpu_memory_allocated_bytes{device_uuid=\"" +
               std::string(kUuid) +
               "\",namespace=\"team-a\",node=\"node-a\",pod=\"p2\"} 1.073741824e+09\n",
           "hami_dra_vgpu_core_allocated_ratio{device_uuid=\"" + std::string(kUuid) +
               "\",namespace=\"team-a\",node=\"node-a\",pod=\"p1\"} 0.3\n",
           "# HELP hami_dra_vgpu_memory_used_bytes vGPU Device memory used by a claim\n"
           "# TYPE hami_dra_vgpu_memory_used_bytes gauge\n"
           "hami_dra_vgpu_memory_used_bytes{claim=\"\",claim_uid=\"u3\",device_uuid=\"" +
               std::string(kUuid) +
               "\",namespace=\"\",node=\"node-a\",pod=\"\"} 1.048576e+06\n"
               "hami_dra_vgpu_memory_used_bytes{claim=\"c1\",claim_uid=\"u1\",device_uuid=\"" +
               std::string(kUuid) +
               "\",namespace=\"team-a\",node=\"node-a\",pod=\"p1\"} 5.24288e+08\n"
               "hami_dra_vgpu_memory_used_bytes{claim=\"c1\",claim_uid=\"u1\",device_uuid=\"" +
               std::string(kUuid) +
               "\",namespace=\"team-a\",node=\"node-a\",pod=\"p2\"} 5.24288e+08\n",
           "# HELP hami_dra_vgpu_core_used_ratio vGPU Device SM utilization of a claim\n"
           "# TYPE hami_dra_vgpu_core_used_ratio gauge\n",
           "hami_dra_vgpu_core_used_ratio{claim=\"c1\",claim_uid=\"u1\",device_uuid=\"" +
               std::string(kUuid) + "\",namespace=\"team-a\",node=\"node-a\",pod=\"p2\"} 0.25\n",
           // HAMi's container series of the claim's region, once per pod, container="".
           "hami_vgpu_memory_used_bytes{container=\"\",device_uuid=\"" + std::string(kUuid) +
               "\",namespace=\"team-a\",pod=\"p1\",vdevice_index=\"0\",zone=\"vGPU\"} "
               "5.24288e+08\n",
           "hami_vgpu_memory_limit_bytes{container=\"\",device_uuid=\"" + std::string(kUuid) +
               "\",namespace=\"team-a\",pod=\"p2\",vdevice_index=\"0\",zone=\"vGPU\"} "
               "1.073741824e+09\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n--- in ---\n" << text;
  }
  // A claim without a consumer has no container series (pod="" twice would be a duplicate).
  EXPECT_EQ(text.find("hami_container_device_utilization_ratio{container=\"\",device_uuid=\"" +
                      std::string(kUuid) + "\",namespace=\"\",pod=\"\""),
            std::string::npos)
      << text;
  // No consumer, no per-pod allocation series; no region, no use series.
  EXPECT_EQ(text.find("claim=\"c2\""), std::string::npos) << text;
  EXPECT_EQ(text.find("pod=\"\"} 2.147483648e+09"), std::string::npos) << text;
  // A share without consumedCapacity took the whole device.
  idle.claim.shares[0] = {"hami-gpu-1", -1, -1};
  in.claims = {idle};
  const std::string whole = RenderMetrics(in, false, kNow);
  EXPECT_NE(whole.find("hami_dra_gpu_core_allocated_ratio" + dev + " 1\n"), std::string::npos)
      << whole;
  // Without DRA input nothing of it is rendered.
  EXPECT_EQ(RenderMetrics(MetricsInput{}, false, kNow), "");
}

// Polls `cond` until it holds or 30 s pass (informers apply watch events on their threads).
bool Eventually(const std::function<bool()>& cond) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

RegionWriter Region(uint64_t used, uint64_t sm = 25) {
  RegionWriter w(kV1);
  w.Devices(1).Uuid(0, kUuid).Limit(0, 1ull << 30).ProcNum(1);
  w.Slot(0, 1, 0, 1).Used(0, 0, 0, 0, used, used).SmUtil(0, 0, sm);
  return w;
}

class MonitorClaimsTest : public scheduler::testing::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    if (HasFatalFailure()) return;
    char dir[] = "/tmp/hami-monitor-claims-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    hook_ = dir;
  }
  void TearDown() override {
    if (monitor_) monitor_->Stop();
    std::error_code ec;
    fs::remove_all(hook_, ec);
  }
  void StartMonitor(const Clock* clock = nullptr) {
    MonitorOptions o;
    o.node_name = "node-a";
    o.hook_path = hook_;
    o.metrics_bind = "127.0.0.1:0";
    o.mig_apply_lock = hook_ + "/mig-apply.lock";
    o.clock = clock;
    monitor_ = std::make_unique<Monitor>(*client_, o);
    auto port = monitor_->Start();
    ASSERT_TRUE(port.ok()) << port.error();
    port_ = *port;
    ASSERT_TRUE(Eventually([&] { return monitor_->synced(); }));
  }
  // A claim created and then allocated through /status; returns its UID.
  std::string CreateClaim(const std::string& name,
                          const std::vector<std::pair<std::string, std::string>>& pods) {
    Json claim = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata", {{"name", name}, {"namespace", "default"}}},
        {"spec",
         {{"devices",
           {{"requests",
             {{{"name", "gpu"},
               {"exactly", {{"deviceClassName", "hami-core-gpu.project-hami.io"}}}}}}}}}}};
    auto created = client_->Create(k8s::resources::kResourceClaims, "default", claim);
    EXPECT_TRUE(created) << created.error().ToString();
    if (!created) return "";
    Json allocated = *created;
    allocated["status"] = ClaimStatus("node-a", pods);
    auto updated = client_->UpdateStatus(k8s::resources::kResourceClaims, allocated);
    EXPECT_TRUE(updated) << updated.error().ToString();
    return updated ? (*updated)["metadata"]["uid"].get<std::string>() : "";
  }
  std::string ClaimDir(const std::string& uid) {
    std::string d = hook_ + "/claims/" + uid;
    fs::create_directories(d);
    return d;
  }
  std::string Scrape() {
    httplib::Client http("127.0.0.1", port_);
    auto res = http.Get("/metrics");
    EXPECT_TRUE(res);
    return res ? res->body : "";
  }
  static std::string UsedLine(const std::string& claim, const std::string& uid,
                              const std::string& pod, const char* value) {
    return "hami_dra_vgpu_memory_used_bytes{claim=\"" + claim + "\",claim_uid=\"" + uid +
           "\",device_uuid=\"" + kUuid + "\",namespace=\"" + (claim.empty() ? "" : "default") +
           "\",node=\"node-a\",pod=\"" + pod + "\"} " + value + "\n";
  }

  std::unique_ptr<Monitor> monitor_;
  std::string hook_;
  int port_ = 0;
};

// reservedFor names the pods; a claim not in the API, or without consumers, still shows its use.
TEST_F(MonitorClaimsTest, ReservedForNamesThePodsOfAClaimsRegion) {
  ASSERT_TRUE(client_->Create(k8s::resources::kResourceSlices, "", Slice("node-a")));
  const std::string shared = CreateClaim("shared", {{"p1", "uid-p1"}, {"p2", "uid-p2"}});
  const std::string unused = CreateClaim("unused", {});
  const std::string orphan = "0b7e1d9c-0000-4000-8000-00000000dead";
  ASSERT_TRUE(Region(1048576).Save(ClaimDir(shared) + "/" + shared + ".cache"));
  ASSERT_TRUE(Region(2097152).Save(ClaimDir(unused) + "/" + unused + ".cache"));
  ASSERT_TRUE(Region(3145728).Save(ClaimDir(orphan) + "/" + orphan + ".cache"));
  StartMonitor();
  EXPECT_TRUE(monitor_->Scan().empty());  // claims are not containers of pods
  // The first scan that finds a claim's directory starts the claim and slice informers.
  EXPECT_EQ(monitor_->ScanClaims().size(), 3u);
  ASSERT_TRUE(Eventually([&] { return monitor_->claims_synced(); }));
  const std::vector<ClaimUsage> claims = monitor_->ScanClaims();
  ASSERT_EQ(claims.size(), 3u);
  const std::string text = Scrape();
  EXPECT_NE(text.find(UsedLine("shared", shared, "p1", "1.048576e+06")), std::string::npos) << text;
  EXPECT_NE(text.find(UsedLine("shared", shared, "p2", "1.048576e+06")), std::string::npos);
  EXPECT_NE(text.find(UsedLine("unused", unused, "", "2.097152e+06")), std::string::npos);
  EXPECT_NE(text.find(UsedLine("", orphan, "", "3.145728e+06")), std::string::npos);
  EXPECT_NE(
      text.find("hami_vgpu_memory_used_bytes{container=\"\",device_uuid=\"" + std::string(kUuid) +
                "\",namespace=\"default\",pod=\"p2\",vdevice_index=\"0\",zone=\"vGPU\"} "
                "1.048576e+06\n"),
      std::string::npos);
  EXPECT_NE(text.find("hami_dra_vgpu_core_allocated_ratio{device_uuid=\"" + std::string(kUuid) +
                      "\",namespace=\"default\",node=\"node-a\",pod=\"p1\"} 0.3\n"),
            std::string::npos);
  // Two claims of 1Gi and 30 cores each on hami-gpu-1.
  EXPECT_NE(text.find("hami_dra_gpu_memory_allocated_bytes{device_index=\"1\",device_name=\"hami-"
                      "gpu-1\",device_type=\"NVIDIA-A30\",device_uuid=\"" +
                      std::string(kUuid) + "\",node=\"node-a\"} 2.147483648e+09\n"),
            std::string::npos)
      << text;
  // A new consumer reaches the series at the next scrape.
  auto claim = client_->Get(k8s::resources::kResourceClaims, "default", "unused");
  ASSERT_TRUE(claim);
  Json reserved = *claim;
  reserved["status"]["reservedFor"] =
      Json::array({{{"resource", "pods"}, {"name", "p3"}, {"uid", "uid-p3"}}});
  ASSERT_TRUE(client_->UpdateStatus(k8s::resources::kResourceClaims, reserved));
  ASSERT_TRUE(Eventually([&] {
    return Scrape().find(UsedLine("unused", unused, "p3", "2.097152e+06")) != std::string::npos;
  }));
}

// Regions of claims that are not this node's (allocated on another node's pool, e.g. a hook
// directory several nodes share in hami-sim) are not this node's series; claims without a
// consumer get no container series, so two of them on one GPU never make a duplicate series.
TEST_F(MonitorClaimsTest, OtherNodesClaimsAreLeftOutAndUnconsumedOnesMakeNoDuplicate) {
  ASSERT_TRUE(client_->Create(k8s::resources::kResourceSlices, "", Slice("node-a")));
  const std::string mine = CreateClaim("mine", {{"p1", "uid-p1"}});
  Json theirs = {{"apiVersion", "resource.k8s.io/v1"},
                 {"kind", "ResourceClaim"},
                 {"metadata", {{"name", "theirs"}, {"namespace", "default"}}},
                 {"spec",
                  {{"devices",
                    {{"requests",
                      {{{"name", "gpu"},
                        {"exactly", {{"deviceClassName", "hami-core-gpu.project-hami.io"}}}}}}}}}}};
  auto created = client_->Create(k8s::resources::kResourceClaims, "default", theirs);
  ASSERT_TRUE(created);
  Json allocated = *created;
  allocated["status"] = ClaimStatus("node-b", {{"q1", "uid-q1"}});
  auto updated = client_->UpdateStatus(k8s::resources::kResourceClaims, allocated);
  ASSERT_TRUE(updated);
  const std::string other = (*updated)["metadata"]["uid"].get<std::string>();
  const std::string orphan1 = "0b7e1d9c-0000-4000-8000-0000000000a1";
  const std::string orphan2 = "0b7e1d9c-0000-4000-8000-0000000000a2";
  for (const std::string& uid : {mine, other, orphan1, orphan2}) {
    ASSERT_TRUE(Region(1048576).Save(ClaimDir(uid) + "/" + uid + ".cache"));
  }
  StartMonitor();
  monitor_->ScanClaims();  // starts the claim informers
  ASSERT_TRUE(Eventually([&] { return monitor_->claims_synced(); }));
  ASSERT_TRUE(Eventually([&] { return monitor_->ScanClaims().size() == 3u; }));
  const std::string text = Scrape();
  EXPECT_EQ(text.find(other), std::string::npos) << text;
  EXPECT_NE(text.find(UsedLine("mine", mine, "p1", "1.048576e+06")), std::string::npos) << text;
  EXPECT_NE(text.find(UsedLine("", orphan1, "", "1.048576e+06")), std::string::npos);
  EXPECT_NE(text.find(UsedLine("", orphan2, "", "1.048576e+06")), std::string::npos);
  // The container family has the consumed claim's pod only: no pod="" series at all.
  EXPECT_EQ(text.find("hami_vgpu_memory_used_bytes{container=\"\",device_uuid=\"" +
                      std::string(kUuid) + "\",namespace=\"\",pod=\"\""),
            std::string::npos)
      << text;
  std::set<std::string> seen;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::string series = line.substr(0, line.rfind(' '));
    EXPECT_TRUE(seen.insert(series).second) << "duplicate series " << series;
  }
}

// A node without claims/ (device-plugin mode) never lists ResourceClaims.
TEST_F(MonitorClaimsTest, NoClaimsDirectoryNoClaimInformers) {
  StartMonitor();
  EXPECT_TRUE(monitor_->ScanClaims().empty());
  EXPECT_FALSE(monitor_->claims_synced());
  EXPECT_EQ(Scrape().find("hami_dra_"), std::string::npos);
}

// The container side of a claim is as hostile as a container's directory: a symlink as the
// region, a FIFO, a directory whose name is not a claim UID, a symlinked claim directory. Each
// is skipped (never followed, never blocking); the good claim is served.
TEST_F(MonitorClaimsTest, HostileClaimDirectoriesAreSkipped) {
  char out[] = "/tmp/hami-monitor-claims-outside-XXXXXX";
  ASSERT_NE(mkdtemp(out), nullptr);
  const std::string outside = out;
  ASSERT_TRUE(Region(7340032).Save(outside + "/secret.cache"));
  const std::string good = "aaaaaaaa-0000-4000-8000-000000000001";
  ASSERT_TRUE(Region(1048576).Save(ClaimDir(good) + "/" + good + ".cache"));
  const std::string link = "aaaaaaaa-0000-4000-8000-000000000002";
  fs::create_symlink(outside + "/secret.cache", ClaimDir(link) + "/" + link + ".cache");
  const std::string fifo = "aaaaaaaa-0000-4000-8000-000000000003";
  ASSERT_EQ(mkfifo((ClaimDir(fifo) + "/" + fifo + ".cache").c_str(), 0600), 0);
  ASSERT_TRUE(Region(5242880).Save(ClaimDir("not_a_uid") + "/x.cache"));
  ASSERT_TRUE(Region(6291456).Save(ClaimDir("..cache") + "/x.cache"));
  fs::create_directory_symlink(outside, hook_ + "/claims/aaaaaaaa-0000-4000-8000-000000000004");
  StartMonitor();
  const std::vector<ClaimUsage> claims = monitor_->ScanClaims();
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0].claim.uid, good);
  ASSERT_EQ(claims[0].region.devices.size(), 1u);
  EXPECT_EQ(claims[0].region.devices[0].total, 1048576u);
  const std::string text = Scrape();
  for (const char* v : {"7.340032e+06", "5.242880e+06", "5.24288e+06", "6.291456e+06"}) {
    EXPECT_EQ(text.find(v), std::string::npos) << v << "\n" << text;
  }
  // The feedback writes only the good claim's region, never through the link.
  const auto before = fs::last_write_time(outside + "/secret.cache");
  EXPECT_EQ(monitor_->Feedback(), 1);
  EXPECT_EQ(fs::last_write_time(outside + "/secret.cache"), before);
  std::error_code ec;
  fs::remove_all(outside, ec);
}

// The monitor's log lines, captured while a LogCapture lives.
std::mutex g_log_mu;
std::vector<std::string> g_log;
class LogCapture {
 public:
  LogCapture() {
    std::lock_guard<std::mutex> lock(g_log_mu);
    g_log.clear();
    log::SetSink([](std::string_view line) {
      std::lock_guard<std::mutex> l(g_log_mu);
      g_log.emplace_back(line);
    });
  }
  ~LogCapture() { log::SetSink(nullptr); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  // The lines holding every one of `parts`.
  static int Count(const std::vector<std::string>& parts) {
    std::lock_guard<std::mutex> lock(g_log_mu);
    int n = 0;
    for (const std::string& line : g_log) {
      bool all = true;
      for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
      n += all ? 1 : 0;
    }
    return n;
  }
};

// A directory that is not a claim's is logged once with its path; a DRA node's missing
// containers/ is not a problem (it is on a node with neither claims/ nor containers/).
TEST_F(MonitorClaimsTest, SkippedNamesAreLoggedOnceAndNoContainersDirIsQuietInDraMode) {
  StartMonitor();
  {
    LogCapture capture;
    EXPECT_TRUE(monitor_->ScanClaims().empty());
    EXPECT_EQ(LogCapture::Count({"cannot open \"" + hook_ + "/containers\""}), 1);
  }
  const std::string good = "aaaaaaaa-0000-4000-8000-000000000001";
  ASSERT_TRUE(Region(1048576).Save(ClaimDir(good) + "/" + good + ".cache"));
  ASSERT_TRUE(Region(1).Save(ClaimDir("not_a_uid") + "/x.cache"));
  LogCapture capture;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(monitor_->ScanClaims().size(), 1u);
  EXPECT_EQ(LogCapture::Count({"skipping \"" + hook_ + "/claims/not_a_uid\"", "not a claim UID"}),
            1);
  EXPECT_EQ(LogCapture::Count({"/containers"}), 0);
}

// hami-dra-plugin's Unprepare owns claims/ and claim-limits/: the clean-up of gone pods' files
// never removes them, however long ago their claim went.
TEST_F(MonitorClaimsTest, CleanupNeverRemovesClaims) {
  FakeClock clock;
  const std::string uid = "0b7e1d9c-0000-4000-8000-000000000001";
  ASSERT_TRUE(Region(1).Save(ClaimDir(uid) + "/" + uid + ".cache"));
  fs::create_directories(hook_ + "/claim-limits");
  std::ofstream(hook_ + "/claim-limits/" + uid + ".limits") << "CUDA_DEVICE_MEMORY_LIMIT_0=1g\n";
  // Even a name shaped like a gone pod's <podUID>_<container> under claims/ stays.
  ASSERT_TRUE(Region(1).Save(ClaimDir("0b7e1d9c-gone_main") + "/x.cache"));
  fs::create_directories(hook_ + "/containers");
  StartMonitor(&clock);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(monitor_->Cleanup(), 0);
    clock.Advance(std::chrono::hours(1));
  }
  EXPECT_TRUE(fs::exists(hook_ + "/claims/" + uid + "/" + uid + ".cache"));
  EXPECT_TRUE(fs::exists(hook_ + "/claims/0b7e1d9c-gone_main/x.cache"));
  EXPECT_TRUE(fs::exists(hook_ + "/claim-limits/" + uid + ".limits"));
}

}  // namespace
}  // namespace hami::monitor
