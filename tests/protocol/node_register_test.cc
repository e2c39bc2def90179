#include "protocol/node_register.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hami::protocol {
namespace {

// The two-V100 example of docs/protocol.md#node-registration-and-the-handshake, verbatim.
constexpr char kSeedRegister[] =
    R"([{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,)"
    R"("devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core",)"
    R"("health":true},{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,)"
    R"("devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,)"
    R"("mode":"hami-core","health":true}])";

// HAMi's 2 x A10 example, with the elided UUIDs filled in.
constexpr char kSpecA10[] =
    R"([{"id":"GPU-aaa","count":10,"devmem":24576,"devcore":100,"type":"NVIDIA A10",)"
    R"("mode":"hami-core","health":true},{"id":"GPU-bbb","index":1,"count":10,"devmem":24576,)"
    R"("devcore":100,"type":"NVIDIA A10","numa":1,"mode":"hami-core","health":true}])";

TEST(NodeRegisterJson, SeedDecodesAndReencodesByteForByte) {
  auto r = DecodeNodeRegister(kSeedRegister);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 2u);
  const DeviceInfo& d0 = (*r)[0];
  EXPECT_EQ(d0.id, "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec");
  EXPECT_EQ(d0.index, 0u);
  EXPECT_EQ(d0.count, 10);
  EXPECT_EQ(d0.devmem, 32768);
  EXPECT_EQ(d0.devcore, 100);
  EXPECT_EQ(d0.type, "NVIDIA-Tesla V100-PCIE-32GB");
  EXPECT_EQ(d0.numa, 1);
  EXPECT_EQ(d0.mode, "hami-core");
  EXPECT_TRUE(d0.health);
  EXPECT_EQ((*r)[1].index, 1u);
  EXPECT_EQ(EncodeNodeRegister(*r), kSeedRegister);
}

TEST(NodeRegisterJson, SpecExampleRoundTrips) {
  auto r = DecodeNodeRegister(kSpecA10);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].numa, 0);
  EXPECT_EQ((*r)[1].numa, 1);
  EXPECT_EQ(EncodeNodeRegister(*r), kSpecA10);
}

// §10.2 vector 5.
TEST(NodeRegisterJson, Vector5) {
  auto r = DecodeNodeRegister(
      R"([{"index":1,"id":"id-1","count":1,"devmem":1024,"devcore":10,"type":"type","health":true}])");
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  DeviceInfo want{.id = "id-1",
                  .index = 1,
                  .count = 1,
                  .devmem = 1024,
                  .devcore = 10,
                  .type = "type",
                  .numa = 0,
                  .health = true};
  EXPECT_EQ((*r)[0], want);
  // Re-encoding puts the keys in Go struct order.
  EXPECT_EQ(EncodeNodeRegister(*r),
            R"([{"id":"id-1","index":1,"count":1,"devmem":1024,"devcore":10,"type":"type",)"
            R"("health":true}])");

  auto empty = DecodeNodeRegister("[]");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(EncodeNodeRegister({}), "[]");

  DeviceInfo mig;
  mig.mig_profiles.push_back(
      {.name = "1g.5gb", .memory_mb = 4864, .core = 15, .slice_count = 1, .placements = {{6, 1}}});
  EXPECT_EQ(EncodeNodeRegister({mig}),
            R"([{"migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,)"
            R"("placements":[{"start":6,"size":1}]}]}])");
}

TEST(NodeRegisterJson, ZeroValuesAreOmitted) {
  DeviceInfo d;
  d.id = "GPU-x";
  EXPECT_EQ(EncodeNodeRegister({d}), R"([{"id":"GPU-x"}])");
  EXPECT_EQ(EncodeNodeRegister({DeviceInfo{}}), "[{}]");
  DeviceInfo neg;
  neg.numa = -1;
  neg.devmem = -5;
  EXPECT_EQ(EncodeNodeRegister({neg}), R"([{"devmem":-5,"numa":-1}])");
}

TEST(NodeRegisterJson, MigProfilesRoundTrip) {
  DeviceInfo d{.id = "GPU-m", .count = 7, .devmem = 40960, .devcore = 100, .mode = "mig"};
  d.mig_profiles = {
      {.name = "1g.5gb",
       .memory_mb = 4864,
       .core = 15,
       .slice_count = 1,
       .placements = {{0, 1}, {6, 1}}},
      {.name = "7g.40gb", .memory_mb = 40192, .core = 100, .slice_count = 7, .placements = {}},
  };
  d.health = true;
  std::string enc = EncodeNodeRegister({d});
  EXPECT_EQ(enc,
            R"([{"id":"GPU-m","count":7,"devmem":40960,"devcore":100,"mode":"mig","migProfiles":[)"
            R"({"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,"placements":[)"
            R"({"start":0,"size":1},{"start":6,"size":1}]},{"name":"7g.40gb","memoryMB":40192,)"
            R"("core":100,"sliceCount":7,"placements":[]}],"health":true}])");
  auto r = DecodeNodeRegister(enc);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0], d);
}

TEST(NodeRegisterJson, DecoderIsLenientLikeGo) {
  struct Case {
    const char* in;
    DeviceInfo want;
  };
  const Case cases[] = {
      // Unknown keys (old and other vendors' fields) are ignored.
      {R"([{"id":"a","devicevendor":"NVIDIA","custominfo":{"x":1},"migtemplate":[1]}])",
       {.id = "a"}},
      // null keeps the zero value.
      {R"([{"id":null,"index":null,"health":null,"migProfiles":null}])", {}},
      // Keys match case-insensitively when there is no exact match.
      {R"([{"ID":"a","Index":2,"HEALTH":true}])", {.id = "a", .index = 2, .health = true}},
      // A later key for the same field wins.
      {R"([{"id":"a","Id":"b"}])", {.id = "b"}},
      // White space anywhere JSON allows it.
      {" [ { \"count\" : 3 } ] ", {.count = 3}},
      // A null element is a zero device.
      {"[null]", {}},
      // Range edges (a negative size is refused: RejectsNegativeSizesAndDuplicateIds).
      {R"([{"count":2147483647,"devmem":2147483647,"index":18446744073709551615}])",
       {.index = 18446744073709551615ull, .count = 2147483647, .devmem = 2147483647}},
  };
  for (const auto& c : cases) {
    auto r = DecodeNodeRegister(c.in);
    ASSERT_TRUE(r) << c.in << ": " << r.error();
    ASSERT_EQ(r->size(), 1u) << c.in;
    EXPECT_EQ((*r)[0], c.want) << c.in;
  }
  auto null_list = DecodeNodeRegister("null");
  ASSERT_TRUE(null_list);
  EXPECT_TRUE(null_list->empty());
}

TEST(NodeRegisterJson, RejectsMalformedNamingDeviceAndField) {
  struct Case {
    const char* in;
    const char* want;  // a substring of the error
  };
  const Case cases[] = {
      {R"([{"id":"a"},{"devmem":"abc"}])",
       R"(device 1: field "devmem": want an integer, got "abc")"},
      {R"([{"count":1.5}])", R"(device 0: field "count": want an integer, got 1.5)"},
      {R"([{"count":2147483648}])",
       R"(device 0: field "count": 2147483648 is out of range for int32)"},
      {R"([{"devcore":-2147483649}])", R"(device 0: field "devcore": -2147483649 is out of range)"},
      {R"([{"index":-1}])", R"(device 0: field "index": -1 is out of range for uint)"},
      {R"([{"numa":1e3}])", R"(device 0: field "numa": want an integer)"},
      {R"([{"id":5}])", R"(device 0: field "id": want a string, got 5)"},
      {R"([{"health":"true"}])", R"(device 0: field "health": want true or false, got "true")"},
      {R"([{"health":1}])", R"(device 0: field "health": want true or false, got 1)"},
      {R"([{"migProfiles":{}}])", R"(device 0: field "migProfiles": want a list, got {})"},
      {R"([{"migProfiles":[5]}])", R"(device 0: field "migProfiles[0]": want an object, got 5)"},
      {R"([{"migProfiles":[{"placements":[{"size":-1}]}]}])",
       R"(device 0: field "migProfiles[0].placements[0].size": -1 is out of range for uint32)"},
      {R"([{"migProfiles":[{"name":"x","core":"15"}]}])",
       R"(device 0: field "migProfiles[0].core": want an integer, got "15")"},
      {R"([5])", R"(device 0: want an object, got 5)"},
      {R"({"id":"a"})", R"(node register: want a JSON list, got {"id":"a"})"},
      {R"([{"id":"a"})", "node register: not valid JSON"},
      {"", "node register: not valid JSON"},
      {"[]x", "node register: not valid JSON"},
      {"[\"\xff\"]", "node register: not valid JSON"},
  };
  for (const auto& c : cases) {
    auto r = DecodeNodeRegister(c.in);
    ASSERT_FALSE(r) << c.in;
    EXPECT_NE(r.error().find(c.want), std::string::npos) << c.in << " -> " << r.error();
  }
}

TEST(GoJsonString, EscapesLikeEncodingJson) {
  struct Case {
    std::string in;
    std::string want;
  };
  const Case cases[] = {
      {"plain", R"("plain")"},
      {"", R"("")"},
      {"a\"b\\c", R"("a\"b\\c")"},
      {"\n\r\t", R"("\n\r\t")"},
      {"\b\f", R"("\b\f")"},
      {std::string("\x00\x01\x1f", 3), R"("\u0000\u0001\u001f")"},
      {"\x7f/", "\"\x7f/\""},
      {"<a&b>", R"("\u003ca\u0026b\u003e")"},
      {"\xe2\x80\xa8\xe2\x80\xa9", R"("\u2028\u2029")"},
      {"\xe2\x80\xaa", "\"\xe2\x80\xaa\""},  // U+202A is left alone
      {"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80",
       "\"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80\""},
      {"a\xffz", R"("a\ufffdz")"},
      {"\xc3", R"("\ufffd")"},                                // truncated 2-byte sequence
      {"\xe2\x82z", R"("\ufffd\ufffdz")"},                    // truncated 3-byte: one per byte
      {"\xc0\xaf", R"("\ufffd\ufffd")"},                      // overlong
      {"\xed\xa0\x80", R"("\ufffd\ufffd\ufffd")"},            // surrogate U+D800
      {"\xf4\x90\x80\x80", R"("\ufffd\ufffd\ufffd\ufffd")"},  // above U+10FFFF
      {"\xf0\x90\x80\x80", "\"\xf0\x90\x80\x80\""},           // U+10000
  };
  for (const auto& c : cases) {
    std::string out;
    AppendGoJsonString(&out, c.in);
    EXPECT_EQ(out, c.want);
  }
}

TEST(NodeRegisterJson, EscapedStringsRoundTrip) {
  DeviceInfo d{.id = "GPU-<&>", .type = "NVIDIA \"Q\"\\\n\xe2\x80\xa8", .mode = "hami-core"};
  std::string enc = EncodeNodeRegister({d});
  EXPECT_EQ(enc, R"([{"id":"GPU-\u003c\u0026\u003e","type":"NVIDIA \"Q\"\\\n\u2028",)"
                 R"("mode":"hami-core"}])");
  auto r = DecodeNodeRegister(enc);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0], d);
}

// §2.6 legacy examples and §10.2 vector 4.
TEST(NodeRegisterLegacy, Vector4SevenFields) {
  auto r = DecodeNodeRegisterLegacy(
      "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true:");
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  DeviceInfo want{.id = "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4",
                  .index = 0,
                  .count = 10,
                  .devmem = 7680,
                  .devcore = 100,
                  .type = "NVIDIA-Tesla P4",
                  .numa = 0,
                  .mode = "hami-core",
                  .health = true};
  EXPECT_EQ((*r)[0], want);
  // The encoder always writes 9 fields.
  EXPECT_EQ(EncodeNodeRegisterLegacy(*r),
            "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true,0,"
            "hami-core:");
}

TEST(NodeRegisterLegacy, NineFieldsRoundTripExactly) {
  const std::string values[] = {
      "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true,0,hami-core:",
      "GPU-a,10,7680,100,NVIDIA-Tesla P4,1,false,3,mig:GPU-b,5,1024,50,DCU,-1,true,4,hami-core:",
      "",
  };
  for (const auto& v : values) {
    if (v.empty()) {
      EXPECT_EQ(EncodeNodeRegisterLegacy({}), "");
      continue;
    }
    auto r = DecodeNodeRegisterLegacy(v);
    ASSERT_TRUE(r) << v << ": " << r.error();
    EXPECT_EQ(EncodeNodeRegisterLegacy(*r), v);
  }
  auto two = DecodeNodeRegisterLegacy(values[1]);
  ASSERT_TRUE(two);
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].numa, -1);
  EXPECT_EQ((*two)[1].index, 4u);
  EXPECT_FALSE((*two)[0].health);
}

TEST(NodeRegisterLegacy, SkipsEmptyEntriesAndAcceptsGoSyntax) {
  auto r = DecodeNodeRegisterLegacy("::a,1,2,3,T,0,1::b,+4,5,6,U,0,F,+2,mps:");
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_TRUE((*r)[0].health);
  EXPECT_EQ((*r)[1].count, 4);
  EXPECT_EQ((*r)[1].index, 2u);
  EXPECT_FALSE((*r)[1].health);
  auto none = DecodeNodeRegisterLegacy(":");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  // No trailing ':' is fine as long as one ':' exists.
  auto no_tail = DecodeNodeRegisterLegacy("a,1,2,3,T,0,true:b,1,2,3,T,0,true");
  ASSERT_TRUE(no_tail) << no_tail.error();
  EXPECT_EQ(no_tail->size(), 2u);
}

TEST(NodeRegisterLegacy, RejectsMalformed) {
  struct Case {
    const char* in;
    const char* want;
  };
  const Case cases[] = {
      {"", "has no ':'"},
      {"a,1,2,3,T,0,true", "has no ':'"},
      {"a,1,2,3,T,0:", "want 7 or 9 comma-separated fields"},
      {"a,1,2,3,T,0,true,0:", "got 8"},
      {"a,1,2,3,T,0,true,0,m,x:", "got 10"},
      {"a,x,2,3,T,0,true:", R"(field "count": want an int32, got "x")"},
      {"a,1,99999999999,3,T,0,true:", R"(field "devmem": want an int32, got "99999999999")"},
      {"a,1,2, 3,T,0,true:", R"(field "devcore": want an int32, got " 3")"},
      {"a,1,2,3,T,zero,true:", R"(field "numa": want an integer, got "zero")"},
      {"a,1,2,3,T,0,yes:", R"(field "health": want a bool, got "yes")"},
      {"a,1,2,3,T,0,true,-1,m:", R"(field "index": must not be negative, got "-1")"},
      {"a,1,2,3,T,0,true,i,m:", R"(field "index": want an integer, got "i")"},
      {"a,1,2,3,T,0,true:b,1:", R"(entry "b,1")"},
  };
  for (const auto& c : cases) {
    auto r = DecodeNodeRegisterLegacy(c.in);
    ASSERT_FALSE(r) << c.in;
    EXPECT_NE(r.error().find(c.want), std::string::npos) << c.in << " -> " << r.error();
  }
}

// 100,000 levels of `[` (200 KB, under the annotation size limit) crashed the decoder's caller.
TEST(DeepNesting, NodeRegisterIsACleanError) {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto r = DecodeNodeRegister(deep);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("node register: nested deeper than 10000 levels"), std::string::npos)
      << r.error().substr(0, 200);
}

// Go accepts these, but each adds capacity that does not exist (issue 19).
TEST(NodeRegister, RejectsNegativeSizesAndDuplicateIds) {
  struct Case {
    const char* in;
    const char* want;
  };
  const Case cases[] = {
      {R"([{"id":"GPU-a","count":10,"devmem":-16384,"devcore":100,"health":true}])",
       R"(node register: device 0: field "devmem": must not be negative, got -16384)"},
      {R"([{"id":"GPU-a","count":-1,"devmem":16384,"devcore":100,"health":true}])",
       R"(node register: device 0: field "count": must not be negative, got -1)"},
      {R"([{"id":"GPU-a","count":10,"devmem":16384,"devcore":-100,"health":true}])",
       R"(node register: device 0: field "devcore": must not be negative, got -100)"},
      {R"([{"id":"GPU-a","count":10,"devmem":16384},{"id":"GPU-a","index":1,"count":10,"devmem":16384}])",
       R"(node register: device 1: field "id": duplicate "GPU-a" (a GPU listed twice))"},
  };
  for (const auto& c : cases) {
    auto r = DecodeNodeRegister(c.in);
    ASSERT_FALSE(r) << c.in;
    EXPECT_EQ(r.error(), c.want) << c.in;
  }
  auto legacy = DecodeNodeRegisterLegacy("GPU-a,10,-5,100,DCU,0,true:");
  ASSERT_FALSE(legacy);
  EXPECT_NE(legacy.error().find(R"(field "devmem": must not be negative)"), std::string::npos)
      << legacy.error();
  legacy = DecodeNodeRegisterLegacy("GPU-a,10,5,100,DCU,0,true:GPU-a,10,5,100,DCU,0,true:");
  ASSERT_FALSE(legacy);
  EXPECT_NE(legacy.error().find(R"(duplicate "GPU-a")"), std::string::npos) << legacy.error();
}

// With require_id (the vendors other than NVIDIA) every device needs an id of its own: a missing,
// null or empty id and an id listed twice are refused naming the entry and the field; what the
// decoder refuses without it stays refused; otherwise the devices are the same.
TEST(NodeRegisterJson, RequireIdGivesEveryDeviceAnIdOfItsOwn) {
  struct Case {
    const char* value;
    const char* error;
  };
  const Case cases[] = {
      {R"([{"id":"a"},{"count":1}])", R"(node register: device 1: field "id": missing)"},
      {R"([{"id":null}])", R"(node register: device 0: field "id": missing)"},
      {R"([{"ID":""}])", R"(node register: device 0: field "id": must not be empty, got "")"},
      {R"([{"id":"a"},{"id":"b"},{"iD":"a"}])",
       R"(node register: device 2: field "id": duplicate "a" (a GPU listed twice))"},
      {R"([{"id":"a","count":-1}])",
       R"(node register: device 0: field "count": must not be negative, got -1)"},
      {"[null]", R"(node register: device 0: field "id": missing)"},
  };
  for (const auto& c : cases) {
    auto r = DecodeNodeRegister(c.value, {.require_id = true});
    ASSERT_FALSE(r) << c.value;
    EXPECT_EQ(r.error(), c.error) << c.value;
  }
  for (const char* ok : {"null", "[]", R"([{"id":"a","count":2},{"Id":"b"}])"}) {
    auto r = DecodeNodeRegister(ok, {.require_id = true});
    ASSERT_TRUE(r) << ok << ": " << r.error();
    EXPECT_EQ(*r, *DecodeNodeRegister(ok)) << ok;
  }
}

}  // namespace
}  // namespace hami::protocol
