// charts/hami through helm: lint, then `helm template` with the chart's values, HAMi v2.10's own
// values file (tests/chart/hami-v2.10.0-values.yaml) and typical overrides. Every rendered object
// passes the schema check (k8s_schema.h), and the facts a cluster depends on hold: the scheduler
// flags, the extender configuration, the device-config the binaries load, the DaemonSet's mounts,
// the webhook certificate, no `*` in any rule, no projecthami image. Skips when helm is absent.
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "device/config.h"
#include "helm.h"
#include "k8s_schema.h"

namespace hami::chart_test {
namespace {

constexpr const char* kChart = "charts/hami";
constexpr const char* kHamiValues = "tests/chart/hami-v2.10.0-values.yaml";

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += "  " + s + "\n";
  return out;
}

std::vector<std::string> Strings(const YAML::Node& list) {
  std::vector<std::string> out;
  if (list && list.IsSequence()) {
    for (const auto& n : list) out.push_back(n.as<std::string>());
  }
  return out;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// node[k0][k1]..., or an undefined node where a key is missing (yaml-cpp throws on chained
// lookups through a missing key of a const node).
// (Node::operator= would overwrite the shared document; reset() rebinds the handle.)
YAML::Node At(const YAML::Node& root, std::initializer_list<const char*> keys) {
  YAML::Node node;
  node.reset(root);
  for (const char* k : keys) {
    const YAML::Node& current = node;
    if (!current || !current.IsMap() || !current[k]) return YAML::Node(YAML::NodeType::Undefined);
    node.reset(current[k]);
  }
  return node;
}

// The element of a list of maps whose `name` is `name` (an undefined node when there is none).
YAML::Node Named(const YAML::Node& list, const std::string& name) {
  if (list && list.IsSequence()) {
    for (const auto& n : list) {
      if (n["name"] && n["name"].as<std::string>() == name) return n;
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// The objects of one `helm template` run.
struct Rendered {
  std::vector<YAML::Node> objects;

  // The object of that kind and name, or an undefined node.
  YAML::Node Get(const std::string& kind, const std::string& name) const {
    for (const auto& o : objects) {
      if (o["kind"].as<std::string>() == kind && o["metadata"]["name"].as<std::string>() == name) {
        return o;
      }
    }
    return YAML::Node(YAML::NodeType::Undefined);
  }
  std::vector<YAML::Node> OfKind(const std::string& kind) const {
    std::vector<YAML::Node> out;
    for (const auto& o : objects) {
      if (o["kind"].as<std::string>() == kind) out.push_back(o);
    }
    return out;
  }
  YAML::Node Container(const std::string& kind, const std::string& name,
                       const std::string& container) const {
    return Named(Get(kind, name)["spec"]["template"]["spec"]["containers"], container);
  }
  // The hami-scheduler container's command line.
  std::vector<std::string> SchedulerCommand() const {
    return Strings(Container("Deployment", "hami-scheduler", "hami-scheduler")["command"]);
  }
  // The KubeSchedulerConfiguration in ConfigMap hami-scheduler.
  YAML::Node SchedulerConfig() const {
    const YAML::Node cm = Get("ConfigMap", "hami-scheduler");
    if (!cm) return cm;
    return YAML::Load(cm["data"]["config.yaml"].as<std::string>());
  }
  std::string DeviceConfigYaml() const {
    return Get("ConfigMap", "hami-scheduler-device")["data"]["device-config.yaml"]
        .as<std::string>();
  }
  // Every image of every pod template.
  std::vector<std::string> Images() const {
    std::vector<std::string> out;
    for (const auto& o : objects) {
      const YAML::Node pod = At(o, {"spec", "template", "spec"});
      if (!pod) continue;
      for (const char* key : {"initContainers", "containers"}) {
        for (const auto& c : At(pod, {key})) out.push_back(c["image"].as<std::string>());
      }
    }
    return out;
  }
};

class ChartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    helm_ = FindHelm();
    if (helm_.empty()) GTEST_SKIP() << SkipReason();
  }

  // `helm template hami charts/hami -n kube-system <args>`; a failing render fails the test.
  Rendered Render(const std::string& args = "") {
    Rendered out;
    const CommandResult r = RunCommand(ShellQuote(helm_) + " template hami " + kChart +
                                       " --namespace kube-system " + args);
    EXPECT_EQ(r.exit_code, 0) << "helm template " << args << ":\n" << r.err;
    if (r.exit_code != 0) return out;
    for (const YAML::Node& doc : YAML::LoadAll(r.out)) {
      if (doc && doc.IsMap()) out.objects.push_back(doc);
    }
    return out;
  }

  // Render + every object (and the embedded KubeSchedulerConfiguration) through the schema.
  Rendered RenderChecked(const std::string& args = "") {
    Rendered out = Render(args);
    EXPECT_FALSE(out.objects.empty()) << args;
    std::vector<std::string> errors;
    for (const auto& o : out.objects) {
      for (auto& e : schema_.Check(o)) errors.push_back(std::move(e));
    }
    if (const YAML::Node config = out.SchedulerConfig()) {
      for (auto& e : schema_.Check(config)) errors.push_back(std::move(e));
    }
    EXPECT_TRUE(errors.empty()) << "schema errors with `" << args << "`:\n" << Joined(errors);
    return out;
  }

  std::string helm_;
  Schema schema_;
};

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
  // The monitor binary does not exist yet: no monitor container, Service or ServiceMonitor.
  EXPECT_FALSE(r.Get("Service", "hami-device-plugin-monitor"));
  EXPECT_FALSE(r.Container("DaemonSet", "hami-device-plugin", "vgpu-monitor"));
  EXPECT_TRUE(r.OfKind("ServiceMonitor").empty());
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
    EXPECT_EQ(
        r.Container("Deployment", "hami-scheduler", "hami-scheduler")["image"].as<std::string>(),
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
  EXPECT_EQ(
      r.Container("Deployment", "hami-scheduler", "hami-scheduler")["image"].as<std::string>(),
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
        "--leader-elect-resource-namespace=kube-system", "--node-lock-timeout=5m", "--v=4"}) {
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

TEST_F(ChartTest, HamisExtraArgsAreMadeAcceptable) {
  // HAMi's values pass `--debug` and klog's `-v=4`; our CLI takes `--v=4` and has no --debug.
  const Rendered r = RenderChecked(std::string("-f ") + kHamiValues);
  const auto cmd = r.SchedulerCommand();
  EXPECT_TRUE(Contains(cmd, "--v=4"));
  EXPECT_FALSE(Contains(cmd, "--debug"));
  EXPECT_FALSE(Contains(cmd, "-v=4"));
  const auto plugin =
      Strings(r.Container("DaemonSet", "hami-device-plugin", "device-plugin")["command"]);
  EXPECT_TRUE(Contains(plugin, "--v=4"));
  EXPECT_FALSE(Contains(plugin, "-v=4"));
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
                    "--set scheduler.nodeLabelSelector.a=b")}) {
    const Rendered r = Render(args);
    const auto check = [&](const std::vector<std::string>& cmd, const std::string& help) {
      ASSERT_FALSE(cmd.empty());
      for (size_t i = 1; i < cmd.size(); ++i) {
        const std::string flag = cmd[i].substr(0, cmd[i].find('='));
        ASSERT_EQ(flag.rfind("--", 0), 0u) << cmd[i] << ": not a --flag";
        EXPECT_NE(help.find(flag), std::string::npos)
            << cmd[0] << " has no flag " << flag << " (with `" << args << "`)";
      }
    };
    check(r.SchedulerCommand(), sched.out);
    check(Strings(r.Container("DaemonSet", "hami-device-plugin", "device-plugin")["command"]),
          plugin.out);
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

TEST_F(ChartTest, DeviceConfigLoadsAndEqualsTheBuiltInDefaults) {
  const Rendered r = RenderChecked();
  auto config = device::LoadDeviceConfig(r.DeviceConfigYaml());
  ASSERT_TRUE(config.ok()) << config.error();
  // The chart's defaults are the binaries' built-in defaults (both are HAMi's).
  EXPECT_EQ(config->nvidia, device::DefaultDeviceConfig().nvidia);
  for (const char* section :
       {"cambricon", "hygon", "metax", "enflame", "mthreads", "kunlun", "awsneuron", "amd",
        "vastai", "biren", "iluvatars[0]", "vnpus", "vnpus.configs[6]"}) {
    EXPECT_TRUE(config->others.count(section)) << section;
  }

  const Rendered over = RenderChecked(
      "--set devicePlugin.deviceSplitCount=3 --set devicePlugin.deviceMemoryScaling=1.5 "
      "--set resourceName=example.com/vgpu --set devices.nvidia.gpuCorePolicy=force "
      "--set devicePlugin.runtimeClassName=nvidia");
  auto c = device::LoadDeviceConfig(over.DeviceConfigYaml());
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->nvidia.device_split_count, 3);
  EXPECT_DOUBLE_EQ(c->nvidia.device_memory_scaling, 1.5);
  EXPECT_EQ(c->nvidia.resource_count_name, "example.com/vgpu");
  EXPECT_EQ(c->nvidia.gpu_core_policy, "force");
  EXPECT_EQ(c->nvidia.runtime_class_name, "nvidia");
  EXPECT_EQ(
      over.Get("DaemonSet", "hami-device-plugin")["spec"]["template"]["spec"]["runtimeClassName"]
          .as<std::string>(),
      "nvidia");

  // device-config.content replaces the file whole.
  const Rendered content =
      RenderChecked("--set-string 'device-config.content=nvidia:\n  deviceSplitCount: 7\n'");
  auto d = device::LoadDeviceConfig(content.DeviceConfigYaml());
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->nvidia.device_split_count, 7);
  EXPECT_TRUE(d->others.empty());

  const Rendered hami = RenderChecked(std::string("-f ") + kHamiValues);
  auto h = device::LoadDeviceConfig(hami.DeviceConfigYaml());
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(h->nvidia, device::DefaultDeviceConfig().nvidia);
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
  EXPECT_EQ(m.at("/tmp"), "/tmp");                        // /tmp/vgpulock
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

  // The monitor, once enabled: its container, host caches and NodePort 31992.
  const Rendered mon = RenderChecked("--set devicePlugin.monitor.enabled=true");
  const YAML::Node monitor = mon.Container("DaemonSet", "hami-device-plugin", "vgpu-monitor");
  ASSERT_TRUE(monitor);
  EXPECT_EQ(Strings(monitor["command"])[0], "hami-vgpu-monitor");
  const YAML::Node svc = mon.Get("Service", "hami-device-plugin-monitor");
  ASSERT_TRUE(svc);
  EXPECT_EQ(svc["spec"]["ports"][0]["nodePort"].as<int>(), 31992);
  EXPECT_EQ(svc["spec"]["ports"][0]["targetPort"].as<int>(), 9394);

  // An external per-node ConfigMap replaces ours.
  const Rendered ext =
      RenderChecked("--set devicePlugin.nodeConfiguration.externalConfigName=my-node-config");
  EXPECT_FALSE(ext.Get("ConfigMap", "hami-device-plugin"));
  EXPECT_EQ(Named(ext.Get("DaemonSet", "hami-device-plugin")["spec"]["template"]["spec"]["volumes"],
                  "deviceconfig")["configMap"]["name"]
                .as<std::string>(),
            "my-node-config");
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

  // Probes on the port hami-scheduler serves.
  const YAML::Node c = three.Container("Deployment", "hami-scheduler", "hami-scheduler");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"].as<std::string>(), "/readyz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["port"].as<std::string>(), "https");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
}

TEST_F(ChartTest, WebhookDisabledServesPlainHttpAndRendersNoWebhook) {
  const Rendered r = RenderChecked("--set scheduler.admissionWebhook.enabled=false");
  EXPECT_TRUE(r.OfKind("MutatingWebhookConfiguration").empty());
  EXPECT_TRUE(r.OfKind("Secret").empty());
  const auto cmd = r.SchedulerCommand();
  EXPECT_TRUE(Contains(cmd, "--http_bind=0.0.0.0:80"));
  EXPECT_FALSE(Contains(cmd, "--cert_file=/tls/tls.crt"));
  const YAML::Node ext = r.SchedulerConfig()["extenders"][0];
  EXPECT_EQ(ext["urlPrefix"].as<std::string>(), "http://127.0.0.1:80");
  EXPECT_FALSE(ext["enableHTTPS"].as<bool>());
  EXPECT_FALSE(ext["tlsConfig"]);
  const YAML::Node pod = r.Get("Deployment", "hami-scheduler")["spec"]["template"]["spec"];
  EXPECT_FALSE(Named(pod["volumes"], "tls-config"));
  EXPECT_EQ(Named(pod["containers"], "hami-scheduler")["readinessProbe"]["httpGet"]["scheme"]
                .as<std::string>(),
            "HTTP");
  EXPECT_EQ(r.Get("Service", "hami-scheduler")["spec"]["ports"][0]["targetPort"].as<int>(), 80);
}

TEST_F(ChartTest, WebhookSelectorsAndPolicies) {
  const Rendered r = RenderChecked();
  const YAML::Node hook = r.Get("MutatingWebhookConfiguration", "hami-webhook")["webhooks"][0];
  ASSERT_TRUE(hook);
  EXPECT_EQ(hook["failurePolicy"].as<std::string>(), "Ignore");
  EXPECT_EQ(hook["reinvocationPolicy"].as<std::string>(), "Never");
  EXPECT_EQ(hook["clientConfig"]["service"]["name"].as<std::string>(), "hami-scheduler");
  EXPECT_EQ(hook["clientConfig"]["service"]["path"].as<std::string>(), "/webhook");
  // Pods and namespaces labelled hami.io/webhook=ignore are skipped (the scheduler's own pod is).
  for (const char* selector : {"objectSelector", "namespaceSelector"}) {
    const YAML::Node e = hook[selector]["matchExpressions"][0];
    EXPECT_EQ(e["key"].as<std::string>(), "hami.io/webhook") << selector;
    EXPECT_EQ(e["operator"].as<std::string>(), "NotIn") << selector;
    EXPECT_EQ(Strings(e["values"]), std::vector<std::string>{"ignore"}) << selector;
  }
  EXPECT_EQ(r.Get("Deployment",
                  "hami-scheduler")["spec"]["template"]["metadata"]["labels"]["hami.io/webhook"]
                .as<std::string>(),
            "ignore");

  const Rendered over = RenderChecked(
      "--set scheduler.admissionWebhook.failurePolicy=Fail "
      "--set scheduler.admissionWebhook.reinvocationPolicy=IfNeeded "
      "--set 'scheduler.admissionWebhook.whitelistNamespaces={team-a,team-b}' "
      "--set scheduler.admissionWebhook.objectSelector.matchLabels.gpu=yes");
  const YAML::Node h = over.Get("MutatingWebhookConfiguration", "hami-webhook")["webhooks"][0];
  EXPECT_EQ(h["failurePolicy"].as<std::string>(), "Fail");
  EXPECT_EQ(h["reinvocationPolicy"].as<std::string>(), "IfNeeded");
  const YAML::Node ns = h["namespaceSelector"]["matchExpressions"][1];
  EXPECT_EQ(ns["key"].as<std::string>(), "kubernetes.io/metadata.name");
  EXPECT_EQ(Strings(ns["values"]), (std::vector<std::string>{"team-a", "team-b"}));
  EXPECT_EQ(h["objectSelector"]["matchLabels"]["gpu"].as<std::string>(), "yes");

  const Rendered unmanaged =
      RenderChecked("--set scheduler.admissionWebhook.manageNamespaceSelector=false");
  EXPECT_FALSE(unmanaged.Get("MutatingWebhookConfiguration",
                             "hami-webhook")["webhooks"][0]["namespaceSelector"]);
}

std::unique_ptr<X509, decltype(&X509_free)> ParseCert(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  return {PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free};
}

std::string Base64Decode(const std::string& in) {
  std::string out(in.size(), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0) return {};
  out.resize(static_cast<size_t>(n));
  while (!out.empty() && out.back() == '\0') out.pop_back();  // padding
  return out;
}

TEST_F(ChartTest, HelmMadeCertificateIsOneCaForSecretAndWebhook) {
  const Rendered r = RenderChecked();
  const YAML::Node secret = r.Get("Secret", "hami-scheduler-tls");
  ASSERT_TRUE(secret);
  EXPECT_EQ(secret["type"].as<std::string>(), "kubernetes.io/tls");
  const std::string ca_b64 = secret["data"]["ca.crt"].as<std::string>();
  const YAML::Node hook = r.Get("MutatingWebhookConfiguration", "hami-webhook")["webhooks"][0];
  EXPECT_EQ(hook["clientConfig"]["caBundle"].as<std::string>(), ca_b64);

  auto ca = ParseCert(Base64Decode(ca_b64));
  auto leaf = ParseCert(Base64Decode(secret["data"]["tls.crt"].as<std::string>()));
  ASSERT_TRUE(ca && leaf);
  // The leaf verifies against the CA, for the name kube-apiserver dials.
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), &X509_STORE_free);
  X509_STORE_add_cert(store.get(), ca.get());
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(),
                                                                      &X509_STORE_CTX_free);
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), nullptr);
  X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx.get()),
                              "hami-scheduler.kube-system.svc", 0);
  EXPECT_EQ(X509_verify_cert(ctx.get()), 1)
      << X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
  EXPECT_EQ(
      X509_check_host(leaf.get(), "hami-scheduler.kube-system.svc.cluster.local", 0, 0, nullptr),
      1);
  EXPECT_EQ(X509_check_host(leaf.get(), "evil.example", 0, 0, nullptr), 0);
  // The key belongs to the certificate.
  const std::string key_pem = Base64Decode(secret["data"]["tls.key"].as<std::string>());
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), &BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  ASSERT_TRUE(key);
  EXPECT_EQ(X509_check_private_key(leaf.get(), key.get()), 1);
  // The scheduler reads it from the Secret as files; no ServiceAccount reads Secrets.
  const YAML::Node pod = r.Get("Deployment", "hami-scheduler")["spec"]["template"]["spec"];
  EXPECT_EQ(Named(pod["volumes"], "tls-config")["secret"]["secretName"].as<std::string>(),
            "hami-scheduler-tls");
}

TEST_F(ChartTest, CertManagerOptionMakesNoSecretAndInjectsTheCa) {
  const Rendered r = RenderChecked("--set scheduler.certManager.enabled=true");
  EXPECT_FALSE(r.Get("Secret", "hami-scheduler-tls"));
  const YAML::Node issuer = r.Get("Issuer", "hami-scheduler-selfsigned-issuer");
  ASSERT_TRUE(issuer);
  const YAML::Node cert = r.Get("Certificate", "hami-scheduler-serving-cert");
  ASSERT_TRUE(cert);
  EXPECT_EQ(cert["spec"]["secretName"].as<std::string>(), "hami-scheduler-tls");
  EXPECT_TRUE(Contains(Strings(cert["spec"]["dnsNames"]), "hami-scheduler.kube-system.svc"));
  EXPECT_EQ(cert["spec"]["issuerRef"]["name"].as<std::string>(),
            "hami-scheduler-selfsigned-issuer");
  const YAML::Node mwc = r.Get("MutatingWebhookConfiguration", "hami-webhook");
  EXPECT_EQ(mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].as<std::string>(),
            "kube-system/hami-scheduler-serving-cert");
  EXPECT_FALSE(mwc["webhooks"][0]["clientConfig"]["caBundle"]);
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

TEST_F(ChartTest, CustomUrlWebhookCertificateCoversTheHost) {
  const Rendered r = RenderChecked(
      "--set scheduler.admissionWebhook.customURL.enabled=true "
      "--set scheduler.admissionWebhook.customURL.host=10.0.0.5");
  const YAML::Node hook = r.Get("MutatingWebhookConfiguration", "hami-webhook")["webhooks"][0];
  EXPECT_EQ(hook["clientConfig"]["url"].as<std::string>(), "https://10.0.0.5:31998/webhook");
  EXPECT_FALSE(hook["clientConfig"]["service"]);
  auto leaf = ParseCert(
      Base64Decode(r.Get("Secret", "hami-scheduler-tls")["data"]["tls.crt"].as<std::string>()));
  ASSERT_TRUE(leaf);
  EXPECT_EQ(X509_check_ip_asc(leaf.get(), "10.0.0.5", 0), 1);
}

}  // namespace
}  // namespace hami::chart_test
