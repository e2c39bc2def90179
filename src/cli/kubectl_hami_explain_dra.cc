// `kubectl hami explain` for a pod of DRA mode (docs/KUBECTL_HAMI.md "DRA mode"): its claims and
// what they hold, and for a pending pod kube-scheduler's allocator (dra::Allocator, the code
// hami-sim's kube-scheduler runs) on every node that publishes hami-dra-plugin's GPUs, with the
// allocator's reasons per claim, request and device.
#include <algorithm>
#include <map>
#include <set>

#include "cli/kubectl_hami_explain.h"
#include "common/strings.h"
#include "dra/allocator.h"

namespace hami::cli {
namespace {

using nlohmann::json;

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : std::string(sep)) + items[i];
  return out;
}

// "node-1/hami-gpu-0 GPU-a (3000 MiB, 30% cores)"
std::string ShareWords(const DraShare& s) {
  return s.node + "/" + s.device + (s.uuid.empty() ? "" : " " + s.uuid) + " (" +
         std::to_string(s.memory) + " MiB, " + std::to_string(s.cores) + "% cores)";
}

std::string Key(const json& obj) {
  const json meta = obj.is_object() ? obj.value("metadata", json::object()) : json::object();
  if (!meta.is_object()) return "/";
  auto text = [&](const char* k) {
    const json v = meta.value(k, json());
    return v.is_string() ? v.get<std::string>() : std::string();
  };
  return text("namespace") + "/" + text("name");
}

bool Allocated(const json& claim) {
  return claim.is_object() && claim.contains("status") && claim["status"].is_object() &&
         claim["status"].contains("allocation") && claim["status"]["allocation"].is_object();
}

// What `allocation` (AllocateOnNode's, for `claim`) would give, read as a listed claim would be.
std::vector<DraShare> WouldGet(const std::vector<json>& slices, json claim,
                               const json& allocation) {
  claim["status"] = {{"allocation", allocation}};
  DraView view = ReadDra({slices, {claim}});
  auto it = view.claims.find(Key(claim));
  return it == view.claims.end() ? std::vector<DraShare>{} : it->second.shares;
}

// The allocator on every node with our GPUs, for the pod's claims that are not allocated.
void RunAllocator(const ExplainInput& input, const DraView& dra, const std::vector<json>& pending,
                  ExplainView* view) {
  dra::Inventory inventory;
  for (const json& c : input.device_classes) {
    const std::string name = Key(c).substr(Key(c).find('/') + 1);
    if (!name.empty()) inventory.device_classes[name] = c;
  }
  inventory.slices = input.dra.slices;
  for (const json& c : input.dra.claims) {
    if (Allocated(c)) inventory.allocated_claims.push_back(c);
  }
  int64_t next_share = 0;
  // Share IDs are not shown; a counter keeps them distinct and the output reproducible.
  dra::Allocator allocator(inventory, [&next_share] {
    const std::string n = std::to_string(++next_share);
    return "00000000-0000-4000-8000-" + std::string(12 - std::min<size_t>(n.size(), 12), '0') + n;
  });
  std::vector<const json*> nodes;
  for (const json& n : input.nodes) {
    if (dra.gpus.count(Key(n).substr(Key(n).find('/') + 1)) != 0) nodes.push_back(&n);
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const json* a, const json* b) { return Key(*a) < Key(*b); });
  for (const json* n : nodes) {
    ExplainDraNode out;
    out.name = Key(*n).substr(Key(*n).find('/') + 1);
    auto result = allocator.AllocateOnNode(*n, pending);
    if (!result.ok()) {
      view->warnings.push_back("node " + out.name + ": the allocator: " + result.error());
      continue;
    }
    out.fit = result.value().fits;
    if (out.fit) {
      for (size_t i = 0; i < pending.size() && i < result.value().allocations.size(); ++i) {
        for (const DraShare& s :
             WouldGet(input.dra.slices, pending[i], result.value().allocations[i])) {
          out.details.push_back("claim " + Key(pending[i]) + " request " + Quote(s.request) +
                                ": would get " + ShareWords(s));
        }
      }
    } else {
      out.reason = result.value().failure.reason;
      out.details = result.value().failure.details;
    }
    view->dra_nodes.push_back(std::move(out));
  }
}

std::string Summary(const json& node, const ExplainView& view, bool allocator_ran) {
  std::vector<std::string> holds;
  for (const auto& c : view.claims) {
    for (const auto& s : c.shares) holds.push_back(ShareWords(s));
  }
  if (node.is_string() && !node.get<std::string>().empty()) {
    return "Scheduled on " + node.get<std::string>() + "." +
           (holds.empty() ? "" : " Its claims hold " + Join(holds, ", ") + ".");
  }
  for (const auto& c : view.claims) {
    if (c.state == "not created") {
      return "Pending: claim " + c.name + " is not created yet" +
             (c.template_name ? "; kube-controller-manager makes it from ResourceClaimTemplate " +
                                    *c.template_name
                              : std::string()) +
             ".";
    }
    if (c.state == "not found") {
      return "Pending: ResourceClaim " + view.ns + "/" + c.claim.value_or("") +
             ", which the pod names, does not exist.";
    }
  }
  if (!allocator_ran) {
    return "Pending: its claims are allocated" +
           (holds.empty() ? std::string() : " (" + Join(holds, ", ") + ")") +
           "; kube-scheduler has not bound the pod yet.";
  }
  if (view.dra_nodes.empty()) {
    return "Pending: no node publishes hami-dra-plugin's GPUs (no ResourceSlice of driver " +
           std::string(kDraDriver) + ").";
  }
  for (const auto& n : view.dra_nodes) {
    if (n.fit) {
      return "Pending, but node " + n.name +
             " can allocate its claims now: kube-scheduler should place it at its next attempt.";
    }
  }
  return "Pending: no node can allocate the pod's claims now (the reasons per node are above).";
}

}  // namespace

bool ExplainDra(const ExplainInput& input, ExplainView* view) {
  const DraView dra = ReadDra(input.dra);
  const std::vector<PodClaim> claims = PodClaims(input.pod, dra);
  if (claims.empty() || !IsDraPod(input.pod, claims)) return false;
  std::map<std::string, std::string> templates;  // entry -> template
  const json spec = input.pod.is_object() ? input.pod.value("spec", json::object()) : json();
  const json entries = spec.is_object() ? spec.value("resourceClaims", json::array()) : json();
  for (const json& e : entries.is_array() ? entries : json::array()) {
    if (!e.is_object()) continue;
    const json name = e.value("name", json());
    const json t = e.value("resourceClaimTemplateName", json());
    if (name.is_string() && t.is_string())
      templates[name.get<std::string>()] = t.get<std::string>();
  }
  std::map<std::string, const json*> objects;  // by "NS/NAME"
  for (const json& c : input.dra.claims) objects[Key(c)] = &c;
  std::vector<json> pending;
  bool missing = false;
  std::set<std::string> mine;
  for (const PodClaim& c : claims) {
    ExplainClaim ec;
    ec.name = c.name;
    ec.claim = c.claim;
    if (auto t = templates.find(c.name); t != templates.end()) ec.template_name = t->second;
    ec.containers = c.containers;
    if (!c.claim) {
      ec.state = "not created";
    } else if (c.found == nullptr) {
      ec.state = "not found";
    } else if (!c.found->allocated) {
      ec.state = "pending";
      pending.push_back(*objects.at(view->ns + "/" + *c.claim));
    } else {
      ec.state = c.found->shares.empty() ? "other driver" : "allocated";
      ec.shares = c.found->shares;
    }
    missing = missing || c.found == nullptr;
    if (c.claim) mine.insert("resourceclaim " + view->ns + "/" + *c.claim + ":");
    view->claims.push_back(std::move(ec));
  }
  for (const std::string& w : dra.warnings) {
    for (const std::string& prefix : mine) {
      if (w.starts_with(prefix)) view->warnings.push_back(w);
    }
  }
  const json node = spec.is_object() ? spec.value("nodeName", json()) : json();
  const bool bound = node.is_string() && !node.get<std::string>().empty();
  const bool run = !bound && !missing && !pending.empty();
  if (run) {
    RunAllocator(input, dra, pending, view);
    // The nodes the allocator ran on have a device; so do those hami-scheduler's filter showed.
    view->other_nodes = std::max<int64_t>(0, static_cast<int64_t>(input.nodes.size()) -
                                                 static_cast<int64_t>(view->dra_nodes.size()) -
                                                 static_cast<int64_t>(view->nodes.size()));
  }
  view->summary = Summary(node, *view, run);
  return true;
}

std::string ExplainDraText(const ExplainView& view, const TableOptions& options) {
  if (view.claims.empty()) return "";
  std::string out = "\nClaims:\n";
  std::vector<std::vector<std::string>> rows;
  if (!options.no_headers) rows.push_back({"NAME", "CLAIM", "STATE", "CONTAINERS", "HOLDS"});
  for (const auto& c : view.claims) {
    std::vector<std::string> holds;
    for (const auto& s : c.shares) holds.push_back(ShareWords(s));
    std::string state = c.state;
    if (c.state == "not created" && c.template_name)
      state += " (template " + *c.template_name + ")";
    rows.push_back({c.name, c.claim.value_or("<none>"), state,
                    c.containers.empty() ? "<none>" : Join(c.containers, ","),
                    holds.empty() ? "<none>" : Join(holds, ", ")});
  }
  out += RenderTable(rows, 2);
  if (view.dra_nodes.empty()) return out;
  out += "\nDRA allocation, computed now (kube-scheduler's allocator):\n";
  rows.clear();
  if (!options.no_headers) rows.push_back({"NODE", "FIT", "WHY"});
  std::vector<int> fit_of_row(rows.size(), -1);  // colour: 1 yes, 0 no, -1 none
  for (const auto& n : view.dra_nodes) {
    std::vector<std::string> lines = n.details;
    if (!n.fit) lines.insert(lines.begin(), n.reason);
    if (lines.empty()) lines.push_back("");
    for (size_t i = 0; i < lines.size(); ++i) {
      rows.push_back({i == 0 ? n.name : "", i == 0 ? (n.fit ? "yes" : "no") : "", lines[i]});
      fit_of_row.push_back(i == 0 ? (n.fit ? 1 : 0) : -1);
    }
  }
  out += RenderTable(rows, 2, [&](size_t row, size_t col) -> const char* {
    if (!options.colour || col != 1 || fit_of_row[row] < 0) return nullptr;
    return fit_of_row[row] == 1 ? "\033[32m" : "\033[31m";
  });
  if (view.other_nodes > 0) {
    out += "  (" + std::to_string(view.other_nodes) + " node(s) without a HAMi device)\n";
  }
  return out;
}

}  // namespace hami::cli
