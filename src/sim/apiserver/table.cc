// meta.k8s.io Table responses for pods, nodes and the resource.k8s.io kinds, with the columns and
// cells of kube-apiserver's printers (pkg/printers/internalversion/printers.go: printPod,
// printNode, printResourceClaim, printResourceSlice, ...).
#include "sim/apiserver/table.h"

#include <chrono>
#include <string_view>
#include <vector>

#include "common/strings.h"
#include "common/time_format.h"

namespace hami::sim {
namespace {

using Json = nlohmann::json;

Json Column(const char* name, const char* type, const char* description, int priority = 0,
            const char* format = "") {
  return Json{{"name", name},
              {"type", type},
              {"format", format},
              {"description", description},
              {"priority", priority}};
}

std::string Str(const Json& obj, std::initializer_list<const char*> path) {
  const Json* cur = &obj;
  for (const char* key : path) {
    if (!cur->is_object()) return "";
    auto it = cur->find(key);
    if (it == cur->end()) return "";
    cur = &*it;
  }
  return cur->is_string() ? cur->get<std::string>() : "";
}

const Json& Field(const Json& obj, const char* key) {
  static const Json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

std::string OrNone(std::string s) { return s.empty() ? "<none>" : s; }

std::string Age(const Json& obj, SystemTime now) {
  std::string created = Str(obj, {"metadata", "creationTimestamp"});
  if (created.empty()) return "<unknown>";
  auto t = ParseRfc3339(created);
  if (!t) return "<unknown>";
  return HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(now - t->instant));
}

int64_t Int(const Json& j) { return j.is_number_integer() ? j.get<int64_t>() : 0; }

// printPod's READY, STATUS and RESTARTS.
void PodStatus(const Json& pod, int& ready, int& total, std::string& reason, int64_t& restarts) {
  const Json& spec = Field(pod, "spec");
  const Json& status = Field(pod, "status");
  const Json& containers = Field(spec, "containers");
  total = containers.is_array() ? static_cast<int>(containers.size()) : 0;
  ready = 0;
  restarts = 0;
  reason = Str(status, {"phase"});
  if (!Str(status, {"reason"}).empty()) reason = Str(status, {"reason"});
  bool initializing = false;
  const Json& init = Field(status, "initContainerStatuses");
  const Json& init_specs = Field(spec, "initContainers");
  if (init.is_array()) {
    for (size_t i = 0; i < init.size(); ++i) {
      const Json& c = init[i];
      restarts += Int(Field(c, "restartCount"));
      const Json& state = Field(c, "state");
      const Json& term = Field(state, "terminated");
      const Json& wait = Field(state, "waiting");
      if (term.is_object() && Int(Field(term, "exitCode")) == 0) continue;
      initializing = true;
      if (term.is_object()) {
        std::string r = Str(term, {"reason"});
        if (!r.empty()) {
          reason = "Init:" + r;
        } else if (Int(Field(term, "signal")) != 0) {
          reason = "Init:Signal:" + std::to_string(Int(Field(term, "signal")));
        } else {
          reason = "Init:ExitCode:" + std::to_string(Int(Field(term, "exitCode")));
        }
      } else if (wait.is_object() && !Str(wait, {"reason"}).empty() &&
                 Str(wait, {"reason"}) != "PodInitializing") {
        reason = "Init:" + Str(wait, {"reason"});
      } else {
        reason = "Init:" + std::to_string(i) + "/" +
                 std::to_string(init_specs.is_array() ? init_specs.size() : 0);
      }
      break;
    }
  }
  if (!initializing) {
    restarts = 0;
    bool has_running = false;
    const Json& cs = Field(status, "containerStatuses");
    if (cs.is_array()) {
      for (size_t i = cs.size(); i-- > 0;) {
        const Json& c = cs[i];
        restarts += Int(Field(c, "restartCount"));
        const Json& state = Field(c, "state");
        const Json& term = Field(state, "terminated");
        const Json& wait = Field(state, "waiting");
        if (wait.is_object() && !Str(wait, {"reason"}).empty()) {
          reason = Str(wait, {"reason"});
        } else if (term.is_object() && !Str(term, {"reason"}).empty()) {
          reason = Str(term, {"reason"});
        } else if (term.is_object()) {
          reason = Int(Field(term, "signal")) != 0
                       ? "Signal:" + std::to_string(Int(Field(term, "signal")))
                       : "ExitCode:" + std::to_string(Int(Field(term, "exitCode")));
        } else if (Field(c, "ready") == true && Field(state, "running").is_object()) {
          has_running = true;
          ++ready;
        }
      }
    }
    if (reason == "Completed" && has_running) {
      bool pod_ready = false;
      const Json& conds = Field(status, "conditions");
      if (conds.is_array()) {
        for (const Json& c : conds) {
          if (Str(c, {"type"}) == "Ready" && Str(c, {"status"}) == "True") pod_ready = true;
        }
      }
      reason = pod_ready ? "Running" : "NotReady";
    }
  }
  const Json& deleting = Field(Field(pod, "metadata"), "deletionTimestamp");
  if (!deleting.is_null()) reason = reason == "NodeLost" ? "Unknown" : "Terminating";
}

std::string ReadinessGates(const Json& pod) {
  const Json& gates = Field(Field(pod, "spec"), "readinessGates");
  if (!gates.is_array() || gates.empty()) return "<none>";
  size_t met = 0;
  const Json& conds = Field(Field(pod, "status"), "conditions");
  for (const Json& g : gates) {
    if (!conds.is_array()) break;
    for (const Json& c : conds) {
      if (Str(c, {"type"}) == Str(g, {"conditionType"}) && Str(c, {"status"}) == "True") ++met;
    }
  }
  return std::to_string(met) + "/" + std::to_string(gates.size());
}

Json PodCells(const Json& pod, SystemTime now) {
  int ready = 0;
  int total = 0;
  std::string reason;
  int64_t restarts = 0;
  PodStatus(pod, ready, total, reason, restarts);
  return Json::array({Str(pod, {"metadata", "name"}),
                      std::to_string(ready) + "/" + std::to_string(total), reason,
                      std::to_string(restarts), Age(pod, now),
                      OrNone(Str(pod, {"status", "podIP"})), OrNone(Str(pod, {"spec", "nodeName"})),
                      OrNone(Str(pod, {"status", "nominatedNodeName"})), ReadinessGates(pod)});
}

std::string NodeAddress(const Json& node, std::string_view type) {
  const Json& addrs = Field(Field(node, "status"), "addresses");
  if (!addrs.is_array()) return "<none>";
  for (const Json& a : addrs) {
    if (Str(a, {"type"}) == type) return OrNone(Str(a, {"address"}));
  }
  return "<none>";
}

Json NodeCells(const Json& node, SystemTime now) {
  std::string status;
  const Json& conds = Field(Field(node, "status"), "conditions");
  if (conds.is_array()) {
    for (const Json& c : conds) {
      if (Str(c, {"type"}) != "Ready") continue;
      status = Str(c, {"status"}) == "True" ? "Ready" : "NotReady";
    }
  }
  if (status.empty()) status = "Unknown";
  if (Field(Field(node, "spec"), "unschedulable") == true) status += ",SchedulingDisabled";
  std::vector<std::string> roles;
  const Json& labels = Field(Field(node, "metadata"), "labels");
  if (labels.is_object()) {
    constexpr std::string_view kRolePrefix = "node-role.kubernetes.io/";
    for (auto it = labels.begin(); it != labels.end(); ++it) {
      if (it.key().rfind(kRolePrefix, 0) == 0 && it.key().size() > kRolePrefix.size()) {
        roles.push_back(it.key().substr(kRolePrefix.size()));
      } else if (it.key() == "kubernetes.io/role" && it->is_string() &&
                 !it->get<std::string>().empty()) {
        roles.push_back(it->get<std::string>());
      }
    }
  }
  std::string role_text;
  for (const std::string& r : roles) role_text += (role_text.empty() ? "" : ",") + r;
  auto unknown = [](std::string s) { return s.empty() ? std::string("<unknown>") : s; };
  return Json::array({Str(node, {"metadata", "name"}), status, OrNone(role_text), Age(node, now),
                      Str(node, {"status", "nodeInfo", "kubeletVersion"}),
                      NodeAddress(node, "InternalIP"), NodeAddress(node, "ExternalIP"),
                      unknown(Str(node, {"status", "nodeInfo", "osImage"})),
                      unknown(Str(node, {"status", "nodeInfo", "kernelVersion"})),
                      unknown(Str(node, {"status", "nodeInfo", "containerRuntimeVersion"}))});
}

const Json& PodColumns() {
  static const Json kColumns = Json::array(
      {Column("Name", "string",
              "Name must be unique within a namespace. Is required when creating resources, "
              "although some resources may allow a client to request the generation of an "
              "appropriate name automatically.",
              0, "name"),
       Column("Ready", "string",
              "The aggregate readiness state of this pod for accepting traffic."),
       Column("Status", "string", "The aggregate status of the containers in this pod."),
       Column("Restarts", "string",
              "The number of times the containers in this pod have been restarted and when the "
              "last container in this pod has restarted."),
       Column("Age", "string",
              "CreationTimestamp is a timestamp representing the server time when this object "
              "was created."),
       Column("IP", "string",
              "IP address allocated to the pod. Routable at least within the "
              "cluster. Empty if not yet allocated.",
              1),
       Column("Node", "string", "NodeName is a request to schedule this pod onto a specific node.",
              1),
       Column("Nominated Node", "string",
              "nominatedNodeName is set only when this pod preempts other pods on the node.", 1),
       Column("Readiness Gates", "string",
              "If specified, all readiness gates will be evaluated for pod readiness.", 1)});
  return kColumns;
}

const Json& NodeColumns() {
  static const Json kColumns = Json::array(
      {Column("Name", "string",
              "Name must be unique within a namespace. Is required when creating resources, "
              "although some resources may allow a client to request the generation of an "
              "appropriate name automatically.",
              0, "name"),
       Column("Status", "string", "The status of the node"),
       Column("Roles", "string", "The roles of the node"),
       Column("Age", "string",
              "CreationTimestamp is a timestamp representing the server time when this object "
              "was created."),
       Column("Version", "string", "Kubelet Version reported by the node."),
       Column("Internal-IP", "string", "List of internal IPs that are assigned to the node.", 1),
       Column("External-IP", "string", "List of external IPs that are assigned to the node.", 1),
       Column("OS-Image", "string",
              "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 "
              "(wheezy)).",
              1),
       Column("Kernel-Version", "string",
              "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
              1),
       Column("Container-Runtime", "string",
              "ContainerRuntime Version reported by the node through runtime remote API (e.g. "
              "containerd://1.4.2).",
              1)});
  return kColumns;
}

Json NameColumn() {
  return Column("Name", "string",
                "Name must be unique within a namespace. Is required when creating resources, "
                "although some resources may allow a client to request the generation of an "
                "appropriate name automatically.",
                0, "name");
}
Json AgeColumn() {
  return Column("Age", "string",
                "CreationTimestamp is a timestamp representing the server time when this object "
                "was created.");
}

// printResourceClaim's STATE: deleted, pending, allocated, reserved, comma-separated.
std::string ClaimState(const Json& claim) {
  std::vector<std::string> states;
  const bool deleting = !Field(Field(claim, "metadata"), "deletionTimestamp").is_null();
  if (deleting) states.push_back("deleted");
  const Json& status = Field(claim, "status");
  if (Field(status, "allocation").is_null()) {
    if (!deleting) states.push_back("pending");
  } else {
    states.push_back("allocated");
    const Json& reserved = Field(status, "reservedFor");
    if (reserved.is_array() && !reserved.empty()) states.push_back("reserved");
  }
  std::string out;
  for (const auto& s : states) out += (out.empty() ? "" : ",") + s;
  return out;
}

// kube-apiserver's printers for the resource.k8s.io kinds (printDeviceClass, printResourceClaim,
// printResourceClaimTemplate, printResourceSlice).
const Json& DraColumns(const std::string& kind) {
  static const Json kNameAge = Json::array({NameColumn(), AgeColumn()});
  static const Json kClaim =
      Json::array({NameColumn(),
                   Column("State", "string",
                          "A summary of the current state (allocated, pending, reserved, etc.)."),
                   AgeColumn()});
  static const Json kSlice = Json::array(
      {NameColumn(),
       Column("Node", "string",
              "NodeName identifies the node which provides the resources in this pool."),
       Column("Driver", "string",
              "Driver identifies the DRA driver providing the capacity information."),
       Column("Pool", "string", "Name is used to identify the pool."), AgeColumn()});
  if (kind == "ResourceClaim") return kClaim;
  if (kind == "ResourceSlice") return kSlice;
  return kNameAge;
}

Json DraCells(const std::string& kind, const Json& obj, SystemTime now) {
  const std::string name = Str(obj, {"metadata", "name"});
  if (kind == "ResourceClaim") return Json::array({name, ClaimState(obj), Age(obj, now)});
  if (kind == "ResourceSlice") {
    return Json::array({name, Str(obj, {"spec", "nodeName"}), Str(obj, {"spec", "driver"}),
                        Str(obj, {"spec", "pool", "name"}), Age(obj, now)});
  }
  return Json::array({name, Age(obj, now)});
}

bool IsPods(const ResourceType& t) { return t.group.empty() && t.plural == "pods"; }
bool IsNodes(const ResourceType& t) { return t.group.empty() && t.plural == "nodes"; }
bool IsDra(const ResourceType& t) { return t.group == "resource.k8s.io"; }

Json Cells(const ResourceType& t, const Json& obj, SystemTime now) {
  if (IsPods(t)) return PodCells(obj, now);
  if (IsNodes(t)) return NodeCells(obj, now);
  return DraCells(t.kind, obj, now);
}

const Json& Columns(const ResourceType& t) {
  if (IsPods(t)) return PodColumns();
  if (IsNodes(t)) return NodeColumns();
  return DraColumns(t.kind);
}

}  // namespace

std::optional<std::string> WantedTableVersion(const std::string& accept) {
  for (std::string_view part : Split(accept, ',')) {
    bool table = false;
    bool meta_group = false;
    std::string version;
    for (std::string_view p : Split(part, ';')) {
      std::string param(Trim(p));
      if (param == "as=Table") table = true;
      if (param == "g=meta.k8s.io") meta_group = true;
      if (param.rfind("v=", 0) == 0) version = param.substr(2);
    }
    if (table && meta_group && (version == "v1" || version == "v1beta1")) return version;
  }
  return std::nullopt;
}

bool HasTableColumns(const ResourceType& type) {
  return IsPods(type) || IsNodes(type) || IsDra(type);
}

nlohmann::json ToTable(const ResourceType& type, const std::vector<ObjectPtr>& items,
                       const std::string& version, const std::string& include_object,
                       SystemTime now, const nlohmann::json& list_metadata) {
  Json rows = Json::array();
  for (const ObjectPtr& item : items) {
    Json row = {{"cells", Cells(type, item->json, now)}};
    if (include_object == "Object") {
      row["object"] = item->json;
    } else if (include_object != "None") {
      row["object"] = Json{{"kind", "PartialObjectMetadata"},
                           {"apiVersion", "meta.k8s.io/" + version},
                           {"metadata", Field(item->json, "metadata")}};
    }
    rows.push_back(std::move(row));
  }
  return Json{{"kind", "Table"},
              {"apiVersion", "meta.k8s.io/" + version},
              {"metadata", list_metadata},
              {"columnDefinitions", Columns(type)},
              {"rows", std::move(rows)}};
}

std::string HumanDuration(std::chrono::seconds d) {
  const int64_t s = d.count();
  if (s < -1) return "<invalid>";
  if (s < 0) return "0s";
  if (s < 60 * 2) return std::to_string(s) + "s";
  const int64_t minutes = s / 60;
  if (minutes < 10) {
    const int64_t rest = s % 60;
    return std::to_string(minutes) + "m" + (rest == 0 ? "" : std::to_string(rest) + "s");
  }
  if (minutes < 60 * 3) return std::to_string(minutes) + "m";
  const int64_t hours = minutes / 60;
  if (hours < 8) {
    const int64_t rest = minutes % 60;
    return std::to_string(hours) + "h" + (rest == 0 ? "" : std::to_string(rest) + "m");
  }
  if (hours < 48) return std::to_string(hours) + "h";
  const int64_t days = hours / 24;
  if (hours < 24 * 8) {
    const int64_t rest = hours % 24;
    return std::to_string(days) + "d" + (rest == 0 ? "" : std::to_string(rest) + "h");
  }
  if (hours < 24 * 365 * 2) return std::to_string(days) + "d";
  const int64_t years = days / 365;
  if (hours < 24 * 365 * 8) {
    const int64_t rest = days % 365;
    return std::to_string(years) + "y" + (rest == 0 ? "" : std::to_string(rest) + "d");
  }
  return std::to_string(years) + "y";
}

}  // namespace hami::sim
