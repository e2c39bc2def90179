#include "sim/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "common/strings.h"
#include "device/vendors/nvidia/nvidia_config.h"
#include "device/yaml_error.h"
#include "deviceplugin/mig_profiles.h"
#include "k8s/client_flags.h"
#include "protocol/quantity.h"
#include "sim/vendor_plugin.h"
#include "sim/yaml_json.h"

namespace hami::sim {
namespace {

using device::Describe;
using device::FieldError;

// Unknown keys are errors: a misspelt `replica:` must not silently run one pod.
Status CheckKeys(const YAML::Node& map, const std::string& path,
                 std::initializer_list<std::string_view> known) {
  if (!map || !map.IsMap()) {
    return FieldError(path.empty() ? "scenario" : path, "a map", Describe(map));
  }
  for (const auto& kv : map) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "<non-scalar>";
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::vector<std::string> names(known.begin(), known.end());
      return Error{(path.empty() ? "" : path + ".") + key +
                   ": unknown key (known: " + Join(names, ", ") + ")"};
    }
  }
  return OkStatus();
}

std::string Sub(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

Status ReadString(const YAML::Node& node, const std::string& path, std::string* out) {
  if (!node || !node.IsScalar() || node.Scalar().empty()) {
    return FieldError(path, "a non-empty string", Describe(node));
  }
  *out = node.Scalar();
  return OkStatus();
}

Status ReadInt(const YAML::Node& node, const std::string& path, int64_t min, int64_t max,
               int64_t* out) {
  std::optional<int64_t> v;
  if (node && node.IsScalar()) v = ParseInt64(node.Scalar());
  if (!v || *v < min || *v > max) {
    return FieldError(path,
                      "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]",
                      Describe(node));
  }
  *out = *v;
  return OkStatus();
}

Status ReadIntTo(const YAML::Node& node, const std::string& path, int64_t min, int64_t max,
                 int* out) {
  int64_t v = 0;
  if (auto s = ReadInt(node, path, min, max, &v); !s) return s;
  *out = static_cast<int>(v);
  return OkStatus();
}

Status ReadDouble(const YAML::Node& node, const std::string& path, double min, double max,
                  std::string_view want, double* out) {
  if (!node || !node.IsScalar() || node.Scalar().empty()) {
    return FieldError(path, want, Describe(node));
  }
  const std::string& text = node.Scalar();
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v) || v < min || v > max) {
    return FieldError(path, want, text);
  }
  *out = v;
  return OkStatus();
}

Status ReadDuration(const YAML::Node& node, const std::string& path,
                    std::chrono::milliseconds* out) {
  std::optional<std::chrono::nanoseconds> d;
  if (node && node.IsScalar()) d = k8s::ParseGoDuration(node.Scalar());
  if (!d || d->count() < 0) {
    return FieldError(path, "a duration like 250ms or 2s", Describe(node));
  }
  *out = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  return OkStatus();
}

Status ReadStringList(const YAML::Node& node, const std::string& path,
                      std::vector<std::string>* out) {
  if (!node || !node.IsSequence() || node.size() == 0) {
    return FieldError(path, "a non-empty list of strings", Describe(node));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    std::string item;
    if (auto st = ReadString(node[i], path + "[" + std::to_string(i) + "]", &item); !st) {
      return st;
    }
    out->push_back(std::move(item));
  }
  return OkStatus();
}

Status ReadStringMap(const YAML::Node& node, const std::string& path,
                     std::map<std::string, std::string>* out) {
  if (!node || !node.IsMap()) return FieldError(path, "a map of strings", Describe(node));
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (key.empty()) return FieldError(path, "string keys", Describe(kv.first));
    if (!kv.second.IsScalar()) return FieldError(path + "." + key, "a string", Describe(kv.second));
    (*out)[key] = kv.second.Scalar();
  }
  return OkStatus();
}

Status ParseTiming(const YAML::Node& node, Scenario* s) {
  const std::string path = "timing";
  if (auto st = CheckKeys(
          node, path,
          {"kubeletLatency", "timeout", "podCreators", "podInitialBackoff", "podMaxBackoff"});
      !st) {
    return st;
  }
  // kube-scheduler's podInitialBackoffSeconds / podMaxBackoffSeconds.
  for (auto [key, out] : {std::pair{"podInitialBackoff", &s->pod_initial_backoff},
                          std::pair{"podMaxBackoff", &s->pod_max_backoff}}) {
    if (!node[key]) continue;
    if (auto st = ReadDuration(node[key], Sub(path, key), out); !st) return st;
    if (out->count() == 0) return FieldError(Sub(path, key), "a positive duration", "0");
  }
  if (s->pod_max_backoff < s->pod_initial_backoff) {
    return FieldError(Sub(path, "podMaxBackoff"), "at least podInitialBackoff",
                      std::to_string(s->pod_max_backoff.count()) + "ms");
  }
  if (node["kubeletLatency"]) {
    if (auto st =
            ReadDuration(node["kubeletLatency"], Sub(path, "kubeletLatency"), &s->kubelet_latency);
        !st) {
      return st;
    }
  }
  if (node["timeout"]) {
    if (auto st = ReadDuration(node["timeout"], Sub(path, "timeout"), &s->timeout); !st) return st;
    if (s->timeout.count() == 0)
      return FieldError(Sub(path, "timeout"), "a positive duration", "0");
  }
  if (node["podCreators"]) {
    return ReadIntTo(node["podCreators"], Sub(path, "podCreators"), 1, 256, &s->pod_creators);
  }
  return OkStatus();
}

Status ParsePolicies(const YAML::Node& node, Scenario* s) {
  const std::string path = "policies";
  if (auto st = CheckKeys(node, path, {"nodeSchedulerPolicy", "gpuSchedulerPolicy"}); !st) {
    return st;
  }
  if (node["nodeSchedulerPolicy"]) {
    const std::string p = Sub(path, "nodeSchedulerPolicy");
    if (auto st = ReadString(node["nodeSchedulerPolicy"], p, &s->node_scheduler_policy); !st) {
      return st;
    }
    if (!device::ParseNodePolicy(s->node_scheduler_policy)) {
      return FieldError(p, "binpack or spread", s->node_scheduler_policy);
    }
  }
  if (node["gpuSchedulerPolicy"]) {
    const std::string p = Sub(path, "gpuSchedulerPolicy");
    if (auto st = ReadString(node["gpuSchedulerPolicy"], p, &s->gpu_scheduler_policy); !st) {
      return st;
    }
    if (auto g = device::ParseGpuPolicy(s->gpu_scheduler_policy, /*strict=*/true); !g) {
      return Error{p + ": " + g.error()};
    }
  }
  return OkStatus();
}

// A duration that may be negative ("-30s"), for clock skews.
Status ReadSignedDuration(const YAML::Node& node, const std::string& path,
                          std::chrono::milliseconds* out) {
  const bool negative =
      node && node.IsScalar() && !node.Scalar().empty() && node.Scalar()[0] == '-';
  std::optional<std::chrono::nanoseconds> d;
  if (node && node.IsScalar()) d = k8s::ParseGoDuration(node.Scalar().substr(negative ? 1 : 0));
  if (!d || d->count() < 0) {
    return FieldError(path, "a duration like 30s or -2m", Describe(node));
  }
  *out = std::chrono::duration_cast<std::chrono::milliseconds>(*d) * (negative ? -1 : 1);
  return OkStatus();
}

Status ParseFaultSchedule(const YAML::Node& node, const std::string& path, bool with_target,
                          FaultSchedule* out, KillTarget* target) {
  if (auto st = with_target
                    ? CheckKeys(node, path, {"at", "every", "start", "count", "down", "target"})
                    : CheckKeys(node, path, {"at", "every", "start", "count", "down"});
      !st) {
    return st;
  }
  if (node["at"]) {
    const std::string at = Sub(path, "at");
    if (!node["at"].IsSequence() || node["at"].size() == 0) {
      return FieldError(at, "a non-empty list of durations", Describe(node["at"]));
    }
    for (size_t i = 0; i < node["at"].size(); ++i) {
      std::chrono::milliseconds t{0};
      if (auto st = ReadDuration(node["at"][i], at + "[" + std::to_string(i) + "]", &t); !st) {
        return st;
      }
      out->at.push_back(t);
    }
    std::sort(out->at.begin(), out->at.end());
  }
  for (auto [key, field] : {std::pair{"every", &out->every}, std::pair{"start", &out->start},
                            std::pair{"down", &out->down}}) {
    if (!node[key]) continue;
    if (auto st = ReadDuration(node[key], Sub(path, key), field); !st) return st;
  }
  if (node["every"] && out->every.count() == 0) {
    return FieldError(Sub(path, "every"), "a positive duration", "0");
  }
  if (node["count"]) {
    if (auto st = ReadIntTo(node["count"], Sub(path, "count"), 0, 1 << 20, &out->count); !st) {
      return st;
    }
  }
  if (!out->enabled()) {
    return FieldError(path, "a schedule: `at` offsets or an `every` period", Describe(node));
  }
  if (node["target"]) {
    const std::string t = node["target"].IsScalar() ? node["target"].Scalar() : "";
    if (t == "any") {
      *target = KillTarget::kAny;
    } else if (t == "leader") {
      *target = KillTarget::kLeader;
    } else if (t == "follower") {
      *target = KillTarget::kFollower;
    } else {
      return FieldError(Sub(path, "target"), "any, leader or follower", Describe(node["target"]));
    }
  }
  return OkStatus();
}

Status ParseClockSkew(const YAML::Node& node, const std::string& path, ProcessFaults* f) {
  if (auto st = CheckKeys(node, path, {"scheduler", "plugins"}); !st) return st;
  for (auto [key, field] : {std::pair{"scheduler", &f->scheduler_clock_skew},
                            std::pair{"plugins", &f->plugin_clock_skew}}) {
    if (!node[key]) continue;
    if (auto st = ReadSignedDuration(node[key], Sub(path, key), field); !st) return st;
  }
  return OkStatus();
}

Status ParseFaults(const YAML::Node& node, Scenario* s) {
  const std::string path = "faults";
  if (auto st = CheckKeys(
          node, path,
          {"errorRate", "latency", "dropWatchEvery", "seed", "killScheduler", "killPlugin",
           "restartKubelet", "restartApiServer", "deleteNode", "unhealthyGpu", "clockSkew"});
      !st) {
    return st;
  }
  if (node["errorRate"]) {
    if (auto st = ReadDouble(node["errorRate"], Sub(path, "errorRate"), 0, 0.5,
                             "a fraction in [0, 0.5]", &s->fault_error_rate);
        !st) {
      return st;
    }
  }
  if (node["latency"]) {
    if (auto st = ReadDuration(node["latency"], Sub(path, "latency"), &s->fault_latency); !st) {
      return st;
    }
  }
  if (node["dropWatchEvery"]) {
    if (auto st = ReadIntTo(node["dropWatchEvery"], Sub(path, "dropWatchEvery"), 0, 1 << 30,
                            &s->fault_drop_watch_every);
        !st) {
      return st;
    }
  }
  ProcessFaults& f = s->process_faults;
  if (node["seed"]) {
    int64_t seed = 0;
    if (auto st = ReadInt(node["seed"], Sub(path, "seed"), 0, INT64_MAX, &seed); !st) return st;
    f.seed = static_cast<uint64_t>(seed);
  }
  KillTarget unused = KillTarget::kAny;
  for (auto [key, schedule, target] :
       {std::tuple{"killScheduler", &f.kill_scheduler, &f.kill_scheduler_target},
        std::tuple{"killPlugin", &f.kill_plugin, &unused},
        std::tuple{"restartKubelet", &f.restart_kubelet, &unused},
        std::tuple{"restartApiServer", &f.restart_api_server, &unused},
        std::tuple{"deleteNode", &f.delete_node, &unused},
        std::tuple{"unhealthyGpu", &f.unhealthy_gpu, &unused}}) {
    if (!node[key]) continue;
    const bool with_target = schedule == &f.kill_scheduler;
    if (auto st = ParseFaultSchedule(node[key], Sub(path, key), with_target, schedule, target);
        !st) {
      return st;
    }
  }
  if (node["clockSkew"]) return ParseClockSkew(node["clockSkew"], Sub(path, "clockSkew"), &f);
  return OkStatus();
}

Status ParseLeaderElection(const YAML::Node& node, Scenario* s) {
  const std::string path = "leaderElection";
  if (auto st = CheckKeys(node, path, {"leaseDuration", "renewDeadline", "retryPeriod"}); !st) {
    return st;
  }
  LeaderElectionTiming& le = s->leader_election;
  if (node["leaseDuration"]) {
    std::chrono::milliseconds d{0};
    const std::string p = Sub(path, "leaseDuration");
    if (auto st = ReadDuration(node["leaseDuration"], p, &d); !st) return st;
    // leaseDurationSeconds is whole seconds on the wire.
    if (d.count() < 1000 || d.count() % 1000 != 0) {
      return FieldError(p, "whole seconds, at least 1s", node["leaseDuration"].Scalar());
    }
    le.lease_duration = std::chrono::duration_cast<std::chrono::seconds>(d);
  }
  for (auto [key, field] : {std::pair{"renewDeadline", &le.renew_deadline},
                            std::pair{"retryPeriod", &le.retry_period}}) {
    if (!node[key]) continue;
    if (auto st = ReadDuration(node[key], Sub(path, key), field); !st) return st;
    if (field->count() == 0) return FieldError(Sub(path, key), "a positive duration", "0");
  }
  // client-go's checks: leaseDuration > renewDeadline > retryPeriod.
  if (le.renew_deadline >= le.lease_duration) {
    return FieldError(Sub(path, "renewDeadline"), "less than leaseDuration",
                      std::to_string(le.renew_deadline.count()) + "ms");
  }
  if (le.retry_period >= le.renew_deadline) {
    return FieldError(Sub(path, "retryPeriod"), "less than renewDeadline",
                      std::to_string(le.retry_period.count()) + "ms");
  }
  return OkStatus();
}

// `mode` and `profiles` of a gpus entry (MIG, docs/MIG.md).
Status ParseGpuMode(const YAML::Node& node, const std::string& path, GpuGroup* g) {
  if (node["mode"]) {
    if (auto st = ReadString(node["mode"], Sub(path, "mode"), &g->mode); !st) return st;
    if (g->mode != "mig" && g->mode != "hami-core") {
      return FieldError(Sub(path, "mode"), "\"mig\" or \"hami-core\"", g->mode);
    }
  }
  if (!node["profiles"]) return OkStatus();
  if (g->mode != "mig") return FieldError(Sub(path, "profiles"), "mode: mig", "no mode: mig");
  const YAML::Node& list = node["profiles"];
  if (!list.IsSequence() || list.size() == 0) {
    return FieldError(Sub(path, "profiles"), "a non-empty list", Describe(list));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string p = Sub(path, "profiles") + "[" + std::to_string(i) + "]";
    std::string name;
    if (auto st = ReadString(list[i], p, &name); !st) return st;
    if (deviceplugin::GpuInstanceProfileId(name) < 0 || name.find('.') == std::string::npos) {
      return FieldError(p, "a MIG profile <N>g.<memory> with N in 1, 2, 3, 4, 6, 7, 8", name);
    }
    g->mig_profiles.push_back(std::move(name));
  }
  return OkStatus();
}

Status ParseGpuGroup(const YAML::Node& node, const std::string& path, GpuGroup* g) {
  if (auto st = CheckKeys(
          node, path, {"model", "memory", "count", "numa", "uuids", "mode", "profiles", "vendor"});
      !st) {
    return st;
  }
  if (auto st = ParseGpuMode(node, path, g); !st) return st;
  if (node["vendor"]) {
    if (auto st = ReadString(node["vendor"], Sub(path, "vendor"), &g->vendor); !st) return st;
    if (g->vendor == "NVIDIA") g->vendor.clear();
  }
  if (auto st = ReadString(node["model"], Sub(path, "model"), &g->model); !st) return st;
  if (g->model.find_first_of(",:;") != std::string::npos) {
    return FieldError(Sub(path, "model"), "no ',', ':' or ';'", g->model);
  }
  if (auto st = ReadInt(node["memory"], Sub(path, "memory"), 1, 1 << 24, &g->memory_mib); !st) {
    return st;
  }
  if (node["count"]) {
    if (auto st = ReadIntTo(node["count"], Sub(path, "count"), 1, 64, &g->count); !st) return st;
  }
  if (node["numa"]) {
    if (auto st = ReadInt(node["numa"], Sub(path, "numa"), 0, 64, &g->numa); !st) return st;
  }
  if (node["uuids"]) {
    const YAML::Node& u = node["uuids"];
    if (!u || !u.IsSequence()) return FieldError(Sub(path, "uuids"), "a list", Describe(u));
    for (size_t i = 0; i < u.size(); ++i) {
      std::string id;
      const std::string p = Sub(path, "uuids") + "[" + std::to_string(i) + "]";
      if (auto st = ReadString(u[i], p, &id); !st) return st;
      if (id.find_first_of(",:;") != std::string::npos) return FieldError(p, "a GPU UUID", id);
      g->uuids.push_back(id);
    }
    if (static_cast<int>(g->uuids.size()) != g->count) {
      return FieldError(Sub(path, "uuids"), std::to_string(g->count) + " UUIDs (count)",
                        std::to_string(g->uuids.size()) + " UUIDs");
    }
  }
  return OkStatus();
}

Status ParseNodeGroup(const YAML::Node& node, const std::string& path, NodeGroup* n) {
  if (auto st = CheckKeys(node, path, {"name", "count", "labels", "gpus"}); !st) return st;
  if (auto st = ReadString(node["name"], Sub(path, "name"), &n->name_pattern); !st) return st;
  if (node["count"]) {
    if (auto st = ReadIntTo(node["count"], Sub(path, "count"), 1, 100000, &n->count); !st) {
      return st;
    }
  }
  if (n->count > 1 && n->name_pattern.find("{i}") == std::string::npos) {
    return FieldError(Sub(path, "name"), "a pattern with {i} when count > 1", n->name_pattern);
  }
  if (node["labels"]) {
    if (auto st = ReadStringMap(node["labels"], Sub(path, "labels"), &n->labels); !st) return st;
  }
  const YAML::Node& gpus = node["gpus"];
  if (!gpus || !gpus.IsSequence() || gpus.size() == 0) {
    return FieldError(Sub(path, "gpus"), "a non-empty list", Describe(gpus));
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    GpuGroup g;
    if (auto st = ParseGpuGroup(gpus[i], Sub(path, "gpus") + "[" + std::to_string(i) + "]", &g);
        !st) {
      return st;
    }
    if (!g.uuids.empty() && n->count != 1) {
      return FieldError(Sub(path, "gpus") + "[" + std::to_string(i) + "].uuids",
                        "uuids only in a group of one node", "count " + std::to_string(n->count));
    }
    if (i > 0 && g.vendor != n->gpus.front().vendor) {
      return FieldError(Sub(path, "gpus") + "[" + std::to_string(i) + "].vendor",
                        "the vendor of gpus[0] (a node has one vendor)",
                        g.vendor.empty() ? "NVIDIA" : g.vendor);
    }
    n->gpus.push_back(std::move(g));
  }
  return OkStatus();
}

Status ParseUsage(const YAML::Node& node, const std::string& path, SimUsage* u) {
  if (auto st = CheckKeys(node, path, {"memory", "utilization"}); !st) return st;
  if (node["memory"]) {
    if (auto st = ReadInt(node["memory"], Sub(path, "memory"), 0, 1 << 30, &u->memory_mib); !st) {
      return st;
    }
  }
  if (node["utilization"]) {
    if (auto st = ReadInt(node["utilization"], Sub(path, "utilization"), 0, 100, &u->utilization);
        !st) {
      return st;
    }
  }
  return OkStatus();
}

Status ParseContainer(const YAML::Node& node, const std::string& path, ContainerSpec* c) {
  if (auto st = CheckKeys(node, path, {"name", "resources", "usage", "claims"}); !st) return st;
  if (auto st = ReadString(node["name"], Sub(path, "name"), &c->name); !st) return st;
  if (node["claims"]) {
    if (auto st = ReadStringList(node["claims"], Sub(path, "claims"), &c->claims); !st) return st;
  }
  if (node["usage"]) {
    SimUsage u;
    if (auto st = ParseUsage(node["usage"], Sub(path, "usage"), &u); !st) return st;
    c->usage = u;
  }
  if (!node["resources"]) return OkStatus();
  const std::string rp = Sub(path, "resources");
  if (auto st = ReadStringMap(node["resources"], rp, &c->resources); !st) return st;
  for (const auto& [name, value] : c->resources) {
    if (auto q = protocol::ParseQuantity(value); !q) {
      return FieldError(rp + "." + name, "a quantity", value);
    }
  }
  return OkStatus();
}

Status ParseWorkloadTimes(const YAML::Node& node, const std::string& path, Workload* w) {
  if (node["arrival"]) {
    if (auto st = ReadDuration(node["arrival"], Sub(path, "arrival"), &w->arrival); !st) return st;
  }
  if (node["interval"]) {
    if (auto st = ReadDuration(node["interval"], Sub(path, "interval"), &w->interval); !st) {
      return st;
    }
  }
  if (node["duration"]) {
    std::chrono::milliseconds d{0};
    if (auto st = ReadDuration(node["duration"], Sub(path, "duration"), &d); !st) return st;
    w->duration_seconds = static_cast<double>(d.count()) / 1000.0;
  }
  return OkStatus();
}

Status ParsePodClaim(const YAML::Node& node, const std::string& path, PodClaim* c) {
  if (auto st = CheckKeys(node, path, {"name", "template", "claim"}); !st) return st;
  if (auto st = ReadString(node["name"], Sub(path, "name"), &c->name); !st) return st;
  if (node["template"].IsDefined() == node["claim"].IsDefined()) {
    return FieldError(path, "exactly one of template and claim",
                      node["template"] ? "both" : "neither");
  }
  if (node["template"]) {
    return ReadString(node["template"], Sub(path, "template"), &c->claim_template);
  }
  return ReadString(node["claim"], Sub(path, "claim"), &c->claim);
}

// An entry of resourceClaimTemplates / resourceClaims: the spec is checked by the API server
// when the run creates it (its errors name the object).
Status ParseClaimObject(const YAML::Node& node, const std::string& path, ClaimObject* o) {
  if (auto st = CheckKeys(node, path, {"name", "namespace", "spec"}); !st) return st;
  if (auto st = ReadString(node["name"], Sub(path, "name"), &o->name); !st) return st;
  if (node["namespace"]) {
    if (auto st = ReadString(node["namespace"], Sub(path, "namespace"), &o->ns); !st) return st;
  }
  if (!node["spec"] || !node["spec"].IsMap()) {
    return FieldError(Sub(path, "spec"), "a map", Describe(node["spec"]));
  }
  o->spec_json = YamlToJson(node["spec"]).dump();
  return OkStatus();
}

// A node's GPUs share one operating mode in device-plugin mode (its plugin runs in one); in DRA
// mode each GPU is in MIG mode or not, as hami-dra-plugin publishes each GPU by its own mode.
Status CheckNodeModes(const Scenario& s) {
  if (s.dra) return OkStatus();
  for (size_t n = 0; n < s.nodes.size(); ++n) {
    const std::vector<GpuGroup>& gpus = s.nodes[n].gpus;
    for (size_t i = 1; i < gpus.size(); ++i) {
      if ((gpus[i].mode == "mig") == (gpus.front().mode == "mig")) continue;
      return FieldError("nodes[" + std::to_string(n) + "].gpus[" + std::to_string(i) + "].mode",
                        "the mode of gpus[0] (a node has one operating mode; with dra: true each "
                        "GPU may have its own)",
                        gpus[i].mode.empty() ? "no mode" : gpus[i].mode);
    }
  }
  return OkStatus();
}

// DRA: claims need `dra: true`; a container's claims name its workload's; a workload's claim
// names a template or claim of the scenario; the device plugin's vendors and DRA do not mix.
Status CheckDra(const Scenario& s) {
  for (size_t w = 0; w < s.workloads.size(); ++w) {
    const Workload& wl = s.workloads[w];
    const std::string path = "workloads[" + std::to_string(w) + "]";
    if (!wl.claims.empty() && !s.dra) {
      return FieldError(path + ".claims", "dra: true (claims are DRA's)", wl.claims[0].name);
    }
    std::set<std::string> names;
    for (size_t i = 0; i < wl.claims.size(); ++i) {
      const PodClaim& c = wl.claims[i];
      const std::string cp = path + ".claims[" + std::to_string(i) + "]";
      if (!names.insert(c.name).second) return FieldError(cp + ".name", "a unique name", c.name);
      const auto& objects = c.claim.empty() ? s.claim_templates : s.claims;
      const std::string& ref = c.claim.empty() ? c.claim_template : c.claim;
      const bool found = std::any_of(objects.begin(), objects.end(), [&](const ClaimObject& o) {
        return o.name == ref && o.ns == wl.ns;
      });
      if (!found) {
        return FieldError(cp + (c.claim.empty() ? ".template" : ".claim"),
                          std::string("one of ") +
                              (c.claim.empty() ? "resourceClaimTemplates" : "resourceClaims") +
                              " in namespace " + Quote(wl.ns),
                          ref);
      }
    }
    for (size_t i = 0; i < wl.containers.size(); ++i) {
      for (size_t j = 0; j < wl.containers[i].claims.size(); ++j) {
        const std::string& name = wl.containers[i].claims[j];
        if (names.count(name) == 0) {
          return FieldError(
              path + ".containers[" + std::to_string(i) + "].claims[" + std::to_string(j) + "]",
              "the name of one of the workload's claims", name);
        }
      }
    }
  }
  if ((!s.claim_templates.empty() || !s.claims.empty()) && !s.dra) {
    return FieldError(!s.claims.empty() ? "resourceClaims" : "resourceClaimTemplates",
                      "dra: true (claims are DRA's)",
                      !s.claims.empty() ? s.claims[0].name : s.claim_templates[0].name);
  }
  if (!s.dra) return OkStatus();
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    for (size_t j = 0; j < s.nodes[i].gpus.size(); ++j) {
      if (!s.nodes[i].gpus[j].vendor.empty()) {
        return FieldError("nodes[" + std::to_string(i) + "].gpus[" + std::to_string(j) + "].vendor",
                          "NVIDIA GPUs with dra: true (hami-dra-plugin serves NVIDIA only)",
                          s.nodes[i].gpus[j].vendor);
      }
    }
  }
  if (s.scheduler_replicas != 1) {
    return FieldError("schedulerReplicas", "1 with dra: true",
                      std::to_string(s.scheduler_replicas));
  }
  return OkStatus();
}

Status ParseWorkload(const YAML::Node& node, const std::string& path, Workload* w) {
  if (auto st = CheckKeys(node, path,
                          {"name", "namespace", "replicas", "arrival", "interval", "duration",
                           "annotations", "containers", "claims", "deleteAfter"});
      !st) {
    return st;
  }
  if (auto st = ReadString(node["name"], Sub(path, "name"), &w->name); !st) return st;
  if (node["namespace"]) {
    if (auto st = ReadString(node["namespace"], Sub(path, "namespace"), &w->ns); !st) return st;
  }
  if (node["replicas"]) {
    if (auto st = ReadIntTo(node["replicas"], Sub(path, "replicas"), 0, 1000000, &w->replicas);
        !st) {
      return st;
    }
  }
  if (auto st = ParseWorkloadTimes(node, path, w); !st) return st;
  if (node["deleteAfter"]) {
    if (auto st = ReadDuration(node["deleteAfter"], Sub(path, "deleteAfter"), &w->delete_after);
        !st) {
      return st;
    }
  }
  if (node["claims"]) {
    const YAML::Node& claims = node["claims"];
    if (!claims.IsSequence() || claims.size() == 0) {
      return FieldError(Sub(path, "claims"), "a non-empty list", Describe(claims));
    }
    for (size_t i = 0; i < claims.size(); ++i) {
      PodClaim c;
      if (auto st =
              ParsePodClaim(claims[i], Sub(path, "claims") + "[" + std::to_string(i) + "]", &c);
          !st) {
        return st;
      }
      w->claims.push_back(std::move(c));
    }
  }
  if (node["annotations"]) {
    if (auto st = ReadStringMap(node["annotations"], Sub(path, "annotations"), &w->annotations);
        !st) {
      return st;
    }
  }
  const YAML::Node& cs = node["containers"];
  if (!cs || !cs.IsSequence() || cs.size() == 0) {
    return FieldError(Sub(path, "containers"), "a non-empty list", Describe(cs));
  }
  for (size_t i = 0; i < cs.size(); ++i) {
    ContainerSpec c;
    if (auto st =
            ParseContainer(cs[i], Sub(path, "containers") + "[" + std::to_string(i) + "]", &c);
        !st) {
      return st;
    }
    w->containers.push_back(std::move(c));
  }
  return OkStatus();
}

Status ParseDeviceConfig(const YAML::Node& node, Scenario* s) {
  if (!node || !node.IsMap()) return FieldError("deviceConfig", "a map", Describe(node));
  YAML::Emitter out;
  out << node;
  s->device_config_yaml = out.c_str();
  auto loaded = device::LoadDeviceConfig(s->device_config_yaml);
  if (!loaded) return Error{"deviceConfig: " + loaded.error()};
  s->device_config = std::move(*loaded);
  return OkStatus();
}

template <typename T, typename F>
Status ParseList(const YAML::Node& node, const std::string& path, F parse, std::vector<T>* out) {
  if (!node || !node.IsSequence() || node.size() == 0) {
    return FieldError(path, "a non-empty list", Describe(node));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    T item;
    if (auto st = parse(node[i], path + "[" + std::to_string(i) + "]", &item); !st) return st;
    out->push_back(std::move(item));
  }
  return OkStatus();
}

// Names must be unique: two nodes or two pods with one name would silently merge in the API.
// The MIG profiles a simulated GPU of `group` offers: its `profiles`, else the allowlist's for
// its model, with the simulated geometry's capacity (deviceplugin/mig_profiles.h).
std::vector<deviceplugin::MigProfileCapacity> SimulatedMigProfiles(const Scenario& scenario,
                                                                   const GpuGroup& group) {
  const std::vector<device::nvidia::MigAllowlistEntry> own = {{{group.model}, group.mig_profiles}};
  return deviceplugin::MigProfilesFor(
      group.mig_profiles.empty()
          ? device::nvidia::NvidiaSectionOrDefaults(scenario.device_config).mig_profile_allowlist
          : own,
      group.model, deviceplugin::SimulatedGpuInstanceProfiles(group.model, group.memory_mib));
}

// Every `mode: mig` group must offer at least one profile.
Status CheckMigGroups(const Scenario& s) {
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    for (size_t j = 0; j < s.nodes[i].gpus.size(); ++j) {
      const GpuGroup& g = s.nodes[i].gpus[j];
      if (g.mode != "mig" || !SimulatedMigProfiles(s, g).empty()) continue;
      return FieldError("nodes[" + std::to_string(i) + "].gpus[" + std::to_string(j) + "].mode",
                        "a model with MIG profiles (in migProfileAllowlist, or a profiles list)",
                        g.model);
    }
  }
  return OkStatus();
}

// Every `vendor` names an active backend (its section is in deviceConfig), not in MIG mode.
Status CheckVendors(const Scenario& s) {
  const std::vector<std::string> active = ActiveVendorKeys(s.device_config);
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    for (size_t j = 0; j < s.nodes[i].gpus.size(); ++j) {
      const GpuGroup& g = s.nodes[i].gpus[j];
      if (g.vendor.empty()) continue;
      const std::string path =
          "nodes[" + std::to_string(i) + "].gpus[" + std::to_string(j) + "].vendor";
      if (std::find(active.begin(), active.end(), g.vendor) == active.end()) {
        return FieldError(path,
                          "the vendor key of a backend whose section is in deviceConfig (active: " +
                              Join(active, ", ") + ")",
                          g.vendor);
      }
      if (g.mode == "mig") return FieldError(path, "NVIDIA with mode: mig", g.vendor);
    }
  }
  return OkStatus();
}

Status CheckUniqueNames(const Scenario& s) {
  std::set<std::string> seen;
  for (const ExpandedNode& n : ExpandNodes(s)) {
    if (!seen.insert(n.name).second) return Error{"nodes: duplicate node name " + Quote(n.name)};
  }
  seen.clear();
  for (const PlannedPod& p : ExpandPods(s)) {
    if (!seen.insert(p.ns + "/" + p.name).second) {
      return Error{"workloads: duplicate pod name " + Quote(p.ns + "/" + p.name)};
    }
  }
  return OkStatus();
}

Status ParseRoot(const YAML::Node& root, Scenario* s) {
  if (auto st = CheckKeys(root, "",
                          {"name", "description", "timing", "policies", "faults", "deviceConfig",
                           "schedulerReplicas", "leaderElection", "monitors", "nodes", "workloads",
                           "dra", "resourceClaimTemplates", "resourceClaims"});
      !st) {
    return st;
  }
  if (root["name"]) {
    if (auto st = ReadString(root["name"], "name", &s->name); !st) return st;
  }
  if (root["description"]) {
    if (auto st = ReadString(root["description"], "description", &s->description); !st) return st;
  }
  if (root["timing"]) {
    if (auto st = ParseTiming(root["timing"], s); !st) return st;
  }
  if (root["policies"]) {
    if (auto st = ParsePolicies(root["policies"], s); !st) return st;
  }
  if (root["faults"]) {
    if (auto st = ParseFaults(root["faults"], s); !st) return st;
  }
  if (root["schedulerReplicas"]) {
    if (auto st =
            ReadIntTo(root["schedulerReplicas"], "schedulerReplicas", 1, 3, &s->scheduler_replicas);
        !st) {
      return st;
    }
  }
  if (root["leaderElection"]) {
    if (auto st = ParseLeaderElection(root["leaderElection"], s); !st) return st;
  }
  if (root["monitors"]) {
    std::string m;
    if (auto st = ReadString(root["monitors"], "monitors", &m); !st) return st;
    if (m == "auto") {
      s->monitors = Scenario::Monitors::kAuto;
    } else if (m == "on") {
      s->monitors = Scenario::Monitors::kOn;
    } else if (m == "off") {
      s->monitors = Scenario::Monitors::kOff;
    } else {
      return FieldError("monitors", "auto, on or off", m);
    }
  }
  if (root["dra"]) {
    const YAML::Node& d = root["dra"];
    if (!d.IsScalar() || (d.Scalar() != "true" && d.Scalar() != "false")) {
      return FieldError("dra", "true or false", Describe(d));
    }
    s->dra = d.Scalar() == "true";
  }
  if (root["resourceClaimTemplates"]) {
    if (auto st = ParseList<ClaimObject>(root["resourceClaimTemplates"], "resourceClaimTemplates",
                                         ParseClaimObject, &s->claim_templates);
        !st) {
      return st;
    }
  }
  if (root["resourceClaims"]) {
    if (auto st = ParseList<ClaimObject>(root["resourceClaims"], "resourceClaims", ParseClaimObject,
                                         &s->claims);
        !st) {
      return st;
    }
  }
  if (s->process_faults.kill_scheduler_target != KillTarget::kAny && s->scheduler_replicas < 2) {
    return FieldError(
        "faults.killScheduler.target", "any with schedulerReplicas 1",
        s->process_faults.kill_scheduler_target == KillTarget::kLeader ? "leader" : "follower");
  }
  if (root["deviceConfig"]) {
    if (auto st = ParseDeviceConfig(root["deviceConfig"], s); !st) return st;
  }
  if (auto st = ParseList<NodeGroup>(root["nodes"], "nodes", ParseNodeGroup, &s->nodes); !st) {
    return st;
  }
  if (auto st = CheckMigGroups(*s); !st) return st;
  if (auto st = CheckVendors(*s); !st) return st;
  if (auto st = ParseList<Workload>(root["workloads"], "workloads", ParseWorkload, &s->workloads);
      !st) {
    return st;
  }
  if (auto st = CheckDra(*s); !st) return st;
  if (auto st = CheckNodeModes(*s); !st) return st;
  return CheckUniqueNames(*s);
}

std::string ReplaceIndex(const std::string& pattern, int i) {
  std::string out = pattern;
  const std::string idx = std::to_string(i);
  for (size_t pos = out.find("{i}"); pos != std::string::npos; pos = out.find("{i}", pos)) {
    out.replace(pos, 3, idx);
    pos += idx.size();
  }
  return out;
}

}  // namespace

std::vector<std::chrono::milliseconds> FaultSchedule::Times(
    std::chrono::milliseconds horizon) const {
  std::vector<std::chrono::milliseconds> out;
  for (auto t : at) {
    if (t <= horizon) out.push_back(t);
  }
  if (every.count() > 0) {
    int n = 0;
    for (auto t = start; t <= horizon && (count == 0 || n < count); t += every, ++n) {
      out.push_back(t);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<Scenario> ParseScenario(std::string_view yaml_text) {
  Scenario s;
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    if (auto st = ParseRoot(root, &s); !st) return Error{st.error()};
  } catch (const std::exception& e) {
    return Error{std::string("scenario: not valid YAML: ") + e.what()};
  }
  return s;
}

Result<Scenario> LoadScenarioFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"scenario " + Quote(path) + ": cannot read"};
  std::stringstream text;
  text << in.rdbuf();
  auto s = ParseScenario(text.str());
  if (!s) return Error{"scenario " + Quote(path) + ": " + s.error()};
  return s;
}

std::string GpuUuid(std::string_view node, uint64_t index) {
  // FNV-1a over "<node>/<index>", twice with different seeds for 128 bits.
  auto fnv = [&](uint64_t h) {
    auto mix = [&h](unsigned char c) {
      h ^= c;
      h *= 1099511628211ULL;
    };
    for (char c : node) mix(static_cast<unsigned char>(c));
    mix('/');
    for (char c : std::to_string(index)) mix(static_cast<unsigned char>(c));
    return h;
  };
  const uint64_t a = fnv(14695981039346656037ULL);
  const uint64_t b = fnv(a ^ 0x9e3779b97f4a7c15ULL);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "GPU-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

std::vector<ExpandedNode> ExpandNodes(const Scenario& scenario) {
  std::vector<ExpandedNode> out;
  for (const NodeGroup& g : scenario.nodes) {
    for (int i = 0; i < g.count; ++i) {
      ExpandedNode n;
      n.name = ReplaceIndex(g.name_pattern, i);
      n.labels = g.labels;
      uint64_t index = 0;
      n.mode = g.gpus.empty() || g.gpus.front().mode != "mig" ? "" : "mig";
      n.vendor = g.gpus.empty() ? "" : g.gpus.front().vendor;
      for (const GpuGroup& kind : g.gpus) {
        for (int k = 0; k < kind.count; ++k, ++index) {
          deviceplugin::GpuDevice d;
          d.index = index;
          d.uuid = kind.uuids.empty() ? GpuUuid(n.name, index) : kind.uuids[k];
          d.model = kind.model;
          d.memory_mib = kind.memory_mib;
          d.numa = kind.numa;
          if (kind.mode == "mig") d.mig_profiles = SimulatedMigProfiles(scenario, kind);
          n.gpus.push_back(std::move(d));
        }
      }
      out.push_back(std::move(n));
    }
  }
  return out;
}

std::vector<PlannedPod> ExpandPods(const Scenario& scenario) {
  std::vector<PlannedPod> out;
  for (size_t w = 0; w < scenario.workloads.size(); ++w) {
    const Workload& wl = scenario.workloads[w];
    for (int i = 0; i < wl.replicas; ++i) {
      PlannedPod p;
      p.ns = wl.ns;
      p.name = wl.replicas == 1 ? wl.name : wl.name + "-" + std::to_string(i);
      p.workload = wl.name;
      p.arrival = wl.arrival + wl.interval * i;
      p.workload_index = w;
      out.push_back(std::move(p));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const PlannedPod& a, const PlannedPod& b) { return a.arrival < b.arrival; });
  return out;
}

bool RunsMonitors(const Scenario& scenario, bool serving) {
  switch (scenario.monitors) {
    case Scenario::Monitors::kOn:
      return true;
    case Scenario::Monitors::kOff:
      return false;
    case Scenario::Monitors::kAuto:
      break;
  }
  if (serving) return true;
  for (const Workload& w : scenario.workloads) {
    for (const auto& c : w.containers) {
      if (c.usage) return true;
    }
  }
  return false;
}

Result<deviceplugin::PluginConfig> PluginConfigFor(const Scenario& scenario) {
  deviceplugin::PluginConfig base;
  if (scenario.device_config_yaml.empty()) return base;
  return deviceplugin::ApplyDeviceConfigYaml(scenario.device_config_yaml, base);
}

}  // namespace hami::sim
