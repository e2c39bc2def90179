// Fuzzes the CEL subset of DRA selectors (src/dra/cel.h) with expressions from users: any bytes
// compile or fail with a message, a compiled expression evaluates (or fails) the same way every
// time, in parentheses, and negated.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "dra/cel.h"

namespace {

using hami::dra::CelDevice;
using hami::dra::CelProgram;

const CelDevice& Gpu() {
  static const CelDevice gpu = hami::dra::DeviceFromSlice(nlohmann::json::parse(R"({
    "name": "hami-gpu-0",
    "attributes": {"type": {"string": "hami-gpu"}, "uuid": {"string": "GPU-a"},
                   "minor": {"int": 0}, "productName": {"string": "NVIDIA A100-SXM4-80GB"},
                   "driverVersion": {"version": "550.54.15"}, "bad": {"version": "1.2"},
                   "healthy": {"bool": true}, "resource.kubernetes.io/pcieRoot": {"string": "p"}},
    "capacity": {"cores": {"value": "100"}, "memory": {"value": "80Gi"}},
    "allowMultipleAllocations": true})"),
                                                          "hami-core-gpu.project-hami.io");
  return gpu;
}

// The same outcome: both errors, or both the same bool (`negated`: the opposite bool).
bool Same(const hami::Result<bool>& a, const hami::Result<bool>& b, bool negated) {
  if (a.ok() != b.ok()) return false;
  return !a.ok() || (*a != *b) == negated;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto program = CelProgram::Compile(in);
  if (!program) {
    if (program.error().empty()) std::abort();
    return 0;
  }
  static const CelDevice kEmpty;  // no attributes, no capacity: every lookup misses
  for (const CelDevice* device : {&Gpu(), &kEmpty}) {
    const auto got = program->Eval(*device);
    if (!got.ok() && got.error().empty()) std::abort();
    if (!Same(got, program->Eval(*device), false)) std::abort();
    // A line comment cannot end inside the expression's parentheses: only a one-line one.
    if (in.find('/') != std::string_view::npos || in.find('\n') != std::string_view::npos) continue;
    for (const bool negate : {false, true}) {
      auto wrapped = CelProgram::Compile(std::string(negate ? "!(" : "(") + std::string(in) + ")");
      // Only the limits (length, depth) stop a valid expression in parentheses.
      if (!wrapped) continue;
      if (!Same(got, wrapped->Eval(*device), negate)) std::abort();
    }
  }
  return 0;
}
