#include "deviceplugin/nvml.h"

#include <dlfcn.h>

#include <cctype>
#include <fstream>

#include "common/strings.h"
#include "deviceplugin/nvml_types.h"

namespace hami::deviceplugin {

struct NvmlDiscovery::Api {
  void* handle = nullptr;
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

Result<std::vector<GpuDevice>> NvmlDiscovery::Discover() {
  if (Status s = Load(); !s) return std::move(s).take_error();
  unsigned int count = 0;
  if (nvmlReturn_t rc = api_->get_count(&count); rc != kNvmlSuccess) {
    return Error{"nvmlDeviceGetCount_v2 failed: NVML error " + std::to_string(rc)};
  }
  std::vector<GpuDevice> out;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    if (nvmlReturn_t rc = api_->get_handle(i, &dev); rc != kNvmlSuccess) {
      return CallError("nvmlDeviceGetHandleByIndex_v2", i, rc);
    }
    GpuDevice d;
    d.index = i;
    char buf[kNvmlStringSize] = {};
    if (nvmlReturn_t rc = api_->get_uuid(dev, buf, sizeof buf); rc != kNvmlSuccess) {
      return CallError("nvmlDeviceGetUUID", i, rc);
    }
    d.uuid = buf;
    char name[kNvmlStringSize] = {};
    if (nvmlReturn_t rc = api_->get_name(dev, name, sizeof name); rc != kNvmlSuccess) {
      return CallError("nvmlDeviceGetName", i, rc);
    }
    d.model = name;
    nvmlMemory_st mem{};
    nvmlReturn_t rc = api_->get_memory(dev, &mem);
    if (rc == kNvmlSuccess) {
      d.memory_mib = static_cast<int64_t>(mem.total / (1024 * 1024));
    } else if (rc == kNvmlErrorGpuIsLost) {
      d.healthy = false;
    } else if (rc != kNvmlErrorNotSupported) {  // unified-memory GPUs: preConfiguredDeviceMemory
      return CallError("nvmlDeviceGetMemoryInfo", i, rc);
    }
    nvmlPciInfo_st pci{};
    rc = api_->get_pci(dev, &pci);
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

Result<std::vector<GpuSample>> NvmlDiscovery::Sample() {
  if (Status s = Load(); !s) return std::move(s).take_error();
  unsigned int count = 0;
  if (nvmlReturn_t rc = api_->get_count(&count); rc != kNvmlSuccess) {
    return Error{"nvmlDeviceGetCount_v2 failed: NVML error " + std::to_string(rc)};
  }
  std::vector<GpuSample> out;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    if (nvmlReturn_t rc = api_->get_handle(i, &dev); rc != kNvmlSuccess) {
      return CallError("nvmlDeviceGetHandleByIndex_v2", i, rc);
    }
    GpuSample g;
    g.index = i;
    char buf[kNvmlStringSize] = {};
    if (nvmlReturn_t rc = api_->get_uuid(dev, buf, sizeof buf); rc != kNvmlSuccess) {
      return CallError("nvmlDeviceGetUUID", i, rc);
    }
    g.uuid = buf;
    char name[kNvmlStringSize] = {};
    if (nvmlReturn_t rc = api_->get_name(dev, name, sizeof name); rc != kNvmlSuccess) {
      return CallError("nvmlDeviceGetName", i, rc);
    }
    g.name = name;
    nvmlMemory_st mem{};
    if (api_->get_memory(dev, &mem) == kNvmlSuccess) {
      g.has_memory = true;
      g.memory_used_bytes = mem.used;
    }
    nvmlUtilization_st util{};
    if (api_->get_utilization && api_->get_utilization(dev, &util) == kNvmlSuccess) {
      g.has_utilization = true;
      g.gpu_utilization = util.gpu;
      g.memory_utilization = util.memory;
    }
    out.push_back(std::move(g));
  }
  return out;
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
