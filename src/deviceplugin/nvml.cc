#include "deviceplugin/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>

#include "common/strings.h"
#include "deviceplugin/nvml_types.h"

namespace hami::deviceplugin {

// The MIG calls (docs/MIG.md); bound only when every one of them is exported.
struct NvmlDiscovery::MigApi {
  nvmlReturn_t (*get_mig_mode)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*gi_profile_info)(nvmlDevice_t, unsigned int,
                                  nvmlGpuInstanceProfileInfo_st*) = nullptr;
  nvmlReturn_t (*gi_placements)(nvmlDevice_t, unsigned int, nvmlGpuInstancePlacement_st*,
                                unsigned int*) = nullptr;
  nvmlReturn_t (*create_gi)(nvmlDevice_t, unsigned int, const nvmlGpuInstancePlacement_st*,
                            nvmlGpuInstance_t*) = nullptr;
  nvmlReturn_t (*get_gis)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*, unsigned int*) = nullptr;
  nvmlReturn_t (*get_gi_by_id)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*) = nullptr;
  nvmlReturn_t (*gi_info)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_st*) = nullptr;
  nvmlReturn_t (*destroy_gi)(nvmlGpuInstance_t) = nullptr;
  nvmlReturn_t (*ci_profile_info)(nvmlGpuInstance_t, unsigned int, unsigned int,
                                  nvmlComputeInstanceProfileInfo_st*) = nullptr;
  nvmlReturn_t (*create_ci)(nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t*) = nullptr;
  nvmlReturn_t (*get_cis)(nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t*,
                          unsigned int*) = nullptr;
  nvmlReturn_t (*ci_info)(nvmlComputeInstance_t, nvmlComputeInstanceInfo_st*) = nullptr;
  nvmlReturn_t (*destroy_ci)(nvmlComputeInstance_t) = nullptr;
  nvmlReturn_t (*max_mig_devices)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*mig_device_by_index)(nvmlDevice_t, unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*mig_gi_id)(nvmlDevice_t, unsigned int*) = nullptr;
};

struct NvmlDiscovery::Api {
  void* handle = nullptr;
  MigApi mig{};
  bool has_mig = false;
  bool initialized = false;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*get_count)(unsigned int*) = nullptr;
  nvmlReturn_t (*get_handle)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*get_uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_memory)(nvmlDevice_t, nvmlMemory_st*) = nullptr;
  nvmlReturn_t (*get_pci)(nvmlDevice_t, nvmlPciInfo_st*) = nullptr;
  nvmlReturn_t (*get_utilization)(nvmlDevice_t, nvmlUtilization_st*) = nullptr;  // optional
  // Optional, the monitor's v2.11 host series.
  nvmlReturn_t (*get_temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*get_power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*get_ecc)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  // Optional, the DRA plugin's device attributes (Attributes()).
  nvmlReturn_t (*get_minor)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*get_brand)(nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*get_architecture)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*get_compute_capability)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*get_driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*get_cuda_driver_version)(int*) = nullptr;
};

namespace {

template <typename Fn>
bool Bind(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  return *out != nullptr;
}

Error CallError(const char* call, unsigned index, nvmlReturn_t rc) {
  return Error{std::string(call) + " for GPU " + std::to_string(index) + " failed: NVML error " +
               std::to_string(rc)};
}

}  // namespace

NvmlDiscovery::NvmlDiscovery(NvmlOptions options) : options_(std::move(options)) {}

NvmlDiscovery::~NvmlDiscovery() {
  if (!api_) return;
  if (api_->initialized && api_->shutdown) api_->shutdown();
  if (api_->handle) dlclose(api_->handle);
}

Status NvmlDiscovery::Load() {
  if (api_ && api_->initialized) return OkStatus();
  if (!api_) {
    auto api = std::make_unique<Api>();
    api->handle = dlopen(options_.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!api->handle) {
      const char* why = dlerror();
      return Error{"dlopen " + Quote(options_.library) + ": " + (why ? why : "unknown error")};
    }
    const bool ok = Bind(api->handle, "nvmlInit_v2", &api->init) &&
                    Bind(api->handle, "nvmlShutdown", &api->shutdown) &&
                    Bind(api->handle, "nvmlDeviceGetCount_v2", &api->get_count) &&
                    Bind(api->handle, "nvmlDeviceGetHandleByIndex_v2", &api->get_handle) &&
                    Bind(api->handle, "nvmlDeviceGetUUID", &api->get_uuid) &&
                    Bind(api->handle, "nvmlDeviceGetName", &api->get_name) &&
                    Bind(api->handle, "nvmlDeviceGetMemoryInfo", &api->get_memory) &&
                    Bind(api->handle, "nvmlDeviceGetPciInfo_v3", &api->get_pci);
    Bind(api->handle, "nvmlDeviceGetUtilizationRates", &api->get_utilization);
    Bind(api->handle, "nvmlDeviceGetTemperature", &api->get_temperature);
    Bind(api->handle, "nvmlDeviceGetPowerUsage", &api->get_power);
    Bind(api->handle, "nvmlDeviceGetTotalEccErrors", &api->get_ecc);
    Bind(api->handle, "nvmlDeviceGetMinorNumber", &api->get_minor);
    Bind(api->handle, "nvmlDeviceGetBrand", &api->get_brand);
    Bind(api->handle, "nvmlDeviceGetArchitecture", &api->get_architecture);
    Bind(api->handle, "nvmlDeviceGetCudaComputeCapability", &api->get_compute_capability);
    Bind(api->handle, "nvmlSystemGetDriverVersion", &api->get_driver_version);
    Bind(api->handle, "nvmlSystemGetCudaDriverVersion_v2", &api->get_cuda_driver_version);
    MigApi& m = api->mig;
    void* h = api->handle;
    api->has_mig = Bind(h, "nvmlDeviceGetMigMode", &m.get_mig_mode) &&
                   Bind(h, "nvmlDeviceGetGpuInstanceProfileInfo", &m.gi_profile_info) &&
                   Bind(h, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", &m.gi_placements) &&
                   Bind(h, "nvmlDeviceCreateGpuInstanceWithPlacement", &m.create_gi) &&
                   Bind(h, "nvmlDeviceGetGpuInstances", &m.get_gis) &&
                   Bind(h, "nvmlDeviceGetGpuInstanceById", &m.get_gi_by_id) &&
                   Bind(h, "nvmlGpuInstanceGetInfo", &m.gi_info) &&
                   Bind(h, "nvmlGpuInstanceDestroy", &m.destroy_gi) &&
                   Bind(h, "nvmlGpuInstanceGetComputeInstanceProfileInfo", &m.ci_profile_info) &&
                   Bind(h, "nvmlGpuInstanceCreateComputeInstance", &m.create_ci) &&
                   Bind(h, "nvmlGpuInstanceGetComputeInstances", &m.get_cis) &&
                   Bind(h, "nvmlComputeInstanceGetInfo_v2", &m.ci_info) &&
                   Bind(h, "nvmlComputeInstanceDestroy", &m.destroy_ci) &&
                   Bind(h, "nvmlDeviceGetMaxMigDeviceCount", &m.max_mig_devices) &&
                   Bind(h, "nvmlDeviceGetMigDeviceHandleByIndex", &m.mig_device_by_index) &&
                   Bind(h, "nvmlDeviceGetGpuInstanceId", &m.mig_gi_id);
    if (!ok) {
      dlclose(api->handle);
      return Error{Quote(options_.library) + " lacks an NVML symbol this plugin needs"};
    }
    api_ = std::move(api);
  }
  const nvmlReturn_t rc = api_->init();
  if (rc != kNvmlSuccess) return Error{"nvmlInit_v2 failed: NVML error " + std::to_string(rc)};
  api_->initialized = true;
  return OkStatus();
}

// Every GPU with its handle, UUID and NVML name, in index order.
Result<std::vector<NvmlDiscovery::ListedGpu>> NvmlDiscovery::ListGpus() {
  if (Status s = Load(); !s) return std::move(s).take_error();
  unsigned int count = 0;
  if (nvmlReturn_t rc = api_->get_count(&count); rc != kNvmlSuccess) {
    return Error{"nvmlDeviceGetCount_v2 failed: NVML error " + std::to_string(rc)};
  }
  std::vector<ListedGpu> out;
  for (unsigned i = 0; i < count; ++i) {
    ListedGpu g;
    g.index = i;
    if (nvmlReturn_t rc = api_->get_handle(i, &g.dev); rc != kNvmlSuccess) {
      return CallError("nvmlDeviceGetHandleByIndex_v2", i, rc);
    }
    char uuid[kNvmlStringSize] = {};
    if (nvmlReturn_t rc = api_->get_uuid(g.dev, uuid, sizeof uuid); rc != kNvmlSuccess) {
      return CallError("nvmlDeviceGetUUID", i, rc);
    }
    g.uuid = uuid;
    char name[kNvmlStringSize] = {};
    if (nvmlReturn_t rc = api_->get_name(g.dev, name, sizeof name); rc != kNvmlSuccess) {
      return CallError("nvmlDeviceGetName", i, rc);
    }
    g.name = name;
    out.push_back(std::move(g));
  }
  return out;
}

Result<std::vector<GpuDevice>> NvmlDiscovery::Discover() {
  auto listed = ListGpus();
  if (!listed) return std::move(listed).take_error();
  std::vector<GpuDevice> out;
  for (ListedGpu& g : *listed) {
    const unsigned i = g.index;
    GpuDevice d;
    d.index = i;
    d.uuid = std::move(g.uuid);
    d.model = std::move(g.name);
    nvmlMemory_st mem{};
    nvmlReturn_t rc = api_->get_memory(g.dev, &mem);
    if (rc == kNvmlSuccess) {
      d.memory_mib = static_cast<int64_t>(mem.total / (1024 * 1024));
    } else if (rc == kNvmlErrorGpuIsLost) {
      d.healthy = false;
    } else if (rc != kNvmlErrorNotSupported) {  // unified-memory GPUs: preConfiguredDeviceMemory
      return CallError("nvmlDeviceGetMemoryInfo", i, rc);
    }
    nvmlPciInfo_st pci{};
    rc = api_->get_pci(g.dev, &pci);
    if (rc == kNvmlSuccess) {
      pci.busId[sizeof pci.busId - 1] = '\0';
      d.numa = NumaNodeFromSysfs(options_.sysfs_root, pci.busId);
    } else if (rc == kNvmlErrorGpuIsLost) {
      d.healthy = false;
    }
    out.push_back(std::move(d));
  }
  return out;
}

namespace {

// nvmlBrandType_t's names (nvml.h NVML_BRAND_*), as NVIDIA's DRA driver prints them.
std::string BrandName(int brand) {
  static constexpr const char* kNames[] = {
      "Unknown",   "Quadro",      "Tesla",     "NVS",        "Grid",      "GeForce",
      "Titan",     "NvidiaVApps", "NvidiaVPC", "NvidiaVCS",  "NvidiaVWS", "NvidiaCloudGaming",
      "QuadroRTX", "NvidiaRTX",   "Nvidia",    "GeForceRTX", "TitanRTX"};
  return brand >= 0 && brand < static_cast<int>(std::size(kNames)) ? kNames[brand] : "";
}

// nvmlDeviceArchitecture_t (nvml.h NVML_DEVICE_ARCH_*).
std::string ArchitectureName(unsigned arch) {
  switch (arch) {
    case 2:
      return "Kepler";
    case 3:
      return "Maxwell";
    case 4:
      return "Pascal";
    case 5:
      return "Volta";
    case 6:
      return "Turing";
    case 7:
      return "Ampere";
    case 8:
      return "Ada";
    case 9:
      return "Hopper";
    case 10:
      return "Blackwell";
    default:
      return "";
  }
}

// "550.54" -> "550.54.0": a semantic version has three parts.
std::string ThreePartVersion(std::string v) {
  if (v.empty()) return v;
  const auto dots = std::count(v.begin(), v.end(), '.');
  for (auto i = dots; i < 2; ++i) v += ".0";
  return v;
}

// NVML's 8-digit PCI domain ("00000000:07:00.0") as the 4-digit form ("0000:07:00.0"), lower case.
std::string PcieBusId(std::string bus) {
  std::transform(bus.begin(), bus.end(), bus.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto colon = bus.find(':');
  if (colon == 8 && bus.compare(0, 4, "0000") == 0) bus.erase(0, 4);
  return bus;
}

}  // namespace

Result<std::vector<GpuAttributes>> NvmlDiscovery::Attributes() {
  auto listed = ListGpus();
  if (!listed) return std::move(listed).take_error();
  std::string driver;
  if (api_->get_driver_version) {
    char v[kNvmlStringSize] = {};
    if (api_->get_driver_version(v, sizeof v) == kNvmlSuccess) driver = ThreePartVersion(v);
  }
  std::string cuda;
  if (int v = 0;
      api_->get_cuda_driver_version && api_->get_cuda_driver_version(&v) == kNvmlSuccess && v > 0) {
    cuda = std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10) + ".0";
  }
  std::vector<GpuAttributes> out;
  for (const ListedGpu& g : *listed) {
    GpuAttributes a;
    a.driver_version = driver;
    a.cuda_driver_version = cuda;
    if (unsigned minor = 0; api_->get_minor && api_->get_minor(g.dev, &minor) == kNvmlSuccess) {
      a.minor = static_cast<int>(minor);
    }
    if (int brand = 0; api_->get_brand && api_->get_brand(g.dev, &brand) == kNvmlSuccess) {
      a.brand = BrandName(brand);
    }
    if (unsigned arch = 0;
        api_->get_architecture && api_->get_architecture(g.dev, &arch) == kNvmlSuccess) {
      a.architecture = ArchitectureName(arch);
    }
    if (int major = 0, minor = 0;
        api_->get_compute_capability &&
        api_->get_compute_capability(g.dev, &major, &minor) == kNvmlSuccess) {
      a.cuda_compute_capability = std::to_string(major) + "." + std::to_string(minor) + ".0";
    }
    nvmlPciInfo_st pci{};
    if (api_->get_pci(g.dev, &pci) == kNvmlSuccess) {
      pci.busId[sizeof pci.busId - 1] = '\0';
      a.pcie_bus_id = PcieBusId(pci.busId);
    }
    out.push_back(std::move(a));
  }
  return out;
}

Result<std::vector<GpuSample>> NvmlDiscovery::Sample() {
  auto listed = ListGpus();
  if (!listed) return std::move(listed).take_error();
  std::vector<GpuSample> out;
  for (ListedGpu& l : *listed) {
    GpuSample g;
    g.index = l.index;
    g.uuid = std::move(l.uuid);
    g.name = std::move(l.name);
    nvmlMemory_st mem{};
    if (api_->get_memory(l.dev, &mem) == kNvmlSuccess) {
      g.has_memory = true;
      g.memory_used_bytes = mem.used;
    }
    nvmlUtilization_st util{};
    if (api_->get_utilization && api_->get_utilization(l.dev, &util) == kNvmlSuccess) {
      g.has_utilization = true;
      g.gpu_utilization = util.gpu;
      g.memory_utilization = util.memory;
    }
    constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
    constexpr int kCorrected = 0;       // NVML_MEMORY_ERROR_TYPE_CORRECTED
    constexpr int kUncorrected = 1;     // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    constexpr int kAggregate = 1;       // NVML_AGGREGATE_ECC (the GPU's lifetime)
    unsigned value = 0;
    if (api_->get_temperature &&
        api_->get_temperature(l.dev, kTemperatureGpu, &value) == kNvmlSuccess) {
      g.has_temperature = true;
      g.temperature_celsius = value;
    }
    if (api_->get_power && api_->get_power(l.dev, &value) == kNvmlSuccess) {
      g.has_power = true;
      g.power_milliwatts = value;
    }
    unsigned long long ecc = 0;
    if (api_->get_ecc && api_->get_ecc(l.dev, kCorrected, kAggregate, &ecc) == kNvmlSuccess) {
      g.has_ecc_corrected = true;
      g.ecc_corrected = ecc;
    }
    if (api_->get_ecc && api_->get_ecc(l.dev, kUncorrected, kAggregate, &ecc) == kNvmlSuccess) {
      g.has_ecc_uncorrected = true;
      g.ecc_uncorrected = ecc;
    }
    out.push_back(std::move(g));
  }
  return out;
}

// Every MIG call starts here: the library loaded with its MIG calls, and GPU `gpu`'s handle.
Result<NvmlDiscovery::MigTarget> NvmlDiscovery::OpenMig(uint32_t gpu) {
  if (Status s = Load(); !s) return std::move(s).take_error();
  if (!api_->has_mig) return Error{Quote(options_.library) + " lacks the NVML MIG calls"};
  nvmlDevice_t dev = nullptr;
  if (nvmlReturn_t rc = api_->get_handle(gpu, &dev); rc != kNvmlSuccess) {
    return CallError("nvmlDeviceGetHandleByIndex_v2", gpu, rc);
  }
  return MigTarget{dev, &api_->mig};
}

Result<bool> NvmlDiscovery::MigEnabled(uint32_t gpu) {
  auto target = OpenMig(gpu);
  if (!target) return std::move(target).take_error();
  nvmlDevice_t dev = target->dev;
  MigApi& m = *target->api;
  unsigned int current = 0, pending = 0;
  nvmlReturn_t rc = m.get_mig_mode(dev, &current, &pending);
  if (rc == kNvmlErrorNotSupported) return false;
  if (rc != kNvmlSuccess) return CallError("nvmlDeviceGetMigMode", gpu, rc);
  return current == kNvmlDeviceMigEnable;
}

Result<std::vector<GpuInstanceProfile>> NvmlDiscovery::GpuInstanceProfiles(uint32_t gpu) {
  auto target = OpenMig(gpu);
  if (!target) return std::move(target).take_error();
  nvmlDevice_t dev = target->dev;
  MigApi& m = *target->api;
  std::vector<GpuInstanceProfile> out;
  for (unsigned id = 0; id < kNvmlMigProfileCount; ++id) {
    nvmlGpuInstanceProfileInfo_st info{};
    if (m.gi_profile_info(dev, id, &info) != kNvmlSuccess) continue;  // not offered
    unsigned int count = 0;
    nvmlReturn_t rc = m.gi_placements(dev, info.id, nullptr, &count);
    if (rc != kNvmlSuccess) return CallError("nvmlDeviceGetGpuInstancePossiblePlacements", gpu, rc);
    std::vector<nvmlGpuInstancePlacement_st> placements(count);
    rc = m.gi_placements(dev, info.id, placements.data(), &count);
    if (rc != kNvmlSuccess) return CallError("nvmlDeviceGetGpuInstancePossiblePlacements", gpu, rc);
    GpuInstanceProfile p;
    p.profile_id = id;
    p.slice_count = info.sliceCount;
    p.instance_count = info.instanceCount;
    p.multiprocessors = info.multiprocessorCount;
    p.memory_mib = static_cast<int64_t>(info.memorySizeMB);
    for (unsigned i = 0; i < count && i < placements.size(); ++i) {
      p.placements.push_back({placements[i].start, placements[i].size});
    }
    out.push_back(std::move(p));
  }
  return out;
}

// The GPU instance `gi` with its compute instance and MIG UUID, when it has them.
Result<MigInstance> NvmlDiscovery::Describe(nvmlDevice_st* dev, uint32_t gpu,
                                            nvmlGpuInstance_st* gi) {
  MigApi& m = api_->mig;
  nvmlGpuInstanceInfo_st info{};
  if (nvmlReturn_t rc = m.gi_info(gi, &info); rc != kNvmlSuccess) {
    return CallError("nvmlGpuInstanceGetInfo", gpu, rc);
  }
  MigInstance out;
  out.gpu_instance_id = info.id;
  out.profile_id = info.profileId;
  out.placement = {info.placement.start, info.placement.size};
  nvmlComputeInstanceProfileInfo_st ci_profile{};
  if (m.ci_profile_info(gi, info.profileId, kNvmlComputeInstanceEngineProfileShared, &ci_profile) ==
      kNvmlSuccess) {
    nvmlComputeInstance_t cis[8] = {};
    unsigned int count = 0;
    if (m.get_cis(gi, ci_profile.id, cis, &count) == kNvmlSuccess && count > 0) {
      nvmlComputeInstanceInfo_st ci{};
      if (nvmlReturn_t rc = m.ci_info(cis[0], &ci); rc != kNvmlSuccess) {
        return CallError("nvmlComputeInstanceGetInfo_v2", gpu, rc);
      }
      out.compute_instance_id = ci.id;
    }
  }
  if (!out.compute_instance_id) return out;
  unsigned int max = 0;
  if (nvmlReturn_t rc = m.max_mig_devices(dev, &max); rc != kNvmlSuccess) {
    return CallError("nvmlDeviceGetMaxMigDeviceCount", gpu, rc);
  }
  for (unsigned i = 0; i < max; ++i) {
    nvmlDevice_t mig_dev = nullptr;
    unsigned int gi_id = 0;
    if (m.mig_device_by_index(dev, i, &mig_dev) != kNvmlSuccess) continue;
    if (m.mig_gi_id(mig_dev, &gi_id) != kNvmlSuccess || gi_id != out.gpu_instance_id) continue;
    char uuid[kNvmlStringSize] = {};
    if (nvmlReturn_t rc = api_->get_uuid(mig_dev, uuid, sizeof uuid); rc != kNvmlSuccess) {
      return CallError("nvmlDeviceGetUUID (MIG device)", gpu, rc);
    }
    out.mig_uuid = uuid;
    break;
  }
  return out;
}

Result<std::vector<MigInstance>> NvmlDiscovery::MigInstances(uint32_t gpu) {
  auto target = OpenMig(gpu);
  if (!target) return std::move(target).take_error();
  nvmlDevice_t dev = target->dev;
  MigApi& m = *target->api;
  std::vector<MigInstance> out;
  for (unsigned id = 0; id < kNvmlMigProfileCount; ++id) {
    nvmlGpuInstanceProfileInfo_st info{};
    if (m.gi_profile_info(dev, id, &info) != kNvmlSuccess) continue;
    std::vector<nvmlGpuInstance_t> gis(std::max(info.instanceCount, 1u));
    unsigned int count = static_cast<unsigned int>(gis.size());
    nvmlReturn_t rc = m.get_gis(dev, info.id, gis.data(), &count);
    if (rc != kNvmlSuccess) return CallError("nvmlDeviceGetGpuInstances", gpu, rc);
    for (unsigned i = 0; i < count && i < gis.size(); ++i) {
      auto inst = Describe(dev, gpu, gis[i]);
      if (!inst) return std::move(inst).take_error();
      inst->profile_id = id;
      out.push_back(std::move(*inst));
    }
  }
  std::sort(out.begin(), out.end(), [](const MigInstance& a, const MigInstance& b) {
    return a.gpu_instance_id < b.gpu_instance_id;
  });
  return out;
}

Result<MigInstance> NvmlDiscovery::CreateGpuInstance(uint32_t gpu, uint32_t profile_id,
                                                     protocol::MigPlacement placement) {
  auto target = OpenMig(gpu);
  if (!target) return std::move(target).take_error();
  nvmlDevice_t dev = target->dev;
  MigApi& m = *target->api;
  nvmlGpuInstanceProfileInfo_st info{};
  if (nvmlReturn_t rc = m.gi_profile_info(dev, profile_id, &info); rc != kNvmlSuccess) {
    return CallError("nvmlDeviceGetGpuInstanceProfileInfo", gpu, rc);
  }
  const nvmlGpuInstancePlacement_st at{placement.start, placement.size};
  nvmlGpuInstance_t gi = nullptr;
  if (nvmlReturn_t rc = m.create_gi(dev, info.id, &at, &gi); rc != kNvmlSuccess) {
    return CallError("nvmlDeviceCreateGpuInstanceWithPlacement", gpu, rc);
  }
  auto inst = Describe(dev, gpu, gi);
  if (inst) inst->profile_id = profile_id;
  return inst;
}

Result<MigInstance> NvmlDiscovery::CreateComputeInstance(uint32_t gpu, uint32_t gpu_instance_id) {
  auto target = OpenMig(gpu);
  if (!target) return std::move(target).take_error();
  nvmlDevice_t dev = target->dev;
  MigApi& m = *target->api;
  nvmlGpuInstance_t gi = nullptr;
  if (nvmlReturn_t rc = m.get_gi_by_id(dev, gpu_instance_id, &gi); rc != kNvmlSuccess) {
    return CallError("nvmlDeviceGetGpuInstanceById", gpu, rc);
  }
  nvmlGpuInstanceInfo_st info{};
  if (nvmlReturn_t rc = m.gi_info(gi, &info); rc != kNvmlSuccess) {
    return CallError("nvmlGpuInstanceGetInfo", gpu, rc);
  }
  // The compute instance spanning the whole GPU instance: the profile with its slice count,
  // which has the GPU instance profile's number (kNvmlMigProfileCount).
  nvmlComputeInstanceProfileInfo_st ci_profile{};
  if (nvmlReturn_t rc = m.ci_profile_info(gi, info.profileId,
                                          kNvmlComputeInstanceEngineProfileShared, &ci_profile);
      rc != kNvmlSuccess) {
    return CallError("nvmlGpuInstanceGetComputeInstanceProfileInfo", gpu, rc);
  }
  nvmlComputeInstance_t ci = nullptr;
  if (nvmlReturn_t rc = m.create_ci(gi, ci_profile.id, &ci); rc != kNvmlSuccess) {
    return CallError("nvmlGpuInstanceCreateComputeInstance", gpu, rc);
  }
  return Describe(dev, gpu, gi);
}

Status NvmlDiscovery::DestroyGpuInstance(uint32_t gpu, uint32_t gpu_instance_id) {
  auto target = OpenMig(gpu);
  if (!target) return std::move(target).take_error();
  nvmlDevice_t dev = target->dev;
  MigApi& m = *target->api;
  nvmlGpuInstance_t gi = nullptr;
  nvmlReturn_t rc = m.get_gi_by_id(dev, gpu_instance_id, &gi);
  if (rc == kNvmlErrorNotFound) return OkStatus();
  if (rc != kNvmlSuccess) return CallError("nvmlDeviceGetGpuInstanceById", gpu, rc);
  for (unsigned id = 0; id < kNvmlMigProfileCount; ++id) {
    nvmlComputeInstanceProfileInfo_st ci_profile{};
    if (m.ci_profile_info(gi, id, kNvmlComputeInstanceEngineProfileShared, &ci_profile) !=
        kNvmlSuccess) {
      continue;
    }
    nvmlComputeInstance_t cis[8] = {};
    unsigned int count = 8;
    if (m.get_cis(gi, ci_profile.id, cis, &count) != kNvmlSuccess) continue;
    for (unsigned i = 0; i < count && i < 8; ++i) {
      if ((rc = m.destroy_ci(cis[i])) != kNvmlSuccess) {
        return CallError("nvmlComputeInstanceDestroy", gpu, rc);
      }
    }
  }
  if ((rc = m.destroy_gi(gi)) != kNvmlSuccess) return CallError("nvmlGpuInstanceDestroy", gpu, rc);
  return OkStatus();
}

std::string SysfsBusId(std::string_view nvml_bus_id) {
  std::string id = ToLower(Trim(nvml_bus_id));
  const size_t colon = id.find(':');
  // An 8-digit PCI domain ("00000000") is 4 digits in sysfs.
  if (colon == 8 && id.compare(0, 4, "0000") == 0) id.erase(0, 4);
  return id;
}

int64_t NumaNodeFromSysfs(const std::string& sysfs_root, std::string_view nvml_bus_id) {
  std::ifstream in(sysfs_root + "/bus/pci/devices/" + SysfsBusId(nvml_bus_id) + "/numa_node");
  std::string line;
  if (!in || !std::getline(in, line)) return 0;
  auto v = ParseInt64(Trim(line));
  return v && *v > 0 ? *v : 0;
}

}  // namespace hami::deviceplugin
