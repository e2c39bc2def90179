#include "protocol/annotation_kinds.h"

#include <algorithm>

namespace hami::protocol {
namespace {
std::vector<AnnotationKind>& Registry() {
  static std::vector<AnnotationKind> kinds;
  return kinds;
}
}  // namespace

AnnotationKindRegistrar::AnnotationKindRegistrar(AnnotationKind kind) {
  Registry().push_back(std::move(kind));
}

std::vector<AnnotationKind> AnnotationKinds() {
  std::vector<AnnotationKind> out = Registry();
  std::sort(out.begin(), out.end(),
            [](const AnnotationKind& a, const AnnotationKind& b) { return a.name < b.name; });
  return out;
}

}  // namespace hami::protocol
