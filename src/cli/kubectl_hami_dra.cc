#include "cli/kubectl_hami_dra.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "common/strings.h"
#include "protocol/quantity.h"

namespace hami::cli {
namespace {

using nlohmann::json;

const json* Field(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string String(const json& j, std::string_view key) {
  const json* f = Field(j, key);
  return f != nullptr && f->is_string() ? f->get<std::string>() : "";
}

const json& Array(const json& j, std::string_view key) {
  static const json kEmpty = json::array();
  const json* f = Field(j, key);
  return f != nullptr && f->is_array() ? *f : kEmpty;
}

// attributes.<name>.string, or .int as text.
std::string Attribute(const json& device, std::string_view name) {
  const json* attrs = Field(device, "attributes");
  const json* a = attrs != nullptr ? Field(*attrs, name) : nullptr;
  if (a == nullptr) return "";
  if (const json* s = Field(*a, "string"); s != nullptr && s->is_string()) {
    return s->get<std::string>();
  }
  if (const json* i = Field(*a, "int"); i != nullptr && i->is_number_integer()) {
    return std::to_string(i->get<int64_t>());
  }
  return "";
}

// A device's capacity `name`.value in units of 2^shift; 0 when absent or unreadable.
int64_t Capacity(const json& device, std::string_view name, int shift) {
  const json* capacity = Field(device, "capacity");
  const json* c = capacity != nullptr ? Field(*capacity, name) : nullptr;
  const json* v = c != nullptr ? Field(*c, "value") : nullptr;
  return v != nullptr ? QuantityCeil(*v, shift).value_or(0) : 0;
}

// The device plugin's rule for a GPU's type (deviceplugin/register.cc).
std::string GpuType(const std::string& product) {
  if (product.starts_with("NVIDIA")) return product;
  return "NVIDIA-" + product;
}

bool Tainted(const json& device) {
  for (const json& t : Array(device, "taints")) {
    const std::string effect = String(t, "effect");
    if (effect == "NoSchedule" || effect == "NoExecute") return true;
  }
  return false;
}

// Where one device of a pool is: its node and GPU, and its whole capacity.
struct DeviceAt {
  std::string node, gpu_key, uuid;
  int64_t memory = 0, cores = 0;
};

struct Pool {
  int64_t generation = -1;
  std::vector<const json*> slices;
};

int64_t Generation(const json& pool) {
  const json* g = Field(pool, "generation");
  return g != nullptr && g->is_number_integer() ? g->get<int64_t>() : 0;
}

bool RequestsOurClass(const json& claim) {
  const json* spec = Field(claim, "spec");
  const json* devices = spec != nullptr ? Field(*spec, "devices") : nullptr;
  if (devices == nullptr) return false;
  for (const json& r : Array(*devices, "requests")) {
    if (const json* exactly = Field(r, "exactly");
        exactly != nullptr && String(*exactly, "deviceClassName") == kDraDriver) {
      return true;
    }
    for (const json& sub : Array(r, "firstAvailable")) {
      if (String(sub, "deviceClassName") == kDraDriver) return true;
    }
  }
  return false;
}

}  // namespace

std::optional<int64_t> QuantityCeil(const json& value, int shift) {
  if (!value.is_string()) return std::nullopt;
  auto q = protocol::ParseQuantity(value.get<std::string>());
  if (!q.ok()) return std::nullopt;
  auto milli = protocol::ExactScaledValue(q.value(), -3);
  if (!milli || *milli < 0) return std::nullopt;
  const int64_t unit = int64_t{1000} << shift;
  return *milli / unit + (*milli % unit != 0 ? 1 : 0);
}

DraView ReadDra(const DraObjects& objects) {
  DraView view;
  // Our driver's pools, each at its highest generation.
  std::map<std::string, Pool> pools;
  for (const json& slice : objects.slices) {
    const json* spec = Field(slice, "spec");
    if (spec == nullptr || String(*spec, "driver") != kDraDriver) continue;
    const json* pool = Field(*spec, "pool");
    if (pool == nullptr) continue;
    Pool& p = pools[String(*pool, "name")];
    const int64_t generation = Generation(*pool);
    if (generation > p.generation) {
      p.generation = generation;
      p.slices.clear();
    }
    if (generation == p.generation) p.slices.push_back(&slice);
  }
  std::map<std::string, std::string> pool_node;                     // pool name -> node
  std::map<std::pair<std::string, std::string>, DeviceAt> devices;  // (pool, device)
  std::map<std::string, std::map<std::string, DraGpu>> gpus;        // node -> key -> GPU
  for (const auto& [pool_name, pool] : pools) {
    for (const json* slice : pool.slices) {
      const json& spec = (*slice)["spec"];
      const std::string node = String(spec, "nodeName");
      if (node.empty()) continue;  // our plugin's pools are node-local
      pool_node[pool_name] = node;
      for (const json& d : Array(spec, "devices")) {
        const std::string name = String(d, "name");
        if (name.empty()) continue;
        const std::string uuid = Attribute(d, "uuid");
        const std::string minor_text = Attribute(d, "minor");
        int64_t minor = 0;
        try {
          minor = minor_text.empty() ? 0 : std::stoll(minor_text);
        } catch (...) {
          minor = 0;
        }
        const std::string key = !uuid.empty() ? uuid : "minor:" + std::to_string(minor);
        DeviceAt at{node, key, uuid, Capacity(d, "memory", 20), Capacity(d, "cores", 0)};
        devices[{pool_name, name}] = at;
        auto [it, fresh] = gpus[node].try_emplace(key);
        DraGpu& gpu = it->second;
        if (fresh) {
          gpu.minor = minor;
          gpu.uuid = uuid;
          gpu.type = GpuType(Attribute(d, "productName"));
          gpu.mode = "hami-core";
        }
        const bool mig = Attribute(d, "type") == "hami-mig" || Field(d, "consumesCounters");
        if (mig) gpu.mode = "mig";
        if (Tainted(d)) gpu.health = false;
        gpu.memory = std::max(gpu.memory, at.memory);
        gpu.cores = std::max(gpu.cores, at.cores);
      }
    }
  }

  for (const json& obj : objects.claims) {
    DraClaim claim;
    const json* meta = Field(obj, "metadata");
    if (meta == nullptr) continue;
    claim.ns = String(*meta, "namespace");
    claim.name = String(*meta, "name");
    claim.uid = String(*meta, "uid");
    const std::string key = claim.ns + "/" + claim.name;
    for (const json& ref : Array(*meta, "ownerReferences")) {
      const json* controller = Field(ref, "controller");
      if (controller != nullptr && controller->is_boolean() && controller->get<bool>()) {
        claim.owner_uid = String(ref, "uid");
      }
    }
    if (const json* annotations = Field(*meta, "annotations")) {
      claim.pod_claim_name = String(*annotations, "resource.kubernetes.io/pod-claim-name");
    }
    claim.ours = RequestsOurClass(obj);
    const json* status = Field(obj, "status");
    const json* allocation = status != nullptr ? Field(*status, "allocation") : nullptr;
    claim.allocated = allocation != nullptr && allocation->is_object();
    if (status != nullptr) {
      for (const json& r : Array(*status, "reservedFor")) {
        if (String(r, "resource") != "pods" || !String(r, "apiGroup").empty()) continue;
        if (!String(r, "name").empty()) claim.pods.push_back(claim.ns + "/" + String(r, "name"));
      }
    }
    const json* alloc_devices = allocation != nullptr ? Field(*allocation, "devices") : nullptr;
    const json& results =
        alloc_devices != nullptr ? Array(*alloc_devices, "results") : Array(json(), "results");
    for (size_t i = 0; i < results.size(); ++i) {
      const json& r = results[i];
      if (String(r, "driver") != kDraDriver) continue;
      claim.ours = true;
      DraShare share;
      share.claim = key;
      share.request = String(r, "request");
      share.device = String(r, "device");
      share.share_id = String(r, "shareID");
      share.pods = claim.pods;
      const std::string pool = String(r, "pool");
      auto node = pool_node.find(pool);
      share.node = node != pool_node.end() ? node->second : pool;
      auto at = devices.find({pool, share.device});
      if (at != devices.end()) {
        share.uuid = at->second.uuid;
        share.memory = at->second.memory;
        share.cores = at->second.cores;
      }
      const std::string path =
          "resourceclaim " + key + ": status.allocation.devices.results[" + std::to_string(i) + "]";
      if (const json* consumed = Field(r, "consumedCapacity")) {
        for (auto [cap, shift, out] :
             {std::tuple{"memory", 20, &share.memory}, std::tuple{"cores", 0, &share.cores}}) {
          const json* v = Field(*consumed, cap);
          if (v == nullptr) continue;
          if (auto value = QuantityCeil(*v, shift)) {
            *out = *value;
          } else {
            view.warnings.push_back(path + ".consumedCapacity." + cap + ": not a quantity: " +
                                    Quote(v->is_string() ? v->get<std::string>() : v->dump()));
          }
        }
      }
      if (at != devices.end()) {
        gpus[at->second.node][at->second.gpu_key].shares.push_back(share);
      } else {
        view.warnings.push_back(path + ": device " + Quote(share.device) + " of pool " +
                                Quote(pool) + " is in no ResourceSlice");
      }
      claim.shares.push_back(std::move(share));
    }
    view.claims[key] = std::move(claim);
  }

  for (auto& [node, by_key] : gpus) {
    std::vector<DraGpu>& out = view.gpus[node];
    for (auto& [key, gpu] : by_key) {
      std::sort(gpu.shares.begin(), gpu.shares.end(), [](const DraShare& a, const DraShare& b) {
        return std::tie(a.claim, a.request, a.device, a.share_id) <
               std::tie(b.claim, b.request, b.device, b.share_id);
      });
      out.push_back(std::move(gpu));
    }
    std::sort(out.begin(), out.end(),
              [](const DraGpu& a, const DraGpu& b) { return a.minor < b.minor; });
  }
  return view;
}

std::vector<PodClaim> PodClaims(const json& pod, const DraView& dra) {
  std::vector<PodClaim> out;
  const json* meta = Field(pod, "metadata");
  const json* spec = Field(pod, "spec");
  if (meta == nullptr || spec == nullptr) return out;
  const std::string ns = String(*meta, "namespace");
  const std::string uid = String(*meta, "uid");
  const json* status = Field(pod, "status");
  for (const json& entry : Array(*spec, "resourceClaims")) {
    PodClaim c;
    c.name = String(entry, "name");
    if (c.name.empty()) continue;
    if (std::string direct = String(entry, "resourceClaimName"); !direct.empty()) {
      c.claim = direct;
    } else if (status != nullptr) {
      for (const json& s : Array(*status, "resourceClaimStatuses")) {
        if (String(s, "name") == c.name && !String(s, "resourceClaimName").empty()) {
          c.claim = String(s, "resourceClaimName");
        }
      }
    }
    if (!c.claim && !uid.empty()) {
      for (const auto& [key, claim] : dra.claims) {
        if (claim.ns == ns && claim.owner_uid == uid && claim.pod_claim_name == c.name) {
          c.claim = claim.name;
        }
      }
    }
    if (c.claim) {
      auto it = dra.claims.find(ns + "/" + *c.claim);
      if (it != dra.claims.end()) c.found = &it->second;
    }
    for (const char* kind : {"initContainers", "containers"}) {
      for (const json& ctr : Array(*spec, kind)) {
        const json* resources = Field(ctr, "resources");
        if (resources == nullptr) continue;
        for (const json& ref : Array(*resources, "claims")) {
          if (String(ref, "name") == c.name) {
            c.containers.push_back(String(ctr, "name"));
            break;
          }
        }
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

bool IsDraPod(const json& pod, const std::vector<PodClaim>& claims) {
  for (const PodClaim& c : claims) {
    if (c.found != nullptr && c.found->ours) return true;
  }
  const json* meta = Field(pod, "metadata");
  const json* labels = meta != nullptr ? Field(*meta, "labels") : nullptr;
  return labels != nullptr && String(*labels, "hami.io/dra") == "true";
}

}  // namespace hami::cli
