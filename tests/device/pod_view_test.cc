#include "device/pod_view.h"

#include <gtest/gtest.h>

#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "k8s/object.h"

namespace hami::device {
namespace {

using nlohmann::json;

TEST(PodView, ParsesWhatFitReads) {
  json pod = json::parse(R"({
    "metadata": {"name": "demo", "namespace": "default", "uid": "u-1",
                 "annotations": {"a": "1", "n": 5}, "labels": {"l": "x"},
                 "deletionTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"nodeName": "node-a",
             "initContainers": [{"name": "init", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
             "containers": [{"name": "main", "resources": {
                 "limits": {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "3k"},
                 "requests": {"cpu": "1"}}}, {"name": "side"}]},
    "status": {"phase": "Pending", "initContainerStatuses": [
        {"name": "init", "state": {"terminated": {"exitCode": 0}}}]}
  })");
  auto v = ParsePodView(pod);
  ASSERT_TRUE(v) << v.error();
  EXPECT_EQ(v->name, "demo");
  EXPECT_EQ(v->namespace_name, "default");
  EXPECT_EQ(v->Key(), "default/demo");
  EXPECT_EQ(v->uid, "u-1");
  EXPECT_EQ(v->node_name, "node-a");
  EXPECT_EQ(v->phase, "Pending");
  EXPECT_TRUE(v->deleting);
  EXPECT_TRUE(v->init_done);
  EXPECT_EQ(v->annotations, (StringMap{{"a", "1"}}));
  EXPECT_EQ(v->labels, (StringMap{{"l", "x"}}));
  ASSERT_EQ(v->init_containers.size(), 1u);
  EXPECT_EQ(v->init_containers[0].limits, (StringMap{{"nvidia.com/gpu", "1"}}));
  ASSERT_EQ(v->containers.size(), 2u);
  EXPECT_EQ(v->containers[0].limits,
            (StringMap{{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "3k"}}));
  EXPECT_EQ(v->containers[0].requests, (StringMap{{"cpu", "1"}}));
  auto all = v->AllContainers();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]->name, "init");
  EXPECT_EQ(all[2]->name, "side");
}

TEST(PodView, InitNotDone) {
  const char* cases[] = {
      R"({"spec": {"initContainers": [{"name": "i"}]}})",
      R"({"spec": {"initContainers": [{"name": "i"}]}, "status": {"initContainerStatuses": [
          {"state": {"terminated": {"exitCode": 1}}}]}})",
      R"({"spec": {"initContainers": [{"name": "i"}]}, "status": {"initContainerStatuses": [
          {"state": {"running": {}}}]}})",
      R"({"spec": {}, "status": {"initContainerStatuses": []}})",
  };
  for (const char* c : cases) {
    auto v = ParsePodView(json::parse(c));
    ASSERT_TRUE(v) << v.error();
    EXPECT_FALSE(v->init_done) << c;
  }
}

TEST(PodView, EmptyAndTolerant) {
  auto v = ParsePodView(json::object());
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, PodView{});
  v = ParsePodView(json::parse(R"({"metadata": null, "spec": {"containers": null}})"));
  ASSERT_TRUE(v);
}

TEST(PodView, RejectsWrongTypesNamingTheField) {
  struct Case {
    const char* pod;
    const char* want;
  };
  const Case cases[] = {
      {"[]", "pod: want an object"},
      {R"({"spec": {"containers": {}}})", "spec.containers: want a list"},
      {R"({"spec": {"containers": [3]}})", "spec.containers[0]: want an object"},
      {R"({"spec": {"initContainers": [{"resources": []}]}})",
       "spec.initContainers[0].resources: want an object"},
      {R"({"spec": {"containers": [{}, {"resources": {"limits": {"nvidia.com/gpu": [1]}}}]}})",
       R"(spec.containers[1].resources.limits["nvidia.com/gpu"]: want a quantity, got "[1]")"},
      {R"({"spec": {"containers": [{"resources": {"requests": {"x": 1.5}}}]}})",
       R"(spec.containers[0].resources.requests["x"]: want a quantity)"},
      {R"({"spec": {"containers": [{"resources": {"limits": "x"}}]}})",
       "spec.containers[0].resources.limits: want a map"},
  };
  for (const auto& c : cases) {
    auto v = ParsePodView(json::parse(c.pod));
    ASSERT_FALSE(v) << c.pod;
    EXPECT_EQ(v.error().rfind(c.want, 0), 0u) << v.error();
  }
}

TEST(ObjectAnnotations, ReadsStringsOnly) {
  auto a = ObjectAnnotations(json::parse(R"({"metadata": {"annotations": {"k": "v", "n": 1}}})"));
  EXPECT_EQ(a, (StringMap{{"k", "v"}}));
  EXPECT_TRUE(ObjectAnnotations(json::parse("3")).empty());
}

// PodViewFields keeps what ParsePodView reads: the same view, or the same error, for pods with
// everything else a real pod carries and for pods with fields of the wrong type.
TEST(PodViewFields, ReadsAsThePod) {
  const char* pods[] = {
      R"({"apiVersion": "v1", "kind": "Pod",
          "metadata": {"name": "demo", "namespace": "default", "uid": "u-1",
                       "resourceVersion": "42", "generateName": "demo-",
                       "annotations": {"a": "1", "n": 5}, "labels": {"l": "x"},
                       "deletionTimestamp": "2026-01-01T00:00:00Z",
                       "ownerReferences": [{"kind": "ReplicaSet", "name": "rs"}],
                       "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
          "spec": {"nodeName": "node-a", "schedulerName": "hami-scheduler",
                   "volumes": [{"name": "v", "emptyDir": {}}],
                   "initContainers": [{"name": "init", "image": "busybox",
                                       "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                   "containers": [{"name": "main", "image": "cuda", "env": [{"name": "A"}],
                                   "resources": {"limits": {"nvidia.com/gpu": "2"},
                                                 "requests": {"cpu": "1"},
                                                 "claims": [{"name": "c"}]}},
                                  {"name": "side"}]},
          "status": {"phase": "Running", "podIP": "10.0.0.1",
                     "conditions": [{"type": "Ready", "status": "True"}],
                     "initContainerStatuses": [
                         {"name": "init", "image": "busybox",
                          "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}})",
      R"({"spec": {"initContainers": [{"name": "i"}, {"name": "j"}]},
          "status": {"initContainerStatuses": [{"state": {"running": {}}}, 7,
                                               {"state": {"terminated": {"exitCode": 0}}}]}})",
      R"({"spec": {"initContainers": [{"name": "i"}]},
          "status": {"initContainerStatuses": {"not": "a list"}}})",
      R"({"spec": {"containers": {"name": "main"}}})",
      R"({"spec": {"containers": [3]}})",
      R"({"spec": {"containers": [{"resources": "x"}]}})",
      R"({"spec": {"containers": [{"resources": {"limits": [1]}}]}})",
      R"({"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": [1]}}}]}})",
      R"({"metadata": "m", "spec": "s", "status": "t"})",
      R"({"metadata": null, "spec": {"nodeName": null, "containers": null}})",
      R"({})",
      R"([1, 2])",
  };
  for (const char* text : pods) {
    json pod = json::parse(text);
    json kept = PodViewFields(pod);
    auto want = ParsePodView(pod);
    auto got = ParsePodView(kept);
    ASSERT_EQ(static_cast<bool>(got), static_cast<bool>(want)) << text;
    if (want) {
      EXPECT_EQ(*got, *want) << text;
    } else {
      EXPECT_EQ(got.error(), want.error()) << text;
    }
  }
}

TEST(PodViewFields, DropsWhatParsePodViewDoesNotRead) {
  json pod = json::parse(R"({"apiVersion": "v1", "kind": "Pod",
      "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7",
                   "managedFields": [{"manager": "kubectl"}], "ownerReferences": []},
      "spec": {"nodeName": "n", "volumes": [], "tolerations": [],
               "containers": [{"name": "c", "image": "cuda", "command": ["sleep"],
                               "resources": {"limits": {"nvidia.com/gpu": "1"},
                                             "claims": []}}]},
      "status": {"phase": "Running", "conditions": [], "containerStatuses": [],
                 "initContainerStatuses": [{"name": "i", "imageID": "sha",
                     "state": {"terminated": {"exitCode": 0, "message": "long"}}}]}})");
  EXPECT_EQ(PodViewFields(pod), json::parse(R"({
      "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7"},
      "spec": {"nodeName": "n",
               "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
      "status": {"phase": "Running",
                 "initContainerStatuses": [{"state": {"terminated": {"exitCode": 0}}}]}})"));
}

// The scheduler hands maps read by k8s helpers to device functions: the two aliases must agree.
static_assert(std::is_same_v<StringMap, k8s::StringMap>);

TEST(FindValue, LooksUpByStringView) {
  const StringMap m = {{"hami.io/numa-bind", "true"}, {"hami.io/vgpu-node", "n1"}};
  constexpr std::string_view kKey = "hami.io/numa-bind";
  const std::string* v = FindValue(m, kKey);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(*v, "true");
  EXPECT_EQ(v, &m.at("hami.io/numa-bind"));  // points into the map
  EXPECT_EQ(FindValue(m, "hami.io/numa"), nullptr);
  EXPECT_EQ(FindValue(StringMap{}, kKey), nullptr);
}

}  // namespace
}  // namespace hami::device
