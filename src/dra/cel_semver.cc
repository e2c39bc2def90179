// The versions of CEL's semver() and of version attributes (cel_internal.h): semver 2.0 parsing
// and precedence.
#include <string>
#include <string_view>
#include <vector>

#include "common/strings.h"
#include "dra/cel_internal.h"

namespace hami::dra::cel {
namespace {

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool IsIdentifierChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

// Checks the dot-separated identifiers of a pre-release or build part; numeric identifiers of a
// pre-release have no leading zeros.
bool ValidIdentifiers(std::string_view part, bool pre, std::vector<std::string>* out) {
  for (std::string_view id : Split(part, '.')) {
    if (id.empty()) return false;
    for (char c : id) {
      if (!IsIdentifierChar(c)) return false;
    }
    if (pre && AllDigits(id) && id.size() > 1 && id[0] == '0') return false;
    if (out != nullptr) out->emplace_back(id);
  }
  return true;
}

// Numbers without leading zeros: the longer one is larger.
int CompareNumbers(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

}  // namespace

Result<Version> ParseVersion(std::string_view text) {
  auto bad = [&](const char* why) { return Error{"invalid version " + Quote(text) + ": " + why}; };
  std::string_view rest = text;
  if (const size_t plus = rest.find('+'); plus != std::string_view::npos) {
    if (!ValidIdentifiers(rest.substr(plus + 1), false, nullptr)) {
      return bad("build metadata must be dot-separated [0-9A-Za-z-] identifiers");
    }
    rest = rest.substr(0, plus);
  }
  Version v;
  if (const size_t dash = rest.find('-'); dash != std::string_view::npos) {
    if (!ValidIdentifiers(rest.substr(dash + 1), true, &v.pre)) {
      return bad(
          "a pre-release must be dot-separated [0-9A-Za-z-] identifiers, numbers without"
          " leading zeros");
    }
    rest = rest.substr(0, dash);
  }
  const std::vector<std::string_view> core = Split(rest, '.');
  if (core.size() != 3) return bad("want MAJOR.MINOR.PATCH");
  for (std::string_view n : core) {
    if (!AllDigits(n) || (n.size() > 1 && n[0] == '0')) {
      return bad("MAJOR, MINOR and PATCH must be numbers without leading zeros");
    }
  }
  v.major = std::string(core[0]);
  v.minor = std::string(core[1]);
  v.patch = std::string(core[2]);
  return v;
}

int CompareVersions(const Version& a, const Version& b) {
  for (int c : {CompareNumbers(a.major, b.major), CompareNumbers(a.minor, b.minor),
                CompareNumbers(a.patch, b.patch)}) {
    if (c != 0) return c;
  }
  if (a.pre.empty() || b.pre.empty()) {  // a release is above its pre-releases
    return a.pre.empty() == b.pre.empty() ? 0 : (a.pre.empty() ? 1 : -1);
  }
  for (size_t i = 0; i < a.pre.size() && i < b.pre.size(); ++i) {
    const bool an = AllDigits(a.pre[i]);
    const bool bn = AllDigits(b.pre[i]);
    int c = 0;
    if (an && bn) {
      c = CompareNumbers(a.pre[i], b.pre[i]);
    } else if (an != bn) {
      c = an ? -1 : 1;  // numeric identifiers are below alphanumeric ones
    } else {
      c = a.pre[i].compare(b.pre[i]);
      c = c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    if (c != 0) return c;
  }
  if (a.pre.size() == b.pre.size()) return 0;
  return a.pre.size() < b.pre.size() ? -1 : 1;
}

}  // namespace hami::dra::cel
