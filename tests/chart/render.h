// Test support for the chart checks: `helm template` into a list of objects (Rendered), lookups
// that do not throw on missing keys, and the ChartTest fixture, which skips without helm and
// runs every rendered object (and the embedded KubeSchedulerConfiguration) through the schema.
// Header-only; included by the chart_*_test.cc files of one test binary.
#ifndef HAMI_TESTS_CHART_RENDER_H_
#define HAMI_TESTS_CHART_RENDER_H_

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "helm.h"
#include "k8s_schema.h"

namespace hami::chart_test {

inline constexpr const char* kChart = "charts/hami";
inline constexpr const char* kHamiValues = "tests/chart/hami-v2.10.0-values.yaml";

inline std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += "  " + s + "\n";
  return out;
}

inline std::vector<std::string> Strings(const YAML::Node& list) {
  std::vector<std::string> out;
  if (list && list.IsSequence()) {
    for (const auto& n : list) out.push_back(n.as<std::string>());
  }
  return out;
}

inline bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// node[k0][k1]..., or an undefined node where a key is missing (yaml-cpp throws on chained
// lookups through a missing key of a const node).
// (Node::operator= would overwrite the shared document; reset() rebinds the handle.)
inline YAML::Node At(const YAML::Node& root, std::initializer_list<const char*> keys) {
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
inline YAML::Node Named(const YAML::Node& list, const std::string& name) {
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
    return Strings(Container("Deployment", "hami-scheduler", "vgpu-scheduler-extender")["command"]);
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

}  // namespace hami::chart_test

#endif  // HAMI_TESTS_CHART_RENDER_H_
