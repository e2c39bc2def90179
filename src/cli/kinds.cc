#include "cli/kinds.h"

#include <algorithm>

namespace hami::cli {
namespace {
std::vector<Kind>& Registry() {
  static std::vector<Kind> kinds;
  return kinds;
}
}  // namespace

KindRegistrar::KindRegistrar(Kind kind) { Registry().push_back(std::move(kind)); }

std::vector<Kind> Kinds() {
  std::vector<Kind> out = Registry();
  std::sort(out.begin(), out.end(), [](const Kind& a, const Kind& b) { return a.name < b.name; });
  return out;
}

}  // namespace hami::cli
