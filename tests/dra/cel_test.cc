// The CEL subset of DRA selectors (src/dra/cel.h): what the webhook and the chart write, what
// users write in claims, and every error path.
#include <gtest/gtest.h>

#include <string>

#include "dra/cel.h"

namespace hami::dra {
namespace {

using nlohmann::json;

constexpr const char* kDriver = "hami-core-gpu.project-hami.io";

// A shareable GPU as hami-dra-plugin publishes it (src/draplugin/slices.cc).
CelDevice Gpu() {
  return DeviceFromSlice(json::parse(R"({
    "name": "hami-gpu-0",
    "attributes": {"type": {"string": "hami-gpu"}, "uuid": {"string": "GPU-a"},
                   "minor": {"int": 0}, "productName": {"string": "NVIDIA A100-SXM4-80GB"},
                   "driverVersion": {"version": "550.54.15"},
                   "cudaDriverVersion": {"version": "12.4.0-rc.1"},
                   "bad": {"version": "12.4"}, "healthy": {"bool": true},
                   "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}},
    "capacity": {"cores": {"value": "100"}, "memory": {"value": "80Gi"}},
    "allowMultipleAllocations": true})"),
                         kDriver);
}

Result<bool> Check(const std::string& expression, const CelDevice& device = Gpu()) {
  auto program = CelProgram::Compile(expression);
  if (!program) return std::move(program).take_error();
  return program->Eval(device);
}

const std::string kAttr = R"(device.attributes["hami-core-gpu.project-hami.io"])";
const std::string kCap = R"(device.capacity["hami-core-gpu.project-hami.io"])";

struct Case {
  std::string expression;
  bool want;
};

void ExpectAll(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    auto got = Check(c.expression);
    ASSERT_TRUE(got.ok()) << c.expression << ": " << got.error();
    EXPECT_EQ(*got, c.want) << c.expression;
  }
}

TEST(CelTest, TheWebhooksAndTheChartsSelectors) {
  ExpectAll({
      {R"(device.driver == "hami-core-gpu.project-hami.io")", true},
      {R"(device.driver == "gpu.nvidia.com")", false},
      {kAttr + R"(.type == "hami-gpu")", true},
      {kAttr + R"(.uuid in ["GPU-a", "GPU-b"])", true},
      {kAttr + R"(.uuid in ["GPU-b"])", false},
      {"!(" + kAttr + R"(.uuid in ["GPU-b", "GPU-c"]))", true},
      {"!(" + kAttr + R"(.productName in ["NVIDIA A100-SXM4-80GB"]))", false},
      {kAttr + R"(.productName in ["NVIDIA A100-SXM4-80GB", "Tesla T4"])", true},
  });
}

TEST(CelTest, AccessComparisonsAndLogic) {
  ExpectAll({
      {kAttr + R"(["uuid"] == "GPU-a")", true},
      {R"(device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00")", true},
      {kAttr + ".minor == 0", true},
      {kAttr + ".minor != 0", false},
      {kAttr + ".minor < 1 && " + kAttr + ".minor >= 0", true},
      {kAttr + ".minor > -1", true},
      {kAttr + ".minor <= -1", false},
      {kAttr + ".healthy", true},
      {kAttr + ".healthy == true", true},
      {"device.allowMultipleAllocations", true},
      {R"("b" > "a" && "a" < "ab" && true > false)", true},
      {"1 == 1 && 2 != 3", true},
      {"false || 1 == 2 || 0x10 == 16", true},
      {"!true || !!false", false},
      {"-(-3) == 3 && - 3 == -3", true},
      {"-9223372036854775808 < 9223372036854775807", true},
      {"[1, 2] == [1, 2] && [1] != [2] && [1, 2,] == [1, 2]", true},
      {R"(0 in [1, 2] || "x" in [])", false},
      {R"(("GPU-a" in [)" + kAttr + ".uuid])", true},
      {"[10, 20][1] == 20", true},
      // CEL's heterogeneous equality: different types are not equal (no error).
      {kAttr + R"(.minor == "0")", false},
      {kAttr + R"(.minor != "0")", true},
      {kAttr + R"(.minor in ["0", 0])", true},
      // in over a map of the device tests its keys.
      {R"("uuid" in )" + kAttr, true},
      {R"("nope" in )" + kAttr, false},
      {R"("hami-core-gpu.project-hami.io" in device.attributes)", true},
      {R"("other.example.com" in device.attributes)", false},
      {R"("other.example.com" in device.capacity)", false},
      {R"(has(device.attributes.other))", false},
      {R"(has(device.capacity.other))", false},
      {R"(has(device.attributes.other) || !("a" in device.attributes.other))", true},
      {"[[1, 2]][0][1] == 2", true},
      {R"("memory" in )" + kCap, true},
      {"// a comment\n" + kAttr + ".type\n  == \"hami-gpu\"", true},
      {R"("\x41\u00e9\101\"\\" == 'AéA"\\')", true},
  });
}

TEST(CelTest, QuantitiesSemversHasAndStringMethods) {
  ExpectAll({
      {kCap + R"(.memory.compareTo(quantity("80Gi")) == 0)", true},
      {kCap + R"(.memory.compareTo(quantity("85899345920")) == 0)", true},
      {kCap + R"(.memory.compareTo(quantity("40Gi")) > 0)", true},
      {kCap + R"(.memory.compareTo(quantity("86G")) < 0)", true},
      {kCap + R"(.cores.isGreaterThan(quantity("99")))", true},
      {kCap + R"(.cores.isLessThan(quantity("100")))", false},
      {kCap + R"(.memory == quantity("81920Mi"))", true},
      {kCap + R"(["memory"] != quantity("80G"))", true},
      {R"(semver("1.2.3").isLessThan(semver("1.10.0")))", true},
      {R"(semver("1.0.0-rc.1").isLessThan(semver("1.0.0")))", true},
      {R"(semver("1.0.0-alpha").compareTo(semver("1.0.0-alpha.1")) == -1)", true},
      {R"(semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-alpha.beta")))", true},
      {R"(semver("1.0.0-beta.2").isLessThan(semver("1.0.0-beta.11")))", true},
      {R"(semver("1.0.0-rc.1").isGreaterThan(semver("1.0.0-beta.11")))", true},
      {R"(semver("1.0.0+build.7") == semver("1.0.0"))", true},
      {R"(semver("99999999999999999999.0.0").isGreaterThan(semver("9.0.0")))", true},
      {kAttr + R"(.driverVersion.isGreaterThan(semver("550.0.0")))", true},
      {kAttr + R"(.driverVersion.compareTo(semver("550.54.15")) == 0)", true},
      {kAttr + R"(.cudaDriverVersion.isLessThan(semver("12.4.0")))", true},
      {kAttr + R"(.driverVersion == semver("550.54.15"))", true},
      {"has(" + kAttr + ".uuid)", true},
      {"has(" + kAttr + ".serial)", false},
      {R"(has(device.attributes["other.example.com"].uuid))", false},
      {R"(has(device.capacity["hami-core-gpu.project-hami.io"].memory))", true},
      {"has(device.driver)", true},
      {"has(" + kAttr + ".serial) && " + kAttr + R"(.serial == "x")", false},
      {"!has(" + kAttr + ".serial) || " + kAttr + R"(.serial == "x")", true},
      {kAttr + R"(.productName.startsWith("NVIDIA A100"))", true},
      {kAttr + R"(.productName.endsWith("80GB"))", true},
      {kAttr + R"(.productName.contains("SXM4"))", true},
      {kAttr + R"(.productName.contains("H100"))", false},
      {R"("".startsWith("") && "abc".endsWith("") && !"a".endsWith("ab"))", true},
  });
}

TEST(CelTest, AndAndOrAbsorbAnErrorWhenTheOtherSideDecides) {
  const std::string missing = kAttr + R"(.serial == "x")";
  ExpectAll({
      {"false && " + missing, false},
      {missing + " && false", false},  // commutative, as CEL's
      {"true || " + missing, true},
      {missing + " || true", true},
      {"false && 1 < " + kAttr + ".uuid", false},
  });
  for (const std::string& e :
       {"true && " + missing, missing + " || false", "true && " + missing + " && true"}) {
    auto got = Check(e);
    ASSERT_FALSE(got.ok()) << e;
    EXPECT_EQ(got.error(), R"(no such key: "serial" in )" + kAttr) << e;
  }
}

struct ErrorCase {
  std::string expression;
  std::string error;
};

TEST(CelTest, CompileErrorsNameTheConstructAndTheColumn) {
  const std::vector<ErrorCase> cases = {
      {kAttr + R"(.productName.matches("A100"))",
       R"(unsupported CEL construct "matches" at column 64)"},
      {R"(device.driver.matches("x"))", R"(unsupported CEL construct "matches" at column 15)"},
      {R"(size(device.driver) > 0)", R"(unsupported CEL construct "size" at column 1)"},
      {R"(device.attributes.exists(d, true))",
       R"(unsupported CEL construct "exists" at column 19)"},
      {"1 + 2 == 3", R"(unsupported CEL construct "+" at column 3)"},
      {"2 * 3 == 6", R"(unsupported CEL construct "*" at column 3)"},
      {"3 - 1 == 2", R"(unsupported CEL construct "-" at column 3)"},
      {"true ? true : false", R"(unsupported CEL construct "?:" at column 6)"},
      {"1.5 > 1", R"(unsupported CEL construct "1.5" at column 1)"},
      {"1u == 1u", R"(unsupported CEL construct "1u" at column 1)"},
      {"1e3 == 1", R"(unsupported CEL construct "1e3" at column 1)"},
      {R"({"a": 1}["a"] == 1)", R"(unsupported CEL construct "{" at column 1)"},
      {R"(b"x" == b"x")", R"(unsupported CEL construct "bytes literal" at column 1)"},
      {R"(r"x" == "x")", R"(unsupported CEL construct "raw string" at column 1)"},
      {R"("""x""" == "x")", R"(unsupported CEL construct "triple-quoted string" at column 1)"},
      {"device.attributes.?x", R"(unsupported CEL construct ".?" at column 18)"},
      {"null == null", R"(unsupported CEL construct "null" at column 1)"},
      {"(device.driver == \"a\"",
       "syntax error at column 22: expected \")\", found end of expression"},
      {"device.driver == ",
       "syntax error at column 18: expected an expression, found end of expression"},
      {"device.driver = \"a\"",
       R"(syntax error at column 15: unexpected "=" (comparison is "=="))"},
      {"true & false",
       R"(syntax error at column 6: unexpected "&" (logical operators are "&&" and "||"))"},
      {"true # x", R"(syntax error at column 6: unexpected character "#")"},
      {"\"abc", "syntax error at column 1: unterminated string literal"},
      {"\"a\nb\" == \"\"", "syntax error at column 3: newline in string literal"},
      {R"("\q" == "")", R"(syntax error at column 2: invalid escape sequence "\\q")"},
      {R"("\ud800" == "")",
       R"(syntax error at column 2: escape sequence "\\ud800" is not a Unicode code point)"},
      {"9223372036854775808 > 0", "syntax error at column 1: int literal out of range"},
      {"99999999999999999999 > 0",
       R"(syntax error at column 1: int literal "99999999999999999999" out of range)"},
      {"0x == 0", "syntax error at column 1: hex literal without digits"},
      {"12ab == 1", R"(syntax error at column 3: unexpected "a" after a number)"},
      {"true true", R"(syntax error at column 6: expected end of expression, found "true")"},
      {"[1, 2", R"(syntax error at column 6: expected ",", found end of expression)"},
      {"device.", "syntax error at column 8: expected a field name, found end of expression"},
      {"", "syntax error at column 1: empty expression"},
      {"  // only a comment", "syntax error at column 1: empty expression"},
      {"gpu == 1", R"(undeclared reference to "gpu" at column 1 (the only variable is device))"},
      {"device.name == \"x\"", R"(undefined field "name" of device at column 8)"},
      {"device.driver.x == 1", R"(no field "x" on string at column 15)"},
      {"device[\"driver\"] == 1",
       R"(no matching overload for "[]" applied to (device, string) at column 7)"},
      {"device.attributes[1]",
       R"(no matching overload for "[]" applied to (map, int) at column 18)"},
      {"1 == \"1\"", R"(no matching overload for "==" applied to (int, string) at column 3)"},
      {"device.driver < 1",
       R"(no matching overload for "<" applied to (string, int) at column 15)"},
      {kCap + ".memory < " + kCap + ".cores",
       R"(no matching overload for "<" applied to (quantity, quantity) at column 57)"},
      {"1 in 2", R"(no matching overload for "in" applied to (int, int) at column 3)"},
      {"1 && true", R"(no matching overload for "&&" applied to int at column 1)"},
      {"true || \"a\"", R"(no matching overload for "||" applied to string at column 9)"},
      {"!1", R"(no matching overload for "!" applied to int at column 1)"},
      {"-true", R"(no matching overload for "-" applied to bool at column 1)"},
      {"device.driver.startsWith(1)",
       R"(no matching overload for "startsWith" applied to (string, int) at column 15)"},
      {"device.driver.compareTo(\"a\") == 0",
       R"(no matching overload for "compareTo" applied to (string, string) at column 15)"},
      {R"(quantity("1Gi").compareTo(semver("1.0.0")) == 0)",
       R"(no matching overload for "compareTo" applied to (quantity, semver) at column 17)"},
      {kAttr + ".uuid.startsWith(1 == 1)",
       R"(no matching overload for "startsWith" applied to (dyn, bool) at column 57)"},
      {"device.attributes == device.attributes",
       R"(no matching overload for "==" applied to (map, map) at column 19)"},
      {"device.driver.contains()", R"("contains" takes 1 argument, not 0 at column 15)"},
      {R"(quantity("1", "2") == quantity("1"))",
       R"("quantity" takes 1 argument, not 2 at column 1)"},
      {"quantity(1) == quantity(1)",
       R"(no matching overload for "quantity" applied to int at column 1)"},
      {R"(quantity("10Gx").compareTo(quantity("1")) == 0)",
       R"(invalid quantity "10Gx" at column 1: )"},
      {R"(semver("1.2").isLessThan(semver("1.2.3")))",
       R"(invalid version "1.2": want MAJOR.MINOR.PATCH at column 1)"},
      {R"(semver("01.2.3") == semver("1.2.3"))",
       R"(invalid version "01.2.3": MAJOR, MINOR and PATCH must be numbers without leading zeros at column 1)"},
      {R"(semver("1.2.3-01") == semver("1.2.3"))", R"(invalid version "1.2.3-01": a pre-release)"},
      {R"(semver("1.2.3+") == semver("1.2.3"))", R"(invalid version "1.2.3+": build metadata)"},
      {"has(device)",
       R"(has() needs a field selection such as device.attributes["domain"].name at column 5)"},
      {"has(" + kAttr + "[\"uuid\"])", "has() needs a field selection"},
      {"device.driver", "expression must be bool, is string"},
      {"device.attributes", "expression must be bool, is map"},
      {"1", "expression must be bool, is int"},
      {"device.driver ==\n  1",
       R"(no matching overload for "==" applied to (string, int) at column 15)"},
      {"true &&\n  device.nope", R"(undefined field "nope" of device at line 2, column 10)"},
  };
  for (const ErrorCase& c : cases) {
    auto got = CelProgram::Compile(c.expression);
    ASSERT_FALSE(got.ok()) << c.expression;
    EXPECT_EQ(got.error().substr(0, c.error.size()), c.error) << c.expression;
  }
}

TEST(CelTest, RuntimeErrorsNameThePartOfTheExpression) {
  const std::vector<ErrorCase> cases = {
      {kAttr + R"(.serial == "x")", R"(no such key: "serial" in )" + kAttr},
      {kAttr + R"(["serial"] == "x")", R"(no such key: "serial" in )" + kAttr},
      {R"(device.attributes["other.example.com"].uuid == "x")",
       R"(no such key: "uuid" in device.attributes["other.example.com"])"},
      {kCap + R"(.gpumem.compareTo(quantity("1")) == 0)", R"(no such key: "gpumem" in )" + kCap},
      {kAttr + ".minor < \"1\"",
       R"(no such overload: "<" applied to (int, string) in )" + kAttr + R"(.minor < "1")"},
      {kAttr + ".uuid > 1",
       R"(no such overload: ">" applied to (string, int) in )" + kAttr + ".uuid > 1"},
      {kAttr + ".driverVersion < " + kAttr + ".driverVersion",
       R"(no such overload: "<" applied to (semver, semver) in )"},
      {kAttr + ".uuid && true",
       R"(no such overload: "&&" applied to string in )" + kAttr + ".uuid"},
      {"!" + kAttr + ".uuid", R"(no such overload: "!" applied to string in !)" + kAttr + ".uuid"},
      {"-" + kAttr + ".uuid == 1", R"(no such overload: "-" applied to string in -)"},
      {kAttr + ".uuid.startsWith(" + kAttr + ".minor)",
       R"(no such overload: "startsWith" applied to (string, int) in )"},
      {kAttr + ".minor.contains(\"a\")",
       R"(no such overload: "contains" applied to (int, string) in )"},
      {kAttr + ".driverVersion.compareTo(quantity(\"1\")) == 0",
       R"(no such overload: "compareTo" applied to (semver, quantity) in )"},
      {kAttr + ".bad.isLessThan(semver(\"1.0.0\"))",
       R"(invalid version "12.4": want MAJOR.MINOR.PATCH in )" + kAttr + ".bad"},
      {"quantity(" + kAttr + ".uuid).compareTo(quantity(\"1\")) == 0",
       R"(invalid quantity "GPU-a" in quantity()" + kAttr + ".uuid)"},
      {"semver(" + kAttr + ".uuid) == semver(\"1.0.0\")", R"(invalid version "GPU-a": )"},
      {"quantity(" + kAttr + ".minor) == quantity(\"1\")",
       R"(no such overload: "quantity" applied to int in )"},
      {"[1][" + kAttr + ".minor + 1]", R"(unsupported CEL construct "+")"},
      {"[1][1] == 1", "index 1 out of range in [1][1]"},
      {"[1][" + kAttr + ".uuid] == 1", R"(no such overload: "[]" applied to (list, string))"},
      {kAttr + "[" + kAttr + ".minor] == 1", R"(no such overload: "[]" applied to (map, int))"},
      {kAttr + ".uuid.x == 1", R"(no such overload: ".x" applied to string in )" + kAttr + ".uuid"},
      {"-(" + kAttr + ".minor - 1) == 1", R"(unsupported CEL construct "-")"},
      {kAttr + ".uuid", "expression evaluated to string, not bool"},
  };
  for (const ErrorCase& c : cases) {
    auto got = Check(c.expression);
    ASSERT_FALSE(got.ok()) << c.expression;
    EXPECT_EQ(got.error().substr(0, c.error.size()), c.error) << c.expression;
  }
}

TEST(CelTest, HostileInputIsRefusedNotCrashedOn) {
  // kube-apiserver's 10 KiB limit on an expression.
  std::string big = "true";
  while (big.size() < 10 * 1024 - 8) big += " && true";
  EXPECT_TRUE(Check(big).ok()) << big.size();
  std::string huge = big + " && true && true";
  auto too_long = CelProgram::Compile(huge);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error(), "expression is " + std::to_string(huge.size()) +
                                  " bytes long, more than the limit of 10240");
  // Deep nesting: an error, not a deep recursion.
  for (const char* open : {"(", "[", "!", "-", "has(", "quantity("}) {
    std::string deep;
    for (int i = 0; i < 1000; ++i) deep += open;
    auto got = CelProgram::Compile(deep + "1");
    ASSERT_FALSE(got.ok()) << open;
    EXPECT_NE(got.error().find("expression nested too deeply at column "), std::string::npos)
        << got.error();
    EXPECT_NE(got.error().find("(at most 64 levels)"), std::string::npos) << got.error();
  }
  std::string chain = "device.attributes";
  for (int i = 0; i < 2000; ++i) chain += "[\"a\"]";
  auto deep_chain = CelProgram::Compile(chain + ".x == 1");
  ASSERT_FALSE(deep_chain.ok());
  EXPECT_NE(deep_chain.error().find("nested too deeply"), std::string::npos);
  std::string compares = "1";
  for (int i = 0; i < 2000; ++i) compares += " == 1";
  EXPECT_FALSE(CelProgram::Compile(compares).ok());
  // 60 levels are fine.
  std::string ok = "1 == 1";
  for (int i = 0; i < 60; ++i) ok = "(" + ok + ")";
  EXPECT_TRUE(*Check(ok));
  // Bytes that are not UTF-8 or are control characters are quoted in the error.
  auto binary = CelProgram::Compile(std::string("true \x01\xff", 7));
  ASSERT_FALSE(binary.ok());
  EXPECT_EQ(binary.error(), R"(syntax error at column 6: unexpected character "\x01")");
  auto in_string = Check(kAttr + ".x\x01 == 1");
  ASSERT_FALSE(in_string.ok());
}

TEST(CelTest, AProgramIsCopyableAndKeepsItsExpression) {
  auto program = CelProgram::Compile(kAttr + R"(.type == "hami-gpu")");
  ASSERT_TRUE(program.ok());
  const CelProgram copy = *program;
  EXPECT_EQ(copy.expression(), kAttr + R"(.type == "hami-gpu")");
  EXPECT_TRUE(*copy.Eval(Gpu()));
  CelDevice other = Gpu();
  other.attributes[kDriver]["type"] = std::string("other");
  EXPECT_FALSE(*copy.Eval(other));
  EXPECT_FALSE(CelProgram().Eval(Gpu()).ok());
}

}  // namespace
}  // namespace hami::dra
