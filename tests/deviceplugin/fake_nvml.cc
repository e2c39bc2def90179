// A fake libnvidia-ml.so.1 for the NVML discovery tests. Its GPUs come from the environment at
// nvmlInit_v2 time:
//   HAMI_FAKE_NVML_DEVICES = "uuid|name|MiB|busid;uuid|name|MiB|busid"  (MiB "ns": NOT_SUPPORTED)
//   HAMI_FAKE_NVML_LOST    = index of a GPU whose memory query answers GPU_IS_LOST
//   HAMI_FAKE_NVML_INIT_RC = return code of nvmlInit_v2
//   HAMI_FAKE_NVML_USAGE   = "usedMiB|gpu%|memory%;..." per GPU in index order (the monitor's
//                            host series); a GPU without an entry uses nothing, "-" as gpu%
//                            makes nvmlDeviceGetUtilizationRates answer NOT_SUPPORTED
//   HAMI_FAKE_NVML_SENSORS = "tempC|powerMilliwatts|eccCorrected|eccUncorrected;..." per GPU in
//                            index order, ECC over the GPU's lifetime (NVML_AGGREGATE_ECC) (the
//                            monitor's v2.11 host series); a GPU without an entry, or "-" in a
//                            field, answers NOT_SUPPORTED for that call
//   HAMI_FAKE_NVML_ATTRIBUTES = "minor|brand|arch|ccMajor.ccMinor;..." per GPU in index order
//                            (the DRA plugin's attributes; nvmlBrandType_t and
//                            nvmlDeviceArchitecture_t numbers); a GPU without an entry, or "-" in
//                            a field, answers NOT_SUPPORTED for that call
//   HAMI_FAKE_NVML_DRIVER  = "driverVersion|cudaDriverVersion", e.g. "550.54.15|12040"
// MIG (docs/MIG.md), an A100-like 7-slice geometry with memory in proportion to the GPU's:
//   HAMI_FAKE_NVML_MIG       = "0,2" the GPU indices in MIG mode, or "all"
//   HAMI_FAKE_NVML_MIG_STATE = a file holding the GPU and compute instances: read at
//                              nvmlInit_v2 (absent: none), rewritten after every create or
//                              destroy, so a test (or a restarted plugin) sees what was done.
//                              Lines: "serial N", then "gpu gi profile start size ci uuid" (ci
//                              -1 and uuid "-" for a GPU instance without a compute instance)
//   HAMI_FAKE_NVML_MIG_FAIL  = "ci": creating a compute instance answers INSUFFICIENT_RESOURCES
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "deviceplugin/nvml_types.h"

namespace {

struct FakeGpu {
  std::string uuid, name, mib, bus_id;
};
std::vector<FakeGpu> g_gpus;
int g_lost = -1;
std::vector<std::vector<std::string>> g_usage;       // HAMI_FAKE_NVML_USAGE, per GPU
std::vector<std::vector<std::string>> g_sensors;     // HAMI_FAKE_NVML_SENSORS, per GPU
std::vector<std::vector<std::string>> g_attributes;  // HAMI_FAKE_NVML_ATTRIBUTES, per GPU

// Field `field` of GPU `dev`'s HAMI_FAKE_NVML_ATTRIBUTES entry; nullptr when absent or "-".
const std::string* Attribute(nvmlDevice_t dev, size_t field) {
  const size_t i = reinterpret_cast<size_t>(dev) - 1;
  if (i >= g_attributes.size() || field >= g_attributes[i].size()) return nullptr;
  return g_attributes[i][field] == "-" ? nullptr : &g_attributes[i][field];
}

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

// ---- MIG state ----

struct MigProfileRow {
  unsigned id, slices, instances, sms, eighths, size;
  std::vector<unsigned> starts;
};
const std::vector<MigProfileRow> kMigProfiles = {
    {0, 1, 7, 14, 1, 1, {0, 1, 2, 3, 4, 5, 6}},
    {1, 2, 3, 28, 2, 2, {0, 2, 4}},
    {2, 3, 2, 42, 4, 4, {0, 4}},
    {3, 4, 1, 56, 4, 4, {0}},
    {4, 7, 1, 98, 8, 8, {0}},
};

struct FakeInstance {
  unsigned gpu = 0, gi = 0, profile = 0, start = 0, size = 0;
  int ci = -1;  // -1: no compute instance yet
  std::string uuid = "-";
};
std::vector<bool> g_mig;  // per GPU
std::vector<FakeInstance> g_instances;
unsigned g_serial = 0;
std::string g_state_path;
bool g_fail_ci = false;

constexpr size_t kMigDeviceBase = 0x100000, kGiBase = 0x200000, kCiBase = 0x300000;

size_t HandleIndex(nvmlDevice_t dev) { return reinterpret_cast<size_t>(dev) - 1; }
bool MigOn(size_t gpu) { return gpu < g_mig.size() && g_mig[gpu]; }
const MigProfileRow* Profile(unsigned id) {
  for (const auto& p : kMigProfiles) {
    if (p.id == id) return &p;
  }
  return nullptr;
}
template <typename H>
H MakeHandle(size_t base, unsigned gpu, unsigned gi) {
  return reinterpret_cast<H>(base + (static_cast<size_t>(gpu) << 8) + gi);
}
template <typename H>
FakeInstance* FromHandle(H handle, size_t base) {
  const size_t v = reinterpret_cast<size_t>(handle);
  if (v < base || v >= base + 0x100000) return nullptr;
  const unsigned gpu = static_cast<unsigned>((v - base) >> 8), gi = (v - base) & 0xFF;
  for (auto& i : g_instances) {
    if (i.gpu == gpu && i.gi == gi) return &i;
  }
  return nullptr;
}

// Written beside the file and renamed over it: a test reading the state while the plugin
// changes it sees the old or the new state, never a half-written one.
void SaveMigState() {
  if (g_state_path.empty()) return;
  const std::string tmp = g_state_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "serial " << g_serial << "\n";
    for (const auto& i : g_instances) {
      out << i.gpu << " " << i.gi << " " << i.profile << " " << i.start << " " << i.size << " "
          << i.ci << " " << i.uuid << "\n";
    }
  }
  std::rename(tmp.c_str(), g_state_path.c_str());
}

void LoadMigState() {
  g_instances.clear();
  g_serial = 0;
  if (g_state_path.empty()) return;
  std::ifstream in(g_state_path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    if (line.rfind("serial ", 0) == 0) {
      std::string word;
      fields >> word >> g_serial;
      continue;
    }
    FakeInstance i;
    if (fields >> i.gpu >> i.gi >> i.profile >> i.start >> i.size >> i.ci >> i.uuid) {
      g_instances.push_back(i);
    }
  }
}

void LoadMig() {
  g_mig.assign(g_gpus.size(), false);
  const char* mig = std::getenv("HAMI_FAKE_NVML_MIG");
  if (mig && std::string(mig) == "all") {
    g_mig.assign(g_gpus.size(), true);
  } else if (mig && *mig) {
    for (const std::string& index : SplitOn(mig, ',')) {
      const size_t i = std::strtoul(index.c_str(), nullptr, 10);
      if (i < g_mig.size()) g_mig[i] = true;
    }
  }
  const char* state = std::getenv("HAMI_FAKE_NVML_MIG_STATE");
  g_state_path = state ? state : "";
  const char* fail = std::getenv("HAMI_FAKE_NVML_MIG_FAIL");
  g_fail_ci = fail && std::string(fail) == "ci";
  LoadMigState();
}

std::string NewMigUuid(unsigned gpu) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "MIG-%08x-0000-4000-8000-%012x", gpu + 1, ++g_serial);
  return buf;
}

// The GPU's instances with a compute instance, by GPU instance id: the MIG devices.
std::vector<FakeInstance*> MigDevices(unsigned gpu) {
  std::vector<FakeInstance*> out;
  for (auto& i : g_instances) {
    if (i.gpu == gpu && i.ci >= 0) out.push_back(&i);
  }
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->gi < b->gi; });
  return out;
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
  g_sensors.clear();
  const char* sensors = std::getenv("HAMI_FAKE_NVML_SENSORS");
  if (sensors && *sensors) {
    for (const std::string& entry : SplitOn(sensors, ';')) g_sensors.push_back(SplitOn(entry, '|'));
  }
  g_attributes.clear();
  if (const char* attrs = std::getenv("HAMI_FAKE_NVML_ATTRIBUTES"); attrs && *attrs) {
    for (const std::string& entry : SplitOn(attrs, ';'))
      g_attributes.push_back(SplitOn(entry, '|'));
  }
  const char* lost = std::getenv("HAMI_FAKE_NVML_LOST");
  g_lost = lost ? std::atoi(lost) : -1;
  LoadMig();
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
  if (const FakeInstance* mig = FromHandle(dev, kMigDeviceBase)) return Copy(mig->uuid, out, len);
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

// The DRA plugin's attributes (HAMI_FAKE_NVML_ATTRIBUTES, HAMI_FAKE_NVML_DRIVER).
int nvmlDeviceGetMinorNumber(nvmlDevice_t dev, unsigned* minor) {
  const std::string* v = Attribute(dev, 0);
  if (!v) return 3;  // NVML_ERROR_NOT_SUPPORTED
  *minor = static_cast<unsigned>(std::atoi(v->c_str()));
  return 0;
}
int nvmlDeviceGetBrand(nvmlDevice_t dev, int* brand) {
  const std::string* v = Attribute(dev, 1);
  if (!v) return 3;
  *brand = std::atoi(v->c_str());
  return 0;
}
int nvmlDeviceGetArchitecture(nvmlDevice_t dev, unsigned* arch) {
  const std::string* v = Attribute(dev, 2);
  if (!v) return 3;
  *arch = static_cast<unsigned>(std::atoi(v->c_str()));
  return 0;
}
int nvmlDeviceGetCudaComputeCapability(nvmlDevice_t dev, int* major, int* minor) {
  const std::string* v = Attribute(dev, 3);
  if (!v) return 3;
  auto parts = SplitOn(*v, '.');
  *major = std::atoi(parts[0].c_str());
  *minor = parts.size() > 1 ? std::atoi(parts[1].c_str()) : 0;
  return 0;
}
int nvmlSystemGetDriverVersion(char* out, unsigned len) {
  const char* v = std::getenv("HAMI_FAKE_NVML_DRIVER");
  if (!v) return 3;
  return Copy(SplitOn(v, '|')[0], out, len);
}
int nvmlSystemGetCudaDriverVersion_v2(int* version) {
  const char* v = std::getenv("HAMI_FAKE_NVML_DRIVER");
  if (!v || SplitOn(v, '|').size() < 2) return 3;
  *version = std::atoi(SplitOn(v, '|')[1].c_str());
  return 0;
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

// The v2.11 host series: field k of the GPU's HAMI_FAKE_NVML_SENSORS entry, or NOT_SUPPORTED.
int Sensor(nvmlDevice_t dev, size_t k, unsigned long long* out) {
  if (!Gpu(dev)) return 2;
  const size_t i = reinterpret_cast<size_t>(dev) - 1;
  if (i >= g_sensors.size() || g_sensors[i].size() != 4 || g_sensors[i][k] == "-") return 3;
  *out = std::strtoull(g_sensors[i][k].c_str(), nullptr, 10);
  return 0;
}

int nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned* temp) {
  if (sensor != 0) return 2;  // NVML_TEMPERATURE_GPU only
  unsigned long long v = 0;
  int rc = Sensor(dev, 0, &v);
  if (rc == 0) *temp = static_cast<unsigned>(v);
  return rc;
}

int nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned* milliwatts) {
  unsigned long long v = 0;
  int rc = Sensor(dev, 1, &v);
  if (rc == 0) *milliwatts = static_cast<unsigned>(v);
  return rc;
}

int nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int error_type, int counter_type,
                                unsigned long long* count) {
  if (error_type < 0 || error_type > 1 || counter_type != 1) return 2;  // aggregate only
  return Sensor(dev, 2 + static_cast<size_t>(error_type), count);
}

// ---- MIG ----

int nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int* current, unsigned int* pending) {
  if (!Gpu(dev)) return 2;
  *current = *pending = MigOn(HandleIndex(dev)) ? 1 : 0;
  return 0;
}

int nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t dev, unsigned int profile,
                                        nvmlGpuInstanceProfileInfo_st* info) {
  const FakeGpu* g = Gpu(dev);
  if (!g) return 2;
  const MigProfileRow* p = Profile(profile);
  if (!MigOn(HandleIndex(dev)) || !p) return 3;  // NVML_ERROR_NOT_SUPPORTED
  std::memset(info, 0, sizeof *info);
  info->id = p->id;
  info->sliceCount = p->slices;
  info->instanceCount = p->instances;
  info->multiprocessorCount = p->sms;
  const unsigned long long mib = std::strtoull(g->mib.c_str(), nullptr, 10);
  info->memorySizeMB = mib * p->eighths / 8 * 95 / 100 / 128 * 128;
  return 0;
}

int nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t dev, unsigned int profile,
                                                  nvmlGpuInstancePlacement_st* placements,
                                                  unsigned int* count) {
  const MigProfileRow* p = Profile(profile);
  if (!Gpu(dev)) return 2;
  if (!MigOn(HandleIndex(dev)) || !p) return 3;
  if (placements == nullptr) {
    *count = static_cast<unsigned>(p->starts.size());
    return 0;
  }
  if (*count < p->starts.size()) return 7;
  for (size_t i = 0; i < p->starts.size(); ++i) placements[i] = {p->starts[i], p->size};
  *count = static_cast<unsigned>(p->starts.size());
  return 0;
}

int nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t dev, unsigned int profile,
                                             const nvmlGpuInstancePlacement_st* placement,
                                             nvmlGpuInstance_t* out) {
  const MigProfileRow* p = Profile(profile);
  if (!Gpu(dev)) return 2;
  const unsigned gpu = static_cast<unsigned>(HandleIndex(dev));
  if (!MigOn(gpu) || !p) return 3;
  if (placement->size != p->size ||
      std::find(p->starts.begin(), p->starts.end(), placement->start) == p->starts.end()) {
    return 2;
  }
  std::vector<bool> used(16, false);
  for (const auto& i : g_instances) {
    if (i.gpu != gpu) continue;
    used[i.gi] = true;
    if (placement->start < i.start + i.size && i.start < placement->start + placement->size) {
      return 23;  // NVML_ERROR_INSUFFICIENT_RESOURCES: the slices are taken
    }
  }
  FakeInstance inst;
  inst.gpu = gpu;
  inst.gi = 1;
  while (used[inst.gi]) ++inst.gi;
  inst.profile = profile;
  inst.start = placement->start;
  inst.size = placement->size;
  g_instances.push_back(inst);
  SaveMigState();
  *out = MakeHandle<nvmlGpuInstance_t>(kGiBase, gpu, inst.gi);
  return 0;
}

int nvmlDeviceGetGpuInstances(nvmlDevice_t dev, unsigned int profile, nvmlGpuInstance_t* out,
                              unsigned int* count) {
  if (!Gpu(dev)) return 2;
  const unsigned gpu = static_cast<unsigned>(HandleIndex(dev));
  if (!MigOn(gpu) || !Profile(profile)) return 3;
  unsigned n = 0;
  for (const auto& i : g_instances) {
    if (i.gpu == gpu && i.profile == profile)
      out[n++] = MakeHandle<nvmlGpuInstance_t>(kGiBase, gpu, i.gi);
  }
  *count = n;
  return 0;
}

int nvmlDeviceGetGpuInstanceById(nvmlDevice_t dev, unsigned int id, nvmlGpuInstance_t* out) {
  if (!Gpu(dev)) return 2;
  const unsigned gpu = static_cast<unsigned>(HandleIndex(dev));
  for (const auto& i : g_instances) {
    if (i.gpu == gpu && i.gi == id) {
      *out = MakeHandle<nvmlGpuInstance_t>(kGiBase, gpu, id);
      return 0;
    }
  }
  return 6;  // NVML_ERROR_NOT_FOUND
}

int nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_st* info) {
  const FakeInstance* i = FromHandle(gi, kGiBase);
  if (!i) return 2;
  info->device = reinterpret_cast<nvmlDevice_t>(static_cast<size_t>(i->gpu) + 1);
  info->id = i->gi;
  info->profileId = i->profile;
  info->placement = {i->start, i->size};
  return 0;
}

int nvmlGpuInstanceDestroy(nvmlGpuInstance_t gi) {
  const FakeInstance* i = FromHandle(gi, kGiBase);
  if (!i) return 2;
  if (i->ci >= 0) return 19;  // NVML_ERROR_IN_USE: its compute instance must go first
  g_instances.erase(g_instances.begin() + (i - g_instances.data()));
  SaveMigState();
  return 0;
}

int nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gi, unsigned int profile,
                                                 unsigned int engines,
                                                 nvmlComputeInstanceProfileInfo_st* info) {
  const FakeInstance* i = FromHandle(gi, kGiBase);
  if (!i) return 2;
  const MigProfileRow* p = Profile(i->profile);
  if (profile != i->profile || engines != 0 || !p) return 3;  // whole-instance profiles only
  std::memset(info, 0, sizeof *info);
  info->id = profile;
  info->sliceCount = p->slices;
  info->instanceCount = 1;
  info->multiprocessorCount = p->sms;
  return 0;
}

int nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gi, unsigned int profile,
                                         nvmlComputeInstance_t* out) {
  FakeInstance* i = FromHandle(gi, kGiBase);
  if (!i) return 2;
  if (profile != i->profile) return 3;
  if (i->ci >= 0 || g_fail_ci) return 23;
  i->ci = 0;
  i->uuid = NewMigUuid(i->gpu);
  SaveMigState();
  *out = MakeHandle<nvmlComputeInstance_t>(kCiBase, i->gpu, i->gi);
  return 0;
}

int nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gi, unsigned int profile,
                                       nvmlComputeInstance_t* out, unsigned int* count) {
  const FakeInstance* i = FromHandle(gi, kGiBase);
  if (!i) return 2;
  *count = 0;
  if (profile == i->profile && i->ci >= 0) {
    out[0] = MakeHandle<nvmlComputeInstance_t>(kCiBase, i->gpu, i->gi);
    *count = 1;
  }
  return 0;
}

int nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_st* info) {
  const FakeInstance* i = FromHandle(ci, kCiBase);
  if (!i || i->ci < 0) return 2;
  info->device = reinterpret_cast<nvmlDevice_t>(static_cast<size_t>(i->gpu) + 1);
  info->gpuInstance = MakeHandle<nvmlGpuInstance_t>(kGiBase, i->gpu, i->gi);
  info->id = static_cast<unsigned>(i->ci);
  info->profileId = i->profile;
  info->placement = {0, i->size};
  return 0;
}

int nvmlComputeInstanceDestroy(nvmlComputeInstance_t ci) {
  FakeInstance* i = FromHandle(ci, kCiBase);
  if (!i || i->ci < 0) return 2;
  i->ci = -1;
  i->uuid = "-";
  SaveMigState();
  return 0;
}

int nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int* count) {
  if (!Gpu(dev)) return 2;
  *count = MigOn(HandleIndex(dev)) ? 7 : 0;
  return 0;
}

int nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index, nvmlDevice_t* out) {
  if (!Gpu(dev)) return 2;
  const unsigned gpu = static_cast<unsigned>(HandleIndex(dev));
  auto devices = MigDevices(gpu);
  if (index >= devices.size()) return 6;
  *out = MakeHandle<nvmlDevice_t>(kMigDeviceBase, gpu, devices[index]->gi);
  return 0;
}

int nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned int* id) {
  const FakeInstance* i = FromHandle(dev, kMigDeviceBase);
  if (!i) return 2;
  *id = i->gi;
  return 0;
}

int nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned int* id) {
  const FakeInstance* i = FromHandle(dev, kMigDeviceBase);
  if (!i || i->ci < 0) return 2;
  *id = static_cast<unsigned>(i->ci);
  return 0;
}

}  // extern "C"
