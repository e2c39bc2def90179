// The container side of the simulated kubelets: how many devices a container asks for, the pod
// status a kubelet writes, and the usage region file (sim/usage.h) a container with a declared
// usage leaves for the node's monitor.
#include "common/log.h"
#include "common/strings.h"
#include "common/time_format.h"
#include "k8s/object.h"
#include "sim/kubelet_impl.h"

namespace hami::sim {

using nlohmann::json;

int64_t ContainerDeviceCount(const json& container, const std::string& resource) {
  for (const char* kind : {"limits", "requests"}) {
    const json* r = container.contains("resources") ? &container["resources"] : nullptr;
    if (r == nullptr || !r->contains(kind) || !(*r)[kind].contains(resource)) continue;
    const json& v = (*r)[kind][resource];
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_string()) {
      auto n = ParseInt64(v.get<std::string>());
      if (n) return *n;
    }
  }
  return 0;
}

namespace {

std::string Rfc3339(SystemTime t) { return FormatRfc3339(t, Zone::Utc()); }

}  // namespace

json RunningStatus(const json& pod, SystemTime now) {
  const std::string ts = Rfc3339(now);
  json status = {{"phase", "Running"}, {"startTime", ts}, {"hostIP", "10.0.0.1"}};
  status["conditions"] = json::array();
  for (const char* type : {"Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    status["conditions"].push_back(
        {{"type", type}, {"status", "True"}, {"lastTransitionTime", ts}});
  }
  status["containerStatuses"] = json::array();
  if (pod.contains("spec") && pod["spec"].contains("containers")) {
    for (const json& c : pod["spec"]["containers"]) {
      status["containerStatuses"].push_back({{"name", c.value("name", "")},
                                             {"ready", true},
                                             {"started", true},
                                             {"restartCount", 0},
                                             {"image", "sim"},
                                             {"imageID", ""},
                                             {"state", {{"running", {{"startedAt", ts}}}}}});
    }
  }
  return status;
}

json EndStatus(const json& pod, SystemTime now, bool ok, const std::string& message) {
  const std::string ts = Rfc3339(now);
  json status = {{"phase", ok ? "Succeeded" : "Failed"}};
  if (!ok) {
    status["reason"] = "UnexpectedAdmissionError";
    status["message"] = message;
    return status;
  }
  status["conditions"] = json::array();
  for (const char* type : {"Ready", "ContainersReady"}) {
    status["conditions"].push_back({{"type", type},
                                    {"status", "False"},
                                    {"reason", "PodCompleted"},
                                    {"lastTransitionTime", ts}});
  }
  status["containerStatuses"] = json::array();
  if (pod.contains("spec") && pod["spec"].contains("containers")) {
    for (const json& c : pod["spec"]["containers"]) {
      status["containerStatuses"].push_back(
          {{"name", c.value("name", "")},
           {"ready", false},
           {"restartCount", 0},
           {"image", "sim"},
           {"imageID", ""},
           {"state",
            {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}, {"finishedAt", ts}}}}}});
    }
  }
  return status;
}

// The scenario's `usage:` (sim/usage.h): the pod's annotation, parsed; empty when absent or bad
// (logged).
std::map<std::string, SimUsage> KubeletFleet::Impl::PodUsage(const json& pod) {
  auto value = k8s::Annotation(pod, kUsageAnnotation);
  if (!value) return {};
  auto parsed = ParseUsageAnnotation(*value);
  if (!parsed) {
    HAMI_WARN("pod {}: {}", k8s::ObjectKey(pod), parsed.error());
    return {};
  }
  return std::move(*parsed);
}

// A container with a declared usage: its region file, where the node's monitor reads it.
void KubeletFleet::Impl::WriteUsage(const json& pod, const std::string& container,
                                    const std::map<std::string, SimUsage>& usage,
                                    const std::map<std::string, std::string>& envs,
                                    const std::map<std::string, std::string>& mounts) {
  auto u = usage.find(container);
  if (u == usage.end()) return;
  UsageRegion region;
  region.usage = u->second;
  auto path = UsageRegionFor(envs, HookPath(), k8s::Uid(pod), container, &region);
  if (path && !mounts.empty()) {
    // DRA: the region is the claim's, a file mount of its own (docs/DRA.md "Prepare").
    auto cache = envs.find("CUDA_DEVICE_MEMORY_SHARED_CACHE");
    auto host = cache == envs.end() ? mounts.end() : mounts.find(cache->second);
    if (host == mounts.end()) {
      path = Error{"CUDA_DEVICE_MEMORY_SHARED_CACHE: no CDI mount for " +
                   Quote(cache == envs.end() ? "" : cache->second)};
    } else {
      path = host->second;
    }
  }
  Status st = path ? WriteUsageRegion(*path, region) : Status(Error{path.error()});
  if (!st) HAMI_WARN("pod {} container {}: usage: {}", k8s::ObjectKey(pod), container, st.error());
}

}  // namespace hami::sim
