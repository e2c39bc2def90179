#include "sim/vendor_plugin.h"

#include <utility>

#include "common/log.h"
#include "common/strings.h"
#include "common/time_format.h"
#include "device/pod_view.h"
#include "deviceplugin/allocator.h"
#include "k8s/object.h"
#include "nodelock/release.h"
#include "protocol/handshake.h"
#include "protocol/keys.h"
#include "protocol/pod_devices.h"

namespace hami::sim {
namespace {

using nlohmann::json;
namespace res = k8s::resources;

json AnnotationsPatch(const device::StringMap& annotations) {
  json patch;
  patch["metadata"]["annotations"] = json::object();
  for (const auto& [k, v] : annotations) patch["metadata"]["annotations"][k] = v;
  return patch;
}

// Whether any container of `devices` still holds a device.
bool AnyDevice(const protocol::PodDevices& devices) {
  for (const auto& c : devices) {
    if (!c.empty()) return true;
  }
  return false;
}

}  // namespace

std::vector<protocol::DeviceInfo> VendorDeviceInfos(
    const std::vector<deviceplugin::GpuDevice>& gpus, int32_t split_count) {
  std::vector<protocol::DeviceInfo> out;
  for (const deviceplugin::GpuDevice& g : gpus) {
    protocol::DeviceInfo d;
    d.id = g.uuid;
    d.index = g.index;
    d.count = split_count;
    d.devmem = static_cast<int32_t>(g.memory_mib);
    d.devcore = 100;
    d.type = g.model;
    d.numa = g.numa;
    d.mode = std::string(protocol::kDefaultDeviceMode);
    d.health = true;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> ActiveVendorKeys(const device::DeviceConfig& config) {
  std::vector<std::string> out;
  const device::Registry registry = device::MakeRegistry(config);  // outlives the loop
  for (const device::Device* d : registry.All()) out.push_back(d->VendorKey());
  return out;
}

VendorPlugin::VendorPlugin(const device::Device& device, k8s::Client& api, std::string node,
                           std::vector<protocol::DeviceInfo> devices, const Clock& clock)
    : device_(device),
      api_(api),
      node_(std::move(node)),
      clock_(clock),
      registration_(device.EncodeNodeRegistration(devices)) {}

VendorPlugin::~VendorPlugin() { Stop(); }

Status VendorPlugin::Publish() {
  device::StringMap annotations = registration_.annotations;
  const std::string& handshake = device_.Info().handshake_key;
  if (!handshake.empty()) {
    annotations[handshake] =
        protocol::FormatHandshake(protocol::HandshakeKind::kReported, clock_.Now(), Zone::Local());
  }
  if (annotations.empty()) return OkStatus();
  const json patch = AnnotationsPatch(annotations);
  auto r = k8s::RetryTransient<json>(
      [&] { return api_.Patch(res::kNodes, "", node_, k8s::PatchType::kMerge, patch); });
  if (!r) return Error{"publish on node " + Quote(node_) + ": " + r.error().ToString()};
  return OkStatus();
}

Status VendorPlugin::Start(std::chrono::milliseconds period) {
  if (Status s = Publish(); !s) return s;
  publisher_ = std::thread([this, period] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, period, [this] { return stopping_; })) {
      lock.unlock();
      if (Status s = Publish(); !s) HAMI_WARN("{}", s.error());
      lock.lock();
    }
  });
  return OkStatus();
}

void VendorPlugin::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (publisher_.joinable()) publisher_.join();
}

Status VendorPlugin::Fail(const std::string& ns, const std::string& name, const std::string& why) {
  json patch;
  patch["metadata"]["annotations"][std::string(protocol::kBindPhaseKey)] = "failed";
  auto r = k8s::RetryTransient<json>(
      [&] { return api_.Patch(res::kPods, ns, name, k8s::PatchType::kMerge, patch); });
  if (!r) HAMI_WARN("pod {}/{}: bind-phase failed: {}", ns, name, r.error().ToString());
  if (Status s = nodelock::Release(api_, node_, ns, name); !s) {
    HAMI_WARN("pod {}/{}: {}", ns, name, s.error());
  }
  ReleaseVendorLock();
  return Error{"allocate on node " + Quote(node_) + " for pod " + ns + "/" + name + ": " + why};
}

Status VendorPlugin::Allocate() {
  std::lock_guard<std::mutex> guard(allocate_mu_);
  std::string lock_value;
  auto found = deviceplugin::FindPendingPod(api_, node_, &lock_value);
  if (!found) return Error{"allocate on node " + Quote(node_) + ": " + found.error()};
  const json& pod = *found;
  const std::string ns = k8s::Namespace(pod);
  const std::string name = k8s::Name(pod);
  Result<device::PodView> view = device::ParsePodView(pod);
  if (!view) return Fail(ns, name, view.error());
  auto pending = device_.PodToAllocate(view->annotations);
  if (!pending) return Fail(ns, name, pending.error());
  device::StringMap annotations;
  protocol::PodDevices remaining;
  if (pending->has_value()) {
    remaining = std::move(**pending);
    auto index = protocol::FirstNonEmptyContainer(remaining);
    if (!index) return Fail(ns, name, "no pending devices left");
    remaining[*index].clear();
    // The decoder keeps every ';' segment, so re-encoding drops the last (trailing) one.
    protocol::PodDevices encoded = remaining;
    if (!encoded.empty()) encoded.pop_back();
    annotations[device_.Info().to_allocate_key] = protocol::EncodePodDevices(encoded);
  }
  const bool done = !AnyDevice(remaining);
  if (done) {
    auto allocated = device_.PodAllocated(view->annotations);
    protocol::PodDevices devices =
        allocated && allocated->has_value() ? std::move(**allocated) : protocol::PodDevices{};
    for (auto& [k, v] : device_.AllocateAnnotations(*view, devices)) annotations[k] = v;
    annotations[std::string(protocol::kBindPhaseKey)] = "success";
  }
  if (!annotations.empty()) {
    const json patch = AnnotationsPatch(annotations);
    auto r = k8s::RetryTransient<json>(
        [&] { return api_.Patch(res::kPods, ns, name, k8s::PatchType::kMerge, patch); });
    if (!r) return Fail(ns, name, "update pod: " + r.error().ToString());
  }
  if (done) {
    // The pod is allocated; a lock we fail to remove expires on its own (5 min).
    if (Status s = nodelock::Release(api_, node_, ns, name, lock_value); !s) {
      HAMI_ERROR("pod {}/{}: {}", ns, name, s.error());
    }
    ReleaseVendorLock();
  }
  return OkStatus();
}

void VendorPlugin::ReleaseVendorLock() {
  // The vendor's own node lock (Cambricon's cambricon.com/dsmlu.lock), which its plugin removes
  // once the pod is allocated or has failed.
  if (device_.BindLockKind() != device::BindLock::kVendor) return;
  json patch;
  patch["metadata"]["annotations"][std::string(device_.VendorLockKey())] = nullptr;
  auto r = k8s::RetryTransient<json>(
      [&] { return api_.Patch(res::kNodes, "", node_, k8s::PatchType::kMerge, patch); });
  if (!r)
    HAMI_WARN("node {}: release {}: {}", node_, device_.VendorLockKey(), r.error().ToString());
}

}  // namespace hami::sim
