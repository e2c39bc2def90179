// charts/hami's node side through helm: the device-config.yaml both binaries load (with
// hami::device's own loader), the device-plugin DaemonSet's mounts, init container and monitor.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "device/config.h"
#include "device/device.h"
#include "device/vendors/nvidia/nvidia_config.h"
#include "render.h"

namespace hami::chart_test {
namespace {

TEST_F(ChartTest, DeviceConfigLoadsAndEqualsTheBuiltInDefaults) {
  const Rendered r = RenderChecked();
  auto config = device::LoadDeviceConfig(r.DeviceConfigYaml());
  ASSERT_TRUE(config.ok()) << config.error();
  // The chart's defaults are the binaries' built-in defaults (both are HAMi's): the same sections
  // (every registered vendor's), and each vendor's backends equal, resource names and keys
  // included.
  const device::DeviceConfig builtin = device::DefaultDeviceConfig();
  EXPECT_EQ(device::nvidia::NvidiaSectionOrDefaults(*config), device::nvidia::NvidiaConfig{});
  std::vector<std::string> chart_sections, builtin_sections;
  for (const auto& [name, text] : config->sections) chart_sections.push_back(name);
  for (const auto& [name, text] : builtin.sections) builtin_sections.push_back(name);
  EXPECT_EQ(chart_sections, builtin_sections);
  const device::Registry from_chart = device::MakeRegistry(*config);
  const device::Registry from_builtin = device::MakeRegistry(builtin);
  ASSERT_EQ(from_chart.All().size(), from_builtin.All().size());
  for (const device::Device* dev : from_builtin.All()) {
    const device::Device* chart_dev = from_chart.Find(dev->VendorKey());
    ASSERT_NE(chart_dev, nullptr) << dev->VendorKey();
    const protocol::VendorInfo& a = chart_dev->Info();
    const protocol::VendorInfo& b = dev->Info();
    EXPECT_EQ(a.count_resource, b.count_resource) << dev->VendorKey();
    EXPECT_EQ(a.memory_resource, b.memory_resource) << dev->VendorKey();
    EXPECT_EQ(a.memory_percentage_resource, b.memory_percentage_resource) << dev->VendorKey();
    EXPECT_EQ(a.core_resource, b.core_resource) << dev->VendorKey();
    EXPECT_EQ(a.register_key, b.register_key) << dev->VendorKey();
    EXPECT_EQ(a.allocated_key, b.allocated_key) << dev->VendorKey();
    EXPECT_EQ(chart_dev->MemoryFactor(), dev->MemoryFactor()) << dev->VendorKey();
  }
  // A vendor is active when its section is present: the chart's default makes every backend
  // HAMi v2.10 ships active (issue 15), Ascend and Iluvatar once per chip.
  const device::Registry registry = device::MakeRegistry(*config);
  for (const char* key :
       {"NVIDIA", "MLU", "DCU", "Metax-GPU", "Metax-SGPU", "Mthreads", "GCU", "Enflame", "kunlun",
        "XPU", "AWSNeuron", "AMD", "Vastai", "Biren", "Ascend910A", "Ascend910B3", "Ascend310P"}) {
    EXPECT_NE(registry.Find(key), nullptr) << key;
  }
  EXPECT_GE(registry.All().size(), 20u);

  const Rendered over = RenderChecked(
      "--set devicePlugin.deviceSplitCount=3 --set devicePlugin.deviceMemoryScaling=1.5 "
      "--set resourceName=example.com/vgpu --set devices.nvidia.gpuCorePolicy=force "
      "--set devicePlugin.runtimeClassName=nvidia");
  auto c = device::LoadDeviceConfig(over.DeviceConfigYaml());
  ASSERT_TRUE(c.ok()) << c.error();
  const device::nvidia::NvidiaConfig nv = device::nvidia::NvidiaSectionOrDefaults(*c);
  EXPECT_EQ(nv.device_split_count, 3);
  EXPECT_DOUBLE_EQ(nv.device_memory_scaling, 1.5);
  EXPECT_EQ(nv.resource_count_name, "example.com/vgpu");
  EXPECT_EQ(nv.gpu_core_policy, "force");
  EXPECT_EQ(nv.runtime_class_name, "nvidia");
  EXPECT_EQ(
      over.Get("DaemonSet", "hami-device-plugin")["spec"]["template"]["spec"]["runtimeClassName"]
          .as<std::string>(),
      "nvidia");

  // device-config.content replaces the file whole.
  const Rendered content =
      RenderChecked("--set-string 'device-config.content=nvidia:\n  deviceSplitCount: 7\n'");
  auto d = device::LoadDeviceConfig(content.DeviceConfigYaml());
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(device::nvidia::NvidiaSectionOrDefaults(*d).device_split_count, 7);
  EXPECT_EQ(d->sections.size(), 1u);

  const Rendered hami = RenderChecked(std::string("-f ") + kHamiValues);
  auto h = device::LoadDeviceConfig(hami.DeviceConfigYaml());
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(device::nvidia::NvidiaSectionOrDefaults(*h), device::nvidia::NvidiaConfig{});
}

TEST_F(ChartTest, DaemonSetMountsWhatThePluginNeeds) {
  const Rendered r = RenderChecked();
  const YAML::Node pod = r.Get("DaemonSet", "hami-device-plugin")["spec"]["template"]["spec"];
  ASSERT_TRUE(pod);
  EXPECT_EQ(pod["nodeSelector"]["gpu"].as<std::string>(), "on");
  std::map<std::string, std::string> host;  // volume name -> host path or configMap name
  for (const auto& v : pod["volumes"]) {
    const std::string name = v["name"].as<std::string>();
    if (v["hostPath"]) host[name] = v["hostPath"]["path"].as<std::string>();
    if (v["configMap"]) host[name] = "configMap:" + v["configMap"]["name"].as<std::string>();
  }
  // mount path in the container -> what is mounted there
  const auto mounts = [&](const YAML::Node& c) {
    std::map<std::string, std::string> out;
    for (const auto& m : c["volumeMounts"]) {
      out[m["mountPath"].as<std::string>()] = host[m["name"].as<std::string>()];
    }
    return out;
  };
  const YAML::Node plugin = Named(pod["containers"], "device-plugin");
  ASSERT_TRUE(plugin);
  const auto cmd = Strings(plugin["command"]);
  ASSERT_FALSE(cmd.empty());
  EXPECT_EQ(cmd[0], "hami-device-plugin");
  EXPECT_TRUE(Contains(cmd, "--config-file=/device-config.yaml"));
  EXPECT_TRUE(Contains(cmd, "--node-config-file=/config/config.json"));
  const auto m = mounts(plugin);
  EXPECT_EQ(m.at("/var/lib/kubelet/device-plugins"), "/var/lib/kubelet/device-plugins");
  EXPECT_EQ(m.at("/usr/local/vgpu"), "/usr/local/vgpu");  // libvgpu.so + containers/ caches
  EXPECT_EQ(m.at("/tmp"), "/tmp");                        // /tmp/vgpulock, the MIG apply lock
  EXPECT_EQ(m.at("/run/nvidia/mps"), "/run/nvidia/mps");  // MPS daemons' pipe and log dirs
  EXPECT_EQ(Named(plugin["env"], "NVIDIA_DRIVER_CAPABILITIES")["value"].as<std::string>(),
            "compute,utility");  // the MPS control daemon needs compute
  EXPECT_EQ(m.at("/config"), "configMap:hami-device-plugin");
  EXPECT_EQ(m.at("/device-config.yaml"), "configMap:hami-scheduler-device");
  EXPECT_EQ(Named(plugin["env"], "HOOK_PATH")["value"].as<std::string>(), "/usr/local");
  EXPECT_EQ(
      Named(plugin["env"], "NODE_NAME")["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(),
      "spec.nodeName");
  EXPECT_TRUE(plugin["securityContext"]["privileged"].as<bool>());

  // libvgpu.so reaches the host before the plugin starts.
  const YAML::Node init = Named(pod["initContainers"], "install-libvgpu");
  ASSERT_TRUE(init);
  EXPECT_EQ(Strings(init["command"]),
            (std::vector<std::string>{"hami-install-libvgpu", "/usr/local/vgpu"}));
  EXPECT_EQ(mounts(init).at("/usr/local/vgpu"), "/usr/local/vgpu");

  // The per-node config.json is JSON.
  const YAML::Node node_cm = r.Get("ConfigMap", "hami-device-plugin");
  const auto node_config =
      nlohmann::json::parse(node_cm["data"]["config.json"].as<std::string>(), nullptr, false);
  ASSERT_FALSE(node_config.is_discarded());
  EXPECT_TRUE(node_config["nodeconfig"].is_array());

  // The monitor, on by default: its container, host caches, the plugin's limits files (it
  // removes those of gone pods) and NodePort 31992.
  const Rendered mon = RenderChecked("");
  const YAML::Node monitor = mon.Container("DaemonSet", "hami-device-plugin", "vgpu-monitor");
  ASSERT_TRUE(monitor);
  EXPECT_EQ(Strings(monitor["command"])[0], "hami-vgpu-monitor");
  EXPECT_EQ(mounts(monitor).at("/usr/local/vgpu/containers"), "/usr/local/vgpu/containers");
  EXPECT_EQ(mounts(monitor).at("/usr/local/vgpu/limits"), "/usr/local/vgpu/limits");
  const YAML::Node svc = mon.Get("Service", "hami-device-plugin-monitor");
  ASSERT_TRUE(svc);
  EXPECT_EQ(svc["spec"]["ports"][0]["nodePort"].as<int>(), 31992);
  EXPECT_EQ(svc["spec"]["ports"][0]["targetPort"].as<int>(), 9394);
  // The monitor's pod informer needs watch, granted only with it (docs/RBAC.md).
  const auto pod_verbs = [](const Rendered& r) {
    return Strings(r.Get("ClusterRole", "hami-device-plugin")["rules"][0]["verbs"]);
  };
  EXPECT_TRUE(Contains(pod_verbs(mon), "watch"));
  EXPECT_FALSE(
      Contains(pod_verbs(RenderChecked("--set devicePlugin.monitor.enabled=false")), "watch"));

  // An external per-node ConfigMap replaces ours.
  const Rendered ext =
      RenderChecked("--set devicePlugin.nodeConfiguration.externalConfigName=my-node-config");
  EXPECT_FALSE(ext.Get("ConfigMap", "hami-device-plugin"));
  EXPECT_EQ(Named(ext.Get("DaemonSet", "hami-device-plugin")["spec"]["template"]["spec"]["volumes"],
                  "deviceconfig")["configMap"]["name"]
                .as<std::string>(),
            "my-node-config");
}

}  // namespace
}  // namespace hami::chart_test
