// hami-dra-plugin: the node half of DRA mode (docs/DRA.md). Parses flags and runs DraAgent until
// SIGTERM or SIGINT; everything else is in the library so tests run the same code in-process.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "common/flags.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "deviceplugin/inventory.h"
#include "draplugin/agent.h"
#include "k8s/client.h"
#include "k8s/kubeconfig.h"

namespace hami::draplugin {
namespace {

struct Flags {
  std::string kubeconfig;
  std::string node_name;
  std::string config_file;
  std::string hook_path = "/usr/local";
  std::string cdi_root = "/var/run/cdi";
  std::string registrar_dir = "/var/lib/kubelet/plugins_registry";
  std::string plugins_dir = "/var/lib/kubelet/plugins";
  std::string device_inventory;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string sysfs_root = "/sys";
  std::string nvidia_cdi_kind = "nvidia.com/gpu";
  std::string device_plugin_socket = "/var/lib/kubelet/device-plugins/nvidia-gpu.sock";
  std::string prepare_claim;
  int refresh_seconds = 30;
  int verbosity = 0;
};

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--kubeconfig", f.kubeconfig,
                 "kubeconfig file; empty: $KUBECONFIG, in-cluster, then ~/.kube/config");
  app.add_option("--node-name", f.node_name,
                 "this node's name: its pool of ResourceSlices is named after it (required)")
      ->envname("NODE_NAME");
  app.add_option("--config-file", f.config_file,
                 "device-config.yaml (the scheduler's schema); its nvidia.deviceMemoryScaling "
                 "scales the memory capacity published (optional)")
      ->envname("CONFIG_FILE");
  app.add_option("--hook-path", f.hook_path,
                 "host directory holding vgpu/libvgpu.so; claims' files go under vgpu/claims")
      ->envname("HOOK_PATH");
  app.add_option("--cdi-root", f.cdi_root, "where the container runtime reads CDI specs")
      ->envname("CDI_ROOT");
  app.add_option("--kubelet-registrar-directory-path", f.registrar_dir,
                 "kubelet's plugin registration directory (the -reg.sock goes there)")
      ->envname("KUBELET_REGISTRAR_DIRECTORY_PATH");
  app.add_option("--kubelet-plugins-directory-path", f.plugins_dir,
                 "kubelet's plugin directory; the plugin serves "
                 "<it>/hami-core-gpu.project-hami.io/dra.sock and keeps its checkpoint there")
      ->envname("KUBELET_PLUGINS_DIRECTORY_PATH");
  app.add_option("--device-inventory", f.device_inventory,
                 "YAML inventory (devices: [{index, uuid, model, memory MiB, numa, health}]) used "
                 "instead of NVML: simulation, tests, nodes without GPUs");
  app.add_option("--nvml-library", f.nvml_library, "NVML library to dlopen");
  app.add_option("--sysfs-root", f.sysfs_root, "sysfs mount, for PCI NUMA nodes");
  app.add_option("--nvidia-cdi-kind", f.nvidia_cdi_kind,
                 "CDI kind of the NVIDIA Container Toolkit's spec: each prepared GPU also gets "
                 "<kind>=<GPU UUID> for the driver's libraries; empty: none");
  app.add_option("--device-plugin-socket", f.device_plugin_socket,
                 "the device plugin's kubelet socket: when it is served the node is in "
                 "device-plugin mode and this plugin refuses to start; \"none\": no check");
  app.add_option("--refresh-period", f.refresh_seconds,
                 "seconds between discoveries (health, GPUs added or gone; slices rewritten "
                 "only on a change)")
      ->check(CLI::Range(1, 3600));
  app.add_option("-v,--v", f.verbosity, "log verbosity (klog -v)");
  app.add_option("--prepare-claim", f.prepare_claim,
                 "prepare the allocated ResourceClaim in this JSON file (as `kubectl get "
                 "resourceclaim -o json` prints it) with this node's GPUs, print kubelet's "
                 "answer and exit: no API server or kubelet needed (tests/gpu uses it; "
                 "Unprepare is kubelet's, or remove the claim's files by hand)");
}

// --prepare-claim: one Prepare as kubelet would ask for it, the answer as JSON on stdout.
int PrepareClaimFile(const Flags& f, const AgentOptions& o) {
  auto text = deviceplugin::ReadFile(f.prepare_claim);
  if (!text) return std::cerr << text.error() << "\n", 1;
  Json claim = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (claim.is_discarded()) return std::cerr << f.prepare_claim << ": not JSON\n", 1;
  auto allocation = ReadClaimAllocation(claim);
  if (!allocation) return std::cerr << f.prepare_claim << ": " << allocation.error() << "\n", 1;
  auto discovery = deviceplugin::NodeDiscovery::Make(o.discovery);
  if (!discovery) return std::cerr << "discovery: " << discovery.error() << "\n", 1;
  auto gpus = DiscoverGpus(**discovery);
  if (!gpus) return std::cerr << gpus.error() << "\n", 1;
  if (deviceplugin::NvmlDiscovery* nvml = (*discovery)->nvml()) {
    std::vector<std::string> notes;
    *gpus =
        WithMigProfiles(std::move(*gpus), *nvml, o.discovery.config.mig_profile_allowlist, &notes);
    for (const std::string& n : notes) std::cerr << n << "\n";
  }
  PreparedClaims claims(o.server.plugin_dir + "/checkpoint.json", o.prepare, (*discovery)->nvml(),
                        o.mig_lock_path);
  if (auto s = claims.Load(); !s) return std::cerr << s.error() << "\n", 1;
  auto devices = claims.Prepare(*allocation, *gpus);
  if (!devices) return std::cerr << devices.error() << "\n", 1;
  Json out = {{"claim", allocation->ns + "/" + allocation->name},
              {"cdiSpec", CdiSpecPath(o.prepare, allocation->uid)},
              {"devices", Json::array()}};
  for (const PreparedDevice& d : *devices) {
    out["devices"].push_back({{"requestNames", d.requests},
                              {"poolName", d.pool},
                              {"deviceName", d.device},
                              {"shareID", d.share_id},
                              {"cdiDeviceIDs", d.cdi_device_ids}});
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}

int Run(const Flags& f) {
  log::SetVerbosity(f.verbosity);
  if (f.node_name.empty() && f.prepare_claim.empty()) {
    std::cerr << "--node-name (or NODE_NAME) is required\n";
    return 2;
  }
  AgentOptions o;
  o.discovery.node_name = f.node_name;
  o.discovery.device_inventory = f.device_inventory;
  o.discovery.nvml = deviceplugin::NvmlOptions{f.nvml_library, f.sysfs_root};
  if (!f.config_file.empty()) {
    auto text = deviceplugin::ReadFile(f.config_file);
    if (!text) return std::cerr << text.error() << "\n", 1;
    auto config = deviceplugin::ApplyDeviceConfigYaml(*text, o.discovery.config);
    if (!config) return std::cerr << f.config_file << ": " << config.error() << "\n", 1;
    o.discovery.config = std::move(*config);
  }
  o.server.registrar_dir = f.registrar_dir;
  o.server.plugin_dir = f.plugins_dir + "/" + std::string(kDriverName);
  o.prepare.hook_path = f.hook_path;
  o.prepare.cdi_dir = f.cdi_root;
  o.prepare.nvidia_cdi_kind = f.nvidia_cdi_kind;
  o.refresh = std::chrono::seconds(f.refresh_seconds);
  o.device_plugin_socket = f.device_plugin_socket == "none" ? "" : f.device_plugin_socket;
  if (!f.prepare_claim.empty()) return PrepareClaimFile(f, o);
  auto rest = k8s::LoadConfig(f.kubeconfig);
  if (!rest) return std::cerr << "kubeconfig: " << rest.error() << "\n", 1;

  const sigset_t stop_signals = BlockStopSignals();
  k8s::Client client(*rest);
  DraAgent agent(o, &client, RealClock());
  if (Status s = agent.Start(); !s) return std::cerr << "hami-dra-plugin: " << s.error() << "\n", 1;
  HAMI_INFO("hami-dra-plugin: node {}: pool at generation {}, serving {} (registration {})",
            f.node_name, agent.publisher().generation(), agent.server()->plugin_socket(),
            agent.server()->registration_socket());
  HAMI_INFO("signal {}: shutting down", WaitForStopSignal(stop_signals));
  agent.Stop();
  return 0;
}

}  // namespace
}  // namespace hami::draplugin

int main(int argc, char** argv) {
  CLI::App app{
      "hami-dra-plugin: the DRA kubelet plugin of HAMi (driver hami-core-gpu.project-hami.io). "
      "Publishes each GPU as a ResourceSlice device that claims share by memory and cores, and "
      "enforces each claim's share in its containers with libvgpu through CDI."};
  hami::draplugin::Flags flags;
  hami::draplugin::AddFlags(app, flags);
  hami::flags::GoStyleArgs args(app, argc, argv);
  CLI11_PARSE(app, args.argc(), args.argv());
  return hami::draplugin::Run(flags);
}
