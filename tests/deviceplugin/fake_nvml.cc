// A fake libnvidia-ml.so.1 for the NVML discovery tests. Its GPUs come from the environment at
// nvmlInit_v2 time:
//   HAMI_FAKE_NVML_DEVICES = "uuid|name|MiB|busid;uuid|name|MiB|busid"  (MiB "ns": NOT_SUPPORTED)
//   HAMI_FAKE_NVML_LOST    = index of a GPU whose memory query answers GPU_IS_LOST
//   HAMI_FAKE_NVML_INIT_RC = return code of nvmlInit_v2
//   HAMI_FAKE_NVML_USAGE   = "usedMiB|gpu%|memory%;..." per GPU in index order (the monitor's
//                            host series); a GPU without an entry uses nothing, "-" as gpu%
//                            makes nvmlDeviceGetUtilizationRates answer NOT_SUPPORTED
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "deviceplugin/nvml_types.h"

namespace {

struct FakeGpu {
  std::string uuid, name, mib, bus_id;
};
std::vector<FakeGpu> g_gpus;
int g_lost = -1;
std::vector<std::vector<std::string>> g_usage;  // HAMI_FAKE_NVML_USAGE, per GPU

std::vector<std::string> SplitOn(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos - start));
    if (pos == std::string::npos) return out;
    start = pos + 1;
  }
}

int Copy(const std::string& s, char* out, unsigned len) {
  if (s.size() + 1 > len) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::memcpy(out, s.c_str(), s.size() + 1);
  return 0;
}

const FakeGpu* Gpu(nvmlDevice_t dev) {
  auto i = reinterpret_cast<size_t>(dev) - 1;
  return i < g_gpus.size() ? &g_gpus[i] : nullptr;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  if (const char* rc = std::getenv("HAMI_FAKE_NVML_INIT_RC")) return std::atoi(rc);
  g_gpus.clear();
  const char* spec = std::getenv("HAMI_FAKE_NVML_DEVICES");
  if (spec && *spec) {
    for (const std::string& entry : SplitOn(spec, ';')) {
      auto f = SplitOn(entry, '|');
      if (f.size() == 4) g_gpus.push_back({f[0], f[1], f[2], f[3]});
    }
  }
  g_usage.clear();
  const char* usage = std::getenv("HAMI_FAKE_NVML_USAGE");
  if (usage && *usage) {
    for (const std::string& entry : SplitOn(usage, ';')) g_usage.push_back(SplitOn(entry, '|'));
  }
  const char* lost = std::getenv("HAMI_FAKE_NVML_LOST");
  g_lost = lost ? std::atoi(lost) : -1;
  return 0;
}

int nvmlShutdown() { return 0; }

int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned>(g_gpus.size());
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* dev) {
  if (index >= g_gpus.size()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *dev = reinterpret_cast<nvmlDevice_t>(static_cast<size_t>(index) + 1);
  return 0;
}

int nvmlDeviceGetUUID(nvmlDevice_t dev, char* out, unsigned int len) {
  const FakeGpu* g = Gpu(dev);
  return g ? Copy(g->uuid, out, len) : 2;
}

int nvmlDeviceGetName(nvmlDevice_t dev, char* out, unsigned int len) {
  const FakeGpu* g = Gpu(dev);
  return g ? Copy(g->name, out, len) : 2;
}

int nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_st* mem) {
  const FakeGpu* g = Gpu(dev);
  if (!g) return 2;
  if (reinterpret_cast<size_t>(dev) - 1 == static_cast<size_t>(g_lost)) return 15;
  if (g->mib == "ns") return 3;
  mem->total = std::strtoull(g->mib.c_str(), nullptr, 10) * 1024 * 1024;
  const size_t i = reinterpret_cast<size_t>(dev) - 1;
  mem->used = i < g_usage.size() && !g_usage[i].empty()
                  ? std::strtoull(g_usage[i][0].c_str(), nullptr, 10) * 1024 * 1024
                  : 0;
  mem->free = mem->total - mem->used;
  return 0;
}

int nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_st* pci) {
  const FakeGpu* g = Gpu(dev);
  if (!g) return 2;
  std::memset(pci, 0, sizeof *pci);
  return Copy(g->bus_id, pci->busId, sizeof pci->busId);
}

// The vGPU monitor's host series (hami_host_gpu_utilization_ratio and the memory controller's).
int nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_st* util) {
  const FakeGpu* g = Gpu(dev);
  if (!g) return 2;
  const size_t i = reinterpret_cast<size_t>(dev) - 1;
  const bool has = i < g_usage.size() && g_usage[i].size() == 3;
  if (has && g_usage[i][1] == "-") return 3;  // NVML_ERROR_NOT_SUPPORTED
  util->gpu = has ? static_cast<unsigned>(std::atoi(g_usage[i][1].c_str())) : 0;
  util->memory = has ? static_cast<unsigned>(std::atoi(g_usage[i][2].c_str())) : 0;
  return 0;
}

}  // extern "C"
