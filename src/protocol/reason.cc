#include "protocol/reason.h"

#include <algorithm>
#include <vector>

#include "common/strings.h"

namespace hami::protocol {

std::string EncodeReason(const ReasonCounts& counts, int devices_considered) {
  std::vector<std::string> entries;
  for (const auto& [name, count] : counts) {
    if (count == 0) continue;
    entries.push_back(std::to_string(count) + "/" + std::to_string(devices_considered) + " " +
                      name);
  }
  std::sort(entries.begin(), entries.end());
  return Join(entries, ", ");
}

Result<DecodedReason> DecodeReason(std::string_view value) {
  DecodedReason out;
  if (value.empty()) return out;
  bool first = true;
  for (std::string_view raw : Split(value, ',')) {
    std::string_view entry = Trim(raw);
    auto fail = [&](std::string_view what) {
      return Error{"reason entry " + Quote(entry) + ": " + std::string(what) +
                   " (want \"<count>/<devices> <Reason>\")"};
    };
    size_t slash = entry.find('/');
    size_t space = entry.find(' ');
    if (slash == std::string_view::npos || space == std::string_view::npos || space < slash) {
      return fail("malformed");
    }
    auto count = ParseInt32(entry.substr(0, slash));
    auto total = ParseInt32(entry.substr(slash + 1, space - slash - 1));
    std::string_view name = Trim(entry.substr(space + 1));
    if (!count || *count < 0) return fail("count is not a non-negative integer");
    if (!total || *total < 0) return fail("device total is not a non-negative integer");
    if (name.empty() || name.find(' ') != std::string_view::npos) return fail("bad reason name");
    if (!first && *total != out.devices_considered) {
      return fail("device total differs from the first entry's " +
                  std::to_string(out.devices_considered));
    }
    first = false;
    out.devices_considered = *total;
    if (!out.counts.emplace(std::string(name), *count).second) return fail("duplicate reason");
  }
  return out;
}

}  // namespace hami::protocol
