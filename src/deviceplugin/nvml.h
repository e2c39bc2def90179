// NVML discovery: libnvidia-ml.so.1 is loaded with dlopen at run time (no link-time dependency,
// so the plugin binary starts on nodes without a driver and reports why). Reads count, UUID,
// name, total memory and PCI bus id per GPU; the NUMA node comes from sysfs. A device whose
// queries answer NVML_ERROR_GPU_IS_LOST is reported unhealthy. It is also the MIG driver
// (mig_driver.h): the MIG calls are looked up when the library is loaded and answer an error
// naming the missing symbol when the library lacks them.
#ifndef HAMI_DEVICEPLUGIN_NVML_H_
#define HAMI_DEVICEPLUGIN_NVML_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/mig_driver.h"

struct nvmlDevice_st;
struct nvmlGpuInstance_st;

namespace hami::deviceplugin {

struct NvmlOptions {
  std::string library = "libnvidia-ml.so.1";  // dlopen name or path
  std::string sysfs_root = "/sys";            // tests point this at a fake tree
};

// One GPU's use right now, as the vGPU monitor exports it (hami_host_gpu_*).
struct GpuSample {
  unsigned index = 0;
  std::string uuid{};
  std::string name{};       // NVML's name, e.g. "Tesla V100-PCIE-32GB"
  bool has_memory = false;  // false: NOT_SUPPORTED (unified memory)
  uint64_t memory_used_bytes = 0;
  bool has_utilization = false;     // false: the library lacks the call or it failed
  unsigned gpu_utilization = 0;     // percent
  unsigned memory_utilization = 0;  // percent (memory controller)
  // HAMi v2.11's host series; each false where the library lacks the call or NVML answers
  // NOT_SUPPORTED (or fails) for this GPU.
  bool has_temperature = false;
  unsigned temperature_celsius = 0;  // NVML_TEMPERATURE_GPU
  bool has_power = false;
  unsigned power_milliwatts = 0;
  // ECC errors over the GPU's lifetime (NVML_AGGREGATE_ECC), corrected and uncorrected.
  bool has_ecc_corrected = false;
  uint64_t ecc_corrected = 0;
  bool has_ecc_uncorrected = false;
  uint64_t ecc_uncorrected = 0;
};

class NvmlDiscovery : public Discovery, public MigDriver {
 public:
  explicit NvmlDiscovery(NvmlOptions options = {});
  ~NvmlDiscovery() override;
  NvmlDiscovery(const NvmlDiscovery&) = delete;
  NvmlDiscovery& operator=(const NvmlDiscovery&) = delete;

  // Loads the library and calls nvmlInit_v2 on first use; errors name the library and the
  // failing NVML call with its return code.
  Result<std::vector<GpuDevice>> Discover() override;
  std::string Name() const override { return "nvml:" + options_.library; }

  // Every GPU's used memory and utilisation rates now. Errors as Discover()'s; a GPU whose
  // uuid or name cannot be read fails the whole call.
  Result<std::vector<GpuSample>> Sample();

  // Every GPU's attributes for the DRA plugin (discovery.h GpuAttributes), in index order. Each
  // attribute the library lacks a call for, or NVML does not answer, is left empty; only the
  // listing itself (as Discover's) can fail.
  Result<std::vector<GpuAttributes>> Attributes();

  // MigDriver. Errors name the NVML call, the GPU and the return code.
  Result<bool> MigEnabled(uint32_t gpu) override;
  Result<std::vector<GpuInstanceProfile>> GpuInstanceProfiles(uint32_t gpu) override;
  Result<std::vector<MigInstance>> MigInstances(uint32_t gpu) override;
  Result<MigInstance> CreateGpuInstance(uint32_t gpu, uint32_t profile_id,
                                        protocol::MigPlacement placement) override;
  Result<MigInstance> CreateComputeInstance(uint32_t gpu, uint32_t gpu_instance_id) override;
  Status DestroyGpuInstance(uint32_t gpu, uint32_t gpu_instance_id) override;

 private:
  struct Api;
  struct MigApi;
  struct MigTarget {
    nvmlDevice_st* dev;
    MigApi* api;
  };
  struct ListedGpu {
    unsigned index = 0;
    nvmlDevice_st* dev = nullptr;
    std::string uuid{};
    std::string name{};
  };
  Status Load();
  Result<std::vector<ListedGpu>> ListGpus();
  // Loads the library, checks it has the MIG calls, and gets GPU `gpu`'s handle.
  Result<MigTarget> OpenMig(uint32_t gpu);
  Result<MigInstance> Describe(nvmlDevice_st* dev, uint32_t gpu, nvmlGpuInstance_st* gi);
  NvmlOptions options_;
  std::unique_ptr<Api> api_;
};

// NVML writes bus ids as "00000000:3B:00.0"; sysfs names the device "0000:3b:00.0".
std::string SysfsBusId(std::string_view nvml_bus_id);

// <sysfs_root>/bus/pci/devices/<bus id>/numa_node; a missing file, junk or a negative value
// (no NUMA affinity) reads as 0.
int64_t NumaNodeFromSysfs(const std::string& sysfs_root, std::string_view nvml_bus_id);

}  // namespace hami::deviceplugin

#endif  // HAMI_DEVICEPLUGIN_NVML_H_
