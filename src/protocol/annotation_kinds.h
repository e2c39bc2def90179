// The annotation kinds hamictl and kubectl-hami decode and encode. Each kind turns an annotation
// value into JSON with every field explicit, and JSON (what decode printed, or hand-written) back
// into the exact value. Kinds register themselves (HAMI_REGISTER_KIND): the common formats in
// src/cli/kinds_*.cc, a vendor's own formats in its folder, src/device/vendors/<vendor>/*_kind.cc
// (docs/VENDORS.md), so adding a vendor touches no shared file.
#ifndef HAMI_PROTOCOL_ANNOTATION_KINDS_H_
#define HAMI_PROTOCOL_ANNOTATION_KINDS_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hami::protocol {

struct AnnotationKind {
  std::string name;  // e.g. "node-register"
  std::string help;  // one line for --help
  // Annotation value -> pretty JSON text (no trailing newline).
  Result<std::string> (*decode)(std::string_view value);
  // JSON text -> exact annotation value.
  Result<std::string> (*encode)(std::string_view json);
};

// Every registered kind, sorted by name.
std::vector<AnnotationKind> AnnotationKinds();

class AnnotationKindRegistrar {
 public:
  explicit AnnotationKindRegistrar(AnnotationKind kind);
};

}  // namespace hami::protocol

#define HAMI_KIND_CONCAT_(a, b) a##b
#define HAMI_KIND_CONCAT(a, b) HAMI_KIND_CONCAT_(a, b)
// HAMI_REGISTER_KIND("name", "help", decode, encode); at namespace scope, in a .cc file.
#define HAMI_REGISTER_KIND(...)                                      \
  static ::hami::protocol::AnnotationKindRegistrar HAMI_KIND_CONCAT( \
      kind_registrar_, __LINE__)(::hami::protocol::AnnotationKind{__VA_ARGS__})

#endif  // HAMI_PROTOCOL_ANNOTATION_KINDS_H_
