// hami-sim's generic simulated device plugin for a non-NVIDIA vendor (issue 15 item 3,
// docs/VENDORS.md "hami-sim"). A scenario node whose gpus say `vendor: <HAMi vendor key>` gets
// this plugin instead of the real NVIDIA one. It knows no vendor: everything vendor-specific
// comes from the vendor's device::Device (the backend the scheduler runs too):
//  * registration: Device::EncodeNodeRegistration for the node's devices (annotations, and the
//    capacity/allocatable the kubelet creates the Node with), plus the handshake answer
//    "Reported_<now>" on Info().handshake_key when the vendor has one, re-published every
//    `publish_period` as HAMi's vendor plugins do (the scheduler's Requesting_ needs an answer
//    within 60 s);
//  * Allocate, as HAMi's plugin for that vendor does, one call per container that asks for the
//    vendor's count resource: the pending pod on the node (bind-phase allocating, hami.io/vgpu-node
//    = this node) has its first non-empty container of Device::PodToAllocate consumed (written
//    back to to_allocate_key); when none of the vendor's devices is left, the pod gets
//    Device::AllocateAnnotations and hami.io/bind-phase: success in the same patch, and the node
//    lock is released (nodelock::Release). A vendor without a to-allocate key finishes at the
//    first call. A failure sets bind-phase failed and releases the lock, as HAMi's plugins do.
#ifndef HAMI_SIM_VENDOR_PLUGIN_H_
#define HAMI_SIM_VENDOR_PLUGIN_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "device/device.h"
#include "deviceplugin/discovery.h"
#include "k8s/client.h"
#include "protocol/node_register.h"

namespace hami::sim {

// The devices of a vendor node as its plugin reports them: one per scenario GPU, in order, with
// `split_count` slots, its memory, 100 % cores, healthy; type = the model, mode "hami-core".
std::vector<protocol::DeviceInfo> VendorDeviceInfos(
    const std::vector<deviceplugin::GpuDevice>& gpus, int32_t split_count);

// The vendor keys a scenario may name: the active backends of `config` (their sections are in
// deviceConfig), NVIDIA included.
std::vector<std::string> ActiveVendorKeys(const device::DeviceConfig& config);

class VendorPlugin {
 public:
  // `device` and `api` must outlive the plugin.
  VendorPlugin(const device::Device& device, k8s::Client& api, std::string node,
               std::vector<protocol::DeviceInfo> devices, const Clock& clock = RealClock());
  ~VendorPlugin();  // Stop()s
  VendorPlugin(const VendorPlugin&) = delete;
  VendorPlugin& operator=(const VendorPlugin&) = delete;

  const device::Device& device() const { return device_; }
  // What the plugin publishes (EncodeNodeRegistration of the node's devices).
  const device::NodeRegistration& registration() const { return registration_; }
  // The vendor's count resource: kubelet calls Allocate once per container that asks for it.
  const std::string& count_resource() const { return device_.Info().count_resource; }

  // One publication: the register annotations and, when the vendor has a handshake key,
  // "Reported_<now>" (local time, as HAMi's plugins write it). API errors are retried
  // (transient) and otherwise returned.
  Status Publish();
  // Publishes now and then every `period` on a thread of its own until Stop().
  Status Start(std::chrono::milliseconds period = std::chrono::seconds(30));
  void Stop();  // idempotent

  // One container's Allocate (see the file comment). The error names the node and pod.
  Status Allocate();

 private:
  Status Fail(const std::string& ns, const std::string& name, const std::string& why);
  // Removes the backend's own node lock (device::BindLock::kVendor) from the node; else nothing.
  void ReleaseVendorLock();

  const device::Device& device_;
  k8s::Client& api_;
  const std::string node_;
  const Clock& clock_;
  const device::NodeRegistration registration_;
  std::mutex allocate_mu_;  // one Allocate at a time, as a plugin serves them

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread publisher_;
};

}  // namespace hami::sim

#endif  // HAMI_SIM_VENDOR_PLUGIN_H_
