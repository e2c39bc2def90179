#include "draplugin/prepare.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/strings.h"
#include "deviceplugin/allocate.h"
#include "protocol/quantity.h"

namespace hami::draplugin {
namespace {

constexpr int64_t kMiB = 1 << 20;

// A quantity's value rounded up to a whole number; nullopt when negative or past int64.
std::optional<int64_t> WholeValue(const protocol::Quantity& q) {
  if (q.negative && q.mantissa != 0) return std::nullopt;
  long double v = static_cast<long double>(q.mantissa);
  for (int i = 0; i < q.exp10; ++i) v *= 10;
  for (int i = 0; i > q.exp10; --i) v /= 10;
  for (int i = 0; i < q.exp2; ++i) v *= 2;
  if (v > 9.2e18L) return std::nullopt;
  auto whole = static_cast<int64_t>(v);
  if (static_cast<long double>(whole) < v) ++whole;
  return whole;
}

Result<int64_t> ReadCapacity(const Json& consumed, const char* name, const std::string& path) {
  if (!consumed.contains(name)) return int64_t{-1};
  const Json& v = consumed[name];
  const std::string field = path + ".consumedCapacity." + name;
  if (!v.is_string()) return Error{field + ": want a quantity, got " + Quote(v.dump())};
  auto q = protocol::ParseQuantity(v.get<std::string>());
  if (!q) return Error{field + ": want a quantity, got " + Quote(v.get<std::string>())};
  auto whole = WholeValue(*q);
  if (!whole) return Error{field + ": out of range: " + Quote(v.get<std::string>())};
  return *whole;
}

const GpuFacts* FindGpu(const std::vector<GpuFacts>& gpus, std::string_view device) {
  for (const GpuFacts& g : gpus) {
    if (GpuDeviceName(g.minor()) == device) return &g;
  }
  return nullptr;
}

const GpuFacts* FindGpuByIndex(const std::vector<GpuFacts>& gpus, uint32_t index) {
  for (const GpuFacts& g : gpus) {
    if (g.gpu.index == index) return &g;
  }
  return nullptr;
}

const ClaimMig* FindMig(const std::vector<ClaimMig>& migs, std::string_view device) {
  for (const ClaimMig& m : migs) {
    if (m.device == device) return &m;
  }
  return nullptr;
}

bool IsMigDevice(const std::vector<GpuFacts>& gpus, std::string_view device) {
  for (const GpuFacts& g : gpus) {
    if (device.starts_with(GpuDeviceName(g.minor()) + "-mig-")) return true;
  }
  return false;
}

Json Mount(const std::string& host, const std::string& container, bool read_only) {
  return {{"hostPath", host},
          {"containerPath", container},
          {"options", Json::array({read_only ? "ro" : "rw", "nosuid", "nodev", "bind"})}};
}

// What one GPU of the claim gives its containers.
struct ClaimGpu {
  const GpuFacts* gpu = nullptr;
  int64_t memory_mib = 0;  // summed over the results on it, capped at the GPU's
  int64_t cores = 0;       // summed, capped at 100
};

}  // namespace

Result<ClaimAllocation> ReadClaimAllocation(const Json& claim) {
  if (!claim.is_object()) return Error{"ResourceClaim: want an object"};
  ClaimAllocation out;
  const Json meta = claim.value("metadata", Json::object());
  out.uid = meta.value("uid", std::string());
  out.ns = meta.value("namespace", std::string());
  out.name = meta.value("name", std::string());
  if (out.uid.empty()) return Error{"ResourceClaim " + Quote(out.name) + ": metadata.uid: empty"};
  const Json* results = nullptr;
  const auto ptr = "/status/allocation/devices/results"_json_pointer;
  if (claim.contains(ptr)) results = &claim.at(ptr);
  if (results == nullptr || !results->is_array()) {
    return Error{"ResourceClaim " + out.ns + "/" + out.name +
                 ": status.allocation.devices.results: not allocated"};
  }
  for (size_t i = 0; i < results->size(); ++i) {
    const Json& r = (*results)[i];
    const std::string path = "status.allocation.devices.results[" + std::to_string(i) + "]";
    if (!r.is_object()) return Error{path + ": want an object, got " + Quote(r.dump())};
    if (r.value("driver", std::string()) != kDriverName) continue;
    AllocationResult a;
    a.request = r.value("request", std::string());
    a.pool = r.value("pool", std::string());
    a.device = r.value("device", std::string());
    if (r.contains("shareID") && r["shareID"].is_string()) a.share_id = r["shareID"];
    if (a.device.empty()) return Error{path + ".device: empty"};
    const Json consumed = r.value("consumedCapacity", Json::object());
    if (!consumed.is_object()) {
      return Error{path + ".consumedCapacity: want a map, got " + Quote(consumed.dump())};
    }
    auto memory = ReadCapacity(consumed, "memory", path);
    if (!memory) return std::move(memory).take_error();
    auto cores = ReadCapacity(consumed, "cores", path);
    if (!cores) return std::move(cores).take_error();
    a.memory_bytes = *memory;
    a.cores = *cores;
    out.results.push_back(std::move(a));
  }
  return out;
}

std::string CdiSpecPath(const PrepareEnv& env, std::string_view claim_uid) {
  return env.cdi_dir + "/hami-core-gpu.project-hami.io-claim_" + std::string(claim_uid) + ".json";
}

std::string ClaimHostDir(const PrepareEnv& env, std::string_view claim_uid) {
  return env.hook_path + "/vgpu/claims/" + std::string(claim_uid);
}

std::string ClaimLimitsHostPath(const PrepareEnv& env, std::string_view claim_uid) {
  return env.hook_path + "/vgpu/claim-limits/" + std::string(claim_uid) + ".limits";
}

Result<ClaimPlan> PlanClaim(const ClaimAllocation& claim, const std::vector<GpuFacts>& gpus,
                            const PrepareEnv& env, const std::vector<ClaimMig>& migs) {
  const std::string where = "ResourceClaim " + claim.ns + "/" + claim.name + ": ";
  if (claim.results.empty())
    return Error{where + "no device of driver " + std::string(kDriverName)};
  std::map<int, ClaimGpu> by_minor;  // the claim's GPUs, CUDA order = minor order
  // The claim's MIG devices by the minor of their GPU: (MIG device, its GPU).
  std::multimap<int, std::pair<const ClaimMig*, const GpuFacts*>> migs_by_minor;
  for (size_t i = 0; i < claim.results.size(); ++i) {
    const AllocationResult& r = claim.results[i];
    const std::string path = "result " + std::to_string(i) + " (" + Quote(r.device) + ")";
    const GpuFacts* gpu = FindGpu(gpus, r.device);
    if (gpu == nullptr) {
      const ClaimMig* mig = FindMig(migs, r.device);
      const GpuFacts* parent = mig ? FindGpuByIndex(gpus, mig->gpu_index) : nullptr;
      if (parent != nullptr && !mig->mig_uuid.empty()) {
        bool seen = false;
        for (auto [it, end] = migs_by_minor.equal_range(parent->minor()); it != end; ++it) {
          seen = seen || it->second.first == mig;
        }
        if (!seen) migs_by_minor.emplace(parent->minor(), std::make_pair(mig, parent));
        continue;
      }
      if (IsMigDevice(gpus, r.device)) {
        return Error{where + path + ": no MIG instance of this device on this node"};
      }
      return Error{where + path + ": no such device on this node"};
    }
    ClaimGpu& g = by_minor[gpu->minor()];
    g.gpu = gpu;
    const int64_t full_mib = gpu->gpu.memory_mib;
    int64_t mib = r.memory_bytes < 0 ? full_mib : (r.memory_bytes + kMiB - 1) / kMiB;
    g.memory_mib = std::min(full_mib, g.memory_mib + mib);
    g.cores = std::min<int64_t>(100, g.cores + (r.cores < 0 ? 100 : r.cores));
  }
  bool whole = true;
  for (const auto& [minor, g] : by_minor) {
    whole = whole && g.memory_mib >= g.gpu->gpu.memory_mib && g.cores >= 100;
  }

  ClaimPlan plan;
  plan.claim_dir = ClaimHostDir(env, claim.uid);
  const std::string vgpu = env.hook_path + "/vgpu";
  std::vector<std::string> uuids;
  std::map<std::string, std::string> envs;
  // CUDA devices in minor order; a MIG device is limited by the hardware, so its index gets no
  // libvgpu limit.
  std::set<int> minors;
  for (const auto& [minor, g] : by_minor) minors.insert(minor);
  for (const auto& [minor, m] : migs_by_minor) minors.insert(minor);
  size_t index = 0;
  for (int minor : minors) {
    if (auto it = by_minor.find(minor); it != by_minor.end()) {
      const ClaimGpu& g = it->second;
      uuids.push_back(g.gpu->gpu.uuid);
      envs["CUDA_DEVICE_MEMORY_LIMIT_" + std::to_string(index)] =
          std::to_string(g.memory_mib) + "m";
      envs["CUDA_DEVICE_SM_LIMIT_" + std::to_string(index)] = std::to_string(g.cores);
      ++index;
    }
    for (auto [it, end] = migs_by_minor.equal_range(minor); it != end; ++it) {
      uuids.push_back(it->second.first->mig_uuid);
      ++index;
    }
  }
  Json edits = {{"env", Json::array({"NVIDIA_VISIBLE_DEVICES=" + Join(uuids, ",")})},
                {"deviceNodes", Json::array({{{"path", "/dev/nvidiactl"}},
                                             {{"path", "/dev/nvidia-uvm"}},
                                             {{"path", "/dev/nvidia-uvm-tools"}}})},
                {"mounts", Json::array()}};
  if (!whole) {
    const std::string cache_name = claim.uid + ".cache";
    const std::string cache_container = vgpu + "/" + cache_name;
    envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = cache_container;
    for (const auto& [name, value] : envs) edits["env"].push_back(name + "=" + value);
    const std::string lib_host =
        env.libvgpu_host_path.empty() ? vgpu + "/libvgpu.so" : env.libvgpu_host_path;
    const std::string limits_host = ClaimLimitsHostPath(env, claim.uid);
    const std::string cache_host = plan.claim_dir + "/" + cache_name;
    Json& mounts = edits["mounts"];
    mounts.push_back(Mount(plan.claim_dir, vgpu, false));
    mounts.push_back(Mount(lib_host, vgpu + "/libvgpu.so", true));
    mounts.push_back(
        Mount(limits_host, vgpu + "/" + std::string(deviceplugin::kLimitsFileName), true));
    mounts.push_back(Mount(cache_host, cache_container, false));
    mounts.push_back(Mount(cache_host + ".limiter", cache_container + ".limiter", false));
    mounts.push_back(Mount(vgpu + "/ld.so.preload", "/etc/ld.so.preload", true));
    mounts.push_back(Mount("/tmp/vgpulock", "/tmp/vgpulock", false));
    plan.files.push_back(
        {limits_host, deviceplugin::LimitsFileContent(envs, "hami-dra-plugin"), 0644, false});
    plan.files.push_back({cache_host, "", 0666, true});
    plan.files.push_back({cache_host + ".limiter", "", 0666, true});
  }
  Json devices = Json::array();
  for (size_t i = 0; i < claim.results.size(); ++i) {
    const AllocationResult& r = claim.results[i];
    const GpuFacts* gpu = FindGpu(gpus, r.device);
    std::string visible_uuid = gpu ? gpu->gpu.uuid : "";
    if (gpu == nullptr) {  // a MIG device (checked above)
      const ClaimMig* mig = FindMig(migs, r.device);
      gpu = FindGpuByIndex(gpus, mig->gpu_index);
      visible_uuid = mig->mig_uuid;
    }
    const std::string cdi_name = claim.uid + "-" + (r.share_id.empty() ? r.device : r.share_id);
    devices.push_back(
        {{"name", cdi_name},
         {"containerEdits",
          {{"deviceNodes",
            Json::array({{{"path", "/dev/nvidia" + std::to_string(gpu->minor())}}})}}}});
    PreparedDevice d;
    d.requests = {r.request};
    d.pool = r.pool;
    d.device = r.device;
    d.share_id = r.share_id;
    d.cdi_device_ids.push_back(std::string(kCdiKind) + "=" + cdi_name);
    if (!env.nvidia_cdi_kind.empty()) {
      d.cdi_device_ids.push_back(env.nvidia_cdi_kind + "=" + visible_uuid);
    }
    plan.devices.push_back(std::move(d));
  }
  plan.cdi_spec = {
      {"cdiVersion", "0.6.0"}, {"kind", kCdiKind}, {"devices", devices}, {"containerEdits", edits}};
  plan.files.push_back({CdiSpecPath(env, claim.uid), plan.cdi_spec.dump(2) + "\n", 0644, false});
  return plan;
}

}  // namespace hami::draplugin
