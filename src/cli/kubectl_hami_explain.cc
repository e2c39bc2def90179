#include "cli/kubectl_hami_explain.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string_view>

#include "common/strings.h"
#include "common/time_format.h"
#include "device/device.h"
#include "device/pod_view.h"
#include "device/schedule.h"
#include "device/usage_index.h"
#include "protocol/bind.h"
#include "protocol/keys.h"
#include "protocol/node_lock.h"
#include "protocol/reason.h"

namespace hami::cli {
namespace {

using nlohmann::json;

std::string StringAt(const json& obj, std::initializer_list<std::string_view> path) {
  const json* at = &obj;
  for (std::string_view key : path) {
    if (!at->is_object()) return "";
    auto it = at->find(key);
    if (it == at->end()) return "";
    at = &*it;
  }
  return at->is_string() ? at->get<std::string>() : "";
}

// The PodScheduled=False message (else its reason), as written.
std::optional<std::string> SchedulingMessage(const json& pod) {
  if (!pod.is_object()) return std::nullopt;
  auto status = pod.find("status");
  if (status == pod.end() || !status->is_object()) return std::nullopt;
  auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) return std::nullopt;
  for (const auto& c : *conditions) {
    if (!c.is_object() || c.value("type", json()) != "PodScheduled") continue;
    if (c.value("status", json()) != "False") continue;
    json message = c.value("message", json());
    if (message.is_string() && !message.get<std::string>().empty()) {
      return message.get<std::string>();
    }
    json reason = c.value("reason", json());
    if (reason.is_string()) return reason.get<std::string>();
  }
  return std::nullopt;
}

// The domains ("nvidia.com", "hami.io") whose pod annotations steer HAMi's scheduling.
std::set<std::string> AnnotationDomains(const device::Registry& registry) {
  std::set<std::string> out = {"hami.io"};
  for (const device::Device* d : registry.All()) {
    for (const auto& r : d->Info().ResourceNames()) {
      size_t slash = r.find('/');
      if (slash != std::string::npos) out.insert(r.substr(0, slash));
    }
  }
  return out;
}

std::string JoinValues(const std::vector<int64_t>& values, std::string_view unit) {
  // "81920 each" when all are equal, else every value in the node's device order.
  bool same =
      std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == values.front(); });
  if (values.size() > 1 && same)
    return std::to_string(values.front()) + std::string(unit) + " each";
  std::vector<std::string> parts;
  for (int64_t v : values) parts.push_back(std::to_string(v) + std::string(unit));
  return Join(parts, ", ");
}

// The memory a request takes on one device (the NVIDIA fit's rule: MiB, else a share).
int64_t MemoryWanted(const device::DeviceRequest& req, const device::DeviceUsage& d) {
  if (req.memreq > 0) return req.memreq;
  if (req.mem_percentage != device::kPercentUnset) {
    return static_cast<int64_t>(d.totalmem) * req.mem_percentage / 100;
  }
  return 0;
}

// One device's outcome for one container's request: the backend's Fit over that device alone.
struct DeviceOutcome {
  const device::DeviceUsage* device = nullptr;
  std::string reason;  // "" when it would take the request
};

// The figures behind one reason name over the devices rejected for it.
std::string Figures(std::string_view name, const std::vector<const device::DeviceUsage*>& devs,
                    const device::DeviceRequest& req, const device::PodView& pod,
                    const device::NamespaceQuota* quota, const device::Device* backend) {
  auto uuids = [&] {
    std::vector<std::string> ids;
    for (const auto* d : devs) ids.push_back(d->id);
    return Join(ids, ", ");
  };
  auto selection = [&](std::initializer_list<std::string_view> keys) {
    std::vector<std::string> parts;
    for (const auto& [k, v] : pod.annotations) {
      for (std::string_view key : keys) {
        if (k.size() > key.size() && k.ends_with(key) && k[k.size() - key.size() - 1] == '/') {
          parts.push_back(k + "=" + v);
        }
      }
    }
    return parts.empty() ? std::string() : "; the pod asks " + Join(parts, ", ");
  };
  if (name == protocol::kCardInsufficientMemory) {
    std::vector<int64_t> free;
    for (const auto* d : devs) free.push_back(int64_t{d->totalmem} - d->usedmem);
    std::string wants = req.memreq > 0 ? std::to_string(req.memreq) + " MiB"
                                       : std::to_string(req.mem_percentage) + "% of the memory";
    if (req.memreq <= 0 && !devs.empty()) {
      wants += " (" + std::to_string(MemoryWanted(req, *devs.front())) + " MiB)";
    }
    return "wants " + wants + ", free " + JoinValues(free, "");
  }
  if (name == protocol::kCardInsufficientCore) {
    std::vector<int64_t> free;
    for (const auto* d : devs) free.push_back(int64_t{d->totalcore} - d->usedcores);
    return "wants " + std::to_string(std::min(req.coresreq, 100)) + "% of the cores, free " +
           JoinValues(free, "%");
  }
  if (name == protocol::kCardTimeSlicingExhausted) {
    std::vector<std::string> used;
    for (const auto* d : devs)
      used.push_back(std::to_string(d->used) + "/" + std::to_string(d->count));
    return "slices in use " + Join(used, ", ");
  }
  if (name == protocol::kCardTypeMismatch) {
    std::vector<std::string> types;
    for (const auto* d : devs) {
      std::string t = d->type + (d->mode.empty() ? "" : " (" + d->mode + ")");
      if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
    }
    return "their type " + Join(types, ", ") +
           selection({"use-gputype", "nouse-gputype", "vgpu-mode"});
  }
  if (name == protocol::kCardUuidMismatch) {
    return uuids() + selection({"use-gpuuuid", "nouse-gpuuuid"});
  }
  if (name == protocol::kCardNotHealth || name == protocol::kCardCordoned) return uuids();
  if (name == protocol::kExclusiveDeviceAllocateConflict) {
    std::vector<std::string> used;
    for (const auto* d : devs) used.push_back(std::to_string(d->used));
    return "the request wants a GPU to itself and " + Join(used, ", ") +
           " vGPU(s) already use them";
  }
  if (name == protocol::kCardComputeUnitsExhausted) {
    return "every core is allocated and the request names no cores";
  }
  if (name == protocol::kResourceQuotaNotFit && quota != nullptr && backend != nullptr) {
    std::vector<std::string> parts;
    for (const std::string& r : {backend->Info().memory_resource, backend->Info().core_resource}) {
      auto it = quota->find(r);
      if (r.empty() || it == quota->end() || !it->second.limit_set) continue;
      parts.push_back(r + " used " + std::to_string(it->second.used) + " of " +
                      std::to_string(it->second.limit));
    }
    std::string wants =
        "wants " + std::to_string(devs.empty() ? req.memreq : MemoryWanted(req, *devs.front())) +
        " MiB, " + std::to_string(req.coresreq) + "% cores";
    return wants + (parts.empty() ? "" : "; namespace quota: " + Join(parts, ", "));
  }
  return "";
}

// The node's reason string in words, each entry with its figures. The figures are those of the
// first container whose single-device fits show the entry's reason.
std::string NodeWords(const std::string& reason, const device::Registry& registry,
                      const device::PodView& pod, const device::PodRequests& requests,
                      const device::NodeUsage& node, const device::PodPolicy& policy,
                      const device::NamespaceQuota* quota) {
  if (reason == protocol::kNodeInsufficientDevice) {
    std::vector<std::string> parts;
    for (const auto& c : requests.containers) {
      for (const auto& [vendor, req] : c) {
        if (req.nums <= 0) continue;
        int64_t have = 0;
        for (const auto& d : node.devices) {
          if (device::IsCandidateDevice(d, vendor)) ++have;
        }
        if (req.nums > have) {
          parts.push_back("wants " + std::to_string(req.nums) + " " + vendor + " device(s), has " +
                          std::to_string(have));
        }
      }
    }
    return "the node has too few devices" + (parts.empty() ? "" : ": " + parts.front());
  }
  auto decoded = protocol::DecodeReason(reason);
  if (!decoded.ok()) return reason;
  std::vector<std::string> out;
  for (const auto& [name, count] : decoded.value().counts) {
    std::string words = std::to_string(count) + " of " +
                        std::to_string(decoded.value().devices_considered) + " GPUs ";
    std::optional<std::string_view> phrase = ReasonPhrase(name);
    words += phrase ? std::string(*phrase) : name;
    std::string figures;
    if (name == protocol::kAllocatedCardsInsufficientRequest) {
      figures = "the container wants more GPUs than pass";
    } else if (name == protocol::kNumaNotFit) {
      figures = "nvidia.com/numa-bind wants all of a container's GPUs on one NUMA node";
    }
    for (size_t ci = 0; figures.empty() && ci < requests.containers.size(); ++ci) {
      for (const auto& [vendor, req] : requests.containers[ci]) {
        if (req.nums <= 0) continue;
        const device::Device* backend = registry.Find(vendor);
        if (backend == nullptr) continue;
        std::vector<const device::DeviceUsage*> hit;
        device::DeviceRequest one = req;
        one.nums = 1;
        device::FitContext ctx{.pod = &pod,
                               .node = &node,
                               .policy = policy.gpu_policy,
                               .quota = quota,
                               .earlier = nullptr,
                               .init_count = 0};
        for (const auto& d : node.devices) {
          if (!device::IsCandidateDevice(d, vendor)) continue;
          device::FitResult r = backend->Fit({&d}, one, ctx);
          if (!r.fit && r.reasons.count(name) != 0) hit.push_back(&d);
        }
        if (!hit.empty()) {
          figures = Figures(name, hit, req, pod, quota, backend);
          break;
        }
      }
    }
    out.push_back(words + (figures.empty() ? "" : ": " + figures));
  }
  return Join(out, "; ");
}

std::string EventTime(const json& e) {
  for (const char* k : {"lastTimestamp", "eventTime", "firstTimestamp"}) {
    std::string t = StringAt(e, {k});
    if (!t.empty()) return t;
  }
  return StringAt(e, {"metadata", "creationTimestamp"});
}

// Sort key: the instant of an RFC 3339 time ("" first).
int64_t TimeKey(const std::string& t) {
  auto parsed = ParseRfc3339(t);
  if (!parsed.ok()) return INT64_MIN;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             parsed.value().instant.time_since_epoch())
      .count();
}

bool Holds(const device::PodView& p) { return p.phase != "Succeeded" && p.phase != "Failed"; }

}  // namespace

Result<ExplainView> BuildExplain(const ExplainInput& input) {
  auto parsed = device::ParsePodView(input.pod);
  if (!parsed.ok()) return Error{"pod: " + parsed.error()};
  const device::PodView& pod = parsed.value();
  ExplainView view;
  view.ns = pod.namespace_name;
  view.name = pod.name;
  view.phase = pod.phase;
  const std::string* vgpu_node = device::FindValue(pod.annotations, protocol::kVgpuNodeKey);
  if (!pod.node_name.empty()) {
    view.node = pod.node_name;
  } else if (vgpu_node != nullptr && !vgpu_node->empty()) {
    view.node = *vgpu_node;
  }
  if (const std::string* bp = device::FindValue(pod.annotations, protocol::kBindPhaseKey)) {
    view.bind_phase = *bp;
  }

  const device::Registry registry = device::MakeRegistry(input.config);
  const std::set<std::string> domains = AnnotationDomains(registry);
  for (const auto& [k, v] : pod.annotations) {
    size_t slash = k.find('/');
    if (slash != std::string::npos && domains.count(k.substr(0, slash)) != 0) {
      view.annotations[k] = v;
    }
  }

  // The requests, as the scheduler normalises them.
  auto requests = device::NormalizePodRequests(registry, pod);
  if (!requests.ok()) {
    view.warnings.push_back("pod " + pod.Key() + ": " + requests.error());
  } else {
    const auto all = pod.AllContainers();
    for (size_t i = 0; i < requests.value().containers.size() && i < all.size(); ++i) {
      for (const auto& [vendor, req] : requests.value().containers[i]) {
        if (req.nums <= 0) continue;
        ExplainRequest r;
        r.container = all[i]->name;
        r.init = i < requests.value().init_count;
        r.vendor = vendor;
        r.count = req.nums;
        if (req.memreq > 0) {
          r.memory_mib = req.memreq;
        } else if (req.mem_percentage != device::kPercentUnset) {
          r.memory_percent = req.mem_percentage;
        }
        r.cores = req.coresreq;
        view.requests.push_back(std::move(r));
      }
    }
  }

  // Usage as the scheduler builds it: every node's devices, every other holding pod.
  std::vector<device::NodeUsage> rows;
  std::vector<std::string> names;
  std::map<std::string, device::StringMap> node_annotations;
  for (const auto& n : input.nodes) {
    std::string name = device::ObjectName(n);
    node_annotations[name] = device::ObjectAnnotations(n);
    // The whole node: some vendors register through status.capacity instead of an annotation.
    auto row = device::NodeUsageFromNode(registry, n);
    if (!row.ok()) {
      view.warnings.push_back(row.error());
      ++view.other_nodes;
      continue;
    }
    if (row.value().devices.empty()) {
      ++view.other_nodes;
      continue;
    }
    names.push_back(name);
    rows.push_back(std::move(row.value()));
  }
  std::vector<device::PodAllocation> allocations;
  for (const auto& obj : input.pods) {
    auto other = device::ParsePodView(obj);
    if (!other.ok()) continue;
    auto alloc = device::PodAllocationFromPod(registry, other.value());
    if (!alloc.ok()) {
      view.warnings.push_back(alloc.error());
      continue;
    }
    if (other.value().Key() == pod.Key()) {
      // The pod's own allocation: what it holds, never counted against itself.
      if (alloc.value() && Holds(other.value())) {
        for (const auto& d : alloc.value()->deltas) {
          view.devices.push_back({d.uuid, d.vendor, d.usedmem, d.usedcores});
        }
      }
      continue;
    }
    if (alloc.value()) allocations.push_back(std::move(*alloc.value()));
  }
  device::UsageIndex index;
  index.Rebuild(rows, std::move(allocations));

  // The namespace's quota, as the scheduler checks it.
  std::vector<std::string> tracked;
  for (const device::Device* d : registry.All()) {
    if (!d->Info().memory_resource.empty()) tracked.push_back(d->Info().memory_resource);
    if (!d->Info().core_resource.empty()) tracked.push_back(d->Info().core_resource);
  }
  std::map<std::string, int64_t> limits;
  for (const auto& q : input.quotas) {
    if (StringAt(q, {"metadata", "namespace"}) != pod.namespace_name) continue;
    std::map<std::string, std::string> hard;
    if (q.contains("spec") && q["spec"].is_object() && q["spec"].contains("hard") &&
        q["spec"]["hard"].is_object()) {
      for (const auto& [k, v] : q["spec"]["hard"].items()) {
        if (v.is_string()) hard[k] = v.get<std::string>();
        if (v.is_number_integer()) hard[k] = std::to_string(v.get<int64_t>());
      }
    }
    auto parsed_limits = device::QuotaLimitsFromHard(hard, tracked);
    if (!parsed_limits.ok()) {
      view.warnings.push_back("resourcequota " + device::ObjectName(q) + ": " +
                              parsed_limits.error());
      continue;
    }
    for (const auto& [k, v] : parsed_limits.value()) {
      auto it = limits.find(k);
      if (it == limits.end() || v < it->second) limits[k] = v;
    }
  }
  const device::NamespaceQuota quota =
      device::NamespaceQuotaFor(registry, limits, index.NamespaceUsage(pod.namespace_name));

  // The filter, per node, now.
  std::optional<std::string> would_choose;
  auto options = device::ScheduleOptionsFromConfig(input.config.scheduler);
  auto policy = options.ok() ? device::ResolvePodPolicy(pod, options.value().node_policy,
                                                        options.value().gpu_policy)
                             : Result<device::PodPolicy>(Error{options.error()});
  if (!policy.ok()) view.warnings.push_back(policy.error());
  if (requests.ok() && policy.ok() && !requests.value().Empty()) {
    device::UsageIndex::Snapshot snap = index.Rows(names);
    for (const auto& row : snap.nodes) {
      device::NodeFit fit =
          device::FitPodOnNode(registry, pod, requests.value(), row, policy.value(), &quota);
      ExplainNode n;
      n.name = row.name;
      n.fit = fit.fit;
      if (fit.fit) {
        std::vector<device::DeviceDelta> deltas;
        for (const auto& [vendor, pd] : fit.devices) {
          auto c = device::CollapsePodDevices(pd, requests.value().init_count, false);
          deltas.insert(deltas.end(), c.begin(), c.end());
        }
        std::vector<std::string> words;
        for (const auto& d : deltas) {
          n.devices.push_back({d.uuid, d.vendor, d.usedmem, d.usedcores});
          words.push_back(d.uuid + " (" + std::to_string(d.usedmem) + " MiB, " +
                          std::to_string(d.usedcores) + "% cores)");
        }
        n.words = "fits: would get " + Join(words, ", ");
      } else {
        n.reason = fit.reason;
        n.words =
            NodeWords(fit.reason, registry, pod, requests.value(), row, policy.value(), &quota);
      }
      view.nodes.push_back(std::move(n));
    }
    device::ScheduleOptions so = options.value();
    so.quota = &quota;
    auto decision = device::Schedule(registry, pod, snap.nodes, {}, so);
    if (decision.ok() && decision.value().Chosen() != nullptr) {
      would_choose = decision.value().Chosen()->node;
    }
  }
  std::sort(view.nodes.begin(), view.nodes.end(),
            [](const ExplainNode& a, const ExplainNode& b) { return a.name < b.name; });

  if (auto message = SchedulingMessage(input.pod)) {
    std::string summary = ReasonSummary(*message);
    view.scheduling = ReasonInWords(*message) + (summary.empty() ? "" : " " + summary);
  }

  // The node lock: on the pod's node, else one the pod holds anywhere.
  auto lock_on = [&](const std::string& node) -> std::optional<ExplainLock> {
    auto it = node_annotations.find(node);
    if (it == node_annotations.end()) return std::nullopt;
    const std::string* value = device::FindValue(it->second, protocol::kNodeLockKey);
    if (value == nullptr) return std::nullopt;
    ExplainLock l;
    l.node = node;
    l.value = *value;
    auto parsed_lock = protocol::ParseNodeLock(*value);
    if (parsed_lock.ok()) {
      if (parsed_lock.value().owner) {
        l.holder = parsed_lock.value().owner->ns + "/" + parsed_lock.value().owner->pod;
      }
      l.age_seconds = std::chrono::duration_cast<std::chrono::seconds>(
                          input.now - parsed_lock.value().time.instant)
                          .count();
    }
    l.held_by_pod = protocol::NodeLockOwnedBy(*value, pod.namespace_name, pod.name);
    return l;
  };
  if (view.node) view.lock = lock_on(*view.node);
  if (!view.lock) {
    for (const auto& [node, annotations] : node_annotations) {
      const std::string* value = device::FindValue(annotations, protocol::kNodeLockKey);
      if (value != nullptr && protocol::NodeLockOwnedBy(*value, pod.namespace_name, pod.name)) {
        view.lock = lock_on(node);
        break;
      }
    }
  }

  // The history: the steps the pod's annotations record (first at equal times), its events.
  auto annotation_step = [&](std::string_view key, const std::string& reason,
                             const std::string& message) {
    const std::string* v = device::FindValue(pod.annotations, key);
    if (v == nullptr) return;
    auto t = protocol::ParseBindTime(*v);
    ExplainEvent h;
    h.time = t.ok() ? FormatRfc3339(t.value(), Zone::Utc()) : "";
    h.type = "Annotation";
    h.reason = reason;
    h.message = message;
    h.source = std::string(key);
    view.history.push_back(std::move(h));
  };
  if (vgpu_node != nullptr) {
    annotation_step(protocol::kVgpuTimeKey, "Filtered",
                    "hami-scheduler chose node " + *vgpu_node + " and wrote the devices");
  }
  annotation_step(protocol::kBindTimeKey, "Binding",
                  "hami-scheduler took the node lock and set bind phase allocating");
  const std::string uid = pod.uid;
  for (const auto& e : input.events) {
    if (StringAt(e, {"involvedObject", "kind"}) != "Pod") continue;
    if (StringAt(e, {"involvedObject", "name"}) != pod.name) continue;
    if (StringAt(e, {"involvedObject", "namespace"}) != pod.namespace_name) continue;
    std::string euid = StringAt(e, {"involvedObject", "uid"});
    if (!uid.empty() && !euid.empty() && euid != uid) continue;
    ExplainEvent h;
    h.time = EventTime(e);
    h.type = StringAt(e, {"type"});
    h.reason = StringAt(e, {"reason"});
    h.message = ReasonInWords(StringAt(e, {"message"}));
    h.source = StringAt(e, {"source", "component"});
    if (h.source.empty()) h.source = StringAt(e, {"reportingComponent"});
    if (e.contains("count") && e["count"].is_number_integer()) h.count = e["count"].get<int64_t>();
    view.history.push_back(std::move(h));
  }
  std::stable_sort(view.history.begin(), view.history.end(),
                   [](const ExplainEvent& a, const ExplainEvent& b) {
                     return TimeKey(a.time) < TimeKey(b.time);
                   });

  // The summary. A pod that asks for HAMi devices but carries neither the scheduler name the
  // webhook writes nor any hami.io/ annotation never went through the webhook: HAMi's most common
  // support question, answered in words.
  const std::string scheduler_name = StringAt(input.pod, {"spec", "schedulerName"});
  bool hami_annotations = false;
  for (const auto& [k, v] : pod.annotations) hami_annotations |= k.starts_with("hami.io/");
  if (requests.ok() && !requests.value().Empty() && vgpu_node == nullptr && !hami_annotations &&
      scheduler_name != input.scheduler_name) {
    std::vector<std::string> names;
    for (const auto& r : view.requests) {
      if (std::find(names.begin(), names.end(), r.vendor) == names.end()) names.push_back(r.vendor);
    }
    const std::string* ignore = device::FindValue(pod.labels, "hami.io/webhook");
    view.summary =
        (pod.node_name.empty() ? std::string("Pending")
                               : "Scheduled on " + pod.node_name + " by another scheduler") +
        ": HAMi's webhook was not called for this pod. It asks for HAMi devices (" +
        Join(names, ", ") + ") but its schedulerName is " +
        Quote(scheduler_name.empty() ? "default-scheduler" : scheduler_name) + ", not " +
        Quote(input.scheduler_name) +
        ", and it has no hami.io/ annotations, so hami-scheduler never sees it. " +
        (ignore != nullptr && *ignore == "ignore"
             ? "The pod has the label hami.io/webhook=ignore, which the webhook's objectSelector "
               "skips."
             : "Likely causes: its namespace is excluded by the webhook's namespaceSelector (the "
               "namespace has the label hami.io/webhook=ignore, or is in the chart's "
               "scheduler.admissionWebhook.whitelistNamespaces); the pod has the label "
               "hami.io/webhook=ignore; the webhook's failurePolicy is "
               "Ignore and the webhook was down when the pod was created; the pod's resource "
               "name is not the one the webhook is configured with.") +
        " Recreate the pod once the cause is fixed.";
  } else if (!requests.ok() && pod.node_name.empty()) {
    view.summary = "Pending: hami-scheduler cannot read the pod's requests: " + requests.error();
  } else if (requests.ok() && requests.value().Empty() && vgpu_node == nullptr) {
    view.summary = "The pod asks for no HAMi device; hami-scheduler passes it through.";
  } else if (!pod.node_name.empty()) {
    view.summary = "Scheduled on " + pod.node_name + ".";
    if (view.bind_phase == "success") {
      view.summary += " The device plugin allocated its devices (bind phase success).";
    } else if (view.bind_phase == "allocating") {
      view.summary +=
          " The device plugin has not yet allocated its devices (bind phase "
          "allocating).";
    } else if (view.bind_phase == "failed") {
      view.summary += " The device plugin failed to allocate its devices (bind phase failed).";
    }
  } else if (vgpu_node != nullptr && !vgpu_node->empty()) {
    view.summary = "hami-scheduler chose node " + *vgpu_node + " but the pod is not bound yet.";
    if (view.lock && !view.lock->held_by_pod) {
      view.summary += " It waits for the node lock, held by " +
                      (view.lock->holder.empty() ? view.lock->value : view.lock->holder) + " for " +
                      ShortAge(view.lock->age_seconds) + ".";
    }
  } else {
    bool all_memory = !view.nodes.empty();
    for (const auto& n : view.nodes) {
      auto d = protocol::DecodeReason(n.reason);
      if (n.fit || !d.ok() || d.value().counts.size() != 1 ||
          d.value().counts.count(std::string(protocol::kCardInsufficientMemory)) == 0 ||
          d.value().counts.begin()->second != d.value().devices_considered) {
        all_memory = false;
      }
    }
    if (all_memory) {
      view.summary = "Pending: no GPU has enough memory for the request.";
    } else if (would_choose) {
      view.summary = "Pending, but node " + *would_choose +
                     " fits now: hami-scheduler should place it at its next attempt.";
    } else if (view.nodes.empty()) {
      view.summary = "Pending: no node has a HAMi device.";
    } else {
      view.summary = "Pending: no node fits the request now (the reasons per node are above).";
    }
  }
  // DRA mode: the pod's claims, the allocator per node and a summary of its own.
  ExplainDra(input, &view);
  return view;
}

std::string ExplainJson(const ExplainView& view) {
  using oj = nlohmann::ordered_json;
  auto opt = [](const std::optional<std::string>& s) { return s ? oj(*s) : oj(nullptr); };
  oj out;
  out["pod"]["namespace"] = view.ns;
  out["pod"]["name"] = view.name;
  out["pod"]["phase"] = view.phase;
  out["pod"]["node"] = opt(view.node);
  out["pod"]["bindPhase"] = opt(view.bind_phase);
  oj requests = oj::array();
  for (const auto& r : view.requests) {
    oj o;
    o["container"] = r.container;
    o["init"] = r.init;
    o["vendor"] = r.vendor;
    o["count"] = r.count;
    o["memory"] = r.memory_mib ? oj(*r.memory_mib) : oj(nullptr);
    o["memoryPercent"] = r.memory_percent ? oj(*r.memory_percent) : oj(nullptr);
    o["cores"] = r.cores;
    requests.push_back(std::move(o));
  }
  out["requests"] = std::move(requests);
  oj annotations = oj::object();
  for (const auto& [k, v] : view.annotations) annotations[k] = v;
  out["annotations"] = std::move(annotations);
  auto device_list = [](const std::vector<PodDeviceRow>& devices) {
    oj a = oj::array();
    for (const auto& d : devices) {
      oj o;
      o["uuid"] = d.uuid;
      o["vendor"] = d.vendor;
      o["memory"] = d.memory;
      o["cores"] = d.cores;
      a.push_back(std::move(o));
    }
    return a;
  };
  out["devices"] = device_list(view.devices);
  out["scheduling"] = opt(view.scheduling);
  oj nodes = oj::array();
  for (const auto& n : view.nodes) {
    oj o;
    o["name"] = n.name;
    o["fit"] = n.fit;
    o["reason"] = n.fit ? oj(nullptr) : oj(n.reason);
    o["words"] = n.words;
    o["devices"] = device_list(n.devices);
    nodes.push_back(std::move(o));
  }
  out["nodes"] = std::move(nodes);
  out["otherNodes"] = view.other_nodes;
  if (!view.claims.empty()) {
    oj claims = oj::array();
    for (const auto& c : view.claims) {
      oj o;
      o["name"] = c.name;
      o["claim"] = opt(c.claim);
      o["template"] = opt(c.template_name);
      o["state"] = c.state;
      o["containers"] = c.containers;
      oj shares = oj::array();
      for (const auto& s : c.shares) {
        shares.push_back({{"request", s.request},
                          {"node", s.node},
                          {"uuid", s.uuid},
                          {"device", s.device},
                          {"shareID", s.share_id.empty() ? oj(nullptr) : oj(s.share_id)},
                          {"memory", s.memory},
                          {"cores", s.cores}});
      }
      o["shares"] = std::move(shares);
      claims.push_back(std::move(o));
    }
    out["claims"] = std::move(claims);
    oj dra_nodes = oj::array();
    for (const auto& n : view.dra_nodes) {
      oj o;
      o["name"] = n.name;
      o["fit"] = n.fit;
      o["reason"] = n.fit ? oj(nullptr) : oj(n.reason);
      o["details"] = n.details;
      dra_nodes.push_back(std::move(o));
    }
    out["draNodes"] = std::move(dra_nodes);
  }
  if (view.lock) {
    oj l;
    l["node"] = view.lock->node;
    l["value"] = view.lock->value;
    l["holder"] = view.lock->holder.empty() ? oj(nullptr) : oj(view.lock->holder);
    l["ageSeconds"] = view.lock->age_seconds ? oj(*view.lock->age_seconds) : oj(nullptr);
    l["heldByPod"] = view.lock->held_by_pod;
    out["lock"] = std::move(l);
  } else {
    out["lock"] = nullptr;
  }
  oj history = oj::array();
  for (const auto& h : view.history) {
    oj o;
    o["time"] = h.time.empty() ? oj(nullptr) : oj(h.time);
    o["type"] = h.type;
    o["reason"] = h.reason;
    o["message"] = h.message;
    o["source"] = h.source;
    o["count"] = h.count;
    history.push_back(std::move(o));
  }
  out["history"] = std::move(history);
  out["summary"] = view.summary;
  return out.dump() + "\n";
}

std::string ExplainText(const ExplainView& view, const TableOptions& options) {
  const bool colour = options.colour;
  auto paint = [&](const char* code, const std::string& s) {
    return colour ? std::string(code) + s + "\033[0m" : s;
  };
  std::string out;
  std::vector<std::vector<std::string>> head = {
      {"Pod:", view.ns + "/" + view.name},
      {"Phase:", view.phase.empty() ? "<unknown>" : view.phase},
      {"Node:", view.node.value_or("<none>")},
      {"Bind phase:", view.bind_phase.value_or("<none>")},
  };
  for (const auto& row : head) {
    out += row[0] + std::string(12 - row[0].size(), ' ') + EscapeTerminal(row[1]) + "\n";
  }

  out += "\nRequests (after the webhook):\n";
  if (view.requests.empty()) {
    out += "  none\n";
  } else {
    std::vector<std::vector<std::string>> rows;
    if (!options.no_headers) rows.push_back({"CONTAINER", "VENDOR", "COUNT", "MEMORY", "CORES"});
    for (const auto& r : view.requests) {
      std::string mem = r.memory_mib       ? std::to_string(*r.memory_mib) + "MiB"
                        : r.memory_percent ? std::to_string(*r.memory_percent) + "%"
                                           : "<all>";
      rows.push_back({r.container + (r.init ? " (init)" : ""), r.vendor, std::to_string(r.count),
                      mem, std::to_string(r.cores) + "%"});
    }
    out += RenderTable(rows, 2);
  }
  if (!view.annotations.empty()) {
    out += "\nAnnotations:\n";
    for (const auto& [k, v] : view.annotations) {
      out += "  " + EscapeTerminal(k) + "=" + EscapeTerminal(v) + "\n";
    }
  }
  if (!view.devices.empty()) {
    out += "\nHolds:\n";
    for (const auto& d : view.devices) {
      out += "  " + EscapeTerminal(d.uuid) + " (" + std::to_string(d.memory) + " MiB, " +
             std::to_string(d.cores) + "% cores)\n";
    }
  }
  if (view.scheduling) {
    out += "\nLast scheduling failure: " + EscapeTerminal(*view.scheduling) + "\n";
  }

  if (!view.nodes.empty()) {
    out += "\nFilter, computed now from the cluster's annotations:\n";
    std::vector<std::vector<std::string>> rows;
    if (!options.no_headers) rows.push_back({"NODE", "FIT", "WHY"});
    for (const auto& n : view.nodes) rows.push_back({n.name, n.fit ? "yes" : "no", n.words});
    const size_t first = options.no_headers ? 0 : 1;
    out += RenderTable(rows, 2, [&](size_t row, size_t col) -> const char* {
      if (!colour || col != 1 || row < first) return nullptr;
      return view.nodes[row - first].fit ? "\033[32m" : "\033[31m";
    });
  }
  // A DRA pod's count follows the allocator's table (ExplainDraText).
  if (view.other_nodes > 0 && view.claims.empty()) {
    out += "  (" + std::to_string(view.other_nodes) + " node(s) without a HAMi device)\n";
  }
  out += ExplainDraText(view, options);

  out += "\nNode lock: ";
  if (!view.lock) {
    out += "<none>\n";
  } else {
    out += EscapeTerminal(view.lock->node) + " held by " +
           EscapeTerminal(view.lock->holder.empty() ? view.lock->value : view.lock->holder) +
           " for " + ShortAge(view.lock->age_seconds) +
           (view.lock->held_by_pod ? " (this pod)" : " (this pod waits for it)") + "\n";
  }

  out += "\nHistory:\n";
  if (view.history.empty()) {
    out += "  none\n";
  } else {
    std::vector<std::vector<std::string>> rows;
    if (!options.no_headers) rows.push_back({"TIME", "TYPE", "REASON", "FROM", "MESSAGE"});
    for (const auto& h : view.history) {
      rows.push_back({h.time.empty() ? "<unknown>" : h.time, h.type,
                      h.reason + (h.count > 1 ? " (x" + std::to_string(h.count) + ")" : ""),
                      h.source, h.message});
    }
    const size_t first = options.no_headers ? 0 : 1;
    out += RenderTable(rows, 2, [&](size_t row, size_t col) -> const char* {
      if (!colour || col != 1 || row < first) return nullptr;
      return view.history[row - first].type == "Warning" ? "\033[33m" : nullptr;
    });
  }
  out += "\n" + paint("\033[1m", EscapeTerminal(view.summary, /*keep_newlines=*/true)) + "\n";
  return out;
}

}  // namespace hami::cli
