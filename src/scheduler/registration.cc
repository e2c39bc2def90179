#include "scheduler/registration.h"

#include <set>
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

bool Registrar::RegisterNode(const json& node) {
  const std::string name = k8s::Name(node);
  if (name.empty()) return false;
  bool healthy = true;
  for (const device::Device* dev : registry_.All()) {
    const std::string& key = dev->Info().handshake_key;
    if (key.empty()) continue;
    const int64_t allocatable = AllocatableCount(node, dev->Info().count_resource);
    if (dev->VendorKey() == "NVIDIA") {
      // NVIDIA health follows the allocatable count: devices that were advertised and are now
      // gone mean the plugin left; the node's devices leave scheduling until they come back.
      int64_t last = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        int64_t& seen = last_allocatable_[name];
        last = seen;
        seen = allocatable;
      }
      if (allocatable == 0 && last > 0) {
        healthy = false;
        continue;
      }
    }
    std::optional<std::string> value = k8s::Annotation(node, key);
    std::optional<std::string_view> view;
    if (value) view = *value;
    protocol::HandshakeVerdict verdict =
        protocol::CheckHandshake(view, clock_.Now(), allocatable > 0, options_.zone);
    if (verdict.write_requesting) {
      json patch = {{"metadata", {{"annotations", {{key, verdict.new_value}}}}}};
      auto r = client_.Patch(k8s::resources::kNodes, "", name, k8s::PatchType::kMerge, patch);
      if (!r) HAMI_WARN("node {}: handshake: {}", name.c_str(), r.error().ToString().c_str());
    }
    if (!verdict.healthy) {
      healthy = false;
      // Cleanup (v2.10): delete the handshake key; the devices leave scheduling below.
      json patch = {{"metadata", {{"annotations", {{key, nullptr}}}}}};
      auto r = client_.Patch(k8s::resources::kNodes, "", name, k8s::PatchType::kMerge, patch);
      if (!r) HAMI_WARN("node {}: cleanup: {}", name.c_str(), r.error().ToString().c_str());
    }
  }
  Result<device::NodeUsage> row =
      device::NodeUsageFromAnnotations(registry_, name, device::ObjectAnnotations(node));
  if (!row) {
    HAMI_WARN("node {} skipped: {}", name.c_str(), row.error().c_str());
    if (options_.record_events) {
      auto r = client_.RecordEvent(node, "Warning", "InvalidRegisterAnnotation", row.error(),
                                   options_.component);
      (void)r;
    }
    return false;
  }
  if (!healthy || row->devices.empty()) {
    index_.RemoveNode(name);
    return false;
  }
  index_.SetNode(std::move(*row));
  return true;
}

Result<size_t> Registrar::RunOnce() {
  k8s::ListOptions opts;
  opts.label_selector = options_.node_label_selector;
  opts.limit = 500;
  auto nodes = client_.ListAll(k8s::resources::kNodes, "", opts);
  if (!nodes) return Error{"list nodes: " + nodes.error().ToString()};
  std::set<std::string> seen;
  size_t registered = 0;
  for (const json& node : nodes->items) {
    seen.insert(k8s::Name(node));
    if (RegisterNode(node)) ++registered;
  }
  for (const std::string& name : index_.NodeNames()) {
    if (!seen.count(name)) index_.RemoveNode(name);
  }
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
  if (*alloc) {
    index_.UpsertPod(std::move(**alloc));
  } else {
    index_.RemovePod(view->Key());
  }
}

void Registrar::OnPodDeleted(const json& pod) { index_.RemovePod(k8s::ObjectKey(pod)); }

}  // namespace hami::scheduler
