#include "sim/report.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "draplugin/slices.h"
#include "k8s/object.h"
#include "protocol/mig_allocations.h"
#include "protocol/quantity.h"

namespace hami::sim {
namespace {

constexpr const char* kOurs = "hami-scheduler";

double Ms(SystemTime from, SystemTime to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

LatencyStats Stats(const std::vector<double>& samples) {
  LatencyStats s;
  s.count = samples.size();
  if (samples.empty()) return s;
  s.p50_ms = Percentile(samples, 50);
  s.p90_ms = Percentile(samples, 90);
  s.p99_ms = Percentile(samples, 99);
  s.max_ms = *std::max_element(samples.begin(), samples.end());
  return s;
}

// The state and, when not running, the reason a newcomer should read.
void Classify(const PodObservation& p, const std::string& ours, PodReport* r) {
  if (p.denied) {
    r->state = PodState::kDenied;
    r->reason = "admission webhook denied it: " + p.message;
  } else if (!p.created) {
    r->state = PodState::kFailed;
    r->reason = "not created: " + p.message;
  } else if (p.phase == "Running") {
    r->state = PodState::kRunning;
  } else if (p.phase == "Succeeded" || p.deleted) {
    r->state = PodState::kSucceeded;
    if (p.deleted) r->reason = "deleted after it ran (deleteAfter)";
  } else if (p.phase == "Failed") {
    r->state = PodState::kFailed;
    r->reason = p.message.empty() ? "the kubelet failed it" : p.message;
  } else if (!p.node.empty()) {
    r->state = PodState::kPending;
    r->reason = "bound to " + p.node + ", not running yet (bind-phase " +
                (p.bind_phase.empty() ? "unset" : p.bind_phase) + ")";
  } else if (p.scheduler_name != ours) {
    r->state = PodState::kPending;
    r->reason = "schedulerName " + Quote(p.scheduler_name) + " is not " + ours +
                " (no GPU request?); the simulation schedules only ours";
  } else if (p.attempts > 0) {
    r->state = PodState::kUnschedulable;
    r->reason = p.last_failure.empty() ? "no node fits" : p.last_failure;
  } else {
    r->state = PodState::kPending;
    r->reason = "not scheduled yet";
  }
}

bool HoldsDevices(PodState s) {
  return s != PodState::kSucceeded && s != PodState::kFailed && s != PodState::kDenied;
}

void Count(const PodReport& r, Report* out) {
  switch (r.state) {
    case PodState::kRunning:
      ++out->pods_running;
      break;
    case PodState::kSucceeded:
      ++out->pods_succeeded;
      break;
    case PodState::kFailed:
      ++out->pods_failed;
      break;
    case PodState::kUnschedulable:
      ++out->pods_unschedulable;
      break;
    case PodState::kDenied:
      ++out->pods_denied;
      break;
    case PodState::kPending:
      ++out->pods_pending;
      break;
  }
  if (r.bind_phase == "allocating") ++out->pods_allocating;
}

std::vector<GpuReport> GpuRows(const ReportInput& in) {
  std::vector<GpuReport> rows;
  for (const ExpandedNode& n : in.nodes) {
    for (const deviceplugin::GpuDevice& g : n.gpus) {
      GpuReport r;
      r.node = n.name;
      r.uuid = g.uuid;
      r.model = g.model;
      r.numa = g.numa;
      r.memory_limit_mib =
          static_cast<int64_t>(std::floor(static_cast<double>(g.memory_mib) * in.memory_scaling));
      r.cores_limit = static_cast<int64_t>(std::floor(100.0 * in.core_scaling));
      r.slots_limit = in.split_count;
      if (auto s = in.slots_by_uuid.find(g.uuid); s != in.slots_by_uuid.end()) {
        r.slots_limit = static_cast<int>(s->second);
      }
      if (!g.mig_profiles.empty()) {  // in MIG mode (per GPU: a DRA node may mix)
        r.mode = "mig";
        r.memory_limit_mib = g.memory_mib;
        r.slots_limit = 0;
        for (const auto& p : g.mig_profiles) {
          r.slots_limit = std::max(r.slots_limit, static_cast<int>(p.instance_count));
        }
      }
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

void CheckOvercommit(GpuReport* g) {
  if (g->used_memory_mib > g->memory_limit_mib) {
    g->overcommit.push_back("memory " + std::to_string(g->used_memory_mib) + " > " +
                            std::to_string(g->memory_limit_mib) + " MiB");
  }
  if (g->used_cores > g->cores_limit && g->mode != "mig") {
    g->overcommit.push_back("cores " + std::to_string(g->used_cores) + " > " +
                            std::to_string(g->cores_limit) + " %");
  }
  if (g->used_slots > g->slots_limit) {
    g->overcommit.push_back("pods " + std::to_string(g->used_slots) + " > split count " +
                            std::to_string(g->slots_limit));
  }
}

// Adds the pod's MIG reservations to the GPUs they name (live pods only).
void AccumulateMig(const PodObservation& p, const PodReport& r, std::vector<GpuReport>* gpus,
                   const std::map<std::string, size_t>& by_uuid) {
  if (p.mig_allocations.empty() || !HoldsDevices(r.state)) return;
  auto decoded = protocol::DecodeMigAllocations(p.mig_allocations);
  if (!decoded) return;
  for (const protocol::MigAllocation& a : *decoded) {
    auto it = by_uuid.find(a.gpu_uuid);
    if (it == by_uuid.end()) continue;
    (*gpus)[it->second].mig_instances.push_back(
        {p.ns + "/" + p.name, a.profile, a.placement.start, a.placement.size});
  }
}

// Instances overlapping an earlier one on the same GPU: [start, start+size) ranges intersect.
int CountMigOverlaps(const GpuReport& g) {
  int overlaps = 0;
  for (size_t i = 0; i < g.mig_instances.size(); ++i) {
    const auto& a = g.mig_instances[i];
    for (size_t j = 0; j < i; ++j) {
      const auto& b = g.mig_instances[j];
      if (uint64_t{a.start} < uint64_t{b.start} + b.size &&
          uint64_t{b.start} < uint64_t{a.start} + a.size) {
        ++overlaps;
        break;
      }
    }
  }
  return overlaps;
}

// Adds the pod's allocations to the GPUs they name; returns how many named an unknown GPU.
int Accumulate(const PodObservation& p, PodReport* r, std::vector<GpuReport>* gpus,
               const std::map<std::string, size_t>& by_uuid) {
  if (p.allocated.empty()) return 0;
  Result<protocol::PodDevices> decoded = protocol::DecodePodDevices(p.allocated);
  if (!decoded) return 1;
  int unknown = 0;
  for (size_t c = 0; c < decoded->size(); ++c) {
    for (const protocol::ContainerDevice& d : (*decoded)[c]) {
      r->devices.push_back(PlacedDevice{c, d});
      if (!HoldsDevices(r->state)) continue;
      auto it = by_uuid.find(d.uuid);
      if (it == by_uuid.end() || (!p.node.empty() && (*gpus)[it->second].node != p.node)) {
        ++unknown;
        continue;
      }
      GpuReport& g = (*gpus)[it->second];
      g.used_memory_mib += d.usedmem;
      g.used_cores += d.usedcores;
      ++g.used_slots;
      const std::string key = p.ns + "/" + p.name;
      if (g.pods.empty() || g.pods.back() != key) g.pods.push_back(key);
    }
  }
  return unknown;
}

constexpr int64_t kMiB = 1024 * 1024;

// The MIG profile and placement start of MIG device `device`: the placement of `gpu` (GPU
// `minor` of its node) that hami-dra-plugin publishes under that name (draplugin::MigDeviceName,
// docs/DRA.md "ResourceSlices"); null if none.
const protocol::MigProfile* DraMigProfile(const deviceplugin::GpuDevice& gpu, int minor,
                                          const std::string& device, uint32_t* start) {
  for (const deviceplugin::MigProfileCapacity& c : gpu.mig_profiles) {
    for (const protocol::MigPlacement& p : c.profile.placements) {
      if (draplugin::MigDeviceName(minor, c.profile.name, p.start) != device) continue;
      *start = p.start;
      return &c.profile;
    }
  }
  return nullptr;
}

// The DRA shares onto their GPUs (node + minor = the GPU's index on the node): a share of a
// GPU counts against its memory and cores; a MIG device is one of its instances (checked for
// overlap like device-plugin mode's). Returns how many name no GPU (or MIG device) of the run.
int AccumulateDra(const ReportInput& in, std::vector<GpuReport>* gpus) {
  std::map<std::pair<std::string, int>, std::pair<size_t, const deviceplugin::GpuDevice*>> at;
  size_t row = 0;
  for (const ExpandedNode& n : in.nodes) {
    for (const deviceplugin::GpuDevice& g : n.gpus) {
      at[{n.name, static_cast<int>(g.index)}] = {row++, &g};
    }
  }
  int unknown = 0;
  for (const DraShareObservation& s : in.dra_claims.shares) {
    auto it = at.find({s.node, draplugin::DeviceNameMinor(s.device)});
    if (it == at.end() || it->second.first >= gpus->size()) {
      ++unknown;
      continue;
    }
    GpuReport& g = (*gpus)[it->second.first];
    GpuReport::DraShare share{s.claim, s.device, s.share_id, s.pods, 0, 0};
    if (s.device.find("-mig-") != std::string::npos) {
      uint32_t start = 0;
      const protocol::MigProfile* profile =
          DraMigProfile(*it->second.second, it->first.second, s.device, &start);
      if (profile == nullptr) {
        ++unknown;
        continue;
      }
      share.memory_mib = profile->memory_mb;
      share.cores = profile->core;
      g.used_memory_mib += share.memory_mib;  // (its cores are not a share: rounded up)
      for (const protocol::MigPlacement& p : profile->placements) {
        if (p.start != start) continue;
        g.mig_instances.push_back(
            {s.pods.empty() ? s.claim : Join(s.pods, ","), profile->name, p.start, p.size});
        ++g.used_slots;
        break;
      }
    } else {
      share.memory_mib =
          s.memory_bytes < 0 ? g.memory_limit_mib : (s.memory_bytes + kMiB - 1) / kMiB;
      share.cores = s.cores < 0 ? g.cores_limit : s.cores;
      g.used_memory_mib += share.memory_mib;
      g.used_cores += share.cores;
      ++g.used_slots;
    }
    for (const std::string& pod : s.pods) {
      if (std::find(g.pods.begin(), g.pods.end(), pod) == g.pods.end()) g.pods.push_back(pod);
    }
    g.dra_shares.push_back(std::move(share));
  }
  return unknown;
}

// Each running container with exactly one claim: its CUDA_DEVICE_MEMORY_LIMIT_<i> and
// CUDA_DEVICE_SM_LIMIT_<i> must be what hami-dra-plugin derives from the claim's consumed
// capacity: per GPU the sum of the claim's shares on it (capped at the GPU), in GPU order, and
// no limit at all when the claim holds whole GPUs only.
void CheckDraEnvs(const ReportInput& in, const std::vector<GpuReport>& gpus, Report* out) {
  std::map<std::string, std::map<std::pair<std::string, int>, std::pair<int64_t, int64_t>>>
      per_claim;  // claim -> (node, minor) -> (MiB, cores)
  std::map<std::pair<std::string, int>, const GpuReport*> gpu_at;
  std::map<std::string, int> next;
  for (const GpuReport& g : gpus) gpu_at.emplace(std::make_pair(g.node, next[g.node]++), &g);
  for (const DraShareObservation& s : in.dra_claims.shares) {
    if (s.device.find("-mig-") != std::string::npos) continue;
    const std::pair<std::string, int> key{s.node, draplugin::DeviceNameMinor(s.device)};
    auto g = gpu_at.find(key);
    if (g == gpu_at.end()) continue;
    auto& [mib, cores] = per_claim[s.claim][key];
    mib = std::min(g->second->memory_limit_mib,
                   mib + (s.memory_bytes < 0 ? g->second->memory_limit_mib
                                             : (s.memory_bytes + kMiB - 1) / kMiB));
    cores = std::min<int64_t>(100, cores + (s.cores < 0 ? 100 : s.cores));
  }
  for (const PodObservation& p : in.pods) {
    if (!p.running || p.phase != "Running") continue;
    for (size_t c = 0; c < p.container_claims.size() && c < p.container_envs.size(); ++c) {
      if (p.container_claims[c].size() != 1) continue;
      auto claim = per_claim.find(p.container_claims[c][0]);
      if (claim == per_claim.end()) continue;
      bool whole = true;
      std::map<std::string, std::string> want;
      int i = 0;
      for (const auto& [key, limits] : claim->second) {  // (node, minor) order = CUDA order
        const GpuReport* g = gpu_at.at(key);
        whole = whole && limits.first >= g->memory_limit_mib && limits.second >= 100;
        want["CUDA_DEVICE_MEMORY_LIMIT_" + std::to_string(i)] = std::to_string(limits.first) + "m";
        want["CUDA_DEVICE_SM_LIMIT_" + std::to_string(i)] = std::to_string(limits.second);
        ++i;
      }
      if (whole) want.clear();
      std::map<std::string, std::string> have;
      for (const auto& [k, v] : p.container_envs[c]) {
        if (k.rfind("CUDA_DEVICE_MEMORY_LIMIT_", 0) == 0 ||
            k.rfind("CUDA_DEVICE_SM_LIMIT_", 0) == 0) {
          have[k] = v;
        }
      }
      ++out->dra_env_checked;
      if (have == want) continue;
      ++out->dra_env_mismatches;
      std::vector<std::string> diff;
      for (const auto& [k, v] : want) {
        auto h = have.find(k);
        if (h == have.end() || h->second != v) {
          diff.push_back(k + " = " + (h == have.end() ? "(unset)" : h->second) + ", want " + v);
        }
      }
      for (const auto& [k, v] : have) {
        if (!want.count(k)) diff.push_back(k + " = " + v + ", want (unset)");
      }
      out->dra_env_mismatch.push_back(p.ns + "/" + p.name + " container " + std::to_string(c) +
                                      ": " + Join(diff, "; "));
    }
  }
}

}  // namespace

namespace {

// The value at `path` (object keys) in `obj`, or null when a step is missing.
const nlohmann::json* At(const nlohmann::json& obj, std::initializer_list<const char*> path) {
  const nlohmann::json* cur = &obj;
  for (const char* key : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

}  // namespace

DraObservation ObserveDraClaims(const std::vector<nlohmann::json>& claims,
                                const std::set<std::string>& live_pod_uids) {
  using nlohmann::json;
  DraObservation out;
  for (const json& claim : claims) {
    if (!claim.is_object()) continue;
    ++out.claims_total;
    const std::string key = k8s::FieldString(claim, "metadata.namespace") + "/" +
                            k8s::FieldString(claim, "metadata.name");
    const json* owners = At(claim, {"metadata", "ownerReferences"});
    for (size_t i = 0; owners && owners->is_array() && i < owners->size(); ++i) {
      const json& o = (*owners)[i];
      if (!o.is_object()) continue;
      if (o.value("kind", "") == "Pod" && !live_pod_uids.count(o.value("uid", ""))) {
        out.orphaned.push_back(key);
        break;
      }
    }
    const json* results = At(claim, {"status", "allocation", "devices", "results"});
    if (!results || !results->is_array()) continue;
    ++out.claims_allocated;
    std::vector<std::string> pods;
    if (const json* rf = At(claim, {"status", "reservedFor"}); rf && rf->is_array()) {
      for (const json& r : *rf) {
        if (!r.is_object()) continue;
        pods.push_back(k8s::FieldString(claim, "metadata.namespace") + "/" + r.value("name", ""));
      }
    }
    for (const json& r : *results) {
      if (!r.is_object()) continue;
      DraShareObservation s;
      s.claim = key;
      s.node = r.value("pool", "");
      s.device = r.value("device", "");
      s.request = r.value("request", "");
      s.share_id = r.value("shareID", "");
      s.pods = pods;
      auto quantity = [&](const char* name) -> int64_t {
        auto it = r.find("consumedCapacity");
        if (it == r.end() || !it->is_object() || !it->contains(name) || !(*it)[name].is_string()) {
          return -1;
        }
        auto q = protocol::ParseQuantity((*it)[name].get<std::string>());
        if (!q) return -1;
        return protocol::ExactScaledValue(*q, 0).value_or(-1);
      };
      s.memory_bytes = quantity("memory");
      s.cores = quantity("cores");
      out.shares.push_back(std::move(s));
    }
  }
  return out;
}

const char* PodStateName(PodState state) {
  switch (state) {
    case PodState::kRunning:
      return "Running";
    case PodState::kSucceeded:
      return "Succeeded";
    case PodState::kFailed:
      return "Failed";
    case PodState::kUnschedulable:
      return "Unschedulable";
    case PodState::kDenied:
      return "Denied";
    case PodState::kPending:
      return "Pending";
  }
  return "Pending";
}

Report BuildReport(const ReportInput& in) {
  Report out;
  out.scenario_name = in.scenario_name;
  out.timed_out = in.timed_out;
  out.setup_seconds = in.setup_seconds;
  out.setup_error = in.setup_error;
  out.rbac_enforced = in.rbac_enforced;
  out.forbidden_requests = in.forbidden_requests;
  out.forbidden = in.forbidden;
  out.gpus = GpuRows(in);
  out.measured = in.measured;
  for (GpuReport& g : out.gpus) {
    if (!in.measured) break;
    auto m = in.measured_memory_mib.find(g.uuid);
    g.measured_memory_mib = m == in.measured_memory_mib.end() ? 0 : m->second;
  }
  std::map<std::string, size_t> by_uuid;
  for (size_t i = 0; i < out.gpus.size(); ++i) by_uuid.emplace(out.gpus[i].uuid, i);

  std::vector<double> schedule, bind, e2e;
  for (const PodObservation& p : in.pods) {
    PodReport r;
    r.ns = p.ns;
    r.name = p.name;
    r.workload = p.workload;
    r.node = p.node;
    r.bind_phase = p.bind_phase;
    r.attempts = p.attempts;
    for (const auto& env : in.dra ? p.container_envs : decltype(p.container_envs){}) {
      std::map<std::string, std::string> limits;
      for (const auto& [k, v] : env) {
        if (k.rfind("CUDA_DEVICE_MEMORY_LIMIT", 0) == 0 ||
            k.rfind("CUDA_DEVICE_SM_LIMIT", 0) == 0 || k == "NVIDIA_VISIBLE_DEVICES") {
          limits[k] = v;
        }
      }
      r.limits_env.push_back(std::move(limits));
    }
    Classify(p, in.dra ? "default-scheduler" : kOurs, &r);
    if (p.deleted) ++out.pods_deleted;
    out.unknown_device_allocations += Accumulate(p, &r, &out.gpus, by_uuid);
    AccumulateMig(p, r, &out.gpus, by_uuid);
    if (p.created && p.bound) r.schedule_ms = Ms(p.created_at, p.bound_at);
    if (p.bound && p.running) r.bind_ms = Ms(p.bound_at, p.running_at);
    if (p.created && p.running) r.e2e_ms = Ms(p.created_at, p.running_at);
    if (r.schedule_ms) schedule.push_back(*r.schedule_ms);
    if (r.bind_ms) bind.push_back(*r.bind_ms);
    if (r.e2e_ms) e2e.push_back(*r.e2e_ms);
    Count(r, &out);
    if (in.scheduler_counted && r.state == PodState::kRunning && !r.devices.empty()) {
      auto counted = in.scheduler_counted->find(p.ns + "/" + p.name);
      bool lost = counted == in.scheduler_counted->end();
      for (size_t d = 0; !lost && d < r.devices.size(); ++d) {
        lost = counted->second.count(r.devices[d].device.uuid) == 0;
      }
      if (lost) out.lost.push_back(p.ns + "/" + p.name);
    }
    out.pods.push_back(std::move(r));
  }
  out.lost_allocations = in.scheduler_counted ? static_cast<int>(out.lost.size()) : -1;
  out.scheduler_restarts = in.scheduler_restarts;
  out.plugin_restarts = in.plugin_restarts;
  out.leader_changes = in.leader_changes;
  out.failover_seconds_max = in.failover_seconds_max;
  out.faults_injected = in.faults_injected;
  out.pods_recreated = in.pods_recreated;
  out.pods_total = static_cast<int>(in.pods.size());
  if (in.dra) {
    out.dra = true;
    out.unknown_device_allocations += AccumulateDra(in, &out.gpus);
    out.dra_claims_total = in.dra_claims.claims_total;
    out.dra_claims_allocated = in.dra_claims.claims_allocated;
    out.dra_orphaned = in.dra_claims.orphaned;
    out.dra_claims_orphaned = static_cast<int>(out.dra_orphaned.size());
    CheckDraEnvs(in, out.gpus, &out);
  }
  for (GpuReport& g : out.gpus) {
    CheckOvercommit(&g);
    if (!g.overcommit.empty()) ++out.overcommitted_devices;
    out.overlapping_mig_placements += CountMigOverlaps(g);
  }
  out.schedule = Stats(schedule);
  out.bind = Stats(bind);
  out.e2e = Stats(e2e);
  out.filter = Stats(in.filter_latencies_ms);
  out.wall_seconds = std::max(0.0, Ms(in.first_created, in.settled_at) / 1000.0);
  if (out.wall_seconds > 0) {
    out.pods_per_second = (out.pods_running + out.pods_succeeded) / out.wall_seconds;
  }
  return out;
}

std::string ShortUuid(const std::string& uuid) {
  size_t start = uuid.rfind("GPU-", 0) == 0 ? 4 : 0;
  size_t dash = uuid.find('-', start);
  return dash == std::string::npos ? uuid : uuid.substr(0, dash);
}

std::string UsageBar(int64_t used, int64_t limit, int width) {
  std::string bar = "[";
  int filled = width;
  if (limit > 0 && used < limit) {
    filled = static_cast<int>(std::llround(static_cast<double>(used) * width / limit));
    if (used > 0 && filled == 0) filled = 1;  // something is used: show it
  }
  if (used <= 0) filled = 0;
  const char mark = used > limit ? '!' : '#';
  bar.append(static_cast<size_t>(filled), mark);
  bar.append(static_cast<size_t>(width - filled), '.');
  bar += "]";
  return bar;
}

nlohmann::json ReportToJson(const Report& r) {
  using nlohmann::json;
  auto stats = [](const LatencyStats& s) {
    return json{{"count", s.count},
                {"p50_ms", s.p50_ms},
                {"p90_ms", s.p90_ms},
                {"p99_ms", s.p99_ms},
                {"max_ms", s.max_ms}};
  };
  json j = {{"scenario", r.scenario_name},
            {"pods_total", r.pods_total},
            {"pods_running", r.pods_running},
            {"pods_succeeded", r.pods_succeeded},
            {"pods_deleted", r.pods_deleted},
            {"pods_failed", r.pods_failed},
            {"pods_unschedulable", r.pods_unschedulable},
            {"pods_denied", r.pods_denied},
            {"pods_pending", r.pods_pending},
            {"pods_allocating", r.pods_allocating},
            {"lost_allocations", r.lost_allocations},
            {"scheduler_restarts", r.scheduler_restarts},
            {"plugin_restarts", r.plugin_restarts},
            {"leader_changes", r.leader_changes},
            {"failover_seconds_max", r.failover_seconds_max},
            {"pods_recreated", r.pods_recreated},
            {"overcommitted_devices", r.overcommitted_devices},
            {"unknown_device_allocations", r.unknown_device_allocations},
            {"overlapping_mig_placements", r.overlapping_mig_placements},
            {"wall_seconds", r.wall_seconds},
            {"setup_seconds", r.setup_seconds},
            {"pods_per_second", r.pods_per_second},
            {"timed_out", r.timed_out},
            {"schedule_latency_p50_ms", r.schedule.p50_ms},
            {"schedule_latency_p99_ms", r.schedule.p99_ms},
            {"bind_latency_p50_ms", r.bind.p50_ms},
            {"bind_latency_p99_ms", r.bind.p99_ms},
            {"filter_latency_p50_ms", r.filter.p50_ms},
            {"filter_latency_p99_ms", r.filter.p99_ms},
            {"latency",
             {{"schedule", stats(r.schedule)},
              {"bind", stats(r.bind)},
              {"e2e", stats(r.e2e)},
              {"filter", stats(r.filter)}}},
            {"setup_error", r.setup_error},
            {"rbac_enforced", r.rbac_enforced},
            {"forbidden_requests", r.forbidden_requests}};
  json forbidden = json::array();
  for (const rbac::ForbiddenRequest& f : r.forbidden) {
    forbidden.push_back({{"user", f.user},
                         {"verb", f.verb},
                         {"resource", f.resource},
                         {"subresource", f.subresource},
                         {"namespace", f.ns}});
  }
  j["forbidden"] = std::move(forbidden);
  j["faults_injected"] = r.faults_injected;
  j["lost"] = r.lost;
  json pods = json::array();
  for (const PodReport& p : r.pods) {
    json devs = json::array();
    for (const PlacedDevice& d : p.devices) {
      devs.push_back({{"container", d.container},
                      {"uuid", d.device.uuid},
                      {"memory_mib", d.device.usedmem},
                      {"cores", d.device.usedcores}});
    }
    json pj = {{"namespace", p.ns},
               {"name", p.name},
               {"workload", p.workload},
               {"state", PodStateName(p.state)},
               {"node", p.node},
               {"reason", p.reason},
               {"bind_phase", p.bind_phase},
               {"attempts", p.attempts},
               {"devices", devs}};
    if (!p.limits_env.empty()) pj["limits_env"] = p.limits_env;
    if (p.schedule_ms) pj["schedule_ms"] = *p.schedule_ms;
    if (p.bind_ms) pj["bind_ms"] = *p.bind_ms;
    if (p.e2e_ms) pj["e2e_ms"] = *p.e2e_ms;
    pods.push_back(std::move(pj));
  }
  json gpus = json::array();
  for (const GpuReport& g : r.gpus) {
    gpus.push_back({{"node", g.node},
                    {"uuid", g.uuid},
                    {"model", g.model},
                    {"numa", g.numa},
                    {"memory_limit_mib", g.memory_limit_mib},
                    {"cores_limit", g.cores_limit},
                    {"slots_limit", g.slots_limit},
                    {"used_memory_mib", g.used_memory_mib},
                    {"used_cores", g.used_cores},
                    {"used_slots", g.used_slots},
                    {"pods", g.pods},
                    {"overcommitted", !g.overcommit.empty()},
                    {"overcommit", g.overcommit}});
    if (g.measured_memory_mib) gpus.back()["measured_memory_mib"] = *g.measured_memory_mib;
    if (g.mode == "mig") {
      json instances = json::array();
      for (const auto& m : g.mig_instances) {
        instances.push_back(
            {{"pod", m.pod}, {"profile", m.profile}, {"start", m.start}, {"size", m.size}});
      }
      gpus.back()["mode"] = g.mode;
      gpus.back()["mig_instances"] = std::move(instances);
    }
  }
  j["pods"] = std::move(pods);
  j["gpus"] = std::move(gpus);
  if (r.dra) {
    j["dra"] = true;
    j["dra_claims_total"] = r.dra_claims_total;
    j["dra_claims_allocated"] = r.dra_claims_allocated;
    j["dra_claims_orphaned"] = r.dra_claims_orphaned;
    j["dra_orphaned"] = r.dra_orphaned;
    j["dra_env_checked"] = r.dra_env_checked;
    j["dra_env_mismatches"] = r.dra_env_mismatches;
    j["dra_env_mismatch"] = r.dra_env_mismatch;
    for (size_t i = 0; i < r.gpus.size(); ++i) {
      json shares = json::array();
      for (const GpuReport::DraShare& s : r.gpus[i].dra_shares) {
        shares.push_back({{"claim", s.claim},
                          {"device", s.device},
                          {"share_id", s.share_id},
                          {"pods", s.pods},
                          {"memory_mib", s.memory_mib},
                          {"cores", s.cores}});
      }
      j["gpus"][i]["dra_shares"] = std::move(shares);
    }
  }
  return j;
}

namespace {

// Rows of the text tables are capped so a 10,000-pod run stays readable; --report has it all.
constexpr size_t kMaxRows = 40;

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

// Left-aligned columns, two spaces apart.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = "  ";
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string More(size_t total) {
  if (total <= kMaxRows) return "";
  return "  ... and " + std::to_string(total - kMaxRows) + " more (see --report FILE)\n";
}

class TextWriter {
 public:
  TextWriter(const Report& r, bool color)
      : r_(r), bold_(color ? "\033[1m" : ""), off_(color ? "\033[0m" : "") {
    for (const GpuReport& g : r.gpus) model_[g.uuid] = g.model;
  }

  std::string Render() {
    Heading("hami-sim run" + (r_.scenario_name.empty() ? "" : ": " + r_.scenario_name));
    Placements();
    Usage();
    Pending();
    Summary();
    Rbac();
    return out_.str();
  }

 private:
  void Heading(const std::string& title) {
    out_ << "\n" << bold_ << "== " << title << off_ << "\n";
  }

  void Placements() {
    Heading("Placements");
    if (r_.dra) return DraPlacements();
    out_ << "Which GPU each container got: the node, the GPU (short UUID), its model, the memory\n"
            "slice (MiB) and the share of the GPU's cores (%; 0 = no core limit).\n";
    std::vector<std::vector<std::string>> rows = {{"POD", "NODE", "GPU", "MODEL", "MEM", "CORES"}};
    size_t total = 0;
    for (const PodReport& p : r_.pods) {
      if (p.state != PodState::kRunning && p.state != PodState::kSucceeded) continue;
      for (const PlacedDevice& d : p.devices) {
        if (++total > kMaxRows) continue;
        auto m = model_.find(d.device.uuid);
        rows.push_back({p.ns == "default" ? p.name : p.ns + "/" + p.name, p.node,
                        ShortUuid(d.device.uuid), m == model_.end() ? "?" : m->second,
                        std::to_string(d.device.usedmem), std::to_string(d.device.usedcores)});
      }
    }
    if (total == 0) {
      out_ << "  (no pod is running)\n";
      return;
    }
    out_ << Table(rows) << More(total);
  }

  // DRA mode: per pod, the shares its claims hold (a claim shared by pods is listed for each).
  void DraPlacements() {
    out_ << "Which GPU share each pod's claims got: the node, the GPU (short UUID), the device\n"
            "(hami-gpu-<minor>, or a MIG device), the memory (MiB) and cores (%) the claim\n"
            "consumes there, and the claim.\n";
    std::vector<std::vector<std::string>> rows = {
        {"POD", "NODE", "GPU", "DEVICE", "MEM", "CORES", "CLAIM"}};
    size_t total = 0;
    for (const GpuReport& g : r_.gpus) {
      for (const GpuReport::DraShare& sh : g.dra_shares) {
        for (const std::string& pod : sh.pods) {
          if (++total > kMaxRows) continue;
          const std::string name = pod.rfind("default/", 0) == 0 ? pod.substr(8) : pod;
          rows.push_back({name, g.node, ShortUuid(g.uuid), sh.device, std::to_string(sh.memory_mib),
                          std::to_string(sh.cores), sh.claim});
        }
      }
    }
    if (total == 0) {
      out_ << "  (no claim is allocated)\n";
      return;
    }
    out_ << Table(rows) << More(total);
  }

  void Usage() {
    Heading("GPU usage");
    out_
        << "What is handed out on each GPU: memory, cores, and pods sharing it (at most the split\n"
           "count). '!' marks an over-committed GPU; there should never be one.\n";
    if (r_.measured) {
      out_ << "Memory reads used (what the node's hami-vgpu-monitor measured in the containers'\n"
              "regions) / allocated / total.\n";
    }
    std::vector<std::vector<std::string>> rows;
    size_t total = 0;
    for (const GpuReport& g : r_.gpus) {
      // Big runs: show the GPUs in use first, idle ones only in a small cluster.
      if (g.used_slots == 0 && r_.gpus.size() > kMaxRows) continue;
      if (++total > kMaxRows) continue;
      rows.push_back(
          {g.node, ShortUuid(g.uuid), g.model,
           "mem " + UsageBar(g.used_memory_mib, g.memory_limit_mib, 20) + " " +
               (g.measured_memory_mib ? std::to_string(*g.measured_memory_mib) + " used / "
                                      : std::string()) +
               std::to_string(g.used_memory_mib) + "/" + std::to_string(g.memory_limit_mib) +
               " MiB",
           "cores " + UsageBar(g.used_cores, g.cores_limit, 10) + " " +
               std::to_string(g.used_cores) + "/" + std::to_string(g.cores_limit) + "%",
           "pods " + std::to_string(g.used_slots) + "/" + std::to_string(g.slots_limit) +
               (g.overcommit.empty() ? "" : "  OVER-COMMITTED: " + Join(g.overcommit, ", "))});
    }
    out_ << Table(rows) << More(total);
    MigInstances();
    DraShares();
  }

  // DRA mode: each GPU's shares, the claim and pods holding each.
  void DraShares() {
    if (!r_.dra) return;
    std::vector<std::vector<std::string>> rows;
    size_t total = 0;
    for (const GpuReport& g : r_.gpus) {
      for (const GpuReport::DraShare& s : g.dra_shares) {
        if (++total > kMaxRows) continue;
        rows.push_back({g.node, s.device, s.claim, std::to_string(s.memory_mib) + " MiB",
                        std::to_string(s.cores) + "%", Join(s.pods, ",")});
      }
    }
    out_ << "DRA shares (device, the claim, what it consumes, the pods it is reserved for): "
         << r_.dra_claims_allocated << " of " << r_.dra_claims_total << " claims allocated, "
         << r_.dra_claims_orphaned
         << " orphaned (claims whose pod is gone; there should never be one), "
         << r_.dra_env_mismatches << " of " << r_.dra_env_checked
         << " containers with limits other than their claim's.\n";
    if (total == 0) {
      out_ << "  (no share allocated)\n";
      return;
    }
    out_ << Table(rows) << More(total);
    for (const std::string& m : r_.dra_env_mismatch) out_ << "  limits differ: " << m << "\n";
  }

  // The instances of each GPU in MIG mode: profile@start+size and the pod holding it.
  void MigInstances() {
    std::vector<std::vector<std::string>> rows;
    size_t total = 0;
    for (const GpuReport& g : r_.gpus) {
      if (g.mode != "mig" || ++total > kMaxRows) continue;
      std::vector<std::string> items;
      for (const auto& m : g.mig_instances) {
        items.push_back(m.profile + "@" + std::to_string(m.start) + "+" + std::to_string(m.size) +
                        " " + m.pod);
      }
      rows.push_back(
          {g.node, ShortUuid(g.uuid), items.empty() ? "(no instance)" : Join(items, ", ")});
    }
    if (total == 0) return;
    out_ << "MIG instances per GPU (profile@first slice+slices, and the pod): "
         << r_.overlapping_mig_placements << " overlapping (there should never be one).\n"
         << Table(rows) << More(total);
  }

  void Pending() {
    Heading("Pods not running");
    out_ << "Pods that did not get a GPU, and the reason the scheduler or the webhook gave.\n";
    std::vector<std::vector<std::string>> rows;
    size_t total = 0;
    for (const PodReport& p : r_.pods) {
      if (p.state == PodState::kRunning || p.state == PodState::kSucceeded) continue;
      if (++total > kMaxRows) continue;
      rows.push_back(
          {p.ns == "default" ? p.name : p.ns + "/" + p.name, PodStateName(p.state), p.reason});
    }
    if (total == 0) {
      out_ << "  (none: every pod is running or finished)\n";
      return;
    }
    out_ << Table(rows) << More(total);
  }

  void Summary() {
    Heading("Summary");
    out_ << "Counts, over-commit check, throughput and latency. schedule = created -> bound,\n"
            "bind = bound -> Running (the device plugin's Allocate; in DRA mode the DRA plugin's\n"
            "NodePrepareResources), e2e = created -> Running, filter = one POST /filter round\n"
            "trip as the kube-scheduler loop saw it, every attempt (in DRA mode: one allocation\n"
            "pass over the nodes).\n";
    out_ << "  pods: " << r_.pods_total << " total, " << r_.pods_running << " running, "
         << r_.pods_succeeded << " succeeded"
         << (r_.pods_deleted ? " (" + std::to_string(r_.pods_deleted) + " deleted after)" : "")
         << ", " << r_.pods_unschedulable << " unschedulable, " << r_.pods_denied << " denied, "
         << r_.pods_failed << " failed, " << r_.pods_pending << " pending (" << r_.pods_allocating
         << " left in bind-phase allocating)\n";
    out_ << "  over-committed GPUs: " << r_.overcommitted_devices
         << (r_.unknown_device_allocations ? "  (allocations on unknown GPUs: " +
                                                 std::to_string(r_.unknown_device_allocations) + ")"
                                           : "")
         << "\n";
    if (!r_.faults_injected.empty()) {
      out_ << "  faults:";
      for (const auto& [name, n] : r_.faults_injected) out_ << " " << name << " x" << n;
      out_ << "\n  lost allocations: "
           << (r_.lost_allocations < 0 ? std::string("unknown (no scheduler served)")
                                       : std::to_string(r_.lost_allocations))
           << ", scheduler restarts: " << r_.scheduler_restarts
           << ", plugin restarts: " << r_.plugin_restarts
           << ", leader changes: " << r_.leader_changes
           << ", longest failover: " << Fixed(r_.failover_seconds_max, 2)
           << " s, pods re-created: " << r_.pods_recreated << "\n";
    }
    out_ << "  wall time: " << Fixed(r_.wall_seconds, 2) << " s (setup "
         << Fixed(r_.setup_seconds, 2) << " s before it), " << Fixed(r_.pods_per_second, 1)
         << " pods/s" << (r_.timed_out ? "  TIMED OUT" : "") << "\n";
    if (!r_.setup_error.empty()) out_ << "  SETUP FAILED: " << r_.setup_error << "\n";
    std::vector<std::vector<std::string>> rows = {{"latency (ms)", "p50", "p90", "p99", "max"}};
    for (const auto& [name, s] :
         {std::pair<const char*, const LatencyStats&>{"schedule", r_.schedule},
          {"bind", r_.bind},
          {"e2e", r_.e2e},
          {"filter", r_.filter}}) {
      rows.push_back(
          {name, Fixed(s.p50_ms, 1), Fixed(s.p90_ms, 1), Fixed(s.p99_ms, 1), Fixed(s.max_ms, 1)});
    }
    out_ << Table(rows);
  }

  void Rbac() {
    if (!r_.rbac_enforced) return;
    Heading("RBAC");
    out_ << "Each component ran with its ServiceAccount's token from --manifests; the API server\n"
            "answered what its rules do not allow with 403 Forbidden.\n";
    out_ << "  forbidden requests: " << r_.forbidden_requests << "\n";
    if (r_.forbidden.empty()) return;
    std::vector<std::vector<std::string>> rows = {
        {"user", "verb", "resource", "subresource", "namespace"}};
    for (const rbac::ForbiddenRequest& f : r_.forbidden) {
      rows.push_back({f.user, f.verb, f.resource, f.subresource.empty() ? "-" : f.subresource,
                      f.ns.empty() ? "(cluster)" : f.ns});
    }
    out_ << Table(rows);
  }

  const Report& r_;
  const char* bold_;
  const char* off_;
  std::map<std::string, std::string> model_;
  std::ostringstream out_;
};

}  // namespace

std::string RenderText(const Report& report, bool color) {
  return TextWriter(report, color).Render();
}

}  // namespace hami::sim
