// charts/hami's scheduler side through helm: lint, the components, images, hami-scheduler's
// flags (each one known to the binary), the KubeSchedulerConfiguration's extender and
// managedResources, replicas and leader election, and every override rendering valid objects
// with no `*` in any rule and no projecthami image. Skips when helm is absent.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "render.h"

namespace hami::chart_test {
namespace {

TEST_F(ChartTest, LintPassesWithOurValuesAndHamisValuesFile) {
  for (const std::string& args : {std::string(), std::string("-f ") + kHamiValues}) {
    const CommandResult r =
        RunCommand(ShellQuote(helm_) + " lint --strict " + kChart + " " + args + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << "helm lint " << args << ":\n" << r.out << r.err;
  }
}

TEST_F(ChartTest, DefaultValuesRenderEveryComponent) {
  const Rendered r = RenderChecked();
  for (const auto& [kind, name] : std::vector<std::pair<std::string, std::string>>{
           {"Deployment", "hami-scheduler"},
           {"DaemonSet", "hami-device-plugin"},
           {"ConfigMap", "hami-scheduler"},
           {"ConfigMap", "hami-scheduler-device"},
           {"ConfigMap", "hami-device-plugin"},
           {"Secret", "hami-scheduler-tls"},
           {"Service", "hami-scheduler"},
           {"PodDisruptionBudget", "hami-scheduler"},
           {"MutatingWebhookConfiguration", "hami-webhook"},
           {"ServiceAccount", "hami-scheduler"},
           {"ServiceAccount", "hami-device-plugin"}}) {
    EXPECT_TRUE(r.Get(kind, name)) << kind << "/" << name << " missing";
  }
  // The monitor is on by default (issue 13 item 5): its container and Service; ServiceMonitors
  // only with prometheus.enabled.
  EXPECT_TRUE(r.Get("Service", "hami-device-plugin-monitor"));
  EXPECT_TRUE(r.Container("DaemonSet", "hami-device-plugin", "vgpu-monitor"));
  EXPECT_TRUE(r.OfKind("ServiceMonitor").empty());
  const Rendered off = RenderChecked("--set devicePlugin.monitor.enabled=false");
  EXPECT_FALSE(off.Get("Service", "hami-device-plugin-monitor"));
  EXPECT_FALSE(off.Container("DaemonSet", "hami-device-plugin", "vgpu-monitor"));
  // Components run as the ServiceAccounts the RBAC templates bind.
  EXPECT_EQ(r.Get("Deployment", "hami-scheduler")["spec"]["template"]["spec"]["serviceAccountName"]
                .as<std::string>(),
            "hami-scheduler");
  EXPECT_EQ(
      r.Get("DaemonSet", "hami-device-plugin")["spec"]["template"]["spec"]["serviceAccountName"]
          .as<std::string>(),
      "hami-device-plugin");
}

TEST_F(ChartTest, ImagesAreOursAndFollowTheChart) {
  for (const std::string& args : {std::string(), std::string("-f ") + kHamiValues}) {
    const Rendered r = RenderChecked(args);
    for (const auto& image : r.Images()) {
      EXPECT_EQ(image.find("projecthami"), std::string::npos) << image << " with `" << args << "`";
    }
    EXPECT_EQ(r.Container("Deployment", "hami-scheduler", "vgpu-scheduler-extender")["image"]
                  .as<std::string>(),
              "localhost/hami:0.1.0")
        << args;
    EXPECT_EQ(
        r.Container("DaemonSet", "hami-device-plugin", "device-plugin")["image"].as<std::string>(),
        "localhost/hami:0.1.0")
        << args;
  }
  const Rendered r = RenderChecked(
      "--kube-version v1.29.3 --set global.imageRegistry=reg.example:5000 "
      "--set devicePlugin.image.tag=dev");
  EXPECT_EQ(r.Container("Deployment", "hami-scheduler", "vgpu-scheduler-extender")["image"]
                .as<std::string>(),
            "reg.example:5000/hami:0.1.0");
  EXPECT_EQ(
      r.Container("DaemonSet", "hami-device-plugin", "device-plugin")["image"].as<std::string>(),
      "reg.example:5000/hami:dev");
  EXPECT_EQ(
      r.Container("Deployment", "hami-scheduler", "kube-scheduler")["image"].as<std::string>(),
      "reg.example:5000/kube-scheduler:v1.29.3");
  const Rendered pinned = Render("--set scheduler.kubeScheduler.image.tag=v1.30.2");
  EXPECT_EQ(
      pinned.Container("Deployment", "hami-scheduler", "kube-scheduler")["image"].as<std::string>(),
      "registry.k8s.io/kube-scheduler:v1.30.2");
}

// kube-scheduler runs at the cluster's version, stripped of distribution suffixes as HAMi does;
// clusters without KubeSchedulerConfiguration v1 (before 1.25) are refused at install.
TEST_F(ChartTest, KubeSchedulerFollowsTheClusterVersion) {
  for (const auto& [version, tag] :
       std::vector<std::pair<std::string, std::string>>{{"v1.31.1+k3s1", "v1.31.1"},
                                                        {"v1.30.8-eks-2d5f260", "v1.30.8"},
                                                        {"v1.25.0", "v1.25.0"}}) {
    const Rendered r = Render("--kube-version " + version);
    EXPECT_EQ(
        r.Container("Deployment", "hami-scheduler", "kube-scheduler")["image"].as<std::string>(),
        "registry.k8s.io/kube-scheduler:" + tag)
        << version;
  }
  const CommandResult old =
      RunCommand(ShellQuote(helm_) + " template hami " + kChart + " --kube-version v1.24.9");
  EXPECT_NE(old.exit_code, 0);
  EXPECT_NE(old.err.find("chart requires kubeVersion: >= 1.25.0-0"), std::string::npos) << old.err;
}

TEST_F(ChartTest, SchedulerArgsCarryTheValues) {
  const Rendered def = RenderChecked();
  const auto cmd = def.SchedulerCommand();
  ASSERT_FALSE(cmd.empty());
  EXPECT_EQ(cmd[0], "hami-scheduler");
  for (const char* flag :
       {"--http_bind=0.0.0.0:443", "--cert_file=/tls/tls.crt", "--key_file=/tls/tls.key",
        "--scheduler-name=hami-scheduler", "--metrics-bind-address=:9395",
        "--node-scheduler-policy=binpack", "--gpu-scheduler-policy=spread",
        "--device-config-file=/device-config.yaml", "--leader-elect=true",
        "--leader-elect-resource-name=hami-scheduler",
        "--leader-elect-resource-namespace=kube-system", "--node-lock-timeout=5m", "-v=4"}) {
    EXPECT_TRUE(Contains(cmd, flag)) << flag;
  }
  const Rendered r = RenderChecked(
      "--set scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy=spread "
      "--set scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy=topology-aware "
      "--set schedulerName=gpu-sched --set scheduler.nodeLockExpire=2m "
      "--set scheduler.nodeLabelSelector.gpu=on --set legacyMetrics=true");
  const auto over = r.SchedulerCommand();
  for (const char* flag :
       {"--node-scheduler-policy=spread", "--gpu-scheduler-policy=topology-aware",
        "--scheduler-name=gpu-sched", "--leader-elect-resource-name=gpu-sched",
        "--node-lock-timeout=2m", "--node-label-selector=gpu=on", "--legacy-metrics=true"}) {
    EXPECT_TRUE(Contains(over, flag)) << flag;
  }
  EXPECT_EQ(r.SchedulerConfig()["profiles"][0]["schedulerName"].as<std::string>(), "gpu-sched");
  EXPECT_EQ(r.SchedulerConfig()["leaderElection"]["resourceName"].as<std::string>(), "gpu-sched");
}

TEST_F(ChartTest, HamisExtraArgsPassUnchanged) {
  // HAMi's values pass `--debug` and klog's `-v=4`; our binaries read them as HAMi's do.
  const Rendered r = RenderChecked(std::string("-f ") + kHamiValues);
  const auto cmd = r.SchedulerCommand();
  EXPECT_TRUE(Contains(cmd, "--debug"));
  EXPECT_TRUE(Contains(cmd, "-v=4"));
  EXPECT_FALSE(Contains(cmd, "--v=4"));
  const auto plugin =
      Strings(r.Container("DaemonSet", "hami-device-plugin", "device-plugin")["command"]);
  EXPECT_TRUE(Contains(plugin, "-v=4"));
  EXPECT_FALSE(Contains(plugin, "--v=4"));
  // The flags HAMi's chart adds from its values, as HAMi renders them.
  EXPECT_TRUE(Contains(plugin, "--mig-strategy=none"));
  EXPECT_TRUE(Contains(plugin, "--disable-core-limit=false"));
  EXPECT_FALSE(Contains(cmd, "--enable-ascend=true"));
  const auto vendors =
      Render("--set devices.ascend.enabled=true --set devices.iluvatar.enabled=true")
          .SchedulerCommand();
  EXPECT_TRUE(Contains(vendors, "--enable-ascend=true"));
  EXPECT_TRUE(Contains(vendors, "--enable-iluvatar=true"));
}

#if defined(HAMI_SCHEDULER_BIN) && defined(HAMI_DEVICE_PLUGIN_BIN)
// Every flag the chart passes is one the binary declares (`--help`), with our values, HAMi's
// values file and the monitor off: a renamed or HAMi-only flag would stop the pod at start.
TEST_F(ChartTest, EveryRenderedFlagIsKnownToTheBinary) {
  const CommandResult sched = RunCommand(ShellQuote(HAMI_SCHEDULER_BIN) + " --help");
  const CommandResult plugin = RunCommand(ShellQuote(HAMI_DEVICE_PLUGIN_BIN) + " --help");
  ASSERT_EQ(sched.exit_code, 0) << sched.err;
  ASSERT_EQ(plugin.exit_code, 0) << plugin.err;
  for (const std::string& args :
       {std::string(), std::string("-f ") + kHamiValues,
        std::string("--set scheduler.admissionWebhook.enabled=false --set legacyMetrics=true "
                    "--set scheduler.nodeLabelSelector.a=b"),
        std::string("--set devices.ascend.enabled=true --set devices.iluvatar.enabled=true "
                    "--set devicePlugin.reportNodeCapacity=true")}) {
    const Rendered r = Render(args);
    const auto check = [&](const std::vector<std::string>& cmd, const std::string& help) {
      ASSERT_FALSE(cmd.empty());
      for (size_t i = 1; i < cmd.size(); ++i) {
        // Go reads -name and --name alike (so do our binaries); --help lists "--name".
        ASSERT_EQ(cmd[i].rfind("-", 0), 0u) << cmd[i] << ": not a flag";
        const size_t dashes = cmd[i].rfind("--", 0) == 0 ? 2 : 1;
        const std::string flag = "--" + cmd[i].substr(dashes, cmd[i].find('=') - dashes);
        // The whole name: "--leader-elect" is not found in "--leader-elect-resource-name".
        bool found = false;
        for (size_t at = help.find(flag); at != std::string::npos && !found;
             at = help.find(flag, at + 1)) {
          const size_t end = at + flag.size();
          found = end == help.size() || !(std::isalnum(static_cast<unsigned char>(help[end])) ||
                                          help[end] == '-' || help[end] == '_');
        }
        EXPECT_TRUE(found) << cmd[0] << " has no flag " << flag << " (with `" << args << "`)";
      }
    };
    check(r.SchedulerCommand(), sched.out);
    check(Strings(r.Container("DaemonSet", "hami-device-plugin", "device-plugin")["command"]),
          plugin.out);
#ifdef HAMI_VGPU_MONITOR_BIN
    // The monitor is on by default: its flags (legacyMetrics, extraArgs) too.
    const CommandResult monitor = RunCommand(ShellQuote(HAMI_VGPU_MONITOR_BIN) + " --help");
    ASSERT_EQ(monitor.exit_code, 0) << monitor.err;
    if (const YAML::Node m = r.Container("DaemonSet", "hami-device-plugin", "vgpu-monitor")) {
      check(Strings(m["command"]), monitor.out);
    }
#endif
  }
}
#endif

// The resource names the extender must manage for the chart's default values: NVIDIA's five,
// Cambricon, Hygon's three, Metax's four, then each enabled vendor's customresources (awsneuron
// and amd always). Computed from charts/hami/values.yaml here, apart from the template.
std::vector<std::string> ExpectedManagedResources(const YAML::Node& values) {
  std::vector<std::string> out;
  for (const char* key :
       {"resourceName", "resourceMem", "resourceCores", "resourceMemPercentage", "resourcePriority",
        "mluResourceName", "dcuResourceName", "dcuResourceMem", "dcuResourceCores"}) {
    out.push_back(values[key].as<std::string>());
  }
  out.push_back("metax-tech.com/gpu");
  for (const char* key : {"metaxResourceName", "metaxResourceCore", "metaxResourceMem"}) {
    out.push_back(values[key].as<std::string>());
  }
  for (const char* vendor : {"ascend", "mthreads", "enflame", "kunlun", "awsneuron", "iluvatar",
                             "vastai", "biren", "amd"}) {
    const YAML::Node d = values["devices"][vendor];
    const bool always = std::string(vendor) == "awsneuron" || std::string(vendor) == "amd";
    if (always || (d["enabled"] && d["enabled"].as<bool>())) {
      for (const auto& name : Strings(d["customresources"])) {
        if (!Contains(out, name)) out.push_back(name);
      }
    }
  }
  return out;
}

std::vector<std::string> ManagedResources(const YAML::Node& config) {
  std::vector<std::string> out;
  for (const auto& m : config["extenders"][0]["managedResources"]) {
    EXPECT_TRUE(m["ignoredByScheduler"].as<bool>()) << m["name"].as<std::string>();
    out.push_back(m["name"].as<std::string>());
  }
  return out;
}

TEST_F(ChartTest, ExtenderConfigNamesEveryManagedResource) {
  const Rendered r = RenderChecked();
  const YAML::Node config = r.SchedulerConfig();
  ASSERT_TRUE(config);
  EXPECT_EQ(config["apiVersion"].as<std::string>(), "kubescheduler.config.k8s.io/v1");
  ASSERT_EQ(config["extenders"].size(), 1u);
  const YAML::Node ext = config["extenders"][0];
  EXPECT_EQ(ext["urlPrefix"].as<std::string>(), "https://127.0.0.1:443");
  EXPECT_TRUE(ext["enableHTTPS"].as<bool>());
  EXPECT_EQ(ext["filterVerb"].as<std::string>(), "filter");
  EXPECT_EQ(ext["bindVerb"].as<std::string>(), "bind");
  EXPECT_TRUE(ext["nodeCacheCapable"].as<bool>());
  EXPECT_TRUE(config["leaderElection"]["leaderElect"].as<bool>());
  EXPECT_EQ(config["leaderElection"]["resourceNamespace"].as<std::string>(), "kube-system");
  const YAML::Node values = YAML::LoadFile(std::string(kChart) + "/values.yaml");
  EXPECT_EQ(ManagedResources(config), ExpectedManagedResources(values));

  // Renamed NVIDIA resources and an enabled vendor are managed; the old names are not.
  const Rendered over = RenderChecked(
      "--set resourceName=example.com/vgpu --set resourceMem=example.com/vgpu-memory "
      "--set devices.ascend.enabled=true --set devices.biren.enabled=false");
  const auto managed = ManagedResources(over.SchedulerConfig());
  for (const char* name : {"example.com/vgpu", "example.com/vgpu-memory", "huawei.com/Ascend910B3",
                           "huawei.com/Ascend310P-memory", "nvidia.com/gpucores"}) {
    EXPECT_TRUE(Contains(managed, name)) << name;
  }
  for (const char* name : {"nvidia.com/gpu", "nvidia.com/gpumem", "birentech.com/gpu"}) {
    EXPECT_FALSE(Contains(managed, name)) << name;
  }
  // HAMi's own values file manages the same set as ours.
  const Rendered hami = RenderChecked(std::string("-f ") + kHamiValues);
  EXPECT_EQ(ManagedResources(hami.SchedulerConfig()), ExpectedManagedResources(values));
}

TEST_F(ChartTest, ReplicasAndLeaderElection) {
  const Rendered one =
      RenderChecked("--set scheduler.leaderElect=false --set scheduler.replicas=3");
  const YAML::Node dep = one.Get("Deployment", "hami-scheduler");
  EXPECT_EQ(dep["spec"]["replicas"].as<int>(), 1);  // several only with leader election
  EXPECT_TRUE(Contains(one.SchedulerCommand(), "--leader-elect=false"));
  EXPECT_FALSE(one.SchedulerConfig()["leaderElection"]["leaderElect"].as<bool>());
  EXPECT_FALSE(dep["spec"]["template"]["spec"]["affinity"]);
  EXPECT_EQ(one.Get("PodDisruptionBudget", "hami-scheduler")["spec"]["maxUnavailable"].as<int>(),
            1);

  const Rendered three = RenderChecked("--set scheduler.replicas=3");
  EXPECT_EQ(three.Get("Deployment", "hami-scheduler")["spec"]["replicas"].as<int>(), 3);
  const YAML::Node pdb = three.Get("PodDisruptionBudget", "hami-scheduler");
  EXPECT_EQ(pdb["spec"]["minAvailable"].as<int>(), 1);
  EXPECT_FALSE(pdb["spec"]["maxUnavailable"]);
  // `enabled: false` turns it off (a `default true` would read false as unset).
  EXPECT_TRUE(RenderChecked("--set scheduler.podDisruptionBudget.enabled=false")
                  .OfKind("PodDisruptionBudget")
                  .empty());

  // Probes on the port hami-scheduler serves. Readiness is /readyz with or without leader
  // election: a follower answers 200 once its informers synced (tests/scheduler).
  const YAML::Node c = three.Container("Deployment", "hami-scheduler", "vgpu-scheduler-extender");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"].as<std::string>(), "/readyz");
  EXPECT_EQ(one.Container("Deployment", "hami-scheduler",
                          "vgpu-scheduler-extender")["readinessProbe"]["httpGet"]["path"]
                .as<std::string>(),
            "/readyz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["port"].as<std::string>(), "https");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
}

TEST_F(ChartTest, ServicesUseHamisNodePorts) {
  const Rendered r = RenderChecked();
  const YAML::Node svc = r.Get("Service", "hami-scheduler");
  ASSERT_TRUE(svc);
  EXPECT_EQ(svc["spec"]["type"].as<std::string>(), "NodePort");
  EXPECT_EQ(svc["spec"]["selector"]["hami.io/scheduler-role"].as<std::string>(), "leader");
  const YAML::Node http = Named(svc["spec"]["ports"], "http");
  EXPECT_EQ(http["port"].as<int>(), 443);
  EXPECT_EQ(http["targetPort"].as<int>(), 443);
  EXPECT_EQ(http["nodePort"].as<int>(), 31998);
  const YAML::Node metrics = Named(svc["spec"]["ports"], "monitor");
  EXPECT_EQ(metrics["port"].as<int>(), 31993);
  EXPECT_EQ(metrics["targetPort"].as<int>(), 9395);
  EXPECT_EQ(metrics["nodePort"].as<int>(), 31993);

  const Rendered cip = RenderChecked("--set scheduler.service.type=ClusterIP");
  for (const auto& p : cip.Get("Service", "hami-scheduler")["spec"]["ports"]) {
    EXPECT_FALSE(p["nodePort"]) << p["name"].as<std::string>();
  }
  // ServiceMonitors only where the Prometheus operator's CRD exists.
  const Rendered prom = RenderChecked(
      "--set prometheus.enabled=true --api-versions monitoring.coreos.com/v1/ServiceMonitor");
  EXPECT_TRUE(prom.Get("ServiceMonitor", "hami-scheduler-metrics-monitor"));
  EXPECT_TRUE(RenderChecked("--set prometheus.enabled=true").OfKind("ServiceMonitor").empty());
}

// Across our values, HAMi's and every override: no `*` in any RBAC or webhook rule, every
// object passes the schema (RenderChecked), no Job and no helm hook.
TEST_F(ChartTest, TypicalOverridesRenderValidObjectsWithoutWildcards) {
  const std::vector<std::string> overrides = {
      "",
      std::string("-f ") + kHamiValues,
      "--set scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy=spread "
      "--set scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy=binpack",
      "--set resourceName=example.com/vgpu --set resourceMem=example.com/vmem "
      "--set resourceCores=example.com/vcores",
      "--set devicePlugin.deviceSplitCount=4",
      "--set scheduler.leaderElect=false",
      "--set scheduler.admissionWebhook.enabled=false",
      "--set scheduler.certManager.enabled=true",
      "--set devicePlugin.monitor.enabled=true --set prometheus.enabled=true "
      "--api-versions monitoring.coreos.com/v1/ServiceMonitor",
      "--set devicePlugin.createRuntimeClass=true --set devicePlugin.runtimeClassName=nvidia "
      "--set devicePlugin.gpuOperatorToolkitReady.enabled=true",
      "--set scheduler.admissionWebhook.customURL.enabled=true "
      "--set scheduler.admissionWebhook.customURL.host=10.0.0.5",
      "--set scheduler.kubeScheduler.enabled=false --set devicePlugin.enabled=false",
      "--set fullnameOverride=gpu --set namespaceOverride=gpu-system "
      "--set 'global.imagePullSecrets[0]=regcred' --set global.labels.team=ml "
      "--set 'scheduler.tolerations[0].operator=Exists'",
  };
  for (const auto& args : overrides) {
    SCOPED_TRACE(args);
    const Rendered r = RenderChecked(args);
    for (const auto& o : r.objects) {
      const std::string what =
          o["kind"].as<std::string>() + "/" + o["metadata"]["name"].as<std::string>();
      EXPECT_NE(o["kind"].as<std::string>(), "Job") << what;
      EXPECT_FALSE(At(o, {"metadata", "annotations", "helm.sh/hook"})) << what;
      std::vector<YAML::Node> rules;
      for (const auto& rule : At(o, {"rules"})) rules.push_back(rule);
      for (const auto& hook : At(o, {"webhooks"})) {
        for (const auto& rule : At(hook, {"rules"})) rules.push_back(rule);
      }
      for (const auto& rule : rules) {
        for (const char* key :
             {"verbs", "apiGroups", "resources", "operations", "apiVersions", "scope"}) {
          const YAML::Node field = At(rule, {key});
          const auto values =
              field.IsScalar() ? std::vector<std::string>{field.as<std::string>()} : Strings(field);
          EXPECT_FALSE(Contains(values, "*")) << what << " has `*` in " << key;
        }
      }
    }
    for (const auto& image : r.Images()) {
      EXPECT_EQ(image.find("projecthami"), std::string::npos) << image;
    }
  }
}

}  // namespace
}  // namespace hami::chart_test
