#include "protocol/quantity.h"

#include <gtest/gtest.h>

#include "common/strings.h"

namespace hami::protocol {
namespace {

constexpr const char* kMem = "nvidia.com/gpumem";
constexpr const char* kCores = "nvidia.com/gpucores";

TEST(ParseQuantity, Grammar) {
  struct Case {
    const char* text;
    bool negative;
    uint64_t mantissa;
    int exp10, exp2;
    QuantityFormat format;
  };
  const Case cases[] = {
      {"3000", false, 3, 3, 0, QuantityFormat::kDecimalSI},
      {"1.5Gi", false, 15, -1, 30, QuantityFormat::kBinarySI},
      {"500m", false, 5, -1, 0, QuantityFormat::kDecimalSI},
      {"3k", false, 3, 3, 0, QuantityFormat::kDecimalSI},
      {"2e0", false, 2, 0, 0, QuantityFormat::kDecimalExponent},
      {"1E3", false, 1, 3, 0, QuantityFormat::kDecimalExponent},
      {"1E", false, 1, 18, 0, QuantityFormat::kDecimalSI},
      {"1Ei", false, 1, 0, 60, QuantityFormat::kBinarySI},
      {"-.5", true, 5, -1, 0, QuantityFormat::kDecimalSI},
      {"+5.", false, 5, 0, 0, QuantityFormat::kDecimalSI},
      {"0.000", false, 0, 0, 0, QuantityFormat::kDecimalSI},
      {"007e-2", false, 7, -2, 0, QuantityFormat::kDecimalExponent},
  };
  for (const auto& c : cases) {
    auto q = ParseQuantity(c.text);
    ASSERT_TRUE(q) << c.text << ": " << q.error();
    EXPECT_EQ(q->negative, c.negative) << c.text;
    EXPECT_EQ(q->mantissa, c.mantissa) << c.text;
    EXPECT_EQ(q->exp10, c.exp10) << c.text;
    EXPECT_EQ(q->exp2, c.exp2) << c.text;
    EXPECT_EQ(q->format, c.format) << c.text;
  }
  for (const char* bad : {"", "-", ".", "Gi", "1 Gi", " 1", "1gi", "1KB", "1e", "1e+", "1e1.5",
                          "1..5", "1.5.", "1e1000", "12345678901234567891", "0x10", "1ki"}) {
    auto q = ParseQuantity(bad);
    ASSERT_FALSE(q) << bad;
    EXPECT_NE(q.error().find(Quote(bad)), std::string::npos) << q.error();
  }
}

Quantity Q(const char* text) {
  auto q = ParseQuantity(text);
  EXPECT_TRUE(q) << text;
  return q ? *q : Quantity{};
}

TEST(CompareQuantities, ExactAcrossSuffixesAndMagnitudes) {
  struct Case {
    const char* a;
    const char* b;
    int want;
  };
  const Case cases[] = {
      {"1Gi", "1073741824", 0},
      {"1Gi", "1073741825", -1},
      {"1.5Gi", "1536Mi", 0},
      {"1.5Gi", "1.5G", 1},
      {"1Mi", "1048576000m", 0},
      {"1k", "1000", 0},
      {"1e3", "1k", 0},
      {"-0", "0", 0},
      {"0", "0.000", 0},
      {"-1", "0", -1},
      {"-1Gi", "-1G", -1},
      {"-2", "-3", 1},
      {"1e999", "1e998", 1},
      {"1e-999", "0", 1},
      {"1e-999", "1e-998", -1},
      {"1e999", "1e-999", 1},
      {"999Ei", "1e999", -1},
      {"9999999999999999999e-999", "1e-979", -1},
      {"9999999999999999999e980", "1e999", -1},
      {"1Ei", "1152921504606846976", 0},
      {"1Ei", "1152921504606846977", -1},
      {"80Gi", "85899345920", 0},
      {"100", "1e2", 0},
      {"0.1", "100m", 0},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(CompareQuantities(Q(c.a), Q(c.b)), c.want) << c.a << " vs " << c.b;
    EXPECT_EQ(CompareQuantities(Q(c.b), Q(c.a)), -c.want) << c.b << " vs " << c.a;
  }
}

TEST(ExactScaledValue, WholeUnitsOrNothing) {
  EXPECT_EQ(ExactScaledValue(Q("1Mi"), 0), 1048576);
  EXPECT_EQ(ExactScaledValue(Q("80Gi"), 0), 85899345920);
  EXPECT_EQ(ExactScaledValue(Q("1.5Gi"), 0), 1610612736);
  EXPECT_EQ(ExactScaledValue(Q("1.5"), -3), 1500);
  EXPECT_EQ(ExactScaledValue(Q("-250m"), -3), -250);
  EXPECT_EQ(ExactScaledValue(Q("3k"), 0), 3000);
  EXPECT_EQ(ExactScaledValue(Q("3k"), 3), 3);
  EXPECT_EQ(ExactScaledValue(Q("0"), 0), 0);
  EXPECT_EQ(ExactScaledValue(Q("9223372036854775807"), 0), INT64_MAX);
  EXPECT_EQ(ExactScaledValue(Q("-9223372036854775808"), 0), INT64_MIN);
  EXPECT_EQ(ExactScaledValue(Q("1.5"), 0), std::nullopt);
  EXPECT_EQ(ExactScaledValue(Q("0.0001"), -3), std::nullopt);
  EXPECT_EQ(ExactScaledValue(Q("9223372036854775808"), 0), std::nullopt);
  EXPECT_EQ(ExactScaledValue(Q("8Ei"), 0), std::nullopt);
  EXPECT_EQ(ExactScaledValue(Q("1e999"), 0), std::nullopt);
  EXPECT_EQ(ExactScaledValue(Q("1e-999"), -3), std::nullopt);
}

TEST(ParseMemoryMiB, UnitsAndRounding) {
  struct Case {
    const char* text;
    int32_t mib;
  };
  const Case cases[] = {
      {"3000", 3000},   {"3k", 3000},        {"1500", 1500},
      {"1.5k", 1500},   {"3e3", 3000},       {"0", 0},
      {"3000m", 3},     {"1.5Gi", 1536},     {"3Gi", 3072},
      {"3000Mi", 3000}, {"3G", 2862},        {"2G", 1908},
      {"1Ki", 1},       {"1048576Ki", 1024}, {"1048577Ki", 1025},
      {"1M", 1},        {"1.048576M", 1},    {"1.048577M", 2},
      {"1Ti", 1048576}, {"1Pi", 1073741824}, {"2147483647", 2147483647},
      {"0.5Mi", 1},     {"0.001Mi", 1},
  };
  for (const auto& c : cases) {
    auto r = ParseMemoryMiB(kMem, c.text);
    ASSERT_TRUE(r) << c.text << ": " << r.error();
    EXPECT_EQ(*r, c.mib) << c.text;
  }
}

TEST(ParseMemoryMiB, ErrorsNameResourceValueAndProblem) {
  struct Case {
    const char* text;
    const char* problem;
  };
  const Case cases[] = {
      {"-1", "negative"},
      {"-1Gi", "negative"},
      {"", "no digits"},
      {"lots", "no digits"},
      {"3GB", "unknown suffix"},
      {"1.5", "not a whole number of MiB"},
      {"500m", "not a whole number of MiB"},
      {"2147483648", "more than 2147483647 MiB"},
      {"3e9", "more than 2147483647 MiB"},
      {"2Pi", "more than 2147483647 MiB"},
      {"1Ei", "more than 2147483647 MiB"},
      {"9999999999999999999E", "more than 2147483647 MiB"},
      {"1e999", "more than 2147483647 MiB"},
  };
  for (const auto& c : cases) {
    auto r = ParseMemoryMiB(kMem, c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.error().find(kMem), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(Quote(c.text)), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(c.problem), std::string::npos) << r.error();
  }
}

TEST(ParseDeviceCount, WholeNumbersOnly) {
  struct Case {
    const char* text;
    int32_t n;
  };
  for (const Case& c :
       {Case{"2", 2}, Case{"30", 30}, Case{"2e0", 2}, Case{"1k", 1000}, Case{"0", 0},
        Case{"2000m", 2}, Case{"1Ki", 1024}, Case{"2147483647", 2147483647}, Case{"-0", 0}}) {
    auto r = ParseDeviceCount(kCores, c.text);
    ASSERT_TRUE(r) << c.text << ": " << r.error();
    EXPECT_EQ(*r, c.n) << c.text;
  }
  for (const char* bad : {"500m", "1.5", "-1", "", "x", "2147483648", "1e10", "3G"}) {
    auto r = ParseDeviceCount(kCores, bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().find(kCores), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(Quote(bad)), std::string::npos) << r.error();
  }
}

}  // namespace
}  // namespace hami::protocol
