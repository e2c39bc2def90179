// The schema checker itself (k8s_schema.h): it must reject what an API server rejects, or the
// chart checks prove nothing.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "k8s_schema.h"

namespace hami::chart_test {
namespace {

constexpr const char* kDeployment = R"(
apiVersion: apps/v1
kind: Deployment
metadata:
  name: s
  labels: {app: s, version: "1"}
spec:
  replicas: 2
  selector: {matchLabels: {app: s}}
  template:
    metadata: {labels: {app: s}}
    spec:
      nodeSelector: {gpu: "on"}
      containers:
        - name: c
          image: localhost/hami:0.1.0
          command: [hami-scheduler, --v=4]
          ports: [{name: https, containerPort: 443, protocol: TCP}]
          readinessProbe: {httpGet: {path: /readyz, port: https, scheme: HTTPS}}
          volumeMounts: [{name: v, mountPath: /tls, readOnly: true}]
      volumes: [{name: v, secret: {secretName: t}}]
)";

// Returns the checker's errors after `edit` changed the valid Deployment above.
std::vector<std::string> ErrorsAfter(void (*edit)(YAML::Node&)) {
  YAML::Node object = YAML::Load(kDeployment);
  edit(object);
  return Schema().Check(object);
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

TEST(SchemaTest, ValidDeploymentPasses) {
  const auto errors = Schema().Check(YAML::Load(kDeployment));
  EXPECT_TRUE(errors.empty()) << Joined(errors);
}

TEST(SchemaTest, MisspeltFieldFailsWithItsPath) {
  const auto errors = ErrorsAfter([](YAML::Node& o) {
    o["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always";
  });
  ASSERT_EQ(errors.size(), 1u) << Joined(errors);
  EXPECT_EQ(errors[0],
            "Deployment/s: spec.template.spec.containers[0].imagePullPolicyy: unknown field");
}

TEST(SchemaTest, FieldAtTheWrongLevelFails) {
  const auto errors = ErrorsAfter([](YAML::Node& o) { o["spec"]["serviceAccountName"] = "x"; });
  ASSERT_EQ(errors.size(), 1u) << Joined(errors);
  EXPECT_EQ(errors[0], "Deployment/s: spec.serviceAccountName: unknown field");
}

TEST(SchemaTest, QuotedIntegerFails) {
  const auto errors = ErrorsAfter([](YAML::Node& o) {
    o["spec"] = YAML::Load(R"({replicas: "2", selector: {matchLabels: {app: s}}})");
  });
  ASSERT_EQ(errors.size(), 1u) << Joined(errors);
  EXPECT_EQ(errors[0], "Deployment/s: spec.replicas: want an integer, got \"2\"");
}

TEST(SchemaTest, UnquotedBoolOrNumberWhereAStringGoesFails) {
  // `gpu: on` is the bool true to helm's YAML 1.1 reader; a label value 1 is a number.
  const auto on = ErrorsAfter([](YAML::Node& o) {
    o["spec"]["template"]["spec"]["nodeSelector"] = YAML::Load("{gpu: on}");
  });
  ASSERT_EQ(on.size(), 1u) << Joined(on);
  EXPECT_NE(on[0].find("spec.template.spec.nodeSelector.gpu: want a string, got the bool on"),
            std::string::npos)
      << on[0];
  const auto number =
      ErrorsAfter([](YAML::Node& o) { o["metadata"]["labels"] = YAML::Load("{version: 1}"); });
  ASSERT_EQ(number.size(), 1u) << Joined(number);
  EXPECT_NE(number[0].find("metadata.labels.version: want a string, got the number 1"),
            std::string::npos);
}

TEST(SchemaTest, MapWhereAListGoesFails) {
  const auto errors = ErrorsAfter([](YAML::Node& o) {
    o["spec"]["template"]["spec"]["containers"][0]["command"] = YAML::Load("{a: b}");
  });
  ASSERT_EQ(errors.size(), 1u) << Joined(errors);
  EXPECT_EQ(errors[0],
            "Deployment/s: spec.template.spec.containers[0].command: want a list, got a map");
}

TEST(SchemaTest, WrongApiVersionAndUnknownKindFail) {
  const auto version = ErrorsAfter([](YAML::Node& o) { o["apiVersion"] = "apps/v1beta1"; });
  ASSERT_EQ(version.size(), 1u) << Joined(version);
  EXPECT_EQ(version[0], "Deployment/s: apiVersion \"apps/v1beta1\", want \"apps/v1\"");
  const auto kind = Schema().Check(YAML::Load("{apiVersion: v1, kind: Pod, metadata: {name: p}}"));
  ASSERT_EQ(kind.size(), 1u);
  EXPECT_EQ(kind[0], "Pod/p: kind \"Pod\" is not in the schema");
}

TEST(SchemaTest, IntOrStringAcceptsBothButNotABool) {
  const auto ok = ErrorsAfter([](YAML::Node& o) {
    o["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] = 443;
  });
  EXPECT_TRUE(ok.empty()) << Joined(ok);
  const auto bad = ErrorsAfter([](YAML::Node& o) {
    o["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] =
        YAML::Load("true");
  });
  EXPECT_EQ(bad.size(), 1u) << Joined(bad);
}

TEST(SchemaTest, KubeSchedulerConfigurationIsCheckedStrictly) {
  // kube-scheduler decodes its config strictly: a misspelt extender field stops it.
  const YAML::Node config = YAML::Load(R"(
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
extenders:
  - urlPrefix: https://127.0.0.1:443
    filterVerb: filter
    nodeCacheCapible: true
)");
  const auto errors = Schema().Check(config);
  ASSERT_EQ(errors.size(), 1u) << Joined(errors);
  EXPECT_EQ(errors[0],
            "KubeSchedulerConfiguration/?: extenders[0].nodeCacheCapible: unknown field");
}

}  // namespace
}  // namespace hami::chart_test
