#include "cli/kubectl_hami_view.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string_view>

#include "common/strings.h"
#include "common/time_format.h"
#include "device/pod_view.h"
#include "device/usage.h"
#include "protocol/keys.h"
#include "protocol/node_lock.h"
#include "protocol/node_register.h"
#include "protocol/pod_devices.h"
#include "protocol/reason.h"
#include "protocol/vendor.h"

namespace hami::cli {
namespace {

using nlohmann::json;

std::optional<int64_t> AgeSeconds(const json& obj, SystemTime now) {
  if (!obj.is_object()) return std::nullopt;
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return std::nullopt;
  auto ts = meta->find("creationTimestamp");
  if (ts == meta->end() || !ts->is_string()) return std::nullopt;
  auto t = ParseRfc3339(ts->get<std::string>());
  if (!t.ok()) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::seconds>(now - t.value().instant).count();
}

// The Iluvatar and Ascend chip names ("common words") found in register keys on `nodes`: their
// keys are built from the chip name, so the vendor table has no fixed entry for them.
std::vector<protocol::VendorInfo> VendorsFor(const std::vector<json>& nodes) {
  std::set<std::string> fixed;
  for (const auto& v : protocol::BuiltinVendors()) fixed.insert(v.register_key);
  const std::string mark = "\x01";
  const std::string ilu = protocol::IluvatarVendor(mark).register_key;
  const std::string asc = protocol::AscendVendor(mark).register_key;
  std::set<std::string> ilu_words, asc_words;
  auto match = [&](const std::string& pattern, const std::string& key, std::set<std::string>* out) {
    size_t at = pattern.find(mark);
    std::string_view pre = std::string_view(pattern).substr(0, at);
    std::string_view post = std::string_view(pattern).substr(at + mark.size());
    if (key.size() > pre.size() + post.size() && key.starts_with(pre) && key.ends_with(post)) {
      out->insert(key.substr(pre.size(), key.size() - pre.size() - post.size()));
    }
  };
  for (const auto& node : nodes) {
    for (const auto& [key, value] : device::ObjectAnnotations(node)) {
      if (fixed.count(key) != 0) continue;
      match(ilu, key, &ilu_words);
      match(asc, key, &asc_words);
    }
  }
  return protocol::AllVendors({ilu_words.begin(), ilu_words.end()},
                              {asc_words.begin(), asc_words.end()});
}

// The register annotation of one vendor, decoded with the node register codec: a JSON list or
// the legacy colon form, whichever the value is.
Result<std::vector<protocol::DeviceInfo>> DecodeRegister(const std::string& value) {
  std::string_view v = value;
  while (!v.empty() && (v.front() == ' ' || v.front() == '\n' || v.front() == '\t')) {
    v.remove_prefix(1);
  }
  if (v.starts_with("[") || v == "null") return protocol::DecodeNodeRegister(value);
  return protocol::DecodeNodeRegisterLegacy(value);
}

// The pod's allocation for `vendor`: the allocated key, else the to-allocate keys; nullptr when
// the pod holds none.
const std::string* AllocationValue(const device::PodView& pod, const protocol::VendorInfo& vendor) {
  if (!vendor.allocated_key.empty()) {
    if (const std::string* v = device::FindValue(pod.annotations, vendor.allocated_key)) return v;
  }
  if (!vendor.to_allocate_key.empty()) {
    if (const std::string* v = device::FindValue(pod.annotations, vendor.to_allocate_key)) return v;
  }
  for (const auto& key : vendor.to_allocate_read_keys) {
    if (const std::string* v = device::FindValue(pod.annotations, key)) return v;
  }
  return nullptr;
}

// Allocated: holding an allocation and not Succeeded or Failed (bind phase allocating included).
bool Holds(const device::PodView& pod) { return pod.phase != "Succeeded" && pod.phase != "Failed"; }

// One pod's usage per device UUID, all vendors, collapsed as the scheduler does.
std::vector<device::DeviceDelta> PodDeltas(const device::PodView& pod,
                                           const std::vector<protocol::VendorInfo>& vendors,
                                           std::vector<std::string>* warnings) {
  std::vector<device::DeviceDelta> out;
  std::set<std::string> seen_keys;
  for (const auto& vendor : vendors) {
    const std::string* value = AllocationValue(pod, vendor);
    if (value == nullptr) continue;
    std::string key = vendor.allocated_key.empty() ? vendor.to_allocate_key : vendor.allocated_key;
    if (!seen_keys.insert(key).second) continue;
    auto decoded = protocol::DecodePodDevices(*value);
    if (!decoded.ok()) {
      warnings->push_back("pod " + pod.Key() + ": " + key + ": " + decoded.error());
      continue;
    }
    auto deltas =
        device::CollapsePodDevices(decoded.value(), pod.init_containers.size(), pod.init_done);
    out.insert(out.end(), deltas.begin(), deltas.end());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.uuid < b.uuid; });
  return out;
}

// A MIG device string of v2.8 carries "[t-s]" after the GPU's UUID.
std::string BaseUuid(const std::string& uuid) { return uuid.substr(0, uuid.find('[')); }

std::optional<std::string> PendingReason(const json& pod) {
  auto status = pod.find("status");
  if (status == pod.end() || !status->is_object()) return std::nullopt;
  auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) return std::nullopt;
  for (const auto& c : *conditions) {
    if (!c.is_object() || c.value("type", json()) != "PodScheduled") continue;
    if (c.value("status", json()) != "False") continue;
    json message = c.value("message", json());
    if (message.is_string() && !message.get<std::string>().empty()) {
      std::string summary = ReasonSummary(message.get<std::string>());
      return ReasonInWords(message.get<std::string>()) + (summary.empty() ? "" : " " + summary);
    }
    json reason = c.value("reason", json());
    if (reason.is_string()) return reason.get<std::string>();
  }
  return std::nullopt;
}

bool RequestsVendor(const device::PodView& pod, const std::vector<protocol::VendorInfo>& vendors) {
  for (const device::ContainerView* c : pod.AllContainers()) {
    for (const auto& vendor : vendors) {
      for (const auto& resource : vendor.ResourceNames()) {
        if (device::FindValue(c->limits, resource) || device::FindValue(c->requests, resource)) {
          return true;
        }
      }
    }
  }
  return false;
}

std::string Render(const std::vector<std::vector<std::string>>& rows) { return RenderTable(rows); }

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i != 0) out += sep;
    out += items[i];
  }
  return out;
}

std::string Frac(int64_t a, int64_t b) { return std::to_string(a) + "/" + std::to_string(b); }

// A GPU of a node's ResourceSlices as an inspect row: allocated = the sum of its shares.
DeviceRow DraDeviceRow(const DraGpu& gpu) {
  DeviceRow d;
  d.index = static_cast<uint64_t>(std::max<int64_t>(gpu.minor, 0));
  d.uuid = gpu.uuid;
  d.type = gpu.type;
  d.vendor = "NVIDIA";
  d.health = gpu.health;
  d.mode = gpu.mode;
  d.memory_total = gpu.memory;
  d.cores_total = gpu.cores;
  d.driver = std::string(kDraDriver);
  d.device = "hami-gpu-" + std::to_string(gpu.minor);
  d.shares = gpu.shares;
  std::set<std::string> pods;
  for (const DraShare& s : gpu.shares) {
    d.memory_allocated += s.memory;
    d.cores_allocated += s.cores;
    pods.insert(s.pods.begin(), s.pods.end());
  }
  d.slices_used = static_cast<int64_t>(gpu.shares.size());
  d.pods.assign(pods.begin(), pods.end());
  return d;
}

// The pod's claims that kubectl-hami shows (ours, and those not made or listed yet).
std::vector<PodRow::Claim> DraClaimRows(const std::vector<PodClaim>& claims) {
  std::vector<PodRow::Claim> out;
  for (const PodClaim& c : claims) {
    if (c.found != nullptr && !c.found->ours) continue;
    PodRow::Claim row{c.name, c.claim, c.found != nullptr && c.found->allocated, {}};
    if (c.found != nullptr) row.shares = c.found->shares;
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace

namespace {

struct ReasonEntry {
  std::string name;
  int64_t rejected = 0, considered = 0;
  int64_t nodes = 1;  // the kube-scheduler count in front of the entry
};

std::string ScanReasons(const std::string& message, std::vector<ReasonEntry>* entries);

}  // namespace

std::optional<std::string_view> ReasonPhrase(std::string_view name) {
  static const std::map<std::string_view, std::string_view> kPhrases = {
      {protocol::kCardNotHealth, "are unhealthy"},
      {protocol::kCardCordoned, "are cordoned"},
      {protocol::kCardTypeMismatch, "are not of the requested type"},
      {protocol::kNumaNotFit, "do not fit the NUMA binding"},
      {protocol::kCardUuidMismatch, "are excluded by the pod's UUID selection"},
      {protocol::kCardTimeSlicingExhausted, "have no vGPU slot left"},
      {protocol::kExclusiveDeviceAllocateConflict, "conflict with an exclusive allocation"},
      {protocol::kResourceQuotaNotFit, "would exceed the namespace's quota"},
      {protocol::kCardInsufficientMemory, "lack memory"},
      {protocol::kCardInsufficientCore, "lack cores"},
      {protocol::kCardComputeUnitsExhausted, "have no compute units left"},
      {protocol::kCardMigTopologyInfeasible, "have no MIG placement for the request"},
      {protocol::kNodeInsufficientDevice, "are too few for the request"},
      {protocol::kAllocatedCardsInsufficientRequest, "cannot serve the request together"},
      // Reason names of other vendors' fits (HAMi v2.10 pkg/device/common, metax, ascend).
      {"CardNotFoundCustomFilterRule", "fail the vendor's custom filter rule"},
      {"ModeNotFit", "are not in the requested mode"},
      {"CardUnhealthy", "are unhealthy"},
      {"CardQosPolicyMismatch", "do not match the requested QoS policy"},
      {"CardAppClassMismatch", "do not match the requested application class"},
  };
  auto it = kPhrases.find(name);
  if (it == kPhrases.end()) return std::nullopt;
  return it->second;
}

std::string RenderTable(const std::vector<std::vector<std::string>>& raw, size_t indent,
                        const std::function<const char*(size_t row, size_t col)>& colour) {
  // Every table's cells pass here: the one place they are made safe for a terminal (a cell is
  // one line, so a newline in it is escaped too).
  std::vector<std::vector<std::string>> rows = raw;
  for (auto& row : rows) {
    for (auto& cell : row) cell = EscapeTerminal(cell);
  }
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (row.size() > width.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto& row = rows[r];
    std::string line(indent, ' ');
    size_t pad = 0;  // blanks owed before the next cell (none after the last)
    for (size_t i = 0; i < row.size(); ++i) {
      line.append(pad, ' ');
      const char* code = colour ? colour(r, i) : nullptr;
      if (code != nullptr && !row[i].empty()) {
        line += std::string(code) + row[i] + "\033[0m";
      } else {
        line += row[i];
      }
      pad = width[i] - row[i].size() + 3;
      if (row[i].empty() && i + 1 == row.size()) pad = 0;
    }
    while (line.size() > indent && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string ReasonInWords(const std::string& message) { return ScanReasons(message, nullptr); }

std::string ReasonSummary(const std::string& message) {
  std::vector<ReasonEntry> entries;
  ScanReasons(message, &entries);
  if (entries.empty()) return "";
  bool all_memory = true;
  for (const auto& e : entries) {
    if (e.name != protocol::kCardInsufficientMemory || e.rejected != e.considered) {
      all_memory = false;
    }
  }
  if (all_memory) return "No GPU has enough memory for the request.";
  return "";
}

namespace {

std::string ScanReasons(const std::string& message, std::vector<ReasonEntry>* entries) {
  // Scans for "[N ]K/M Name" starting at a word boundary; no regex, so any length is safe.
  const std::string_view m = message;
  auto digits = [&](size_t i) {
    size_t j = i;
    while (j < m.size() && m[j] >= '0' && m[j] <= '9') ++j;
    return j;
  };
  auto is_alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
  // "K/M Name" at i: the end of Name and the words, or npos.
  auto number = [&](size_t from, size_t to) {
    int64_t v = 0;
    for (size_t j = from; j < to && v < (int64_t{1} << 40); ++j) v = v * 10 + (m[j] - '0');
    return v;
  };
  ReasonEntry last;
  auto entry = [&](size_t i, std::string* words) -> size_t {
    size_t k = digits(i);
    if (k == i || k >= m.size() || m[k] != '/') return std::string_view::npos;
    size_t n = digits(k + 1);
    if (n == k + 1 || n >= m.size() || m[n] != ' ') return std::string_view::npos;
    size_t e = n + 1;
    while (e < m.size() && is_alpha(m[e])) ++e;
    if (e < m.size() && ((m[e] >= '0' && m[e] <= '9') || m[e] == '_')) {
      return std::string_view::npos;
    }
    std::optional<std::string_view> phrase = ReasonPhrase(m.substr(n + 1, e - n - 1));
    if (!phrase) return std::string_view::npos;
    last = {std::string(m.substr(n + 1, e - n - 1)), number(i, k), number(k + 1, n), 1};
    *words = std::string(m.substr(i, k - i)) + " of " + std::string(m.substr(k + 1, n - k - 1)) +
             " GPUs " + std::string(*phrase);
    return e;
  };
  std::string out;
  size_t i = 0;
  while (i < m.size()) {
    bool boundary = i == 0 || !(is_alpha(m[i - 1]) || (m[i - 1] >= '0' && m[i - 1] <= '9'));
    if (boundary && m[i] >= '0' && m[i] <= '9') {
      std::string words;
      size_t d = digits(i);
      if (d < m.size() && m[d] == ' ') {  // "N K/M Name": N nodes
        if (size_t e = entry(d + 1, &words); e != std::string_view::npos) {
          out += std::string(m.substr(i, d - i)) + " node(s) where " + words;
          last.nodes = number(i, d);
          if (entries != nullptr) entries->push_back(last);
          i = e;
          continue;
        }
      }
      if (size_t e = entry(i, &words); e != std::string_view::npos) {
        out += words;
        if (entries != nullptr) entries->push_back(last);
        i = e;
        continue;
      }
      out.append(m.substr(i, d - i));  // a number that starts no entry
      i = d;
      continue;
    }
    out += m[i++];
  }
  return out;
}

}  // namespace

std::string ShortAge(std::optional<int64_t> seconds) {
  if (!seconds) return "<unknown>";
  int64_t s = std::max<int64_t>(*seconds, 0);
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 48 * 3600) return std::to_string(s / 3600) + "h";
  if (s < 2 * 365 * 86400) return std::to_string(s / 86400) + "d";
  return std::to_string(s / (365 * 86400)) + "y";
}

Result<InspectView> BuildInspect(const std::vector<json>& nodes, const std::vector<json>& pods,
                                 const std::vector<std::string>& only, SystemTime now,
                                 const DraObjects& dra) {
  InspectView view;
  const std::vector<protocol::VendorInfo> vendors = VendorsFor(nodes);
  DraView dra_view = ReadDra(dra);
  view.warnings = std::move(dra_view.warnings);
  std::set<std::string> wanted(only.begin(), only.end());
  std::set<std::string> found;
  std::map<std::string, std::vector<device::DeviceUsage>> usage;  // by node
  std::map<std::string, std::vector<DeviceRow>> dra_rows;         // by node
  for (const auto& node : nodes) {
    std::string name = device::ObjectName(node);
    if (!wanted.empty() && wanted.count(name) == 0) continue;
    found.insert(name);
    device::StringMap annotations = device::ObjectAnnotations(node);
    NodeRow row;
    row.name = name;
    std::vector<device::DeviceUsage>& rows = usage[name];
    for (const auto& vendor : vendors) {
      if (vendor.register_key.empty()) continue;
      if (vendor.register_format != protocol::RegisterFormat::kJson &&
          vendor.register_format != protocol::RegisterFormat::kLegacyColon) {
        continue;
      }
      const std::string* value = device::FindValue(annotations, vendor.register_key);
      if (value == nullptr) continue;
      auto decoded = DecodeRegister(*value);
      if (!decoded.ok()) {
        view.warnings.push_back("node " + name + ": " + vendor.register_key + ": " +
                                decoded.error());
        continue;
      }
      for (const auto& info : decoded.value()) {
        rows.push_back(device::UsageFromDeviceInfo(info, vendor.vendor_key));
      }
      if (row.handshake.empty() && !vendor.handshake_key.empty()) {
        if (const std::string* hs = device::FindValue(annotations, vendor.handshake_key)) {
          row.handshake = *hs;
        }
      }
    }
    if (const std::string* lock = device::FindValue(annotations, protocol::kNodeLockKey)) {
      row.lock = *lock;
      auto parsed = protocol::ParseNodeLock(*lock);
      if (parsed.ok()) {
        if (parsed.value().owner) {
          row.lock_holder = parsed.value().owner->ns + "/" + parsed.value().owner->pod;
        }
        row.lock_age_seconds =
            std::chrono::duration_cast<std::chrono::seconds>(now - parsed.value().time.instant)
                .count();
      }
    }
    // A node with no HAMi device is shown only when named. One without a register annotation
    // shows the GPUs of its ResourceSlices (DRA mode).
    if (rows.empty() && dra_view.gpus.count(name) != 0) {
      for (const DraGpu& gpu : dra_view.gpus[name]) dra_rows[name].push_back(DraDeviceRow(gpu));
    }
    if (rows.empty() && dra_rows.count(name) == 0 && wanted.empty()) {
      usage.erase(name);
      continue;
    }
    view.nodes.push_back(std::move(row));
  }
  for (const auto& name : only) {
    if (found.count(name) == 0) return Error{"node " + Quote(name) + ": not found"};
  }

  // Usage: every holding pod's collapsed deltas on its node's devices.
  std::map<std::string, std::map<std::string, std::set<std::string>>> holders;  // node, uuid
  for (const auto& obj : pods) {
    auto parsed = device::ParsePodView(obj);
    if (!parsed.ok()) {
      view.warnings.push_back("pod " + device::ObjectName(obj) + ": " + parsed.error());
      continue;
    }
    const device::PodView& pod = parsed.value();
    if (!Holds(pod)) continue;
    std::string node = pod.node_name;
    if (node.empty()) {
      if (const std::string* v = device::FindValue(pod.annotations, protocol::kVgpuNodeKey)) {
        node = *v;
      }
    }
    auto it = usage.find(node);
    if (it == usage.end()) continue;
    std::vector<device::DeviceDelta> deltas = PodDeltas(pod, vendors, &view.warnings);
    for (auto& d : deltas) {
      d.uuid = BaseUuid(d.uuid);
      holders[node][d.uuid].insert(pod.Key());
    }
    device::ApplyDeltas(deltas, +1, &it->second);
  }

  for (auto& row : view.nodes) {
    for (const auto& u : usage[row.name]) {
      DeviceRow d;
      d.index = u.index;
      d.uuid = u.id;
      d.type = u.type;
      d.vendor = u.vendor;
      d.health = u.health;
      d.mode = u.mode;
      d.numa = u.numa;
      d.memory_allocated = u.usedmem;
      d.memory_total = u.totalmem;
      d.cores_allocated = u.usedcores;
      d.cores_total = u.totalcore;
      d.slices_used = u.used;
      d.slices_total = u.count;
      const auto& h = holders[row.name][u.id];
      d.pods.assign(h.begin(), h.end());
      row.devices.push_back(std::move(d));
    }
    if (row.devices.empty()) row.devices = std::move(dra_rows[row.name]);
  }
  std::sort(view.nodes.begin(), view.nodes.end(),
            [](const NodeRow& a, const NodeRow& b) { return a.name < b.name; });
  return view;
}

PodsView BuildPods(const std::vector<json>& nodes, const std::vector<json>& pods, SystemTime now,
                   const DraObjects& dra) {
  PodsView view;
  const std::vector<protocol::VendorInfo> vendors = VendorsFor(nodes);
  DraView dra_view = ReadDra(dra);
  view.warnings = std::move(dra_view.warnings);
  for (const auto& obj : pods) {
    auto parsed = device::ParsePodView(obj);
    if (!parsed.ok()) {
      view.warnings.push_back("pod " + device::ObjectName(obj) + ": " + parsed.error());
      continue;
    }
    const device::PodView& pod = parsed.value();
    const std::string* vgpu_node = device::FindValue(pod.annotations, protocol::kVgpuNodeKey);
    const std::vector<PodClaim> claims = PodClaims(obj, dra_view);
    const bool dra_pod = IsDraPod(obj, claims);
    if (vgpu_node == nullptr && !RequestsVendor(pod, vendors) && !dra_pod) continue;
    PodRow row;
    row.ns = pod.namespace_name;
    row.name = pod.name;
    row.phase = pod.phase;
    if (!pod.node_name.empty()) {
      row.node = pod.node_name;
    } else if (vgpu_node != nullptr && !vgpu_node->empty()) {
      row.node = *vgpu_node;
    }
    if (const std::string* bp = device::FindValue(pod.annotations, protocol::kBindPhaseKey)) {
      row.bind_phase = *bp;
    }
    for (const auto& d : PodDeltas(pod, vendors, &view.warnings)) {
      row.devices.push_back({d.uuid, d.vendor, d.usedmem, d.usedcores});
    }
    if (dra_pod) {
      row.claims = DraClaimRows(claims);
      // The claims' shares per GPU, beside any device-plugin devices, by UUID.
      std::map<std::string, PodDeviceRow> by_uuid;
      for (const auto& c : row.claims) {
        for (const DraShare& s : c.shares) {
          PodDeviceRow& d = by_uuid[s.uuid];
          d.uuid = s.uuid;
          d.vendor = "NVIDIA";
          d.memory += s.memory;
          d.cores += s.cores;
        }
      }
      for (auto& [uuid, d] : by_uuid) row.devices.push_back(std::move(d));
      std::stable_sort(row.devices.begin(), row.devices.end(),
                       [](const auto& a, const auto& b) { return a.uuid < b.uuid; });
    }
    if (pod.node_name.empty()) row.reason = PendingReason(obj);
    row.age_seconds = AgeSeconds(obj, now);
    view.pods.push_back(std::move(row));
  }
  std::sort(view.pods.begin(), view.pods.end(), [](const PodRow& a, const PodRow& b) {
    return std::tie(a.ns, a.name) < std::tie(b.ns, b.name);
  });
  return view;
}

std::vector<ContainerAllocation> ContainerAllocations(const std::vector<json>& nodes,
                                                      const std::vector<json>& pods,
                                                      std::vector<std::string>* warnings,
                                                      const DraObjects& dra) {
  std::vector<ContainerAllocation> out;
  const std::vector<protocol::VendorInfo> vendors = VendorsFor(nodes);
  DraView dra_view = ReadDra(dra);
  std::vector<ContainerAllocation> shares;  // after every annotation's
  for (const auto& obj : pods) {
    auto parsed = device::ParsePodView(obj);
    if (!parsed.ok()) {
      warnings->push_back("pod " + device::ObjectName(obj) + ": " + parsed.error());
      continue;
    }
    const device::PodView& pod = parsed.value();
    if (!Holds(pod)) continue;
    std::string node = pod.node_name;
    if (node.empty()) {
      if (const std::string* v = device::FindValue(pod.annotations, protocol::kVgpuNodeKey)) {
        node = *v;
      }
    }
    const std::vector<const device::ContainerView*> containers = pod.AllContainers();
    std::set<std::string> seen_keys;
    for (const auto& vendor : vendors) {
      const std::string* value = AllocationValue(pod, vendor);
      if (value == nullptr) continue;
      std::string key =
          vendor.allocated_key.empty() ? vendor.to_allocate_key : vendor.allocated_key;
      if (!seen_keys.insert(key).second) continue;
      auto decoded = protocol::DecodePodDevices(*value);
      if (!decoded.ok()) {
        warnings->push_back("pod " + pod.Key() + ": " + key + ": " + decoded.error());
        continue;
      }
      for (size_t i = 0; i < decoded.value().size(); ++i) {
        std::string name = i < containers.size() ? containers[i]->name : std::to_string(i);
        for (const auto& d : decoded.value()[i]) {
          out.push_back({node,
                         pod.namespace_name,
                         pod.name,
                         name,
                         BaseUuid(d.uuid),
                         d.type,
                         d.usedmem,
                         d.usedcores,
                         "",
                         {}});
        }
      }
    }
    for (const PodClaim& c : PodClaims(obj, dra_view)) {
      if (c.found == nullptr || !c.found->ours) continue;
      for (const DraShare& s : c.found->shares) {
        shares.push_back({s.node, pod.namespace_name, pod.name, "", s.uuid, "NVIDIA", s.memory,
                          s.cores, *c.claim, c.containers});
      }
    }
  }
  out.insert(out.end(), shares.begin(), shares.end());
  return out;
}

namespace {

// DRA shares in -o json: a device's (with the claim and its pods) or a claim's (with the node
// and GPU).
nlohmann::ordered_json SharesJson(const std::vector<DraShare>& shares, bool with_claim) {
  using oj = nlohmann::ordered_json;
  oj out = oj::array();
  for (const DraShare& s : shares) {
    oj o;
    if (with_claim) o["claim"] = s.claim;
    o["request"] = s.request;
    if (!with_claim) {
      o["node"] = s.node;
      o["uuid"] = s.uuid;
    }
    o["device"] = s.device;
    o["shareID"] = s.share_id.empty() ? oj(nullptr) : oj(s.share_id);
    o["memory"] = s.memory;
    o["cores"] = s.cores;
    if (with_claim) o["pods"] = s.pods;
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

std::string InspectJson(const InspectView& view) {
  using oj = nlohmann::ordered_json;  // keys in the documented order
  oj nodes = oj::array();
  for (const auto& n : view.nodes) {
    oj devices = oj::array();
    for (const auto& d : n.devices) {
      oj od;
      od["index"] = d.index;
      od["uuid"] = d.uuid;
      od["type"] = d.type;
      od["vendor"] = d.vendor;
      od["health"] = d.health;
      od["memory"]["allocated"] = d.memory_allocated;
      od["memory"]["total"] = d.memory_total;
      od["cores"]["allocated"] = d.cores_allocated;
      od["cores"]["total"] = d.cores_total;
      od["slices"]["used"] = d.slices_used;
      od["slices"]["total"] = d.slices_total;
      od["pods"] = d.pods;
      if (!d.driver.empty()) {
        od["driver"] = d.driver;
        od["device"] = d.device;
        od["mode"] = d.mode;
        od["shares"] = SharesJson(d.shares, /*with_claim=*/true);
      }
      devices.push_back(std::move(od));
    }
    oj on;
    on["name"] = n.name;
    on["devices"] = std::move(devices);
    on["handshake"] = n.handshake;
    on["lock"] = n.lock ? oj(*n.lock) : oj(nullptr);
    nodes.push_back(std::move(on));
  }
  oj out;
  out["nodes"] = std::move(nodes);
  return out.dump() + "\n";
}

std::string PodsJson(const PodsView& view) {
  using oj = nlohmann::ordered_json;
  oj pods = oj::array();
  for (const auto& p : view.pods) {
    oj devices = oj::array();
    for (const auto& d : p.devices) {
      oj od;
      od["uuid"] = d.uuid;
      od["vendor"] = d.vendor;
      od["memory"] = d.memory;
      od["cores"] = d.cores;
      devices.push_back(std::move(od));
    }
    oj op;
    op["namespace"] = p.ns;
    op["name"] = p.name;
    op["node"] = p.node ? oj(*p.node) : oj(nullptr);
    op["bindPhase"] = p.bind_phase ? oj(*p.bind_phase) : oj(nullptr);
    op["devices"] = std::move(devices);
    op["reason"] = p.reason ? oj(*p.reason) : oj(nullptr);
    if (!p.claims.empty()) {
      oj claims = oj::array();
      for (const auto& c : p.claims) {
        oj oc;
        oc["name"] = c.name;
        oc["claim"] = c.claim ? oj(*c.claim) : oj(nullptr);
        oc["allocated"] = c.allocated;
        oc["shares"] = SharesJson(c.shares, /*with_claim=*/false);
        claims.push_back(std::move(oc));
      }
      op["claims"] = std::move(claims);
    }
    pods.push_back(std::move(op));
  }
  oj out;
  out["pods"] = std::move(pods);
  return out.dump() + "\n";
}

std::string InspectTable(const InspectView& view, const TableOptions& options) {
  std::vector<std::vector<std::string>> rows;
  if (!options.no_headers) {
    std::vector<std::string> h = {"NODE",   "INDEX",       "UUID",     "TYPE",   "VENDOR",
                                  "HEALTH", "MEMORY(MiB)", "CORES(%)", "SLICES", "PODS"};
    if (options.wide) {
      h.insert(h.end() - 1, {"MODE", "NUMA"});
    }
    rows.push_back(std::move(h));
  }
  // A DRA GPU has no split count: its slices are the shares, out of "-".
  auto slices_text = [](int64_t used, int64_t total, bool dra) {
    return dra ? std::to_string(used) + "/-" : Frac(used, total);
  };
  for (const auto& n : view.nodes) {
    int64_t mem = 0, mem_total = 0, cores = 0, cores_total = 0, used = 0, slices = 0;
    bool dra = false;
    for (const auto& d : n.devices) {
      dra = dra || !d.driver.empty();
      std::vector<std::string> r = {n.name,
                                    std::to_string(d.index),
                                    d.uuid,
                                    d.type,
                                    d.vendor,
                                    d.health ? "true" : "false",
                                    Frac(d.memory_allocated, d.memory_total),
                                    Frac(d.cores_allocated, d.cores_total),
                                    slices_text(d.slices_used, d.slices_total, !d.driver.empty()),
                                    d.pods.empty() ? "<none>" : Join(d.pods, ",")};
      if (options.wide) r.insert(r.end() - 1, {d.mode, std::to_string(d.numa)});
      rows.push_back(std::move(r));
      mem += d.memory_allocated;
      mem_total += d.memory_total;
      cores += d.cores_allocated;
      cores_total += d.cores_total;
      used += d.slices_used;
      slices += d.slices_total;
    }
    std::vector<std::string> total = {n.name,
                                      "total",
                                      std::to_string(n.devices.size()) + " devices",
                                      "",
                                      "",
                                      "",
                                      Frac(mem, mem_total),
                                      Frac(cores, cores_total),
                                      slices_text(used, slices, dra),
                                      ""};
    if (options.wide) total.insert(total.end() - 1, {"", ""});
    rows.push_back(std::move(total));
  }
  // Colour: an unhealthy device's HEALTH cell in red.
  std::string out = RenderTable(rows, 0, [&](size_t r, size_t c) -> const char* {
    if (!options.colour || c != 5 || (r == 0 && !options.no_headers)) return nullptr;
    return rows[r][c] == "false" ? "\033[31m" : nullptr;
  });
  // DRA shares: which claim holds how much of which GPU, for which pods.
  std::vector<std::vector<std::string>> shares;
  if (!options.no_headers) {
    std::vector<std::string> h = {"NODE",   "INDEX",       "CLAIM",    "REQUEST",
                                  "DEVICE", "MEMORY(MiB)", "CORES(%)", "PODS"};
    if (options.wide) h.insert(h.end() - 1, "SHARE-ID");
    shares.push_back(std::move(h));
  }
  const size_t share_header = shares.size();
  for (const auto& n : view.nodes) {
    for (const auto& d : n.devices) {
      for (const DraShare& s : d.shares) {
        std::vector<std::string> r = {n.name,
                                      std::to_string(d.index),
                                      s.claim,
                                      s.request,
                                      s.device,
                                      std::to_string(s.memory),
                                      std::to_string(s.cores),
                                      s.pods.empty() ? "<none>" : Join(s.pods, ",")};
        if (options.wide) r.insert(r.end() - 1, s.share_id.empty() ? "<none>" : s.share_id);
        shares.push_back(std::move(r));
      }
    }
  }
  if (shares.size() > share_header) out += "\n" + Render(shares);
  // The node state: handshake and lock.
  std::vector<std::vector<std::string>> state;
  if (!options.no_headers) state.push_back({"NODE", "HANDSHAKE", "LOCK-HOLDER", "LOCK-AGE"});
  for (const auto& n : view.nodes) {
    std::string holder = "<none>";
    if (n.lock) holder = n.lock_holder.empty() ? *n.lock : n.lock_holder;
    state.push_back({n.name, n.handshake.empty() ? "<none>" : n.handshake, holder,
                     n.lock ? ShortAge(n.lock_age_seconds) : "<none>"});
  }
  if (!view.nodes.empty()) out += "\n" + Render(state);
  return out;
}

std::string PodsTable(const PodsView& view, const TableOptions& options) {
  std::vector<std::vector<std::string>> rows;
  // The CLAIMS column only where a pod has claims (DRA mode).
  const bool any_claims = std::any_of(view.pods.begin(), view.pods.end(),
                                      [](const PodRow& p) { return !p.claims.empty(); });
  if (!options.no_headers) {
    std::vector<std::string> h = {"NAMESPACE", "POD", "NODE", "BIND-PHASE", "DEVICES", "AGE"};
    if (any_claims) h.insert(h.end() - 1, "CLAIMS");
    if (options.wide) h.insert(h.end(), {"PHASE", "REASON"});
    rows.push_back(std::move(h));
  }
  for (const auto& p : view.pods) {
    std::vector<std::string> devices;
    for (const auto& d : p.devices) {
      devices.push_back(d.uuid + "(" + std::to_string(d.memory) + "MiB," + std::to_string(d.cores) +
                        "%)");
    }
    std::vector<std::string> r = {p.ns,
                                  p.name,
                                  p.node.value_or("<none>"),
                                  p.bind_phase.value_or("<none>"),
                                  devices.empty() ? "<none>" : Join(devices, ","),
                                  ShortAge(p.age_seconds)};
    if (any_claims) {
      // A claim by its name; "(pending)" until allocated, the pod's entry "(not created)" before
      // kube-controller-manager made it from its template.
      std::vector<std::string> claims;
      for (const auto& c : p.claims) {
        if (!c.claim) {
          claims.push_back(c.name + "(not created)");
        } else {
          claims.push_back(*c.claim + (c.allocated ? "" : "(pending)"));
        }
      }
      r.insert(r.end() - 1, claims.empty() ? "<none>" : Join(claims, ","));
    }
    if (options.wide) r.insert(r.end(), {p.phase, p.reason.value_or("")});
    rows.push_back(std::move(r));
  }
  // Colour: the bind phase (success green, allocating yellow, failed red), pending lines yellow.
  std::string out = RenderTable(rows, 0, [&](size_t r, size_t c) -> const char* {
    if (!options.colour || c != 3 || (r == 0 && !options.no_headers)) return nullptr;
    if (rows[r][c] == "success") return "\033[32m";
    if (rows[r][c] == "allocating") return "\033[33m";
    if (rows[r][c] == "failed") return "\033[31m";
    return nullptr;
  });
  // Pending pods: the reason in words, below the table (it is long).
  if (!options.wide) {
    for (const auto& p : view.pods) {
      if (!p.reason) continue;
      std::string line = EscapeTerminal(p.ns + "/" + p.name + " pending: " + *p.reason);
      out += options.colour ? "\033[33m" + line + "\033[0m\n" : line + "\n";
    }
  }
  return out;
}

}  // namespace hami::cli
