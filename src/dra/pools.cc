#include "dra/pools.h"

#include <algorithm>
#include <cstdlib>

namespace hami::dra {
namespace {

using Json = nlohmann::json;

std::string Str(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

bool Bool(const Json& obj, const char* key) {
  if (!obj.is_object()) return false;
  const auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

std::string NodeName(const Json& node) {
  const Json* meta = node.contains("metadata") ? &node["metadata"] : nullptr;
  return meta != nullptr ? Str(*meta, "name") : "";
}

std::vector<std::string> Values(const Json& req) {
  std::vector<std::string> out;
  const auto it = req.find("values");
  if (it == req.end() || !it->is_array()) return out;
  for (const Json& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// One requirement (key, operator, values) against a value that is present or not.
bool RequirementMatches(const Json& req, const std::string* value) {
  const std::string op = Str(req, "operator");
  const std::vector<std::string> values = Values(req);
  const bool listed =
      value != nullptr && std::find(values.begin(), values.end(), *value) != values.end();
  if (op == "In") return listed;
  if (op == "NotIn") return !listed;
  if (op == "Exists") return value != nullptr;
  if (op == "DoesNotExist") return value == nullptr;
  if (op == "Gt" || op == "Lt") {
    if (value == nullptr || values.size() != 1) return false;
    char* end = nullptr;
    const long long have = std::strtoll(value->c_str(), &end, 10);
    if (end == value->c_str() || *end != '\0') return false;
    const long long bound = std::strtoll(values[0].c_str(), &end, 10);
    if (end == values[0].c_str() || *end != '\0') return false;
    return op == "Gt" ? have > bound : have < bound;
  }
  return false;
}

bool TermMatches(const Json& term, const Json& node) {
  if (!term.is_object()) return false;
  const Json labels = node.value("/metadata/labels"_json_pointer, Json::object());
  bool any = false;
  if (const auto it = term.find("matchExpressions"); it != term.end() && it->is_array()) {
    for (const Json& req : *it) {
      any = true;
      const std::string key = Str(req, "key");
      std::string value;
      const bool has = labels.is_object() && labels.contains(key) && labels[key].is_string();
      if (has) value = labels[key].get<std::string>();
      if (!RequirementMatches(req, has ? &value : nullptr)) return false;
    }
  }
  if (const auto it = term.find("matchFields"); it != term.end() && it->is_array()) {
    for (const Json& req : *it) {
      any = true;
      if (Str(req, "key") != "metadata.name") return false;
      const std::string name = NodeName(node);
      if (!RequirementMatches(req, &name)) return false;
    }
  }
  return any;  // an empty term matches no node
}

// Where the owner of these fields (a slice's spec, or a device with perDeviceNodeSelection) may
// be used; `on` whether that includes `node`.
Locality LocalityOf(const Json& owner, const Json& node, bool* on) {
  Locality l;
  const std::string node_name = Str(owner, "nodeName");
  if (!node_name.empty()) {
    l.kind = Locality::Kind::kNode;
    *on = node_name == NodeName(node);
  } else if (Bool(owner, "allNodes")) {
    l.kind = Locality::Kind::kAll;
    *on = true;
  } else if (owner.contains("nodeSelector") && owner["nodeSelector"].is_object()) {
    l.kind = Locality::Kind::kSelector;
    l.selector = &owner["nodeSelector"];
    *on = NodeSelectorMatches(*l.selector, node);
  } else {
    *on = false;
  }
  return l;
}

}  // namespace

std::string DeviceKey(const std::string& driver, const std::string& pool,
                      const std::string& device) {
  return driver + "/" + pool + "/" + device;
}

std::vector<Pool> GatherPools(const std::vector<Json>& slices) {
  std::vector<Pool> pools;
  std::map<std::string, size_t> index;  // "driver/pool" -> position in pools
  for (const Json& slice : slices) {
    if (!slice.is_object() || !slice.contains("spec")) continue;
    const Json& spec = slice["spec"];
    if (!spec.is_object()) continue;
    const std::string driver = Str(spec, "driver");
    Json pool_ref = spec.value("pool", Json::object());
    if (!pool_ref.is_object()) pool_ref = Json::object();
    const std::string name = Str(pool_ref, "name");
    if (driver.empty() || name.empty()) continue;
    const int64_t generation =
        pool_ref.contains("generation") && pool_ref["generation"].is_number_integer()
            ? pool_ref["generation"].get<int64_t>()
            : 0;
    const int64_t count = pool_ref.contains("resourceSliceCount") &&
                                  pool_ref["resourceSliceCount"].is_number_integer()
                              ? pool_ref["resourceSliceCount"].get<int64_t>()
                              : 1;
    const std::string id = driver + "/" + name;
    auto [it, added] = index.emplace(id, pools.size());
    if (added) {
      Pool p;
      p.driver = driver;
      p.name = name;
      p.generation = generation;
      pools.push_back(std::move(p));
    }
    Pool& p = pools[it->second];
    if (generation < p.generation) continue;
    if (generation > p.generation) {
      p.generation = generation;
      p.slices.clear();
    }
    p.slices.push_back(&slice);
    p.want_slices = count;
  }
  for (Pool& p : pools) {
    p.incomplete = static_cast<int64_t>(p.slices.size()) < p.want_slices;
    for (const Json* slice : p.slices) {
      const Json& spec = (*slice)["spec"];
      const auto sets = spec.find("sharedCounters");
      if (sets == spec.end() || !sets->is_array()) continue;
      for (const Json& set : *sets) {
        const std::string set_name = Str(set, "name");
        if (set_name.empty() || !set.contains("counters") || !set["counters"].is_object()) continue;
        const Json& counters = set["counters"];
        for (const auto& [counter, c] : counters.items()) {
          auto v = ParseAmount(Str(c, "value"));
          if (v) p.counter_sets[set_name][counter] = *v;
        }
      }
    }
  }
  return pools;
}

std::vector<NodeDevice> DevicesOnNode(const Pool& pool, const Json& node) {
  std::vector<NodeDevice> out;
  for (const Json* slice : pool.slices) {
    const Json& spec = (*slice)["spec"];
    const auto devices = spec.find("devices");
    if (devices == spec.end() || !devices->is_array()) continue;
    const bool per_device = Bool(spec, "perDeviceNodeSelection");
    bool slice_on = false;
    const Locality slice_locality = LocalityOf(spec, node, &slice_on);
    if (!per_device && !slice_on) continue;
    for (const Json& device : *devices) {
      const std::string name = Str(device, "name");
      if (name.empty()) continue;
      NodeDevice d;
      d.pool = &pool;
      d.slice = slice;
      d.device = &device;
      d.name = name;
      d.key = DeviceKey(pool.driver, pool.name, name);
      if (per_device) {
        bool on = false;
        d.locality = LocalityOf(device, node, &on);
        if (!on) continue;
      } else {
        d.locality = slice_locality;
      }
      out.push_back(std::move(d));
    }
  }
  return out;
}

bool NodeSelectorMatches(const Json& selector, const Json& node) {
  const auto terms = selector.find("nodeSelectorTerms");
  if (terms == selector.end() || !terms->is_array()) return false;
  return std::any_of(terms->begin(), terms->end(),
                     [&](const Json& term) { return TermMatches(term, node); });
}

}  // namespace hami::dra
