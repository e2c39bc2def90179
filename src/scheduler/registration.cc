#include "scheduler/registration.h"

#include <set>
#include <string_view>
#include <utility>

#include "common/log.h"
#include "common/strings.h"
#include "device/pod_view.h"
#include "k8s/object.h"
#include "protocol/handshake.h"

namespace hami::scheduler {

using nlohmann::json;

Registrar::Registrar(const device::Registry& registry, device::UsageIndex& index,
                     k8s::Client& client, const Clock& clock, RegistrationOptions options)
    : registry_(registry),
      index_(index),
      client_(client),
      clock_(clock),
      options_(std::move(options)) {}

namespace {

// status.allocatable[resource] as a count; 0 when absent or not a whole number.
int64_t AllocatableCount(const json& node, const std::string& resource) {
  if (resource.empty()) return 0;
  const json* status = node.contains("status") ? &node["status"] : nullptr;
  if (!status || !status->is_object() || !status->contains("allocatable")) return 0;
  const json& alloc = (*status)["allocatable"];
  if (!alloc.is_object() || !alloc.contains(resource)) return 0;
  const json& v = alloc[resource];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) return 0;
  std::optional<int64_t> n = ParseInt64(v.get<std::string>());
  return n ? *n : 0;
}

}  // namespace

Health Registrar::CheckBackend(const device::Device& dev, const json& node, bool cached,
                               std::vector<Write>* writes) {
  const std::string name = k8s::Name(node);
  const std::string& key = dev.Info().handshake_key;
  const int64_t allocatable = AllocatableCount(node, dev.Info().count_resource);
  std::optional<std::string> value = k8s::Annotation(node, key);
  std::optional<std::string_view> view;
  if (value) view = *value;
  protocol::HandshakeVerdict verdict =
      protocol::CheckHandshake(view, clock_.Now(), allocatable > 0, options_.zone);
  Health health{verdict.healthy, verdict.need_update};
  if (verdict.write_requesting) AddWrite(name, key, verdict.new_value, "handshake", writes);
  // Cleanup (v2.10): delete the handshake key; the caller takes the devices out.
  if (!health.healthy && cached) AddWrite(name, key, nullptr, "cleanup", writes);
  return health;
}

void Registrar::AddWrite(const std::string& node, const std::string& key, json value,
                         const char* what, std::vector<Write>* writes) {
  // A node's vendors are checked one after another: their keys go into one merge patch, so a
  // node without the other vendors' handshakes costs one PATCH (and one watch event for every
  // informer of nodes), not one per vendor.
  if (writes->empty() || writes->back().node != node) {
    writes->push_back(Write{node, {{"metadata", {{"annotations", json::object()}}}}, what});
  }
  Write& w = writes->back();
  w.patch["metadata"]["annotations"][key] = std::move(value);
  if (std::string_view(w.what) != what) w.what = "handshake and cleanup";
}

void Registrar::MakeWrites(const std::vector<Write>& writes) {
  for (size_t i = 0; i < writes.size(); ++i) {
    if (cancelled_) {
      HAMI_INFO("registration: stopping; {} of {} handshake writes not made", writes.size() - i,
                writes.size());
      return;
    }
    const Write& w = writes[i];
    auto r = client_.Patch(k8s::resources::kNodes, "", w.node, k8s::PatchType::kMerge, w.patch);
    if (!r) HAMI_WARN("node {}: {}: {}", w.node, w.what, r.error().ToString());
  }
}

bool Registrar::RegisterNode(const json& node) {
  std::vector<Write> writes;
  const bool registered = RegisterNode(node, &writes);
  MakeWrites(writes);
  return registered;
}

bool Registrar::RegisterNode(const json& node, std::vector<Write>* writes) {
  const std::string name = k8s::Name(node);
  if (name.empty()) return false;
  // Backends read annotations and, for those that register through it, capacity/allocatable.
  const device::NodeView view = device::NodeViewFromNode(node);
  Result<device::NodeUsage> row = device::NodeUsageFromView(registry_, view);
  if (!row) {
    HAMI_WARN("node {} skipped: {}", name.c_str(), row.error().c_str());
    if (options_.record_events) {
      auto r = client_.RecordEvent(node, "Warning", "InvalidRegisterAnnotation", row.error(),
                                   options_.component);
      (void)r;
    }
    return false;
  }
  device::UsageIndex::SharedSnapshot cached = index_.SharedRows({name});
  const std::vector<device::DeviceUsage> no_devices;
  const std::vector<device::DeviceUsage>& old =
      cached.nodes.empty() ? no_devices : cached.nodes.front()->devices;
  auto of_vendor = [](const std::vector<device::DeviceUsage>& all, const std::string& vendor) {
    std::vector<device::DeviceUsage> out;
    for (const device::DeviceUsage& d : all) {
      if (d.vendor == vendor) out.push_back(d);
    }
    return out;
  };
  std::vector<device::DeviceUsage> devices;
  for (const device::Device* dev : registry_.All()) {
    std::vector<device::DeviceUsage> fresh = of_vendor(row->devices, dev->VendorKey());
    std::vector<device::DeviceUsage> kept = of_vendor(old, dev->VendorKey());
    Health health{true, true};  // backends without a handshake follow the annotation
    if (!dev->Info().handshake_key.empty())
      health = CheckBackend(*dev, node, !kept.empty(), writes);
    // HAMi CheckHealth: a backend may refine the handshake's verdict with its own rules.
    device::Health refined =
        dev->CheckHealth(view, device::Health{health.healthy, health.need_update});
    health = Health{refined.healthy, refined.need_update};
    if (!health.healthy) continue;
    std::vector<device::DeviceUsage>& chosen = health.need_update ? fresh : kept;
    devices.insert(devices.end(), chosen.begin(), chosen.end());
  }
  if (devices.empty()) {
    index_.RemoveNode(name);
    return false;
  }
  row->devices = std::move(devices);
  index_.SetNode(std::move(*row));
  return true;
}

void Registrar::ForgetNode(const std::string& name) {
  index_.RemoveNode(name);
  for (const device::Device* dev : registry_.All()) dev->ForgetNode(name);
}

Result<size_t> Registrar::RunOnce(const std::function<void(size_t)>& rows_ready) {
  k8s::ListOptions opts;
  opts.label_selector = options_.node_label_selector;
  opts.limit = 500;
  auto nodes = client_.ListAll(k8s::resources::kNodes, "", opts);
  if (!nodes) return Error{"list nodes: " + nodes.error().ToString()};
  std::set<std::string> seen;
  size_t registered = 0;
  std::vector<Write> writes;
  for (const json& node : nodes->items) {
    seen.insert(k8s::Name(node));
    if (RegisterNode(node, &writes)) ++registered;
  }
  for (const std::string& name : index_.NodeNames()) {
    if (!seen.count(name)) ForgetNode(name);
  }
  if (rows_ready) rows_ready(registered);
  MakeWrites(writes);
  return registered;
}

void Registrar::OnPod(const json& pod) {
  Result<device::PodView> view = device::ParsePodView(pod);
  if (!view) return;
  auto alloc = device::PodAllocationFromPod(registry_, *view);
  if (!alloc) {
    HAMI_WARN("{}", alloc.error().c_str());
    return;
  }
  const std::string key = view->Key();
  // The usage index orders a pod's events by it; 0 (unknown) is always applied.
  const uint64_t rv = k8s::ResourceVersionNumber(pod);
  if (*alloc) {
    index_.UpsertPod(std::move(**alloc), rv);
  } else {
    index_.RemovePod(key, rv);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (*alloc) {
    pod_keys_.insert(key);
  } else {
    pod_keys_.erase(key);
  }
}

void Registrar::OnPodDeleted(const json& pod) {
  const std::string key = k8s::ObjectKey(pod);
  index_.ForgetPod(key);
  std::lock_guard<std::mutex> lock(mu_);
  pod_keys_.erase(key);
}

std::vector<std::string> Registrar::PodKeys() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::vector<std::string>(pod_keys_.begin(), pod_keys_.end());
}

}  // namespace hami::scheduler
