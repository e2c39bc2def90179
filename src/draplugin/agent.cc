#include "draplugin/agent.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "common/log.h"
#include "common/strings.h"
#include "deviceplugin/mig_profiles.h"
#include "k8s/client.h"

namespace hami::draplugin {
namespace {

int64_t UnixSeconds(const Clock& clock) {
  return std::chrono::duration_cast<std::chrono::seconds>(clock.Now().time_since_epoch()).count();
}

}  // namespace

std::vector<GpuFacts> MakeFacts(const std::vector<deviceplugin::GpuDevice>& devices,
                                const std::vector<deviceplugin::GpuAttributes>& attributes) {
  std::vector<GpuFacts> out;
  for (const deviceplugin::GpuDevice& d : devices) {
    GpuFacts g;
    g.gpu = d;
    if (d.index < attributes.size()) g.attributes = attributes[d.index];
    out.push_back(std::move(g));
  }
  return out;
}

Result<std::vector<GpuFacts>> DiscoverGpus(deviceplugin::NodeDiscovery& discovery) {
  deviceplugin::Discovery* d = discovery.get();
  auto devices = d->Discover();
  if (!devices) return Error{d->Name() + ": " + devices.error()};
  std::vector<deviceplugin::GpuAttributes> attributes;
  if (deviceplugin::NvmlDiscovery* nvml = discovery.nvml()) {
    auto a = nvml->Attributes();
    if (a) attributes = std::move(*a);
  }
  return MakeFacts(*devices, attributes);
}

std::vector<GpuFacts> WithMigProfiles(
    std::vector<GpuFacts> gpus, deviceplugin::MigDriver& driver,
    const std::vector<device::nvidia::MigAllowlistEntry>& allowlist,
    std::vector<std::string>* notes) {
  std::vector<GpuFacts> out;
  for (GpuFacts& g : gpus) {
    const std::string name = "GPU " + Quote(g.gpu.uuid) + " (" + g.gpu.model + ")";
    const auto index = static_cast<uint32_t>(g.gpu.index);
    auto enabled = driver.MigEnabled(index);
    if (!enabled) {
      notes->push_back(name + ": MIG mode unknown (" + enabled.error() + "): shared");
    } else if (*enabled) {
      auto offered = driver.GpuInstanceProfiles(index);
      if (!offered) {
        notes->push_back(name + ": in MIG mode, its profiles unknown (" + offered.error() +
                         "): not published");
        continue;
      }
      g.gpu.mig_profiles = deviceplugin::MigProfilesFor(allowlist, g.gpu.model, *offered);
      if (g.gpu.mig_profiles.empty()) {
        notes->push_back(name +
                         ": in MIG mode, offers no profile of migProfileAllowlist: not published");
        continue;
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

bool SomeoneServes(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool served = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return served;
}

DraAgent::DraAgent(AgentOptions options, k8s::Client* client, const Clock& clock)
    : options_(std::move(options)),
      client_(client),
      clock_(clock),
      publisher_(client, SliceOptions{options_.discovery.node_name,
                                      options_.discovery.config.device_memory_scaling}) {}

DraAgent::~DraAgent() { Stop(); }

std::vector<GpuFacts> DraAgent::Gpus() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gpus_;
}

Status DraAgent::Refresh() {
  Result<std::vector<GpuFacts>> discovered = Error{"no discovery"};
  if (deviceplugin::Discovery* source = options_.discovery_source) {
    auto devices = source->Discover();
    if (!devices) return Error{source->Name() + ": " + devices.error()};
    discovered = MakeFacts(*devices, {});
  } else {
    discovered = DiscoverGpus(*discovery_);
  }
  if (!discovered) return std::move(discovered).take_error();
  std::vector<GpuFacts> gpus = std::move(*discovered);
  std::vector<std::string> notes;
  // A discovery_source says each GPU's MIG profiles itself (hami-sim's scenario); otherwise the
  // MIG driver tells which GPUs are in MIG mode and the allowlist which profiles they publish.
  if (mig_driver_ != nullptr && options_.discovery_source == nullptr) {
    gpus = WithMigProfiles(std::move(gpus), *mig_driver_,
                           options_.discovery.config.mig_profile_allowlist, &notes);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    gpus_ = gpus;
    for (const std::string& n : notes) {
      if (noted_.insert(n).second) HAMI_WARN("hami-dra-plugin: {}", n);
    }
  }
  if (server_) server_->UpdateHealth(gpus, UnixSeconds(clock_));
  if (auto s = publisher_.Publish(gpus); !s) return Error{"publish: " + s.error()};
  return OkStatus();
}

Status DraAgent::Start() {
  const AgentOptions& o = options_;
  if (o.discovery.node_name.empty()) return Error{"the node name is empty (--node-name)"};
  if (SomeoneServes(o.device_plugin_socket)) {
    return Error{"node " + o.discovery.node_name +
                 " is in device-plugin mode: " + Quote(o.device_plugin_socket) +
                 " is served (hami-device-plugin); DRA mode and device-plugin mode cannot share "
                 "a node's GPUs. Remove the device plugin from this node (devicePlugin node "
                 "selector) or keep DRA off it"};
  }
  if (o.discovery_source == nullptr) {
    auto discovery = deviceplugin::NodeDiscovery::Make(o.discovery);
    if (!discovery) return Error{"discovery: " + discovery.error()};
    discovery_ = std::move(*discovery);
  }
  discovering_ = true;
  const std::string checkpoint =
      o.checkpoint_path.empty() ? o.server.plugin_dir + "/checkpoint.json" : o.checkpoint_path;
  mig_driver_ = o.mig_driver ? o.mig_driver : discovery_ ? discovery_->nvml() : nullptr;
  claims_ = std::make_unique<PreparedClaims>(checkpoint, o.prepare, mig_driver_, o.mig_lock_path);
  if (auto s = claims_->Load(); !s) return s;
  if (auto s = Refresh(); !s) return s;
  ServerOptions server = o.server;
  server.node_name = o.discovery.node_name;
  server_ = std::make_unique<DraServer>(
      server, claims_.get(),
      [this](const std::string& ns, const std::string& name) -> Result<Json> {
        auto got = client_->Get(k8s::resources::kResourceClaims, ns, name);
        if (!got) return got.error().ToError();
        return *got;
      },
      [this] { return Gpus(); });
  if (auto s = server_->Start(); !s) return s;
  server_->UpdateHealth(Gpus(), UnixSeconds(clock_));
  loop_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, options_.refresh, [this] { return stop_; });
      if (stop_) break;
      lock.unlock();
      if (auto s = Refresh(); !s) HAMI_WARN("hami-dra-plugin: refresh: {}", s.error());
      lock.lock();
    }
  });
  return OkStatus();
}

void DraAgent::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  if (server_) server_->Stop();
  if (discovering_) {
    if (auto s = publisher_.Withdraw(); !s) HAMI_WARN("hami-dra-plugin: withdraw: {}", s.error());
  }
}

}  // namespace hami::draplugin
