#include "common/time_format.h"

#include <gtest/gtest.h>

#include <chrono>

#include "common/strings.h"

namespace hami {
namespace {

using std::chrono::nanoseconds;
using std::chrono::seconds;

SystemTime At(int64_t unix_seconds, int64_t nanos = 0) {
  return SystemTime(
      std::chrono::duration_cast<SystemTime::duration>(seconds{unix_seconds} + nanoseconds{nanos}));
}

constexpr int kPlus8 = 8 * 3600;
// 2024-01-23 04:30:04 UTC, the seed's handshake timestamp.
constexpr int64_t kSeedInstant = 1705984204;

TEST(DateTime, FormatInZone) {
  EXPECT_EQ(FormatDateTime(At(kSeedInstant), Zone::Utc()), "2024-01-23 04:30:04");
  EXPECT_EQ(FormatDateTime(At(kSeedInstant), Zone::Fixed(kPlus8)), "2024-01-23 12:30:04");
  EXPECT_EQ(FormatDateTime(At(kSeedInstant), Zone::Fixed(-5 * 3600)), "2024-01-22 23:30:04");
  // Sub-seconds are truncated, not rounded.
  EXPECT_EQ(FormatDateTime(At(kSeedInstant, 999999999), Zone::Utc()), "2024-01-23 04:30:04");
  EXPECT_EQ(FormatDateTime(At(0), Zone::Utc()), "1970-01-01 00:00:00");
  EXPECT_EQ(FormatDateTime(At(-1), Zone::Utc()), "1969-12-31 23:59:59");
}

TEST(DateTime, ParseInZone) {
  auto utc = ParseDateTime("2024-01-23 04:30:04", Zone::Utc());
  ASSERT_TRUE(utc) << utc.error();
  EXPECT_EQ(*utc, At(kSeedInstant));
  auto plus8 = ParseDateTime("2024-01-23 12:30:04", Zone::Fixed(kPlus8));
  ASSERT_TRUE(plus8) << plus8.error();
  EXPECT_EQ(*plus8, At(kSeedInstant));
  auto frac = ParseDateTime("2024-01-23 04:30:04.5", Zone::Utc());
  ASSERT_TRUE(frac) << frac.error();
  EXPECT_EQ(*frac, At(kSeedInstant, 500000000));
  auto leap_day = ParseDateTime("2024-02-29 00:00:00", Zone::Utc());
  EXPECT_TRUE(leap_day);
}

TEST(DateTime, ParseRejectsWithTheText) {
  for (const char* bad :
       {"", "2024-01-23", "2024-01-23T04:30:04", "2024-01-23 04:30:04 ", " 2024-01-23 04:30:04",
        "2024-1-23 04:30:04", "2024-13-01 00:00:00", "2023-02-29 00:00:00", "2024-01-32 00:00:00",
        "2024-01-23 24:00:00", "2024-01-23 23:60:00", "2024-01-23 23:59:60", "2024-01-23 04:30:04.",
        "2024-01-23 04:30:04.1234567890", "9999-01-01 00:00:00", "1000-01-01 00:00:00",
        "not-a-timestamp", "2024-01-23 04:30:04Z"}) {
    auto r = ParseDateTime(bad, Zone::Utc());
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().find(Quote(bad)), std::string::npos) << r.error();
  }
}

TEST(Rfc3339, FormatUsesZForUtcAndOffsetOtherwise) {
  EXPECT_EQ(FormatRfc3339(At(kSeedInstant), Zone::Utc()), "2024-01-23T04:30:04Z");
  EXPECT_EQ(FormatRfc3339(At(kSeedInstant), Zone::Fixed(kPlus8)), "2024-01-23T12:30:04+08:00");
  EXPECT_EQ(FormatRfc3339(At(kSeedInstant), Zone::Fixed(-(3 * 3600 + 30 * 60))),
            "2024-01-23T01:00:04-03:30");
  EXPECT_EQ(FormatRfc3339(At(kSeedInstant, 123), Zone::Utc()), "2024-01-23T04:30:04Z");
}

TEST(Rfc3339, ParseKeepsOffset) {
  struct Case {
    const char* text;
    SystemTime instant;
    int offset;
  };
  // 2026-08-21T10:11:12+08:00 is 02:11:12 UTC = 1787278272.
  const Case cases[] = {
      {"2026-08-21T10:11:12+08:00", At(1787278272), kPlus8},
      {"2026-08-21T02:11:12Z", At(1787278272), 0},
      {"2026-08-21T02:11:12+00:00", At(1787278272), 0},
      {"2026-08-21T02:11:12.25Z", At(1787278272, 250000000), 0},
      {"2026-08-20T21:11:12.000000001-05:00", At(1787278272, 1), -5 * 3600},
  };
  for (const auto& c : cases) {
    auto r = ParseRfc3339(c.text);
    ASSERT_TRUE(r) << c.text << ": " << r.error();
    EXPECT_EQ(r->instant, c.instant) << c.text;
    EXPECT_EQ(r->offset_seconds, c.offset) << c.text;
  }
  auto r = ParseRfc3339("2026-08-21T10:11:12+08:00");
  ASSERT_TRUE(r);
  EXPECT_EQ(FormatRfc3339(*r), "2026-08-21T10:11:12+08:00");
}

TEST(Rfc3339, ParseRejectsWithTheText) {
  for (const char* bad :
       {"", "lock", "2026-08-21 10:11:12+08:00", "2026-08-21T10:11:12", "2026-08-21T10:11:12z",
        "2026-08-21T10:11:12+0800", "2026-08-21T10:11:12+24:00", "2026-08-21T10:11:12+08:60",
        "2026-08-21T10:11:12+08:00x", "2026-08-21T10:11:12.Z", "2026-02-30T10:11:12Z"}) {
    auto r = ParseRfc3339(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().find(Quote(bad)), std::string::npos) << r.error();
  }
}

TEST(Zone, LocalRoundTripsWithoutDependingOnTz) {
  // Whatever the machine's zone, formatting then parsing in it returns the same instant
  // (mid-January noon UTC is far from any daylight-saving switch).
  SystemTime t = At(kSeedInstant + 8 * 3600);
  Zone local = Zone::Local();
  auto back = ParseDateTime(FormatDateTime(t, local), local);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, t);
  auto rfc = ParseRfc3339(FormatRfc3339(t, local));
  ASSERT_TRUE(rfc) << rfc.error();
  EXPECT_EQ(rfc->instant, t);
  EXPECT_EQ(rfc->offset_seconds, local.OffsetAt(t));
}

TEST(UnixSeconds, FloorsTowardsNegativeInfinity) {
  EXPECT_EQ(UnixSeconds(At(10, 999999999)), 10);
  EXPECT_EQ(UnixSeconds(At(-1, 500000000)), -1);
  EXPECT_EQ(UnixSeconds(At(-2, 999999999)), -2);
}

}  // namespace
}  // namespace hami
