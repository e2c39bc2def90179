#include "sim/usage.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "common/strings.h"
#include "deviceplugin/allocate.h"
#include "vgpu/shared_region.h"

namespace hami::sim {
namespace {

using json = nlohmann::json;

Status WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Error{std::strerror(errno)};
    p += w;
    n -= static_cast<size_t>(w);
  }
  return OkStatus();
}

}  // namespace

std::string UsageAnnotation(const std::vector<ContainerSpec>& containers) {
  json out = json::object();
  for (const ContainerSpec& c : containers) {
    if (!c.usage) continue;
    out[c.name] = {{"memory", c.usage->memory_mib}, {"utilization", c.usage->utilization}};
  }
  return out.empty() ? "" : out.dump();
}

Result<std::map<std::string, SimUsage>> ParseUsageAnnotation(std::string_view value) {
  const std::string where = std::string(kUsageAnnotation) + " " + Quote(value);
  auto parsed = ParseJson(value);
  if (!parsed) return Error{where + ": " + parsed.error()};
  if (!parsed->is_object()) return Error{where + ": want an object of containers"};
  std::map<std::string, SimUsage> out;
  for (const auto& [name, u] : parsed->items()) {
    if (!u.is_object()) return Error{where + ": container " + Quote(name) + ": want an object"};
    SimUsage s;
    for (const auto& [key, v] : u.items()) {
      const bool memory = key == "memory";
      if (!memory && key != "utilization") {
        return Error{where + ": container " + Quote(name) + ": unknown key " + Quote(key)};
      }
      const int64_t max = memory ? (int64_t{1} << 30) : 100;
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > max) {
        return Error{where + ": " + name + "." + key + ": want an integer in [0, " +
                     std::to_string(max) + "], got " + v.dump()};
      }
      (memory ? s.memory_mib : s.utilization) = v.get<int64_t>();
    }
    out[name] = s;
  }
  return out;
}

Status WriteUsageRegion(const std::string& path, const UsageRegion& region) {
  if (region.uuids.size() > HAMI_REGION_MAX_DEVICES ||
      region.limits.size() != region.uuids.size()) {
    return Error{"region " + Quote(path) + ": want 1 to 16 devices with a limit each, got " +
                 std::to_string(region.uuids.size()) + " uuids and " +
                 std::to_string(region.limits.size()) + " limits"};
  }
  // The layout as libvgpu leaves it once one process has run: header, devices, one live slot.
  auto r = std::make_unique<hami_shared_region_t>();
  std::memset(r.get(), 0, sizeof(hami_shared_region_t));
  r->initialized_flag = HAMI_REGION_MAGIC;
  r->major_version = HAMI_REGION_MAJOR;
  r->minor_version = HAMI_REGION_MINOR;
  r->device_num = static_cast<int32_t>(region.uuids.size());
  const uint64_t used = static_cast<uint64_t>(region.usage.memory_mib) * 1024 * 1024;
  hami_proc_slot_t& slot = r->procs[0];
  slot.pid = region.pid;
  slot.hostpid = 0;
  slot.status = HAMI_SLOT_RUNNING;
  for (size_t d = 0; d < region.uuids.size(); ++d) {
    std::strncpy(r->uuids[d], region.uuids[d].c_str(), HAMI_REGION_UUID_LEN - 1);
    r->limit[d] = region.limits[d];
    r->sm_limit[d] = 100;
    slot.used[d].data_size = used;
    slot.used[d].total = used;
    slot.device_util[d].sm_util = static_cast<uint64_t>(region.usage.utilization);
  }
  r->proc_num = 1;
  const std::string tmp = path + ".sim-tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return Error{"region " + Quote(tmp) + ": " + std::strerror(errno)};
  Status written =
      WriteAll(fd, reinterpret_cast<const char*>(r.get()), sizeof(hami_shared_region_t));
  if (written) written = WriteAll(fd, "", 1);  // the file is one byte longer than the struct
  if (::close(fd) != 0 && written) written = Error{std::strerror(errno)};
  if (!written) {
    ::unlink(tmp.c_str());
    return Error{"region " + Quote(tmp) + ": " + written.error()};
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Error{"region " + Quote(path) + ": rename: " + why};
  }
  return OkStatus();
}

Result<std::string> UsageRegionFor(const std::map<std::string, std::string>& envs,
                                   const std::string& hook_path, const std::string& pod_uid,
                                   const std::string& container, UsageRegion* region) {
  auto env = [&](const std::string& k) {
    auto it = envs.find(k);
    return it == envs.end() ? std::string() : it->second;
  };
  const std::string cache = env("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  const size_t slash = cache.rfind('/');
  const std::string file = slash == std::string::npos ? cache : cache.substr(slash + 1);
  if (file.empty())
    return Error{"CUDA_DEVICE_MEMORY_SHARED_CACHE: want a path, got " + Quote(cache)};
  const std::string devices = env("NVIDIA_VISIBLE_DEVICES");
  region->uuids.clear();
  region->limits.clear();
  for (std::string_view u : Split(devices, ',')) {
    if (u.empty()) continue;
    if (u.rfind("GPU-", 0) != 0) {
      return Error{"NVIDIA_VISIBLE_DEVICES: want GPU uuids, got " + Quote(devices)};
    }
    region->uuids.emplace_back(u);
  }
  if (region->uuids.empty() || region->uuids.size() > HAMI_REGION_MAX_DEVICES) {
    return Error{"NVIDIA_VISIBLE_DEVICES: want 1 to 16 GPU uuids, got " + Quote(devices)};
  }
  for (size_t i = 0; i < region->uuids.size(); ++i) {
    const std::string key = "CUDA_DEVICE_MEMORY_LIMIT_" + std::to_string(i);
    std::string v = env(key);
    if (v.empty()) {
      region->limits.push_back(0);
      continue;
    }
    if (v.back() == 'm') v.pop_back();
    auto mib = ParseInt64(v);
    if (!mib || *mib < 0) return Error{key + ": want MiB such as 2000m, got " + Quote(env(key))};
    region->limits.push_back(static_cast<uint64_t>(*mib) * 1024 * 1024);
  }
  return deviceplugin::ContainerCacheHostDir(hook_path, pod_uid, container) + "/" + file;
}

}  // namespace hami::sim
