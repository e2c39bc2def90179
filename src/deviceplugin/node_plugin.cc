#include "deviceplugin/node_plugin.h"

#include <filesystem>

#include "common/log.h"
#include "common/strings.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/mig_discovery.h"
#include "deviceplugin/mig_manager.h"
#include "deviceplugin/mps.h"
#include "deviceplugin/register.h"
#include "k8s/client.h"

namespace hami::deviceplugin {

Result<std::unique_ptr<NodeDiscovery>> NodeDiscovery::Make(const NodePluginOptions& options) {
  auto d = std::unique_ptr<NodeDiscovery>(new NodeDiscovery());
  const bool mig = options.config.operating_mode == kMigOperatingMode;
  if (!options.device_inventory.empty()) {
    if (mig) {
      return Error{"operatingmode \"mig\" needs NVML: --device-inventory " +
                   Quote(options.device_inventory) + " cannot create MIG instances"};
    }
    d->inventory_ = std::make_unique<InventoryDiscovery>(options.device_inventory);
    d->top_ = d->inventory_.get();
    return d;
  }
  d->nvml_ = std::make_unique<NvmlDiscovery>(options.nvml);
  d->top_ = d->nvml_.get();
  if (mig) {
    d->mig_ = std::make_unique<MigDiscovery>(d->nvml_.get(), d->nvml_.get(),
                                             options.config.mig_profile_allowlist);
    d->top_ = d->mig_.get();
  }
  return d;
}

class NodePlugin::Impl {
 public:
  Impl(NodePluginOptions options, k8s::Client* client, const Clock& clock)
      : options_(std::move(options)), client_(client), clock_(clock) {}

  // The pods bound to this node, for the MIG passes.
  Result<std::vector<k8s::Json>> ListPods(bool retry) {
    k8s::ListOptions list;
    list.field_selector = "spec.nodeName=" + options_.node_name;
    auto call = [&] { return client_->List(k8s::resources::kPods, "", list); };
    auto r = retry ? k8s::RetryTransient<k8s::ObjectList>(call) : call();
    if (!r) return r.error().ToError();
    return std::move(r->items);
  }

  Status StartMig(const std::vector<GpuDevice>& gpus) {
    std::vector<MigGpu> mig_gpus;
    for (const GpuDevice& g : gpus) mig_gpus.push_back({static_cast<uint32_t>(g.index), g.uuid});
    mig_ = std::make_unique<MigManager>(discovery_->nvml(), std::move(mig_gpus),
                                        options_.mig_lock_path, options_.mig_lock_wait);
    reconciler_ = std::make_unique<MigReconciler>(
        mig_.get(), [this] { return ListPods(false); }, clock_);
    // The start-up pass: adopt what the live pods reference, reset the rest. Its pod list is
    // retried; a failure destroys nothing and the reconciler tries again in 5 s.
    MigReconciler startup(
        mig_.get(), [this] { return ListPods(true); }, clock_);
    if (auto r = startup.RunOnce(); !r) {
      HAMI_ERROR("MIG start-up pass: {}", r.error());
    } else {
      HAMI_INFO("MIG start-up pass: kept {} instance(s), destroyed {}", r->kept.size(),
                r->destroyed.size());
    }
    allocator_->set_mig_manager(mig_.get());
    return OkStatus();
  }

  void StartMps(const std::vector<GpuDevice>& gpus) {
    std::vector<std::string> uuids;
    for (const GpuDevice& g : gpus) uuids.push_back(g.uuid);
    mps_ = std::make_unique<MpsDaemons>(options_.mps, std::move(uuids), clock_);
    if (Status s = mps_->Start(); !s) HAMI_ERROR("{}", s.error());
  }

  // The plugin loop's extra work, every pass.
  void Tick() {
    if (reconciler_) {
      if (auto r = reconciler_->Tick(); !r) HAMI_ERROR("{}", r.error());
    }
    if (mps_) mps_->Tick();
  }

  Status Start() {
    auto made = NodeDiscovery::Make(options_);
    if (!made) return std::move(made).take_error();
    discovery_ = std::move(*made);
    // GPUs that cannot be listed at start (a bad inventory file, no driver) end the plugin
    // before anything is published; later failures keep the last published value.
    auto first = discovery_->get()->Discover();
    if (!first) return Error{discovery_->get()->Name() + ": " + first.error()};
    const std::vector<GpuDevice> gpus = FilterDevices(*first, options_.config);

    publisher_ = std::make_unique<RegisterPublisher>(
        discovery_->get(), options_.config,
        [this](std::string_view key, std::string_view value) -> Status {
          k8s::Json patch;
          patch["metadata"]["annotations"][std::string(key)] = value;
          auto r = client_->Patch(k8s::resources::kNodes, "", options_.node_name,
                                  k8s::PatchType::kMerge, patch);
          if (!r) return r.error().ToError();
          return OkStatus();
        },
        clock_);
    AllocateEnv env;
    env.hook_path = options_.hook_path;
    env.license_present = std::filesystem::exists(options_.hook_path + "/vgpu/license");
    env.config = options_.config;
    env.strategy = options_.strategy;
    env.mps_root = options_.mps.root;
    allocator_ = std::make_unique<Allocator>(client_, options_.node_name, env);

    const std::string& mode = options_.config.operating_mode;
    if (mode == kMigOperatingMode) {
      if (Status s = StartMig(gpus); !s) return s;
    } else if (mode == kMpsOperatingMode) {
      StartMps(gpus);
    }

    plugin_options_.kubelet_socket = options_.kubelet_socket;
    plugin_options_.resource_name = options_.config.resource_name;
    plugin_options_.split_count = options_.config.device_split_count;
    plugin_options_.numa_topology = options_.config.enable_numa_topology;
    plugin_options_.preferred_allocation = options_.config.enable_preferred_allocation;
    plugin_options_.poll_interval = options_.poll_interval;
    plugin_options_.tick = [this] { Tick(); };
    plugin_ = std::make_unique<Plugin>(plugin_options_, publisher_.get(), allocator_.get());
    return plugin_->Start();
  }

  void Stop() {
    if (plugin_) plugin_->Stop();
    if (mps_) mps_->Stop();
  }

  const NodePluginOptions options_;
  k8s::Client* client_;
  const Clock& clock_;
  std::unique_ptr<NodeDiscovery> discovery_;
  std::unique_ptr<RegisterPublisher> publisher_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<MigManager> mig_;
  std::unique_ptr<MigReconciler> reconciler_;
  std::unique_ptr<MpsDaemons> mps_;
  PluginOptions plugin_options_;
  std::unique_ptr<Plugin> plugin_;
};

NodePlugin::NodePlugin(NodePluginOptions options, k8s::Client* client, const Clock& clock)
    : impl_(std::make_unique<Impl>(std::move(options), client, clock)) {}

NodePlugin::~NodePlugin() { Stop(); }

Status NodePlugin::Start() { return impl_->Start(); }

void NodePlugin::Stop() { impl_->Stop(); }

std::string NodePlugin::socket_path() const {
  return impl_->plugin_ ? impl_->plugin_->socket_path() : "";
}

std::string NodePlugin::discovery_name() const {
  return impl_->discovery_ ? impl_->discovery_->get()->Name() : "";
}

const PluginOptions& NodePlugin::plugin_options() const { return impl_->plugin_options_; }

}  // namespace hami::deviceplugin
