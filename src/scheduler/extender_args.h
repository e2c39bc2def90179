// The kube-scheduler extender wire shapes (docs/protocol.md#scheduler-extender): the Go structs
// carry no JSON tags, so keys are capitalised ("Pod", "NodeNames"); like Go's decoder we accept any
// case, and `null` reads as absent. Decoding never throws: a malformed body is an Error naming the
// field.
#ifndef HAMI_SCHEDULER_EXTENDER_ARGS_H_
#define HAMI_SCHEDULER_EXTENDER_ARGS_H_

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hami::scheduler {

// ExtenderArgs.
struct ExtenderArgs {
  nlohmann::json pod;                                    // null when absent
  std::optional<std::vector<nlohmann::json>> nodes{};    // Nodes.items; set => simulation
  std::optional<std::vector<std::string>> node_names{};  // NodeNames, de-duplicated
  size_t node_names_dropped = 0;                         // distinct names past the cap
};
// NodeNames keeps at most `max_node_names` distinct names (in order; duplicates dropped); the
// rest are counted in node_names_dropped without being stored, so a body of millions of names
// costs memory in proportion to the cap, not to the body (docs/SECURITY.md).
Result<ExtenderArgs> ParseExtenderArgs(std::string_view body,
                                       size_t max_node_names = static_cast<size_t>(-1));

// ExtenderBindingArgs.
struct BindingArgs {
  std::string pod_name{};
  std::string pod_namespace{};
  std::string pod_uid{};
  std::string node{};
};
Result<BindingArgs> ParseBindingArgs(std::string_view body);

// ExtenderFilterResult as JSON: absent lists and maps are null, Error always present.
struct FilterResult {
  std::optional<std::vector<nlohmann::json>> nodes{};
  std::optional<std::vector<std::string>> node_names{};
  std::optional<std::map<std::string, std::string>> failed_nodes{};
  std::string error{};
};
std::string EncodeFilterResult(const FilterResult& result);

// ExtenderBindingResult: {"Error":"..."}.
std::string EncodeBindingResult(std::string_view error);

// The member of `obj` whose key equals `key` case-insensitively (exact match preferred); null
// when absent or null.
const nlohmann::json* FindKeyInsensitive(const nlohmann::json& obj, std::string_view key);

}  // namespace hami::scheduler

#endif  // HAMI_SCHEDULER_EXTENDER_ARGS_H_
