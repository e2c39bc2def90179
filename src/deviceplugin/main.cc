// hami-device-plugin (NVIDIA): parses flags, loads configuration, and runs deviceplugin::Plugin
// until SIGTERM or SIGINT. Everything else lives in the library so tests and hami-sim can run
// the same code in-process.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "common/flags.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/node_plugin.h"
#include "deviceplugin/register.h"
#include "k8s/client.h"
#include "k8s/kubeconfig.h"

namespace hami::deviceplugin {
namespace {

struct Flags {
  std::string kubeconfig;
  std::string node_name;
  std::string config_file;
  std::string node_config_file = "/config/config.json";
  std::string kubelet_socket = kDefaultKubeletSocket;
  std::string hook_path = "/usr/local";
  std::string device_list_strategy = "envvar";
  std::string device_inventory;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string sysfs_root = "/sys";
  std::string mig_strategy = "none";
  std::string mps_root = "/run/nvidia/mps";
  std::string mps_control{kMpsControlBinary};
  int verbosity = 0;
  bool print_register = false;
};

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--kubeconfig", f.kubeconfig,
                 "kubeconfig file; empty: $KUBECONFIG, in-cluster, then ~/.kube/config");
  app.add_option("--node-name", f.node_name,
                 "this node's name: the Node that gets hami.io/node-nvidia-register and whose "
                 "pods Allocate serves (required)")
      ->envname("NODE_NAME");
  app.add_option("--config-file", f.config_file,
                 "device-config.yaml, the scheduler's schema; its nvidia section sets "
                 "deviceSplitCount, scalings, libCudaLogLevel, ... (optional)")
      ->envname("CONFIG_FILE");
  app.add_option("--node-config-file", f.node_config_file,
                 "per-node overrides (config.json, `nodeconfig` list); missing file: defaults");
  app.add_option("--kubelet-socket", f.kubelet_socket,
                 "kubelet's registration socket; the plugin serves nvidia-gpu.sock in the same "
                 "directory")
      ->envname("KUBELET_SOCKET");
  app.add_option("--hook-path", f.hook_path,
                 "host directory holding vgpu/libvgpu.so and the per-container caches")
      ->envname("HOOK_PATH");
  app.add_option("--device-list-strategy", f.device_list_strategy,
                 "how containers learn their GPUs: envvar, volume-mounts or cdi-annotations")
      ->envname("DEVICE_LIST_STRATEGY");
  app.add_option("--device-inventory", f.device_inventory,
                 "YAML inventory (devices: [{index, uuid, model, memory MiB, numa, health}]) used "
                 "instead of NVML: simulation, tests, nodes without GPUs");
  app.add_option("--nvml-library", f.nvml_library, "NVML library to dlopen");
  app.add_option("--sysfs-root", f.sysfs_root, "sysfs mount, for PCI NUMA nodes");
  app.add_option("-v,--v", f.verbosity, "log verbosity (klog -v)");
  app.add_option("--mig-strategy", f.mig_strategy,
                 "NVIDIA's MIG strategy (none, single, mixed): not served, GPUs are advertised "
                 "whole whatever it says (HAMi's chart passes none); dynamic MIG is config.json's "
                 "operatingmode: mig")
      ->check(CLI::IsMember({"none", "single", "mixed"}))
      ->envname("MIG_STRATEGY");
  app.add_option("--mps-root", f.mps_root,
                 "operatingmode mps: host directory of the MPS control daemons, one "
                 "<GPU UUID>/{pipe,log} pair per GPU, mounted into the containers");
  app.add_option("--mps-control", f.mps_control,
                 "operatingmode mps: the MPS control binary (a path, or a name on PATH); the "
                 "plugin starts and watches one daemon per GPU with it, none when it is absent");
  app.add_flag("--print-register", f.print_register,
               "discover once, print the hami.io/node-nvidia-register value and exit (no API "
               "server or kubelet needed; tests/gpu uses it)");
}

// HAMi v2.10.0's nvidia-device-plugin flags that mean nothing here (its chart renders
// --disable-core-limit): accepted, listed in --help, logged when given.
void AddIgnoredFlags(CLI::App& app, flags::IgnoredFlags& ignored) {
  const std::string config = "HAMi reads it from the device config; so do we: ";
  ignored.Add(
      app,
      {{"disable-core-limit", false,
        "HAMi parses it and never reads it; the device config's nvidia.disableCoreLimit counts"},
       {"device-split-count", true, config + "nvidia.deviceSplitCount"},
       {"device-memory-scaling", true, config + "nvidia.deviceMemoryScaling"},
       {"device-cores-scaling", true, config + "nvidia.deviceCoreScaling"},
       {"resource-name", true, config + "nvidia.resourceCountName"},
       {"fail-on-init-error", false, "NVIDIA's plugin option; an init error always ends ours"},
       {"nvidia-driver-root", true, "NVIDIA's driver root (NVML is found by --nvml-library)"},
       {"dev-root", true, "NVIDIA's device node root (CDI specs are not generated)"},
       {"nvidia-dev-root", true, "alias of --dev-root"},
       {"pass-device-specs", false, "NVIDIA's DeviceSpecs in Allocate (not passed)"},
       {"device-id-strategy", true, "NVIDIA's uuid|index (GPUs are named by UUID)"},
       {"gdrcopy-enabled", false, "NVIDIA's GDRCopy injection (not done)"},
       {"gds-enabled", false, "NVIDIA's NVIDIA_GDS=enabled (not set)"},
       {"mofed-enabled", false, "NVIDIA's NVIDIA_MOFED=enabled (not set)"},
       {"cdi-annotation-prefix", true, "NVIDIA's CDI annotation key prefix"},
       {"nvidia-cdi-hook-path", true, "NVIDIA's CDI hook path (CDI specs are not generated)"},
       {"nvidia-ctk-path", true, "alias of --nvidia-cdi-hook-path"},
       {"driver-root-ctr-path", true, "NVIDIA's in-container driver root (CDI)"},
       {"container-driver-root", true, "alias of --driver-root-ctr-path"},
       {"device-discovery-strategy", true,
        "NVIDIA's auto|nvml|tegra (NVML, or --device-inventory)"},
       {"imex-channel-ids", true, "NVIDIA's IMEX channels (not injected)"},
       {"imex-required", false, "NVIDIA's IMEX requirement (not injected)"},
       {"report-node-capacity", false,
        "HAMi v2.11's vGPU memory/cores in the Node's capacity (not reported)"}});
  ignored.Add(app, flags::KlogFlags());
}

Result<PluginConfig> LoadConfig(const Flags& f) {
  PluginConfig config;
  if (!f.config_file.empty()) {
    auto text = ReadFile(f.config_file);
    if (!text) return std::move(text).take_error();
    auto c = ApplyDeviceConfigYaml(*text, config);
    if (!c) return Error{f.config_file + ": " + c.error()};
    config = std::move(*c);
  }
  if (auto text = ReadFile(f.node_config_file)) {
    auto c = ApplyNodeConfigJson(*text, f.node_name, config);
    if (!c) return Error{f.node_config_file + ": " + c.error()};
    config = std::move(*c);
  } else {
    HAMI_INFO("no node config at {}; using defaults", f.node_config_file);
  }
  return config;
}

NodePluginOptions Options(const Flags& f, const PluginConfig& config) {
  NodePluginOptions o;
  o.node_name = f.node_name;
  o.kubelet_socket = f.kubelet_socket;
  o.hook_path = f.hook_path;
  o.device_inventory = f.device_inventory;
  o.nvml = NvmlOptions{f.nvml_library, f.sysfs_root};
  o.config = config;
  o.mps.root = f.mps_root;
  o.mps.control = f.mps_control;
  return o;
}

int PrintRegister(const Flags& f, const PluginConfig& config) {
  auto discovery = NodeDiscovery::Make(Options(f, config));
  if (!discovery) return std::cerr << discovery.error() << "\n", 1;
  Discovery* d = (*discovery)->get();
  auto devices = d->Discover();
  if (!devices) return std::cerr << d->Name() << ": " << devices.error() << "\n", 1;
  std::cout << protocol::EncodeNodeRegister(
                   BuildDeviceInfos(FilterDevices(*devices, config), config))
            << "\n";
  return 0;
}

int Run(const Flags& f, const flags::IgnoredFlags& ignored) {
  log::SetVerbosity(f.verbosity);
  for (const std::string& m : ignored.Messages()) HAMI_INFO("hami-device-plugin: {}", m);
  if (f.mig_strategy != "none") {
    HAMI_WARN(
        "hami-device-plugin: --mig-strategy={}: NVIDIA's MIG strategies are not served; GPUs "
        "are advertised whole (dynamic MIG is config.json's operatingmode: mig)",
        f.mig_strategy);
  }
  if (f.print_register) {
    auto config = LoadConfig(f);
    if (!config) return std::cerr << config.error() << "\n", 1;
    return PrintRegister(f, *config);
  }
  if (f.node_name.empty()) {
    std::cerr << "--node-name (or NODE_NAME) is required\n";
    return 2;
  }
  auto strategy = ParseDeviceListStrategy(f.device_list_strategy);
  if (!strategy) return std::cerr << strategy.error() << "\n", 2;
  auto config = LoadConfig(f);
  if (!config) return std::cerr << config.error() << "\n", 1;
  auto rest = k8s::LoadConfig(f.kubeconfig);
  if (!rest) return std::cerr << "kubeconfig: " << rest.error() << "\n", 1;

  const sigset_t stop_signals = BlockStopSignals();
  k8s::Client client(*rest);
  NodePluginOptions options = Options(f, *config);
  options.strategy = *strategy;
  NodePlugin plugin(options, &client, RealClock());
  if (Status s = plugin.Start(); !s) return std::cerr << s.error() << "\n", 1;
  HAMI_INFO("hami-device-plugin serving {} on {} ({}, operatingmode {})",
            plugin.plugin_options().resource_name, plugin.socket_path(), plugin.discovery_name(),
            config->operating_mode);
  HAMI_INFO("signal {}: shutting down", WaitForStopSignal(stop_signals));
  plugin.Stop();
  return 0;
}

}  // namespace
}  // namespace hami::deviceplugin

int main(int argc, char** argv) {
  CLI::App app{
      "hami-device-plugin: the NVIDIA kubelet device plugin of HAMi. Advertises each GPU "
      "deviceSplitCount times, publishes hami.io/node-nvidia-register on the node, and answers "
      "Allocate from the pod annotations the scheduler wrote."};
  hami::deviceplugin::Flags flags;
  hami::deviceplugin::AddFlags(app, flags);
  hami::flags::IgnoredFlags ignored;
  hami::deviceplugin::AddIgnoredFlags(app, ignored);
  // Go-style command lines (-v=4, -node-name=x) as HAMi's chart and users write them.
  hami::flags::GoStyleArgs args(app, argc, argv);
  CLI11_PARSE(app, args.argc(), args.argv());
  return hami::deviceplugin::Run(flags, ignored);
}
