// The annotation kinds hamictl and kubectl-hami know (protocol/annotation_kinds.h): the common
// formats register in src/cli/kinds_*.cc, each vendor's own in its folder.
#ifndef HAMI_CLI_KINDS_H_
#define HAMI_CLI_KINDS_H_

#include <vector>

#include "protocol/annotation_kinds.h"

namespace hami::cli {

using Kind = protocol::AnnotationKind;

// All registered kinds, sorted by name.
inline std::vector<Kind> Kinds() { return protocol::AnnotationKinds(); }

}  // namespace hami::cli

#endif  // HAMI_CLI_KINDS_H_
