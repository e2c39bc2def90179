// Fuzzes the pod device decoder: never crashes, and whatever decodes re-encodes to a value that
// decodes to the same containers plus the one empty container the trailing ';' always adds.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/pod_devices.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = hami::protocol::DecodePodDevices(in);
  if (!r) {
    // The helpers must cope with malformed values too.
    (void)hami::protocol::HasVendorDevice(in, "NVIDIA");
    (void)hami::protocol::FirstNonEmptyContainer(in);
    return 0;
  }
  std::string enc = hami::protocol::EncodePodDevices(*r);
  auto again = hami::protocol::DecodePodDevices(enc);
  if (!again || again->size() != r->size() + 1 || !again->back().empty()) std::abort();
  again->pop_back();
  if (*again != *r) std::abort();
  if (hami::protocol::FirstNonEmptyContainer(*r) != hami::protocol::FirstNonEmptyContainer(in)) {
    std::abort();
  }
  return 0;
}
