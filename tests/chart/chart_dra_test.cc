// charts/hami's DRA mode (dra.enabled, docs/DRA.md "Deploying"): the hami-dra-plugin DaemonSet
// in place of the device plugin's (its flags, environment and host mounts), its RBAC rules
// exactly, and the DeviceClass with and without an extended resource name.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "render.h"

namespace hami::chart_test {
namespace {

// "apiGroups|resources|verbs" per rule, lists joined with commas.
std::vector<std::string> Rules(const YAML::Node& role) {
  std::vector<std::string> out;
  for (const auto& rule : At(role, {"rules"})) {
    std::string line;
    for (const char* key : {"apiGroups", "resources", "verbs"}) {
      std::string joined;
      for (const std::string& s : Strings(rule[key])) joined += (joined.empty() ? "" : ",") + s;
      line += (line.empty() ? "" : "|") + joined;
    }
    out.push_back(line);
  }
  return out;
}

TEST_F(ChartTest, DraDisabledByDefaultRendersNothingOfIt) {
  const Rendered r = RenderChecked();
  EXPECT_FALSE(r.Get("DaemonSet", "hami-dra-plugin"));
  EXPECT_FALSE(r.Get("ServiceAccount", "hami-dra-plugin"));
  EXPECT_FALSE(r.Get("ClusterRole", "hami-dra-plugin"));
  EXPECT_FALSE(r.Get("ClusterRoleBinding", "hami-dra-plugin"));
  EXPECT_TRUE(r.OfKind("DeviceClass").empty());
  EXPECT_TRUE(r.Get("DaemonSet", "hami-device-plugin"));
}

TEST_F(ChartTest, DraEnabledRendersThePluginDaemonSetInPlaceOfTheDevicePlugin) {
  const Rendered r = RenderChecked("--set dra.enabled=true --set dra.extraArgs={-v=4}");
  // The two modes cannot share a node's GPUs: no device-plugin DaemonSet.
  EXPECT_FALSE(r.Get("DaemonSet", "hami-device-plugin"));
  ASSERT_EQ(r.OfKind("DaemonSet").size(), 1u);
  const YAML::Node ds = r.Get("DaemonSet", "hami-dra-plugin");
  ASSERT_TRUE(ds);
  EXPECT_EQ(ds["metadata"]["namespace"].as<std::string>(), "kube-system");
  const YAML::Node pod = ds["spec"]["template"]["spec"];
  EXPECT_EQ(pod["serviceAccountName"].as<std::string>(), "hami-dra-plugin");
  EXPECT_EQ(pod["priorityClassName"].as<std::string>(), "system-node-critical");
  // Where the device plugin would run.
  EXPECT_EQ(pod["nodeSelector"]["gpu"].as<std::string>(), "on");

  const YAML::Node c = r.Container("DaemonSet", "hami-dra-plugin", "dra-plugin");
  ASSERT_TRUE(c);
  EXPECT_EQ(c["image"].as<std::string>(), "localhost/hami:0.1.0");
  EXPECT_EQ(
      Strings(c["command"]),
      (std::vector<std::string>{
          "hami-dra-plugin", "--config-file=/device-config.yaml",
          "--kubelet-registrar-directory-path=/var/lib/kubelet/plugins_registry",
          "--kubelet-plugins-directory-path=/var/lib/kubelet/plugins", "--cdi-root=/var/run/cdi",
          "--device-plugin-socket=/var/lib/kubelet/device-plugins/nvidia-gpu.sock", "-v=4"}));
  EXPECT_EQ(
      At(Named(c["env"], "NODE_NAME"), {"valueFrom", "fieldRef", "fieldPath"}).as<std::string>(),
      "spec.nodeName");
  EXPECT_EQ(Named(c["env"], "HOOK_PATH")["value"].as<std::string>(), "/usr/local");
  EXPECT_TRUE(c["securityContext"]["privileged"].as<bool>());

  // Every host path at its host path (kubelet dials the plugin's socket, the CDI spec names
  // the claims' files by host path); the device plugin's directory read-only.
  std::map<std::string, std::string> host_of_volume;
  for (const auto& v : pod["volumes"]) {
    if (v["hostPath"])
      host_of_volume[v["name"].as<std::string>()] = v["hostPath"]["path"].as<std::string>();
  }
  struct Mount {
    std::string path;
    std::string host;
    bool read_only;
  };
  const std::vector<Mount> want = {
      {"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins_registry", false},
      {"/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins", false},
      {"/var/run/cdi", "/var/run/cdi", false},
      {"/usr/local/vgpu", "/usr/local/vgpu", false},
      {"/var/lib/kubelet/device-plugins", "/var/lib/kubelet/device-plugins", true},
  };
  for (const Mount& m : want) {
    YAML::Node found;
    for (const auto& vm : c["volumeMounts"]) {
      if (vm["mountPath"].as<std::string>() == m.path) found.reset(vm);
    }
    ASSERT_TRUE(found) << m.path;
    EXPECT_EQ(host_of_volume[found["name"].as<std::string>()], m.host) << m.path;
    EXPECT_EQ(found["readOnly"] && found["readOnly"].as<bool>(), m.read_only) << m.path;
  }
  // The device config: the scheduler's ConfigMap, as the device plugin gets it.
  YAML::Node config;
  for (const auto& vm : c["volumeMounts"]) {
    if (vm["mountPath"].as<std::string>() == "/device-config.yaml") config.reset(vm);
  }
  ASSERT_TRUE(config);
  EXPECT_EQ(config["subPath"].as<std::string>(), "device-config.yaml");
  EXPECT_EQ(Named(pod["volumes"], config["name"].as<std::string>())["configMap"]["name"]
                .as<std::string>(),
            "hami-scheduler-device");
  EXPECT_TRUE(r.Get("ConfigMap", "hami-scheduler-device"));
  // libvgpu.so and ld.so.preload placed where the claims' CDI specs mount them from.
  const YAML::Node init = Named(pod["initContainers"], "install-libvgpu");
  ASSERT_TRUE(init);
  EXPECT_EQ(Strings(init["command"]),
            (std::vector<std::string>{"hami-install-libvgpu", "/usr/local/vgpu"}));

  // global.gpuHookPath moves the hook directory and HOOK_PATH together.
  const Rendered hook = RenderChecked("--set dra.enabled=true --set global.gpuHookPath=/opt/hami");
  const YAML::Node hc = hook.Container("DaemonSet", "hami-dra-plugin", "dra-plugin");
  EXPECT_EQ(Named(hc["env"], "HOOK_PATH")["value"].as<std::string>(), "/opt/hami");
  const YAML::Node hpod = hook.Get("DaemonSet", "hami-dra-plugin")["spec"]["template"]["spec"];
  EXPECT_EQ(Named(hpod["volumes"], "vgpu")["hostPath"]["path"].as<std::string>(), "/opt/hami/vgpu");
}

TEST_F(ChartTest, DraRbacIsExactlyWhatThePluginCalls) {
  // Without the monitor: the plugin's calls only.
  const Rendered alone =
      RenderChecked("--set dra.enabled=true --set devicePlugin.monitor.enabled=false");
  EXPECT_EQ(Rules(alone.Get("ClusterRole", "hami-dra-plugin")),
            (std::vector<std::string>{
                "resource.k8s.io|resourceslices|list,create,update,delete",
                "resource.k8s.io|resourceclaims|get",
            }));
  EXPECT_FALSE(alone.Container("DaemonSet", "hami-dra-plugin", "vgpu-monitor"));
  // With it (the default): the monitor's informers over pods, claims and slices, its Events.
  const Rendered r = RenderChecked("--set dra.enabled=true");
  EXPECT_TRUE(r.Get("ServiceAccount", "hami-dra-plugin"));
  EXPECT_EQ(Rules(r.Get("ClusterRole", "hami-dra-plugin")),
            (std::vector<std::string>{
                "resource.k8s.io|resourceslices|list,create,update,delete,watch",
                "resource.k8s.io|resourceclaims|get,list,watch",
                "pods|list,watch",
                "events|create,patch",
            }));
  const YAML::Node binding = r.Get("ClusterRoleBinding", "hami-dra-plugin");
  ASSERT_TRUE(binding);
  EXPECT_EQ(binding["roleRef"]["name"].as<std::string>(), "hami-dra-plugin");
  EXPECT_EQ(binding["subjects"][0]["kind"].as<std::string>(), "ServiceAccount");
  EXPECT_EQ(binding["subjects"][0]["name"].as<std::string>(), "hami-dra-plugin");
  EXPECT_EQ(binding["subjects"][0]["namespace"].as<std::string>(), "kube-system");
}

// DRA mode's monitor: a container of the DRA plugin's pods reading <gpuHookPath>/vgpu (claims/
// included), and the monitor Service selecting those pods.
TEST_F(ChartTest, DraModeRunsTheMonitorBesideThePlugin) {
  const Rendered r = RenderChecked("--set dra.enabled=true --set global.gpuHookPath=/opt/hami");
  const YAML::Node m = r.Container("DaemonSet", "hami-dra-plugin", "vgpu-monitor");
  ASSERT_TRUE(m);
  EXPECT_EQ(Strings(m["command"])[0], "hami-vgpu-monitor");
  std::map<std::string, std::string> env;
  for (const auto& e : m["env"]) {
    if (e["value"]) env[e["name"].as<std::string>()] = e["value"].as<std::string>();
  }
  EXPECT_EQ(env["HOOK_PATH"], "/opt/hami/vgpu");
  std::map<std::string, std::string> mounts;
  for (const auto& v : m["volumeMounts"]) {
    mounts[v["name"].as<std::string>()] = v["mountPath"].as<std::string>();
  }
  EXPECT_EQ(mounts["vgpu"], "/opt/hami/vgpu");
  EXPECT_EQ(mounts["hosttmp"], "/tmp");
  const YAML::Node svc = r.Get("Service", "hami-device-plugin-monitor");
  ASSERT_TRUE(svc);
  EXPECT_EQ(svc["spec"]["selector"]["app.kubernetes.io/component"].as<std::string>(),
            "hami-dra-plugin");
  EXPECT_EQ(
      RenderChecked()
          .Get("Service",
               "hami-device-plugin-monitor")["spec"]["selector"]["app.kubernetes.io/component"]
          .as<std::string>(),
      "hami-device-plugin");
}

// The webhook in DRA mode (hami-scheduler --dra): it makes ResourceClaimTemplates, and only
// with dra.enabled may it.
TEST_F(ChartTest, DraModeSwitchesTheWebhookAndLetsItMakeClaimTemplates) {
  auto has_dra_flag = [](const Rendered& r) {
    const YAML::Node c = r.Container("Deployment", "hami-scheduler", "vgpu-scheduler-extender");
    for (const std::string& a : Strings(c["command"])) {
      if (a == "--dra") return true;
    }
    for (const std::string& a : Strings(c["args"])) {
      if (a == "--dra") return true;
    }
    return false;
  };
  const std::string templates = "resource.k8s.io|resourceclaimtemplates|create";
  const Rendered off = RenderChecked();
  EXPECT_FALSE(has_dra_flag(off));
  auto rules = Rules(off.Get("ClusterRole", "hami-scheduler"));
  EXPECT_EQ(std::count(rules.begin(), rules.end(), templates), 0);
  const Rendered on = RenderChecked("--set dra.enabled=true");
  EXPECT_TRUE(has_dra_flag(on));
  rules = Rules(on.Get("ClusterRole", "hami-scheduler"));
  EXPECT_EQ(std::count(rules.begin(), rules.end(), templates), 1);
}

// DRA mode has no extender: the cluster's kube-scheduler allocates claims, so the scheduler pod
// runs hami-scheduler (the webhook) without its own kube-scheduler and extender config.
TEST_F(ChartTest, DraModeDeploysNoKubeSchedulerWithTheExtender) {
  const Rendered off = RenderChecked();
  EXPECT_TRUE(off.Container("Deployment", "hami-scheduler", "kube-scheduler"));
  EXPECT_TRUE(off.Get("ConfigMap", "hami-scheduler"));
  const Rendered on = RenderChecked("--set dra.enabled=true");
  EXPECT_FALSE(on.Container("Deployment", "hami-scheduler", "kube-scheduler"));
  EXPECT_TRUE(on.Container("Deployment", "hami-scheduler", "vgpu-scheduler-extender"));
  EXPECT_FALSE(on.Get("ConfigMap", "hami-scheduler"));  // the KubeSchedulerConfiguration
  EXPECT_TRUE(on.Get("ConfigMap", "hami-scheduler-device"));
  const YAML::Node volumes =
      on.Get("Deployment", "hami-scheduler")["spec"]["template"]["spec"]["volumes"];
  for (const auto& v : volumes) EXPECT_NE(v["name"].as<std::string>(), "scheduler-config");
}

TEST_F(ChartTest, DraDeviceClassSelectsTheDriverWithAnOptionalExtendedResource) {
  const Rendered r = RenderChecked("--set dra.enabled=true");
  const YAML::Node dc = r.Get("DeviceClass", "hami-core-gpu.project-hami.io");
  ASSERT_TRUE(dc);
  EXPECT_EQ(dc["apiVersion"].as<std::string>(), "resource.k8s.io/v1");
  ASSERT_EQ(dc["spec"]["selectors"].size(), 1u);
  EXPECT_EQ(dc["spec"]["selectors"][0]["cel"]["expression"].as<std::string>(),
            "device.driver == \"hami-core-gpu.project-hami.io\"");
  EXPECT_FALSE(dc["spec"]["extendedResourceName"]);

  const Rendered ext =
      RenderChecked("--set dra.enabled=true --set dra.extendedResourceName=nvidia.com/gpu");
  EXPECT_EQ(ext.Get("DeviceClass", "hami-core-gpu.project-hami.io")["spec"]["extendedResourceName"]
                .as<std::string>(),
            "nvidia.com/gpu");

  // The schema refuses what the API server would (an extended resource name is domain/name).
  const CommandResult bad =
      RunCommand(ShellQuote(helm_) + " template hami " + kChart +
                 " --set dra.enabled=true --set dra.extendedResourceName=gpu");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("dra.extendedResourceName: Does not match pattern"), std::string::npos)
      << bad.err;
  const CommandResult typo =
      RunCommand(ShellQuote(helm_) + " template hami " + kChart + " --set dra.enable=true");
  EXPECT_NE(typo.exit_code, 0);
  EXPECT_NE(typo.err.find("dra: Additional property enable is not allowed"), std::string::npos)
      << typo.err;
}

}  // namespace
}  // namespace hami::chart_test
