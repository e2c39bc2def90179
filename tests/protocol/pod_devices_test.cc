#include "protocol/pod_devices.h"

#include <gtest/gtest.h>

#include <string>

namespace hami::protocol {
namespace {

ContainerDevice Dev(const char* uuid, const char* type, int32_t mem, int32_t cores) {
  return ContainerDevice{uuid, type, mem, cores};
}

// §10.2 vector 1.
TEST(PodDevices, Vector1) {
  PodDevices one = {{Dev("UUID1", "Type1", 1000, 30)}};
  EXPECT_EQ(EncodePodDevices(one), "UUID1,Type1,1000,30:;");
  auto r = DecodePodDevices("UUID1,Type1,1000,30:;");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*r, (PodDevices{{Dev("UUID1", "Type1", 1000, 30)}, {}}));

  PodDevices two = {{Dev("UUID1", "Type1", 1000, 30), Dev("UUID2", "Type1", 1000, 30)}};
  EXPECT_EQ(EncodePodDevices(two), "UUID1,Type1,1000,30:UUID2,Type1,1000,30:;");
  auto r2 = DecodePodDevices("UUID1,Type1,1000,30:UUID2,Type1,1000,30:;");
  ASSERT_TRUE(r2);
  EXPECT_EQ((*r2)[0], two[0]);

  auto empty = DecodePodDevices("");
  ASSERT_TRUE(empty);
  EXPECT_EQ(*empty, (PodDevices{{}}));
  EXPECT_EQ(EncodePodDevices({}), "");
}

// §10.2 vector 2.
TEST(PodDevices, Vector2) {
  auto r = DecodePodDevices(
      "GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76,NVIDIA,500,3:;"
      "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,NVIDIA,500,3:;");
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0],
            ContainerDevices{Dev("GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76", "NVIDIA", 500, 3)});
  EXPECT_EQ((*r)[1],
            ContainerDevices{Dev("GPU-ebe7c3f7-303d-558d-435e-99a160631fe4", "NVIDIA", 500, 3)});
  EXPECT_TRUE((*r)[2].empty());
}

// §10.2 vector 3 and other malformed parts.
TEST(PodDevices, RejectsMalformedNamingContainerDeviceAndField) {
  struct Case {
    const char* in;
    const char* want;
  };
  const Case cases[] = {
      {"uuid,type,100:;", R"(container 0 device 0 "uuid,type,100": want 4 comma-separated)"},
      {"a,N,1,2:;b,N:;", R"(container 1 device 0 "b,N": want 4 comma-separated fields)"},
      {"a,N,1,2:b,N,x,2:;",
       R"(container 0 device 1 "b,N,x,2": field "usedmem": want an int32, got "x")"},
      {"a,N,1,2.5:;", R"(field "usedcores": want an int32, got "2.5")"},
      {"a,N,2147483648,0:;", R"(field "usedmem": want an int32, got "2147483648")"},
      {"a,N,,0:;", R"(field "usedmem": want an int32, got "")"},
      {"a,N,+-1,0:;", R"(field "usedmem")"},
      {"a,N, 1,0:;", R"(field "usedmem")"},
      // Negative sizes would free memory or cores another pod holds (issue 19).
      {"GPU-a,NVIDIA,-99999,0:;",
       R"(container 0 device 0 "GPU-a,NVIDIA,-99999,0": field "usedmem": must not be negative, got "-99999")"},
      {"GPU-a,NVIDIA,100,-1:;", R"(field "usedcores": must not be negative, got "-1")"},
  };
  for (const auto& c : cases) {
    auto r = DecodePodDevices(c.in);
    ASSERT_FALSE(r) << c.in;
    EXPECT_NE(r.error().find(c.want), std::string::npos) << c.in << " -> " << r.error();
  }
}

// Every example of docs/protocol.md#device-lists-on-pods and HAMi's docs, byte-exact.
TEST(PodDevices, SpecExamplesRoundTrip) {
  struct Case {
    const char* value;
    PodDevices want;  // decoded, including the trailing empty container
  };
  const Case cases[] = {
      {"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,30:;",
       {{Dev("GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448", "NVIDIA", 3000, 30)}, {}}},
      {"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,0:;",
       {{Dev("GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448", "NVIDIA", 3000, 0)}, {}}},
      {"GPU-a,NVIDIA,3000,0:;GPU-a,NVIDIA,5000,0:;",
       {{Dev("GPU-a", "NVIDIA", 3000, 0)}, {Dev("GPU-a", "NVIDIA", 5000, 0)}, {}}},
      {"GPU-a,NVIDIA,1000,30:GPU-b,NVIDIA,1000,30:;",
       {{Dev("GPU-a", "NVIDIA", 1000, 30), Dev("GPU-b", "NVIDIA", 1000, 30)}, {}}},
      {";GPU-a,NVIDIA,1000,30:;", {{}, {Dev("GPU-a", "NVIDIA", 1000, 30)}, {}}},
      {"GPU-bbb,NVIDIA,3000,30:GPU-aaa,NVIDIA,3000,30:;",
       {{Dev("GPU-bbb", "NVIDIA", 3000, 30), Dev("GPU-aaa", "NVIDIA", 3000, 30)}, {}}},
      {";;", {{}, {}, {}}},
      {";", {{}, {}}},
  };
  for (const auto& c : cases) {
    auto r = DecodePodDevices(c.value);
    ASSERT_TRUE(r) << c.value << ": " << r.error();
    EXPECT_EQ(*r, c.want) << c.value;
    // Dropping the trailing empty container gives back the exact value.
    PodDevices trimmed(r->begin(), r->end() - 1);
    EXPECT_EQ(EncodePodDevices(trimmed), c.value);
  }
}

TEST(PodDevices, LenientPartsLikeGo) {
  // Parts without ',' are skipped; fields past the 4th are ignored; Go's ParseInt takes a sign.
  auto r = DecodePodDevices("junk:a,N,+5,1,extra:::;");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*r, (PodDevices{{Dev("a", "N", 5, 1)}, {}}));
  auto c = DecodeContainerDevices("a,N,1,2:b,N,3,4:");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(*c, (ContainerDevices{Dev("a", "N", 1, 2), Dev("b", "N", 3, 4)}));
  EXPECT_EQ(EncodeContainerDevices(*c), "a,N,1,2:b,N,3,4:");
  auto bad = DecodeContainerDevices("a,N,1:");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find(R"(device 0 "a,N,1")"), std::string::npos) << bad.error();
}

// §11.2: the device plugin consumes the first non-empty segment, then checks for the vendor.
TEST(PodDevices, VendorAndFirstNonEmptyHelpers) {
  struct Case {
    const char* value;
    bool has_nvidia;
    std::optional<size_t> first;
  };
  const Case cases[] = {
      {"GPU-a,NVIDIA,3000,30:;", true, 0},
      {";GPU-a,NVIDIA,1000,30:;", true, 1},
      {";;", false, std::nullopt},
      {";", false, std::nullopt},
      {"", false, std::nullopt},
      {";;GPU-x,DCU,10,10:;", false, 2},
      // A UUID that happens to contain the keyword is not a device of that vendor.
      {"NVIDIA-1,DCU,10,10:;", false, 0},
      // The type may be a model name holding the vendor key.
      {"GPU-a,NVIDIA A100,10,10:;", true, 0},
      // Malformed parts hold no device.
      {"NVIDIA,x:;", false, 0},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(HasVendorDevice(c.value, "NVIDIA"), c.has_nvidia) << c.value;
    EXPECT_EQ(FirstNonEmptyContainer(std::string_view(c.value)), c.first) << c.value;
    auto pod = DecodePodDevices(c.value);
    if (pod) {
      EXPECT_EQ(FirstNonEmptyContainer(*pod), c.first) << c.value;
    }
  }
  // Consuming containers one by one, as the device plugin does.
  auto pod = DecodePodDevices(";GPU-a,NVIDIA,1,1:;GPU-b,NVIDIA,2,2:;");
  ASSERT_TRUE(pod);
  pod->pop_back();
  std::vector<std::string> seen;
  while (auto i = FirstNonEmptyContainer(*pod)) {
    seen.push_back((*pod)[*i][0].uuid);
    (*pod)[*i].clear();
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(EncodePodDevices(*pod), ";;;");
  EXPECT_FALSE(HasVendorDevice(EncodePodDevices(*pod), "NVIDIA"));
}

}  // namespace
}  // namespace hami::protocol
