#include "protocol/reason.h"

#include <gtest/gtest.h>

namespace hami::protocol {
namespace {

// The example of docs/protocol.md#filter-and-scores, step 5.
TEST(Reason, EncodeSpecVector) {
  EXPECT_EQ(EncodeReason({{"CardInsufficientMemory", 1}, {"CardTypeMismatch", 2}}, 3),
            "1/3 CardInsufficientMemory, 2/3 CardTypeMismatch");
}

TEST(Reason, EncodeSortsAsStringsAndSkipsZero) {
  // Sorted as whole strings, so "10/12 B" comes before "2/12 A".
  EXPECT_EQ(EncodeReason({{"A", 2}, {"B", 10}, {"C", 0}}, 12), "10/12 B, 2/12 A");
  EXPECT_EQ(EncodeReason({}, 3), "");
}

TEST(Reason, DecodeInvertsEncode) {
  auto r = DecodeReason("1/3 CardInsufficientMemory, 2/3 CardTypeMismatch");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->devices_considered, 3);
  EXPECT_EQ(r->counts, (ReasonCounts{{"CardInsufficientMemory", 1}, {"CardTypeMismatch", 2}}));
  EXPECT_EQ(EncodeReason(r->counts, r->devices_considered),
            "1/3 CardInsufficientMemory, 2/3 CardTypeMismatch");
}

TEST(Reason, DecodeEmpty) {
  auto r = DecodeReason("");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->counts.empty());
}

TEST(Reason, DecodeRejectsMalformedWithTheEntry) {
  for (const char* bad :
       {"x", "1/3", "a/3 X", "1/b X", "1/3 ", "-1/3 X", "1/3 X, 1/4 Y", ",", "1/3 X, 2/3 X"}) {
    auto r = DecodeReason(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().find("reason entry"), std::string::npos) << r.error();
  }
}

}  // namespace
}  // namespace hami::protocol
