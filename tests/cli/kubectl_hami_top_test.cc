// kubectl-hami top's parts, without a server: the Prometheus text parser, finding each node's
// monitor pod, joining allocations with measurements, the table and the -o json shape.
#include "cli/kubectl_hami_top.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/time_format.h"

namespace hami::cli {
namespace {

using nlohmann::json;

constexpr const char* kU0 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec";
constexpr const char* kU1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448";
const std::string kRegister =
    R"([{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true},{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}])";
const SystemTime kNow = ParseRfc3339("2024-01-23T04:31:04Z").value().instant;

json Node(const std::string& name) {
  return {{"metadata",
           {{"name", name}, {"annotations", {{"hami.io/node-nvidia-register", kRegister}}}}}};
}

// Two containers: a (kU0 3000 MiB 30%), b (nothing), c (kU1 1000 MiB).
json TrainPod() {
  return {{"metadata",
           {{"name", "train"},
            {"namespace", "default"},
            {"annotations",
             {{"hami.io/vgpu-node", "gpu-1"},
              {"hami.io/vgpu-devices-allocated",
               std::string(kU0) + ",NVIDIA,3000,30:;;" + kU1 + ",NVIDIA,1000,0:;"}}}}},
          {"spec",
           {{"nodeName", "gpu-1"},
            {"containers", {{{"name", "a"}}, {{"name", "b"}}, {{"name", "c"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

json MonitorPod(const std::string& ns, const std::string& name, const std::string& node,
                const std::string& phase, json ports) {
  return {{"metadata",
           {{"name", name},
            {"namespace", ns},
            {"labels", {{"app.kubernetes.io/component", "hami-device-plugin"}}}}},
          {"spec",
           {{"nodeName", node},
            {"containers",
             {{{"name", "device-plugin"}}, {{"name", "vgpu-monitor"}, {"ports", ports}}}}}},
          {"status", {{"phase", phase}}}};
}

std::string Metrics() {
  return std::string(
             "# HELP hami_vgpu_memory_used_bytes vGPU device memory usage in bytes\n"
             "# TYPE hami_vgpu_memory_used_bytes gauge\n"
             "hami_vgpu_memory_used_bytes{container=\"a\",device_uuid=\"") +
         kU0 +
         "\",namespace=\"default\",pod=\"train\",vdevice_index=\"0\"} 1.048576e+09\n"
         "hami_vgpu_memory_limit_bytes{container=\"a\",device_uuid=\"" +
         kU0 +
         "\",namespace=\"default\",pod=\"train\",vdevice_index=\"0\"} 3.145728e+09\n"
         "hami_container_device_utilization_ratio{container=\"a\",device_uuid=\"" +
         kU0 +
         "\",namespace=\"default\",pod=\"train\",vdevice_index=\"0\"} 42\n"
         "hami_host_gpu_utilization_ratio{device_index=\"0\"} 50\n";
}

TEST(KubectlHamiTopMetrics, ParsesTheTextFormat) {
  auto r = ParseMetricsText(
      "# HELP x help\n"
      "\n"
      "x 1\n"
      "y{a=\"1\",b=\"q\\\"u\\\\o\\nte\"} -2.5e+03 1700000000000\n"
      "z{ a = \"\" , } NaN\r\n"
      "w +Inf\n");
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r.value().size(), 4u);
  EXPECT_EQ(r.value()[0].name, "x");
  EXPECT_EQ(r.value()[0].value, 1);
  EXPECT_EQ(r.value()[1].labels.at("b"), "q\"u\\o\nte");
  EXPECT_EQ(r.value()[1].value, -2500);
  EXPECT_EQ(r.value()[2].labels.at("a"), "");
  EXPECT_TRUE(std::isnan(r.value()[2].value));
  EXPECT_TRUE(std::isinf(r.value()[3].value));
}

TEST(KubectlHamiTopMetrics, RefusesMalformedLinesNamingThem) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (const Case& c : {
           Case{"x 1\n{a=\"b\"} 1\n", "metrics line 2: want a metric name"},
           Case{"x{a=\"b} 1\n", "metrics line 1: unterminated value of label a"},
           Case{"x{a=b} 1\n", "metrics line 1: want a quoted value for label a"},
           Case{"x{a=\"1\",a=\"2\"} 1\n", "metrics line 1: label a given twice"},
           Case{"x{a=\"1\" b=\"2\"} 1\n", "metrics line 1: want ',' or '}' after label a"},
           Case{"x one\n", "metrics line 1: want a number, got \"one\""},
           Case{"x 1 2 3\n", "metrics line 1: trailing text \"2 3\""},
       }) {
    auto r = ParseMetricsText(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_TRUE(r.error().starts_with(c.error)) << r.error();
  }
  auto many = ParseMetricsText("a 1\nb 2\nc 3\n", 2);
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.error(), "metrics: more than 2 samples");
}

TEST(KubectlHamiTopMonitors, DevicePluginPodsByNodeWithTheMetricsPort) {
  auto m = FindMonitors({
      MonitorPod("kube-system", "dp-b", "gpu-1", "Pending",
                 {{{"name", "metrics"}, {"containerPort", 9999}}}),
      MonitorPod("kube-system", "dp-a", "gpu-1", "Running",
                 {{{"name", "metrics"}, {"containerPort", 9400}}}),
      MonitorPod("hami", "dp-c", "gpu-2", "Running", {{{"name", "http"}, {"containerPort", 80}}}),
      TrainPod(),  // not a monitor
  });
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m["gpu-1"].pod, "dp-a");  // Running wins
  EXPECT_EQ(m["gpu-1"].port, 9400);
  EXPECT_EQ(m["gpu-1"].ProxyPath(), "/api/v1/namespaces/kube-system/pods/dp-a:9400/proxy/metrics");
  EXPECT_EQ(m["gpu-2"].port, 9394);  // no port named "metrics"
  EXPECT_EQ(m["gpu-2"].ns, "hami");
}

TEST(KubectlHamiTop, JoinsAllocationsWithMeasurements) {
  std::vector<json> pods = {TrainPod(),
                            MonitorPod("kube-system", "dp-1", "gpu-1", "Running",
                                       {{{"name", "metrics"}, {"containerPort", 9394}}})};
  NodeMetrics metrics;
  metrics.emplace("gpu-1", Metrics());
  auto view = BuildTop({Node("gpu-1")}, pods, {}, metrics, kNow);
  ASSERT_TRUE(view.ok()) << view.error();
  ASSERT_EQ(view.value().nodes.size(), 1u);
  const TopNode& n = view.value().nodes[0];
  EXPECT_EQ(n.monitor, "kube-system/dp-1");
  EXPECT_FALSE(n.error);
  ASSERT_EQ(n.rows.size(), 2u);
  EXPECT_EQ(n.rows[0].container, "a");
  EXPECT_EQ(n.rows[0].allocated_memory, 3000);
  EXPECT_EQ(n.rows[0].allocated_cores, 30);
  EXPECT_EQ(n.rows[0].used_memory, 1000);
  EXPECT_EQ(n.rows[0].limit_memory, 3000);
  EXPECT_EQ(n.rows[0].utilization, 42);
  EXPECT_EQ(n.rows[1].container, "c");
  EXPECT_EQ(n.rows[1].allocated_memory, 1000);
  EXPECT_FALSE(n.rows[1].used_memory);  // nothing measured (no process yet)

  EXPECT_EQ(
      TopJson(view.value()),
      std::string(
          R"({"nodes":[{"name":"gpu-1","monitor":"kube-system/dp-1","error":null,"containers":[)") +
          R"({"namespace":"default","pod":"train","container":"a","uuid":")" + kU0 +
          R"(","allocated":{"memory":3000,"cores":30},"used":{"memory":1000,"limit":3000,"utilization":42.0}},)" +
          R"({"namespace":"default","pod":"train","container":"c","uuid":")" + kU1 +
          R"(","allocated":{"memory":1000,"cores":0},"used":null}]}]})"
          "\n");
  std::string table = TopTable(view.value(), {});
  EXPECT_NE(table.find("NODE    NAMESPACE   POD     CONTAINER   UUID"), std::string::npos) << table;
  EXPECT_NE(table.find(std::string("gpu-1   default     train   a           ") + kU0 +
                       "   1000               3000                    30                   42"),
            std::string::npos)
      << table;
  EXPECT_EQ(TopTable(view.value(), {.no_headers = true}).find("NODE"), std::string::npos);
}

TEST(KubectlHamiTop, SaysWhenNoMonitorAnswersAndShowsAllocationsOnly) {
  // gpu-1: no monitor pod; gpu-2: its monitor failed; gpu-3: garbage.
  json train2 = TrainPod();
  train2["metadata"]["name"] = "t2";
  train2["spec"]["nodeName"] = "gpu-2";
  train2["metadata"]["annotations"]["hami.io/vgpu-node"] = "gpu-2";
  std::vector<json> pods = {TrainPod(), train2,
                            MonitorPod("kube-system", "dp-2", "gpu-2", "Running", json::array()),
                            MonitorPod("kube-system", "dp-3", "gpu-3", "Running", json::array())};
  NodeMetrics metrics;
  metrics.emplace("gpu-2", Error{"503 ServiceUnavailable: no endpoints"});
  metrics.emplace("gpu-3", std::string("<html>\n"));
  auto view = BuildTop({Node("gpu-1"), Node("gpu-2"), Node("gpu-3")}, pods, {}, metrics, kNow);
  ASSERT_TRUE(view.ok()) << view.error();
  const auto& nodes = view.value().nodes;
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].error,
            "no monitor pod on the node (label app.kubernetes.io/component=hami-device-plugin)");
  EXPECT_EQ(nodes[0].rows.size(), 2u);  // the allocations still show
  EXPECT_EQ(nodes[1].error, "503 ServiceUnavailable: no endpoints");
  ASSERT_TRUE(nodes[2].error);
  EXPECT_TRUE(nodes[2].error->starts_with("metrics line 1: want a metric name")) << *nodes[2].error;
  std::string table = TopTable(view.value(), {});
  EXPECT_NE(table.find("node gpu-2: no measurements, allocations only: 503 ServiceUnavailable: "
                       "no endpoints\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("\033["), std::string::npos);
  EXPECT_NE(TopTable(view.value(), {.colour = true}).find("\033[33mnode gpu-1: no measurements"),
            std::string::npos);
  // A named node that does not exist is an error.
  auto missing = BuildTop({Node("gpu-1")}, pods, {"nosuch"}, metrics, kNow);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(), "node \"nosuch\": not found");
}

// DRA mode: node-1 publishes GPU-a in a ResourceSlice; claim train-gpu (3000Mi, 30 cores) is
// train's (used by its container main), claim "shared" (two shares: 1Gi + 2000Mi, 10 + 5 cores)
// is a's and b's. The monitor runs in the DRA plugin's pod and reports each claim's region once
// per pod with container="" (docs/MONITOR.md "DRA claims").
json DraPod(const std::string& name, const std::string& claim, std::vector<std::string> users) {
  json containers = json::array();
  for (const auto& c : users) {
    containers.push_back({{"name", c}, {"resources", {{"claims", {{{"name", "gpu"}}}}}}});
  }
  containers.push_back({{"name", "idle"}});
  return {{"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "u-" + name}}},
          {"spec",
           {{"nodeName", "node-1"},
            {"containers", containers},
            {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", claim}}}}}},
          {"status", {{"phase", "Running"}}}};
}

DraObjects DraCluster() {
  const char* driver = "hami-core-gpu.project-hami.io";
  DraObjects dra;
  dra.slices = {
      {{"metadata", {{"name", "node-1-hami-core-gpu-0"}}},
       {"spec",
        {{"driver", driver},
         {"nodeName", "node-1"},
         {"pool", {{"name", "node-1"}, {"generation", 1}, {"resourceSliceCount", 1}}},
         {"devices",
          {{{"name", "hami-gpu-0"},
            {"attributes",
             {{"uuid", {{"string", "GPU-a"}}},
              {"minor", {{"int", 0}}},
              {"productName", {{"string", "NVIDIA A30"}}}}},
            {"capacity", {{"memory", {{"value", "24Gi"}}}, {"cores", {{"value", "100"}}}}},
            {"allowMultipleAllocations", true}}}}}}}};
  auto claim = [&](const std::string& name, json results, json pods) {
    // One element in braces is an array of one under g++, a copy of it under clang.
    if (results.is_object()) results = json::array({results});
    json reserved = json::array();
    for (const auto& p : pods) reserved.push_back({{"resource", "pods"}, {"name", p}});
    return json{
        {"metadata", {{"name", name}, {"namespace", "default"}}},
        {"status",
         {{"allocation", {{"devices", {{"results", results}}}}}, {"reservedFor", reserved}}}};
  };
  auto share = [&](const std::string& id, const std::string& mem, const std::string& cores) {
    return json{{"request", "gpu"}, {"driver", driver},
                {"pool", "node-1"}, {"device", "hami-gpu-0"},
                {"shareID", id},    {"consumedCapacity", {{"memory", mem}, {"cores", cores}}}};
  };
  dra.claims = {
      claim("train-gpu", {share("s-1", "3000Mi", "30")}, {"train"}),
      claim("shared", {share("s-2", "1Gi", "10"), share("s-3", "2000Mi", "5")}, {"a", "b"})};
  return dra;
}

std::string DraMetrics() {
  auto series = [](const std::string& name, const std::string& pod, const std::string& value) {
    return name + "{container=\"\",device_uuid=\"GPU-a\",namespace=\"default\",pod=\"" + pod +
           "\",vdevice_index=\"0\"} " + value + "\n";
  };
  return series("hami_vgpu_memory_used_bytes", "train", "1.048576e+09") +
         series("hami_vgpu_memory_limit_bytes", "train", "3.145728e+09") +
         series("hami_container_device_utilization_ratio", "train", "25") +
         series("hami_vgpu_memory_used_bytes", "a", "5.36870912e+08") +
         series("hami_vgpu_memory_used_bytes", "b", "5.36870912e+08") +
         "hami_dra_vgpu_memory_used_bytes{claim=\"shared\",claim_uid=\"u\",device_uuid=\"GPU-a\","
         "namespace=\"default\",node=\"node-1\",pod=\"a\"} 5.36870912e+08\n";
}

TEST(KubectlHamiTop, DraPodsShowTheirClaimsSharesWithTheMonitorsMeasurements) {
  json monitor = MonitorPod("hami", "hami-dra-plugin-x", "node-1", "Running",
                            {{{"name", "metrics"}, {"containerPort", 9394}}});
  monitor["metadata"]["labels"]["app.kubernetes.io/component"] = "hami-dra-plugin";
  std::vector<json> pods = {DraPod("train", "train-gpu", {"main"}), DraPod("a", "shared", {"c1"}),
                            DraPod("b", "shared", {"c2", "c3"}), monitor};
  NodeMetrics metrics;
  metrics.emplace("node-1", DraMetrics());
  auto view =
      BuildTop({{{"metadata", {{"name", "node-1"}}}}}, pods, {}, metrics, kNow, DraCluster());
  ASSERT_TRUE(view.ok()) << view.error();
  ASSERT_EQ(view.value().nodes.size(), 1u);
  EXPECT_EQ(view.value().nodes[0].monitor, "hami/hami-dra-plugin-x");
  EXPECT_EQ(TopTable(view.value(), {}),
            "NODE     NAMESPACE   POD     CONTAINER   CLAIMS      UUID    MEMORY-USED(MiB)   "
            "MEMORY-ALLOCATED(MiB)   CORES-ALLOCATED(%)   UTILIZATION(%)\n"
            "node-1   default     a       c1          shared      GPU-a   512                "
            "3024                    15                   -\n"
            "node-1   default     b       c2,c3       shared      GPU-a   512                "
            "3024                    15                   -\n"
            "node-1   default     train   main        train-gpu   GPU-a   1000               "
            "3000                    30                   25\n");
  std::string json_text = TopJson(view.value());
  EXPECT_NE(
      json_text.find(
          R"({"namespace":"default","pod":"train","container":"main","uuid":"GPU-a","claims":["train-gpu"],"allocated":{"memory":3000,"cores":30},"used":{"memory":1000,"limit":3000,"utilization":25.0}})"),
      std::string::npos)
      << json_text;
  // Without a monitor, the DRA plugin's label is the one named.
  auto alone = BuildTop({{{"metadata", {{"name", "node-1"}}}}},
                        {DraPod("train", "train-gpu", {"main"})}, {}, {}, kNow, DraCluster());
  ASSERT_TRUE(alone.ok()) << alone.error();
  EXPECT_EQ(alone.value().nodes[0].error,
            "no monitor pod on the node (label app.kubernetes.io/component=hami-dra-plugin)");
  EXPECT_EQ(alone.value().nodes[0].rows.size(), 1u);
}

}  // namespace
}  // namespace hami::cli
