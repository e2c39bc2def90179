// The annotation kinds hamictl knows. Each kind turns an annotation value into JSON with every
// field explicit, and JSON (what decode printed, or hand-written) back into the exact value.
#ifndef HAMI_CLI_KINDS_H_
#define HAMI_CLI_KINDS_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hami::cli {

struct Kind {
  std::string name;  // e.g. "node-register"
  std::string help;  // one line for --help
  // Annotation value -> pretty JSON text (no trailing newline).
  Result<std::string> (*decode)(std::string_view value);
  // JSON text -> exact annotation value.
  Result<std::string> (*encode)(std::string_view json);
};

// All registered kinds, sorted by name.
std::vector<Kind> Kinds();

class KindRegistrar {
 public:
  explicit KindRegistrar(Kind kind);
};

}  // namespace hami::cli

#define HAMI_CLI_CONCAT_(a, b) a##b
#define HAMI_CLI_CONCAT(a, b) HAMI_CLI_CONCAT_(a, b)
#define HAMI_REGISTER_KIND(...)                                      \
  static ::hami::cli::KindRegistrar HAMI_CLI_CONCAT(kind_registrar_, \
                                                    __LINE__)(::hami::cli::Kind{__VA_ARGS__})

#endif  // HAMI_CLI_KINDS_H_
