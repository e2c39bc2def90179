#include "protocol/handshake.h"

#include <gtest/gtest.h>

#include <chrono>

namespace hami::protocol {
namespace {

using std::chrono::nanoseconds;
using std::chrono::seconds;

SystemTime At(int64_t secs, int64_t nanos = 0) {
  return SystemTime(
      std::chrono::duration_cast<SystemTime::duration>(seconds{secs} + nanoseconds{nanos}));
}

constexpr int64_t kSeedInstant = 1705984204;  // 2024-01-23 04:30:04 UTC
const Zone kUtc = Zone::Utc();
const Zone kPlus8 = Zone::Fixed(8 * 3600);

TEST(Handshake, ParsesEveryForm) {
  struct Case {
    const char* value;
    HandshakeKind kind;
    std::optional<std::string> timestamp;
    std::optional<SystemTime> time;
  };
  const Case cases[] = {
      {"Requesting_2024-01-23 04:30:04", HandshakeKind::kRequesting, "2024-01-23 04:30:04",
       At(kSeedInstant)},
      {"Reported_2024-01-23 04:30:04", HandshakeKind::kReported, "2024-01-23 04:30:04",
       At(kSeedInstant)},
      {"Deleted_2024-01-23 04:30:04", HandshakeKind::kDeleted, "2024-01-23 04:30:04",
       At(kSeedInstant)},
      {"Reported 2024-01-23 04:30:04.434037031 +0000 UTC m=+1104711.7",
       HandshakeKind::kReportedLegacy, "2024-01-23 04:30:04.434037031 +0000 UTC m=+1104711.7",
       At(kSeedInstant, 434037031)},
      {"Reported 2024-01-23 12:30:04 +0800 CST", HandshakeKind::kReportedLegacy,
       "2024-01-23 12:30:04 +0800 CST", At(kSeedInstant)},
      {"Requesting", HandshakeKind::kRequesting, std::nullopt, std::nullopt},
      {"Requesting_not-a-timestamp", HandshakeKind::kRequesting, "not-a-timestamp", std::nullopt},
      {"Requesting_", HandshakeKind::kRequesting, "", std::nullopt},
      {"Reported 2024-01-23 04:30:04 +0000", HandshakeKind::kReportedLegacy,
       "2024-01-23 04:30:04 +0000", std::nullopt},
      {"", HandshakeKind::kOther, std::nullopt, std::nullopt},
      {"requesting_2024-01-23 04:30:04", HandshakeKind::kOther, std::nullopt, std::nullopt},
      {"RequestingX", HandshakeKind::kOther, std::nullopt, std::nullopt},
  };
  for (const auto& c : cases) {
    Handshake h = ParseHandshake(c.value, kUtc);
    EXPECT_EQ(h.kind, c.kind) << c.value;
    EXPECT_EQ(h.timestamp, c.timestamp) << c.value;
    EXPECT_EQ(h.time, c.time) << c.value;
    EXPECT_EQ(h.raw, c.value);
    EXPECT_EQ(h.time_error.empty(), !h.timestamp || h.time.has_value()) << c.value;
  }
}

TEST(Handshake, TimestampIsReadInTheGivenZone) {
  Handshake h = ParseHandshake("Requesting_2024-01-23 12:30:04", kPlus8);
  EXPECT_EQ(h.time, At(kSeedInstant));
  Handshake legacy = ParseHandshake("Reported 2024-01-23 12:30:04 +0800 CST", kUtc);
  EXPECT_EQ(legacy.legacy_offset_seconds, 8 * 3600);
}

TEST(Handshake, Formats) {
  EXPECT_EQ(FormatHandshake(HandshakeKind::kRequesting, At(kSeedInstant), kUtc),
            "Requesting_2024-01-23 04:30:04");  // HAMi's documented value
  EXPECT_EQ(FormatHandshake(HandshakeKind::kReported, At(kSeedInstant), kPlus8),
            "Reported_2024-01-23 12:30:04");
  EXPECT_EQ(FormatHandshake(HandshakeKind::kDeleted, At(kSeedInstant, 5), kUtc),
            "Deleted_2024-01-23 04:30:04");
  EXPECT_EQ(FormatHandshake(HandshakeKind::kReportedLegacy, At(kSeedInstant, 434037031), kUtc),
            "Reported 2024-01-23 04:30:04.434037031 +0000 UTC");
  EXPECT_EQ(FormatHandshake(HandshakeKind::kReportedLegacy, At(kSeedInstant, 500000000), kPlus8),
            "Reported 2024-01-23 12:30:04.5 +0800 +08");
  EXPECT_EQ(FormatHandshake(HandshakeKind::kOther, At(kSeedInstant), kUtc), "");
}

TEST(Handshake, KindNamesRoundTrip) {
  for (HandshakeKind k :
       {HandshakeKind::kRequesting, HandshakeKind::kReported, HandshakeKind::kDeleted,
        HandshakeKind::kReportedLegacy, HandshakeKind::kOther}) {
    EXPECT_EQ(HandshakeKindFromName(HandshakeKindName(k)), k);
  }
  EXPECT_FALSE(HandshakeKindFromName("requesting"));
}

// The rule of docs/protocol.md#node-registration-and-the-handshake, plus the 60 s window edges
// and the write branch.
TEST(CheckHandshake, SpecVector20AndWindow) {
  const SystemTime now = At(1795000000);  // 2026-11-18 11:06:40 UTC
  struct Case {
    std::optional<std::string_view> value;
    bool allocatable;
    bool healthy, need_update, write;
  };
  const std::string fresh = FormatHandshake(HandshakeKind::kRequesting, now - seconds(60), kUtc);
  const std::string stale = FormatHandshake(HandshakeKind::kRequesting, now - seconds(61), kUtc);
  const Case cases[] = {
      {"Requesting_2128-12-02 00:00:00", false, true, false, false},  // future
      {"Requesting", false, true, false, false},
      {"Requesting_not-a-timestamp", false, true, false, false},
      {"Requesting_2024-01-02 00:00:00", false, false, false, false},  // expired, none alloc.
      {"Requesting_2024-01-02 00:00:00", true, true, false, false},    // expired, allocatable
      {fresh, false, true, false, false},                              // exactly 60 s: fresh
      {stale, false, false, false, false},
      {"xRequesting_2024-01-02 00:00:00", false, true, false, false},  // contains: left alone
      {std::nullopt, false, true, true, true},
      {"", true, true, true, true},
      {"Reported_2024-01-02 00:00:00", false, true, true, true},
      {"Deleted_2024-01-02 00:00:00", false, true, true, true},
      {"Reported 2024-01-23 04:30:04.434037031 +0000 UTC m=+1104711.7", false, true, true, true},
  };
  for (const auto& c : cases) {
    HandshakeVerdict v = CheckHandshake(c.value, now, c.allocatable, kUtc);
    std::string label = c.value ? std::string(*c.value) : "(absent)";
    EXPECT_EQ(v.healthy, c.healthy) << label;
    EXPECT_EQ(v.need_update, c.need_update) << label;
    EXPECT_EQ(v.write_requesting, c.write) << label;
    EXPECT_EQ(v.new_value, c.write ? "Requesting_2026-11-18 11:06:40" : "") << label;
  }
}

TEST(CheckHandshake, UsesTheZoneForReadingAndWriting) {
  const SystemTime now = At(1795000000);
  // Written 30 s ago on a +08:00 scheduler; read back in +08:00 it is fresh.
  std::string v = FormatHandshake(HandshakeKind::kRequesting, now - seconds(30), kPlus8);
  EXPECT_TRUE(CheckHandshake(v, now, false, kPlus8).healthy);
  // Written in UTC, read as +08:00 it looks 8 h old: expired.
  std::string utc = FormatHandshake(HandshakeKind::kRequesting, now - seconds(30), kUtc);
  EXPECT_FALSE(CheckHandshake(utc, now, false, kPlus8).healthy);
  EXPECT_EQ(CheckHandshake(std::nullopt, now, false, kPlus8).new_value,
            "Requesting_2026-11-18 19:06:40");
  // A custom window.
  EXPECT_FALSE(CheckHandshake(v, now, false, kPlus8, seconds(10)).healthy);
}

}  // namespace
}  // namespace hami::protocol
