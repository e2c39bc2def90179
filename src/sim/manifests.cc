#include "sim/manifests.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "common/strings.h"
#include "sim/yaml_json.h"

namespace hami::sim {
namespace {

using nlohmann::json;

std::string StringAt(const json& obj, std::initializer_list<const char*> path) {
  const json* cur = &obj;
  for (const char* key : path) {
    if (!cur->is_object()) return "";
    auto it = cur->find(key);
    if (it == cur->end()) return "";
    cur = &*it;
  }
  return cur->is_string() ? cur->get<std::string>() : "";
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The command + args of the container of the workload's pod template that runs `binary`, or
// nullopt when none does.
std::optional<std::vector<std::string>> ContainerRunning(const json& workload,
                                                         std::string_view binary) {
  const json* containers = nullptr;
  if (workload.contains("spec") && workload["spec"].contains("template")) {
    const json& tmpl = workload["spec"]["template"];
    if (tmpl.is_object() && tmpl.contains("spec") && tmpl["spec"].is_object() &&
        tmpl["spec"].contains("containers")) {
      containers = &tmpl["spec"]["containers"];
    }
  }
  if (containers == nullptr || !containers->is_array()) return std::nullopt;
  for (const json& c : *containers) {
    if (!c.is_object()) continue;
    for (const char* key : {"command", "args"}) {
      auto it = c.find(key);
      if (it == c.end() || !it->is_array() || it->empty()) continue;
      const json& first = (*it)[0];
      if (!first.is_string() || !EndsWith(first.get<std::string>(), binary)) break;
      std::vector<std::string> argv;
      for (const char* part : {"command", "args"}) {
        auto p = c.find(part);
        if (p == c.end() || !p->is_array()) continue;
        for (const json& a : *p) argv.push_back(a.is_string() ? a.get<std::string>() : a.dump());
      }
      return argv;
    }
  }
  return std::nullopt;
}

bool IsRbacKind(const std::string& kind) {
  return kind == "ServiceAccount" || kind == "ClusterRole" || kind == "ClusterRoleBinding" ||
         kind == "Role" || kind == "RoleBinding";
}

}  // namespace

Result<ManifestRbac> ParseManifests(std::string_view yaml_text, const std::string& default_ns) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Error{"manifests: not YAML: " + std::string(e.what())};
  }
  ManifestRbac out;
  std::optional<ServiceAccountRef> scheduler, device_plugin;
  for (size_t i = 0; i < docs.size(); ++i) {
    json obj;
    try {
      obj = YamlToJson(docs[i]);
    } catch (const YAML::Exception& e) {
      return Error{"manifests: document " + std::to_string(i + 1) + ": " + e.what()};
    }
    if (obj.is_null()) continue;  // an empty document (helm leaves them between sources)
    const std::string where = "manifests: document " + std::to_string(i + 1);
    if (!obj.is_object()) return Error{where + ": not a mapping"};
    const std::string kind = StringAt(obj, {"kind"});
    const std::string name = StringAt(obj, {"metadata", "name"});
    std::string ns = StringAt(obj, {"metadata", "namespace"});
    if (ns.empty()) ns = default_ns;
    if (IsRbacKind(kind)) {
      if (name.empty()) return Error{where + " (" + kind + "): metadata.name: required"};
      if (kind == "ServiceAccount" || kind == "Role" || kind == "RoleBinding") {
        obj["metadata"]["namespace"] = ns;
      }
      out.objects.push_back(std::move(obj));
      continue;
    }
    if (kind != "Deployment" && kind != "DaemonSet") continue;
    std::string sa = StringAt(obj, {"spec", "template", "spec", "serviceAccountName"});
    if (sa.empty()) sa = "default";
    if (kind == "Deployment") {
      if (auto argv = ContainerRunning(obj, "hami-scheduler")) {
        if (scheduler) return Error{where + ": a second Deployment runs hami-scheduler: " + name};
        scheduler = ServiceAccountRef{ns, sa};
        out.scheduler_command = std::move(*argv);
      }
    }
    for (const char* plugin : {"hami-device-plugin", "hami-dra-plugin"}) {
      if (kind != "DaemonSet" || !ContainerRunning(obj, plugin)) continue;
      if (device_plugin) {
        return Error{where + ": a second DaemonSet runs a node plugin (" + plugin + "): " + name};
      }
      device_plugin = ServiceAccountRef{ns, sa};
      out.dra_plugin = std::string_view(plugin) == "hami-dra-plugin";
    }
  }
  if (!scheduler) return Error{"manifests: no Deployment runs hami-scheduler (container command)"};
  if (!device_plugin) {
    return Error{
        "manifests: no DaemonSet runs hami-device-plugin or hami-dra-plugin (container command)"};
  }
  out.scheduler = *scheduler;
  out.device_plugin = *device_plugin;
  return out;
}

std::string FlagValue(const std::vector<std::string>& args, std::string_view name) {
  const std::string flag = "--" + std::string(name);
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind(flag + "=", 0) == 0) return args[i].substr(flag.size() + 1);
    if (args[i] != flag) continue;
    if (i + 1 < args.size() && args[i + 1].rfind("-", 0) != 0) return args[i + 1];
    return "true";
  }
  return "";
}

Result<ManifestRbac> LoadManifestsFile(const std::string& path, const std::string& default_ns) {
  std::ifstream in(path);
  if (!in) return Error{"--manifests " + Quote(path) + ": cannot read"};
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = ParseManifests(text.str(), default_ns);
  if (!parsed) return Error{"--manifests " + Quote(path) + ": " + parsed.error()};
  return parsed;
}

}  // namespace hami::sim
