// charts/hami as a replacement for HAMi v2.10's chart (docs/MIGRATION.md), through helm: one
// registry setting moves every image, for our values and HAMi's; HAMi's container names; one
// gpuHookPath moves every hook path. tests/chart/migration_test.sh swaps a live release.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "render.h"

namespace hami::chart_test {
namespace {

std::vector<std::string> Names(const YAML::Node& list) {
  std::vector<std::string> out;
  for (const auto& n : list) out.push_back(n["name"].as<std::string>());
  return out;
}

// Every container the chart can deploy is on: the monitor (default), the toolkit wait and the
// kube-scheduler.
constexpr const char* kAllContainers = " --set devicePlugin.gpuOperatorToolkitReady.enabled=true";

TEST_F(ChartTest, OneRegistryMovesEveryImageForOurValuesAndHamis) {
  for (const std::string& values : {std::string(), std::string(" -f ") + kHamiValues}) {
    const Rendered r =
        RenderChecked(values + kAllContainers + " --set global.imageRegistry=reg.example:5000");
    const std::vector<std::string> images = r.Images();
    EXPECT_GE(images.size(), 5u) << values;
    for (const auto& image : images) {
      EXPECT_NE(image.rfind("reg.example:5000/", 0), std::string::npos)
          << image << " with `" << values << "`";
      EXPECT_EQ(image.find("localhost/"), std::string::npos) << image << " with `" << values << "`";
    }
    // HAMi's projecthami/hami with HAMi's global.imageTag (v2.10.0) is our image at our tag.
    EXPECT_EQ(
        r.Container("DaemonSet", "hami-device-plugin", "vgpu-monitor")["image"].as<std::string>(),
        "reg.example:5000/hami:0.1.0")
        << values;
  }
}

TEST_F(ChartTest, HamisImageKeysMapToOursAndExplicitTagsAreKept) {
  const std::string hami = std::string("-f ") + kHamiValues;
  // Naming our repository in HAMi's values does not pick up HAMi's global.imageTag v2.10.0.
  const Rendered repo =
      Render(hami + " --set global.imageRegistry=r.io --set devicePlugin.image.repository=hami");
  EXPECT_EQ(
      repo.Container("DaemonSet", "hami-device-plugin", "device-plugin")["image"].as<std::string>(),
      "r.io/hami:0.1.0");
  // A tag set on the image is used as given, HAMi's image name or not.
  const Rendered tagged = Render(hami +
                                 " --set global.imageRegistry=r.io --set devicePlugin.image.tag=v9"
                                 " --set scheduler.extender.image.tag=0.1.0-rc1");
  EXPECT_EQ(tagged.Container("DaemonSet", "hami-device-plugin", "device-plugin")["image"]
                .as<std::string>(),
            "r.io/hami:v9");
  EXPECT_EQ(tagged.Container("Deployment", "hami-scheduler", "vgpu-scheduler-extender")["image"]
                .as<std::string>(),
            "r.io/hami:0.1.0-rc1");
  // Our own global.imageTag (no v) applies to every image of ours.
  const Rendered ours = Render("--set global.imageTag=0.2.0");
  for (const auto& image : ours.Images()) {
    if (image.find("kube-scheduler") == std::string::npos) {
      EXPECT_EQ(image, "localhost/hami:0.2.0");
    }
  }
}

TEST_F(ChartTest, ContainersCarryHamisNames) {
  for (const std::string& values : {std::string(), std::string("-f ") + kHamiValues}) {
    const Rendered r = Render(values);
    const YAML::Node dep = r.Get("Deployment", "hami-scheduler");
    EXPECT_EQ(Names(dep["spec"]["template"]["spec"]["containers"]),
              (std::vector<std::string>{"kube-scheduler", "vgpu-scheduler-extender"}))
        << values;
    const YAML::Node ds = r.Get("DaemonSet", "hami-device-plugin");
    EXPECT_EQ(Names(ds["spec"]["template"]["spec"]["containers"]),
              (std::vector<std::string>{"device-plugin", "vgpu-monitor"}))
        << values;
    // The selectors are HAMi's, so the Deployment and DaemonSet are patched in place (a
    // selector is immutable).
    EXPECT_EQ(
        dep["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"].as<std::string>(),
        "hami-scheduler");
    EXPECT_EQ(
        ds["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"].as<std::string>(),
        "hami-device-plugin");
    EXPECT_EQ(ds["spec"]["selector"]["matchLabels"].size(), 3u);
  }
}

// global.gpuHookPath alone moves the lib hostPath, the plugin's and the monitor's HOOK_PATH, the
// installer's target and the monitor's containers and limits directories, with our values and
// with HAMi's (which spell out libPath and ctrPath at their /usr/local defaults).
TEST_F(ChartTest, GpuHookPathMovesEveryHookPath) {
  for (const std::string& values : {std::string(), std::string("-f ") + kHamiValues}) {
    const Rendered r = RenderChecked(values + " --set global.gpuHookPath=/opt/hami");
    const YAML::Node pod = r.Get("DaemonSet", "hami-device-plugin")["spec"]["template"]["spec"];
    std::map<std::string, std::string> host;
    for (const auto& v : pod["volumes"]) {
      if (v["hostPath"])
        host[v["name"].as<std::string>()] = v["hostPath"]["path"].as<std::string>();
    }
    EXPECT_EQ(host["lib"], "/opt/hami/vgpu") << values;
    EXPECT_EQ(host["ctrs"], "/opt/hami/vgpu/containers") << values;
    EXPECT_EQ(host["limits"], "/opt/hami/vgpu/limits") << values;
    std::vector<std::string> bad;
    for (const char* key : {"initContainers", "containers"}) {
      for (const auto& c : pod[key]) {
        const std::string name = c["name"].as<std::string>();
        for (const auto& m : c["volumeMounts"]) {
          const std::string path = m["mountPath"].as<std::string>();
          const std::string vol = m["name"].as<std::string>();
          if (path.find("/usr/local") != std::string::npos) bad.push_back(name + " mount " + path);
          // Hook volumes are mounted where they are on the host: the plugin hands kubelet the
          // paths it sees.
          if (vol == "lib" || vol == "ctrs" || vol == "limits") {
            EXPECT_EQ(path, host[vol]) << name << " " << vol << " " << values;
          }
        }
        for (const auto& e : c["env"]) {
          if (e["value"] && e["value"].as<std::string>().find("/usr/local") != std::string::npos) {
            bad.push_back(name + " env " + e["name"].as<std::string>());
          }
        }
        for (const auto& a : c["command"]) {
          if (a.as<std::string>().find("/usr/local") != std::string::npos) {
            bad.push_back(name + " arg " + a.as<std::string>());
          }
        }
      }
    }
    EXPECT_TRUE(bad.empty()) << values << ":\n" << Joined(bad);
    EXPECT_EQ(Named(Named(pod["containers"], "device-plugin")["env"], "HOOK_PATH")["value"]
                  .as<std::string>(),
              "/opt/hami");
    EXPECT_EQ(Named(Named(pod["containers"], "vgpu-monitor")["env"], "HOOK_PATH")["value"]
                  .as<std::string>(),
              "/opt/hami/vgpu");
    EXPECT_EQ(Strings(Named(pod["initContainers"], "install-libvgpu")["command"]),
              (std::vector<std::string>{"hami-install-libvgpu", "/opt/hami/vgpu"}));
  }
}

// HAMi v2.11's platform.openshift: an SCC for the device plugin and `use` of it granted to the
// device plugin's ServiceAccount only; or, with create=false, a binding to OpenShift's ClusterRole
// for an existing SCC. Nothing of it without the switch.
TEST_F(ChartTest, OpenShiftGrantsTheDevicePluginItsSccOnly) {
  EXPECT_TRUE(Render().OfKind("SecurityContextConstraints").empty());
  EXPECT_FALSE(Render().Get("RoleBinding", "hami-device-plugin-scc"));
  const Rendered r = Render("--set platform.openshift=true");
  const YAML::Node scc = r.Get("SecurityContextConstraints", "hami-device-plugin");
  ASSERT_TRUE(scc);
  EXPECT_TRUE(scc["allowPrivilegedContainer"].as<bool>());
  EXPECT_TRUE(scc["allowHostPID"].as<bool>());
  EXPECT_TRUE(scc["allowHostDirVolumePlugin"].as<bool>());
  EXPECT_EQ(Strings(scc["allowedCapabilities"]), (std::vector<std::string>{"SYS_ADMIN"}));
  const YAML::Node rule = r.Get("ClusterRole", "hami-device-plugin-scc")["rules"][0];
  EXPECT_EQ(Strings(rule["verbs"]), (std::vector<std::string>{"use"}));
  EXPECT_EQ(Strings(rule["resourceNames"]), (std::vector<std::string>{"hami-device-plugin"}));
  const YAML::Node binding = r.Get("RoleBinding", "hami-device-plugin-scc");
  EXPECT_EQ(binding["roleRef"]["name"].as<std::string>(), "hami-device-plugin-scc");
  ASSERT_EQ(binding["subjects"].size(), 1u);
  EXPECT_EQ(binding["subjects"][0]["name"].as<std::string>(), "hami-device-plugin");

  const Rendered existing = Render(
      "--set platform.openshift=true --set openshift.securityContextConstraints.create=false "
      "--set openshift.securityContextConstraints.name=privileged");
  EXPECT_TRUE(existing.OfKind("SecurityContextConstraints").empty());
  EXPECT_EQ(
      existing.Get("RoleBinding", "hami-device-plugin-scc")["roleRef"]["name"].as<std::string>(),
      "system:openshift:scc:privileged");
}

}  // namespace
}  // namespace hami::chart_test
