#include "deviceplugin/allocate.h"

#include <algorithm>

#include "common/strings.h"
#include "deviceplugin/mps.h"

namespace hami::deviceplugin {

Result<DeviceListStrategy> ParseDeviceListStrategy(std::string_view value) {
  if (value == "envvar") return DeviceListStrategy::kEnvvar;
  if (value == "volume-mounts") return DeviceListStrategy::kVolumeMounts;
  if (value == "cdi-annotations") return DeviceListStrategy::kCdiAnnotations;
  return Error{"--device-list-strategy: want envvar, volume-mounts or cdi-annotations, got " +
               Quote(value)};
}

std::string ContainerCacheHostDir(std::string_view hook_path, std::string_view pod_uid,
                                  std::string_view container) {
  return std::string(hook_path) + "/vgpu/containers/" + std::string(pod_uid) + "_" +
         std::string(container);
}

std::string ContainerLimitsHostPath(std::string_view hook_path, std::string_view pod_uid,
                                    std::string_view container) {
  return std::string(hook_path) + "/vgpu/limits/" + std::string(pod_uid) + "_" +
         std::string(container) + ".limits";
}

std::string LimitsFileContent(const std::map<std::string, std::string>& envs,
                              std::string_view writer) {
  static constexpr std::string_view kPrefixes[] = {
      "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_SM_LIMIT", "CUDA_DEVICE_MEMORY_SHARED_CACHE",
      "GPU_CORE_UTILIZATION_POLICY", "CUDA_TASK_PRIORITY"};
  std::string out = "# libvgpu limits, written by " + std::string(writer) + " (docs/vgpu.md)\n";
  // The policy is always written: without it libvgpu would still throttle (a limits file makes
  // the region's utilization_switch advisory), but a reader of the file sees what applies.
  std::map<std::string, std::string> with_policy;
  if (envs.count("GPU_CORE_UTILIZATION_POLICY") == 0) {
    with_policy = envs;
    with_policy["GPU_CORE_UTILIZATION_POLICY"] = "default";
  }
  for (const auto& [name, value] : with_policy.empty() ? envs : with_policy) {
    for (std::string_view prefix : kPrefixes) {
      if (std::string_view(name).substr(0, prefix.size()) == prefix) {
        out += name + "=" + value + "\n";
        break;
      }
    }
  }
  return out;
}

std::string StripReplicaSuffix(std::string_view id) {
  if (std::count(id.begin(), id.end(), '-') != 6) return std::string(id);
  return std::string(id.substr(0, id.rfind('-')));
}

namespace {

void AddDeviceList(const std::vector<std::string>& uuids, std::string_view cache_id,
                   const AllocateEnv& env, ContainerAllocation* out) {
  switch (env.strategy) {
    case DeviceListStrategy::kEnvvar:
      out->envs["NVIDIA_VISIBLE_DEVICES"] = Join(uuids, ",");
      break;
    case DeviceListStrategy::kVolumeMounts:
      out->envs["NVIDIA_VISIBLE_DEVICES"] = std::string(kContainerDevicesDir);
      for (const std::string& u : uuids) {
        out->mounts.push_back({std::string(kContainerDevicesDir) + "/" + u, "/dev/null", true});
      }
      break;
    case DeviceListStrategy::kCdiAnnotations: {
      std::vector<std::string> names;
      for (const std::string& u : uuids)
        names.push_back(std::string(protocol::kNvidiaCdiKind) + "=" + u);
      out->annotations["cdi.k8s.io/hami-device-plugin_" + std::string(cache_id)] = Join(names, ",");
      break;
    }
  }
}

}  // namespace

ContainerAllocation BuildMigContainerAllocation(const std::vector<std::string>& mig_uuids,
                                                std::string_view cache_id, const AllocateEnv& env) {
  ContainerAllocation out;
  AddDeviceList(mig_uuids, cache_id, env, &out);
  return out;
}

Result<std::vector<protocol::MigAllocation>> ContainerMigReservations(
    const std::vector<protocol::MigAllocation>& all, size_t container_index,
    const protocol::ContainerDevices& devices) {
  const std::string where = "container " + std::to_string(container_index);
  std::vector<protocol::MigAllocation> out;
  for (const auto& a : all) {
    if (a.container_index == static_cast<int64_t>(container_index)) out.push_back(a);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.device_index < b.device_index; });
  if (out.size() != devices.size()) {
    return Error{where + ": " + std::to_string(out.size()) + " MIG reservations for " +
                 std::to_string(devices.size()) + " devices"};
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].gpu_uuid != devices[i].uuid) {
      return Error{where + ": MIG reservation " + std::to_string(i) + " is on GPU " +
                   Quote(out[i].gpu_uuid) + ", the device on " + Quote(devices[i].uuid)};
    }
  }
  return out;
}

ContainerAllocation BuildContainerAllocation(const protocol::ContainerDevices& devices,
                                             const ContainerInfo& container,
                                             std::string_view pod_uid, std::string_view cache_id,
                                             const AllocateEnv& env) {
  ContainerAllocation out;
  std::vector<std::string> uuids;
  for (const auto& d : devices) uuids.push_back(d.uuid);
  AddDeviceList(uuids, cache_id, env, &out);
  const std::string vgpu = env.hook_path + "/vgpu";
  for (size_t i = 0; i < devices.size(); ++i) {
    out.envs["CUDA_DEVICE_MEMORY_LIMIT_" + std::to_string(i)] =
        std::to_string(devices[i].usedmem) + "m";
  }
  if (!devices.empty()) out.envs["CUDA_DEVICE_SM_LIMIT"] = std::to_string(devices[0].usedcores);
  out.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = vgpu + "/" + std::string(cache_id) + ".cache";
  if (env.config.device_memory_scaling > 1) out.envs["CUDA_OVERSUBSCRIBE"] = "true";
  if (!env.config.lib_cuda_log_level.empty()) {
    out.envs["LIBCUDA_LOG_LEVEL"] = env.config.lib_cuda_log_level;
  }
  if (env.config.disable_core_limit) out.envs["GPU_CORE_UTILIZATION_POLICY"] = "disable";
  if (!container.task_priority.empty()) out.envs["CUDA_TASK_PRIORITY"] = container.task_priority;
  if (env.config.operating_mode == kMpsOperatingMode) AddMpsSettings(devices, env.mps_root, &out);

  const std::string lib_host =
      env.libvgpu_host_path.empty() ? vgpu + "/libvgpu.so" : env.libvgpu_host_path;
  out.mounts.push_back({vgpu + "/libvgpu.so", lib_host, true});
  out.mounts.push_back(
      {vgpu, ContainerCacheHostDir(env.hook_path, pod_uid, container.name), false});
  out.mounts.push_back({"/tmp/vgpulock", "/tmp/vgpulock", false});
  if (!container.disable_control) {
    out.mounts.push_back({"/etc/ld.so.preload", vgpu + "/ld.so.preload", true});
  }
  if (env.license_present) {
    out.mounts.push_back({"/tmp/license", vgpu + "/license", true});
    out.mounts.push_back({"/usr/bin/vgpuvalidator", vgpu + "/vgpuvalidator", true});
  }
  // The limits, out of the container's reach: a read-only file beside the library (inside the
  // writable cache dir mount, but a mount point cannot be replaced or removed from inside). The
  // env above stays for HAMi-core compatibility; libvgpu ignores it while this file exists.
  const std::string limits_host = ContainerLimitsHostPath(env.hook_path, pod_uid, container.name);
  out.mounts.push_back({vgpu + "/" + std::string(kLimitsFileName), limits_host, true});
  out.files.push_back({limits_host, LimitsFileContent(out.envs)});
  // The region file as a file mount of its own (created empty, 0666; libvgpu sizes it): a mount
  // point cannot be unlinked or renamed from inside, so no process can delete the region, and the
  // usage of the others with it, to start a fresh one.
  const std::string cache_name = std::string(cache_id) + ".cache";
  const std::string cache_host =
      ContainerCacheHostDir(env.hook_path, pod_uid, container.name) + "/" + cache_name;
  out.mounts.push_back({vgpu + "/" + cache_name, cache_host, false});
  out.files.push_back({cache_host, "", 0666});
  // The compute limiter's side file (docs/vgpu.md "Compute limiter") the same way: a directory or
  // link put in its place would leave each new process with an uncalibrated bucket of its own.
  out.mounts.push_back({vgpu + "/" + cache_name + ".limiter", cache_host + ".limiter", false});
  out.files.push_back({cache_host + ".limiter", "", 0666});
  return out;
}

namespace {

// Why `entry` gives `container` more than its own request, or nullopt.
std::optional<std::string> BeyondRequest(const protocol::ContainerDevices& entry,
                                         const ContainerInfo& container) {
  for (const auto& d : entry) {
    if (container.limit.memory_mib && d.usedmem > *container.limit.memory_mib) {
      return "container " + Quote(container.name) + " is allocated " + std::to_string(d.usedmem) +
             " MB on device " + Quote(d.uuid) + " but requests " +
             std::to_string(*container.limit.memory_mib) + " MB";
    }
    if (container.limit.cores && *container.limit.cores > 0 &&
        d.usedcores > *container.limit.cores) {
      return "container " + Quote(container.name) + " is allocated " + std::to_string(d.usedcores) +
             "% of the cores on device " + Quote(d.uuid) + " but requests " +
             std::to_string(*container.limit.cores) + "%";
    }
  }
  return std::nullopt;
}

}  // namespace

Result<AllocationPlan> PlanAllocate(const PodView& pod,
                                    const std::vector<std::vector<std::string>>& requests,
                                    const AllocateEnv& env,
                                    const std::function<std::string()>& new_cache_id) {
  auto decoded = protocol::DecodePodDevices(pod.to_allocate);
  if (!decoded) return Error{std::string(kToAllocateKey) + ": " + decoded.error()};
  protocol::PodDevices devices = std::move(*decoded);
  AllocationPlan plan;
  for (size_t r = 0; r < requests.size(); ++r) {
    const std::string where = "container request " + std::to_string(r);
    auto index = protocol::FirstNonEmptyContainer(devices);
    if (!index) return Error{where + ": no pending devices left in " + Quote(pod.to_allocate)};
    protocol::ContainerDevices entry = devices[*index];
    if (entry.size() != requests[r].size()) {
      return Error{where + ": device number not matched: annotation has " +
                   std::to_string(entry.size()) + ", kubelet asked for " +
                   std::to_string(requests[r].size())};
    }
    ContainerInfo container;
    if (*index < pod.containers.size()) {
      container = pod.containers[*index];
    } else {
      container.name = "container-" + std::to_string(*index);
    }
    // A MIG instance holds its profile's memory, more than asked: nothing to compare.
    if (env.config.operating_mode != kMigOperatingMode) {
      if (auto over = BeyondRequest(entry, container)) return Error{where + ": " + *over};
    }
    // In MIG mode the reservation names the GPU; kubelet's replica ids do not (HAMi too).
    if (env.config.enable_preferred_allocation && env.config.operating_mode != kMigOperatingMode) {
      for (size_t i = 0; i < entry.size(); ++i) entry[i].uuid = StripReplicaSuffix(requests[r][i]);
    }
    plan.containers.push_back(
        BuildContainerAllocation(entry, container, pod.uid, new_cache_id(), env));
    plan.consumed.push_back(*index);
    devices[*index].clear();
  }
  // The decoder keeps every ';' segment, so re-encoding needs the last (trailing) one dropped.
  if (!devices.empty()) devices.pop_back();
  plan.remaining = protocol::EncodePodDevices(devices);
  return plan;
}

std::vector<std::vector<std::string>> PreferReplicas(
    const protocol::PodDevices& pod, const std::vector<std::vector<std::string>>& available,
    const std::vector<int32_t>& sizes) {
  std::vector<std::vector<std::string>> out;
  size_t next = 0;
  for (size_t r = 0; r < available.size(); ++r) {
    const size_t size = r < sizes.size() && sizes[r] > 0 ? static_cast<size_t>(sizes[r]) : 0;
    while (next < pod.size() && pod[next].empty()) ++next;
    std::vector<std::string> chosen;
    if (next < pod.size()) {
      for (const auto& device : pod[next]) {
        for (const std::string& id : available[r]) {
          if (StripReplicaSuffix(id) == device.uuid &&
              std::find(chosen.begin(), chosen.end(), id) == chosen.end()) {
            chosen.push_back(id);
            break;
          }
        }
      }
      ++next;
    }
    if (chosen.size() != size) {
      chosen.assign(available[r].begin(),
                    available[r].begin() + std::min(size, available[r].size()));
    }
    out.push_back(std::move(chosen));
  }
  return out;
}

}  // namespace hami::deviceplugin
