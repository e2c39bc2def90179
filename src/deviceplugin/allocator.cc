#include "deviceplugin/allocator.h"

#include <sys/stat.h>

#include <filesystem>
#include <random>

#include "common/log.h"
#include "common/strings.h"
#include "deviceplugin/container_files.h"
#include "deviceplugin/mig_manager.h"
#include "k8s/client.h"
#include "nodelock/owner.h"
#include "nodelock/release.h"
#include "protocol/bind.h"
#include "protocol/keys.h"
#include "protocol/mig_allocations.h"
#include "protocol/node_lock.h"
#include "protocol/quantity.h"
#include "protocol/vendor.h"

namespace hami::deviceplugin {
namespace {

using k8s::Json;
namespace res = k8s::resources;

Json AnnotationPatch(std::string_view key, const Json& value) {
  Json patch;
  patch["metadata"]["annotations"][std::string(key)] = value;
  return patch;
}

// Allocate's API calls, reads and writes alike, are retried on a transient API error (transport,
// 429, 5xx) with k8s::RetryTransient's default policy: kubelet does not call Allocate again for a
// pod whose Allocate failed, so such an error would fail the pod or leave the node locked. Every
// one of them may be repeated.

bool IsCandidate(const Json& pod, std::string_view node) {
  if (k8s::FieldString(pod, "status.phase") != "Pending") return false;
  auto ann = k8s::Annotations(pod);
  if (!ann.count(protocol::kBindTimeKey)) return false;
  auto phase = ann.find(protocol::kBindPhaseKey);
  if (phase == ann.end() || (phase->second != "allocating" && phase->second != "success")) {
    return false;
  }
  auto vnode = ann.find(protocol::kVgpuNodeKey);
  return vnode != ann.end() && vnode->second == node;
}

// A string member, "" when absent or not a string (json::value() would throw on a mismatch).
std::string StringField(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// resources.limits[name], else resources.requests[name]; null when neither is a string.
const Json* Resource(const Json& c, std::string_view name) {
  auto res = c.find("resources");
  if (res == c.end() || !res->is_object()) return nullptr;
  for (const char* list : {"limits", "requests"}) {
    auto l = res->find(list);
    if (l == res->end() || !l->is_object()) continue;
    auto v = l->find(std::string(name));
    if (v != l->end() && v->is_string()) return &*v;
  }
  return nullptr;
}

// The container's per-device entitlement as the scheduler normalises it (memory first from
// gpumem, unbounded with a percentage; cores from gpucores or the default). A value that does
// not parse bounds nothing: the scheduler refused such a pod already.
ContainerRequestLimit RequestLimit(const Json& c, const PluginConfig& config) {
  ContainerRequestLimit out;
  const Json* mem = Resource(c, protocol::kNvidiaMemoryResource);
  const Json* pct = Resource(c, protocol::kNvidiaMemoryPercentageResource);
  if (mem) {
    if (auto mib =
            protocol::ParseMemoryMiB(protocol::kNvidiaMemoryResource, mem->get<std::string>());
        mib && *mib > 0) {
      out.memory_mib = int64_t{*mib} * std::max(config.memory_factor, 1);
    }
  } else if (!pct && config.default_memory > 0) {
    out.memory_mib = config.default_memory;
  }
  if (const Json* cores = Resource(c, protocol::kNvidiaCoreResource)) {
    if (auto v =
            protocol::ParseDeviceCount(protocol::kNvidiaCoreResource, cores->get<std::string>())) {
      out.cores = *v;
    }
  } else if (config.default_cores > 0) {
    out.cores = config.default_cores;
  }
  return out;
}

void AddContainers(const Json& spec, const char* field, const PluginConfig& config,
                   std::vector<ContainerInfo>* out) {
  auto list = spec.find(field);
  if (list == spec.end() || !list->is_array()) return;
  for (const Json& c : *list) {
    ContainerInfo info;
    info.name = StringField(c, "name");
    if (c.is_object()) info.limit = RequestLimit(c, config);
    auto env = c.find("env");
    if (env != c.end() && env->is_array()) {
      for (const Json& e : *env) {
        if (StringField(e, "name") == "CUDA_TASK_PRIORITY") {
          info.task_priority = StringField(e, "value");
        }
        if (StringField(e, "name") != "CUDA_DISABLE_CONTROL") continue;
        auto v = ParseBool(StringField(e, "value"));
        info.disable_control = v && *v;
      }
    }
    out->push_back(std::move(info));
  }
}

}  // namespace

Result<Json> FindPendingPod(k8s::Client& client, std::string_view node, std::string* seen) {
  auto holder = nodelock::LookupOwner(client, node);
  if (!holder) return std::move(holder).take_error();
  if (seen != nullptr) *seen = *holder ? (*holder)->value : "";
  if (*holder && (*holder)->lock.owner) {
    const protocol::LockOwner& owner = *(*holder)->lock.owner;
    auto pod =
        k8s::RetryTransient<Json>([&] { return client.Get(res::kPods, owner.ns, owner.pod); });
    if (!pod) {
      return Error{"get lock owner pod " + owner.ns + "/" + owner.pod + ": " +
                   pod.error().ToString()};
    }
    return std::move(*pod);
  }
  k8s::ListOptions options;
  options.field_selector = "spec.nodeName=" + std::string(node);
  auto pods =
      k8s::RetryTransient<k8s::ObjectList>([&] { return client.List(res::kPods, "", options); });
  if (!pods) return Error{"list pods on " + Quote(node) + ": " + pods.error().ToString()};
  for (Json& pod : pods->items) {
    if (IsCandidate(pod, node)) return std::move(pod);
  }
  return Error{"no pending pod found on node " + Quote(node)};
}

PodView PodViewFromJson(const Json& pod, const PluginConfig& config) {
  PodView view;
  view.ns = k8s::Namespace(pod);
  view.name = k8s::Name(pod);
  view.uid = k8s::Uid(pod);
  view.to_allocate = k8s::Annotation(pod, kToAllocateKey).value_or("");
  auto spec = pod.find("spec");
  if (spec != pod.end() && spec->is_object()) {
    AddContainers(*spec, "initContainers", config, &view.containers);
    AddContainers(*spec, "containers", config, &view.containers);
  }
  return view;
}

std::string RandomUuid() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t hi = rng(), lo = rng();
  hi = (hi & ~0xF000ULL) | 0x4000ULL;              // version 4
  lo = (lo & ~(0xC0ULL << 56)) | (0x80ULL << 56);  // RFC 4122 variant
  char buf[37];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFFF),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFULL));
  return buf;
}

Allocator::Allocator(k8s::Client* client, std::string node, AllocateEnv env,
                     std::function<std::string()> new_cache_id)
    : client_(client),
      node_(std::move(node)),
      env_(std::move(env)),
      new_cache_id_(std::move(new_cache_id)) {}

Status Allocator::Fail(const PodView& pod, const std::string& reason, std::string_view lock) {
  const std::string who = "pod " + pod.ns + "/" + pod.name;
  HAMI_ERROR("allocate {}: {}", who, reason);
  auto r = k8s::RetryTransient<Json>([&] {
    return client_->Patch(res::kPods, pod.ns, pod.name, k8s::PatchType::kMerge,
                          AnnotationPatch(protocol::kBindPhaseKey, "failed"));
  });
  if (!r) HAMI_ERROR("{}: set bind-phase failed: {}", who, r.error().ToString());
  if (Status s = nodelock::Release(*client_, node_, pod.ns, pod.name, lock); !s) {
    HAMI_ERROR("{}: {}", who, s.error());
  }
  return Error{who + ": " + reason};
}

Status Allocator::PrepareHostDirs(const PodView& pod, const AllocationPlan& plan) {
  namespace fs = std::filesystem;
  for (size_t index : plan.consumed) {
    const std::string name = index < pod.containers.size() ? pod.containers[index].name
                                                           : "container-" + std::to_string(index);
    const std::string dir = ContainerCacheHostDir(env_.hook_path, pod.uid, name);
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    if (ec) return Error{"create " + Quote(dir) + ": " + ec.message()};
    ::chmod(dir.c_str(), 0777);  // the container's user is unknown: anyone may write the cache
  }
  return OkStatus();
}

Result<std::vector<ContainerAllocation>> Allocator::Allocate(
    const std::vector<std::vector<std::string>>& requests) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string lock_value;  // lets the release skip a GET of the node (nodelock::Release)
  auto found = FindPendingPod(*client_, node_, &lock_value);
  if (!found) return Error{"allocate on node " + Quote(node_) + ": " + found.error()};
  const PodView pod = PodViewFromJson(*found, env_.config);
  auto plan = PlanAllocate(pod, requests, env_, new_cache_id_);
  if (!plan) return std::move(Fail(pod, plan.error(), lock_value)).take_error();
  // Steps 4 and 5 in one patch: the entries consumed, and when nothing NVIDIA is left to
  // allocate, bind-phase success with it (HAMi re-reads the pod between the two; one merge patch
  // makes the pair atomic and saves two API calls). In MIG mode the runtime ids go with them.
  Json patch = AnnotationPatch(kToAllocateKey, plan->remaining);
  std::vector<RealisedMig> realised;
  if (mig_ != nullptr) {
    auto mig = ApplyMig(*found, pod, &*plan, &realised);
    if (!mig) return std::move(Fail(pod, mig.error(), lock_value)).take_error();
    patch["metadata"]["annotations"][std::string(protocol::kVgpuMigAllocationsKey)] = *mig;
  } else {
    if (Status s = PrepareHostDirs(pod, *plan); !s)
      return std::move(Fail(pod, s.error(), lock_value)).take_error();
    // The limits files must exist before kubelet mounts them (docs/vgpu.md "Limits file").
    if (Status s = WriteContainerFiles(plan->containers); !s)
      return std::move(Fail(pod, s.error(), lock_value)).take_error();
  }
  const bool done = !protocol::HasVendorDevice(plan->remaining, kNvidiaVendorKey);
  if (done) patch["metadata"]["annotations"][std::string(protocol::kBindPhaseKey)] = "success";
  auto patched = k8s::RetryTransient<Json>(
      [&] { return client_->Patch(res::kPods, pod.ns, pod.name, k8s::PatchType::kMerge, patch); });
  if (!patched) {
    if (mig_ != nullptr) {
      if (Status s = mig_->Release(realised); !s) HAMI_ERROR("MIG roll-back: {}", s.error());
    }
    return std::move(
               Fail(pod,
                    "update " + std::string(kToAllocateKey) + ": " + patched.error().ToString(),
                    lock_value))
        .take_error();
  }
  if (done) {
    // The pod is allocated; a lock we fail to remove expires on its own (5 min).
    if (Status s = nodelock::Release(*client_, node_, pod.ns, pod.name, lock_value); !s) {
      HAMI_ERROR("pod {}/{}: {}", pod.ns, pod.name, s.error());
    }
  }
  return std::move(plan->containers);
}

Result<std::string> Allocator::ApplyMig(const Json& pod_json, const PodView& pod,
                                        AllocationPlan* plan, std::vector<RealisedMig>* realised) {
  const std::string key(protocol::kVgpuMigAllocationsKey);
  auto all = protocol::DecodeMigAllocations(k8s::Annotation(pod_json, key).value_or(""));
  if (!all) return Error{key + ": " + all.error()};
  auto devices = protocol::DecodePodDevices(pod.to_allocate);
  if (!devices) return Error{std::string(kToAllocateKey) + ": " + devices.error()};
  for (size_t k = 0; k < plan->consumed.size(); ++k) {
    const size_t index = plan->consumed[k];
    auto reservations = ContainerMigReservations(*all, index, (*devices)[index]);
    auto made = reservations ? mig_->Ensure(*reservations)
                             : Result<std::vector<RealisedMig>>(Error{reservations.error()});
    if (!made) {
      if (Status s = mig_->Release(*realised); !s) HAMI_ERROR("MIG roll-back: {}", s.error());
      return Error{key + ": " + made.error()};
    }
    std::vector<std::string> uuids;
    for (size_t i = 0; i < made->size(); ++i) {
      const protocol::MigAllocation& r = (*reservations)[i];
      for (protocol::MigAllocation& a : *all) {
        if (a.container_index == r.container_index && a.device_index == r.device_index) {
          a.runtime = (*made)[i].identity;
        }
      }
      uuids.push_back((*made)[i].identity.mig_uuid);
      realised->push_back((*made)[i]);
    }
    plan->containers[k] = BuildMigContainerAllocation(uuids, new_cache_id_(), env_);
  }
  return protocol::EncodeMigAllocations(*all);
}

std::vector<std::vector<std::string>> Allocator::Prefer(
    const std::vector<std::vector<std::string>>& available, const std::vector<int32_t>& sizes) {
  std::lock_guard<std::mutex> lock(mu_);
  protocol::PodDevices devices;
  if (auto pod = FindPendingPod(*client_, node_)) {
    auto decoded = protocol::DecodePodDevices(k8s::Annotation(*pod, kToAllocateKey).value_or(""));
    if (decoded) devices = std::move(*decoded);
  }
  return PreferReplicas(devices, available, sizes);
}

}  // namespace hami::deviceplugin
