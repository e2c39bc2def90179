// Fuzzes the handshake parser and verdict: never crashes; every timestamped value re-formats to
// a value that parses to the same kind and instant (to the second for the underscore forms).
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/handshake.h"

using hami::SystemTime;
using hami::Zone;
using hami::protocol::HandshakeKind;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const Zone zone = Zone::Fixed(5 * 3600 + 30 * 60);
  auto h = hami::protocol::ParseHandshake(in, zone);
  if (h.raw != in) std::abort();
  (void)hami::protocol::CheckHandshake(in, SystemTime{}, size % 2 == 0, zone);
  if (!h.time) return 0;
  bool legacy = h.kind == HandshakeKind::kReportedLegacy;
  Zone out_zone = legacy ? Zone::Fixed(h.legacy_offset_seconds) : zone;
  auto again = hami::protocol::ParseHandshake(
      hami::protocol::FormatHandshake(h.kind, *h.time, out_zone), zone);
  if (again.kind != h.kind || !again.time) std::abort();
  SystemTime want = legacy ? *h.time : std::chrono::floor<std::chrono::seconds>(*h.time);
  if (*again.time != want) std::abort();
  return 0;
}
