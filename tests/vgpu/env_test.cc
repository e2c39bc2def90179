#include "vgpu/env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace hami::vgpu {
namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  std::vector<std::string> errors;
};

const char* Lookup(void* ctx, const char* name) {
  auto* env = static_cast<FakeEnv*>(ctx);
  auto it = env->vars.find(name);
  return it == env->vars.end() ? nullptr : it->second.c_str();
}

void Collect(void* ctx, const char* message) {
  static_cast<FakeEnv*>(ctx)->errors.push_back(message);
}

VgpuConfig Load(FakeEnv* env) {
  VgpuConfig config;
  LoadConfig(Lookup, env, Collect, env, &config);
  return config;
}

TEST(ParseSizeTest, AcceptsSuffixesAndBases) {
  struct Case {
    const char* text;
    std::uint64_t want;
  } cases[] = {
      {"0", 0},
      {"1024", 1024},
      {"1k", 1024},
      {"1K", 1024},
      {"3m", 3ULL << 20},
      {"3M", 3ULL << 20},
      {"2g", 2ULL << 30},
      {"2G", 2ULL << 30},
      {"0x10m", 16ULL << 20},
      {"010", 8},  // leading zero = octal, as HAMi-core's strtoul(.., 0)
      {"17179869184", 16ULL << 30},
      {"16777215g", 16777215ULL << 30},
  };
  for (const Case& c : cases) {
    std::uint64_t got = 1;
    char err[256] = "";
    EXPECT_TRUE(ParseSize("X", c.text, &got, err, sizeof(err))) << c.text << ": " << err;
    EXPECT_EQ(got, c.want) << c.text;
  }
}

TEST(ParseSizeTest, RejectsGarbageWithNameAndValue) {
  const char* bad[] = {
      "", " 1g", "-1", "+1", "1t", "1gb", "g", "abc", "99999999999999999999", "17179869184g"};
  for (const char* text : bad) {
    std::uint64_t got = 42;
    char err[256] = "";
    EXPECT_FALSE(ParseSize("CUDA_DEVICE_MEMORY_LIMIT", text, &got, err, sizeof(err))) << text;
    EXPECT_EQ(got, 42u) << text;
    EXPECT_NE(std::string(err).find("CUDA_DEVICE_MEMORY_LIMIT"), std::string::npos) << err;
    EXPECT_NE(std::string(err).find(std::string("\"") + text + "\""), std::string::npos) << err;
  }
}

TEST(LoadConfigTest, Defaults) {
  FakeEnv env;
  VgpuConfig c = Load(&env);
  for (int i = 0; i < kMaxDevices; ++i) {
    EXPECT_EQ(c.memory_limit[i], 0u);
    EXPECT_EQ(c.sm_limit[i], 100u);
  }
  EXPECT_STREQ(c.cache_path, "/tmp/cudevshr.cache");
  EXPECT_EQ(c.policy, kPolicyDefault);
  EXPECT_EQ(c.priority, 1);
  EXPECT_EQ(c.log_level, 2);
  EXPECT_TRUE(env.errors.empty());
}

TEST(LoadConfigTest, PerDeviceOverridesFallback) {
  FakeEnv env;
  env.vars = {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"},
              {"CUDA_DEVICE_MEMORY_LIMIT_1", "3000m"},
              {"CUDA_DEVICE_MEMORY_LIMIT_15", "2g"},
              {"CUDA_DEVICE_SM_LIMIT", "30"},
              {"CUDA_DEVICE_SM_LIMIT_2", "0"},
              {"CUDA_DEVICE_SM_LIMIT_3", "55"},
              {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/usr/local/vgpu/x.cache"},
              {"CUDA_TASK_PRIORITY", "0"},
              {"LIBCUDA_LOG_LEVEL", "4"}};
  VgpuConfig c = Load(&env);
  EXPECT_EQ(c.memory_limit[0], 1ULL << 30);
  EXPECT_EQ(c.memory_limit[1], 3000ULL << 20);
  EXPECT_EQ(c.memory_limit[2], 1ULL << 30);
  EXPECT_EQ(c.memory_limit[15], 2ULL << 30);
  EXPECT_EQ(c.sm_limit[0], 30u);
  EXPECT_EQ(c.sm_limit[2], 100u);  // 0 = unset
  EXPECT_EQ(c.sm_limit[3], 55u);
  EXPECT_STREQ(c.cache_path, "/usr/local/vgpu/x.cache");
  EXPECT_EQ(c.priority, 0);
  EXPECT_EQ(c.log_level, 4);
  EXPECT_TRUE(env.errors.empty());
}

TEST(LoadConfigTest, InvalidValueIsReportedAndIgnored) {
  FakeEnv env;
  env.vars = {{"CUDA_DEVICE_MEMORY_LIMIT", "2g"}, {"CUDA_DEVICE_MEMORY_LIMIT_0", "lots"}};
  VgpuConfig c = Load(&env);
  EXPECT_EQ(c.memory_limit[0], 2ULL << 30);  // falls back to the global value
  ASSERT_EQ(env.errors.size(), 1u);
  EXPECT_NE(env.errors[0].find("CUDA_DEVICE_MEMORY_LIMIT_0"), std::string::npos);
  EXPECT_NE(env.errors[0].find("\"lots\""), std::string::npos);
}

TEST(LoadConfigTest, Policy) {
  struct Case {
    const char* text;
    int want;
  } cases[] = {{"FORCE", kPolicyForce},     {"force", kPolicyForce},   {"DISABLE", kPolicyDisable},
               {"disable", kPolicyDisable}, {"Force", kPolicyDefault}, {"", kPolicyDefault},
               {"default", kPolicyDefault}};
  for (const Case& c : cases) {
    FakeEnv env;
    env.vars["GPU_CORE_UTILIZATION_POLICY"] = c.text;
    EXPECT_EQ(Load(&env).policy, c.want) << c.text;
  }
}

TEST(VisibleDevicesTest, SplitAndResolve) {
  char uuids[3][HAMI_REGION_UUID_LEN] = {"GPU-aaaa1111-0000", "GPU-bbbb2222-0000",
                                         "GPU-aaaa3333-0000"};
  char tokens[kMaxDevices][HAMI_REGION_UUID_LEN];
  ASSERT_EQ(SplitVisibleDevices("2, GPU-bbbb ,GPU-aaaa,MIG-x,7", tokens, kMaxDevices), 5);
  EXPECT_EQ(ResolveVisibleDevice(tokens[0], uuids, 3), 2);
  EXPECT_EQ(ResolveVisibleDevice(tokens[1], uuids, 3), 1);
  EXPECT_EQ(ResolveVisibleDevice(tokens[2], uuids, 3), -1);  // ambiguous prefix
  EXPECT_EQ(ResolveVisibleDevice(tokens[3], uuids, 3), -1);  // MIG: not mappable
  EXPECT_EQ(ResolveVisibleDevice(tokens[4], uuids, 3), -1);  // out of range
  EXPECT_EQ(ResolveVisibleDevice("GPU-aaaa3333-0000", uuids, 3), 2);
  EXPECT_EQ(SplitVisibleDevices("", tokens, kMaxDevices), 0);
}

TEST(LimitsFileTest, ParsesLimitVariablesCommentsAndBlanks) {
  const std::string text =
      "# limits of container main\n\n  CUDA_DEVICE_MEMORY_LIMIT_0=1024m  \r\n"
      "CUDA_DEVICE_MEMORY_LIMIT_15=1g\nCUDA_DEVICE_SM_LIMIT=30\n"
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/x.cache\nGPU_CORE_UTILIZATION_POLICY=force";
  static LimitsFile file;
  char err[256] = "";
  ASSERT_TRUE(ParseLimitsFile(text.data(), text.size(), &file, err, sizeof(err))) << err;
  EXPECT_EQ(file.count, 5);
  EXPECT_STREQ(LimitsFileLookup(&file, "CUDA_DEVICE_MEMORY_LIMIT_0"), "1024m");
  EXPECT_EQ(LimitsFileLookup(&file, "CUDA_DEVICE_MEMORY_LIMIT"), nullptr);  // never the env
  EXPECT_EQ(LimitsFileLookup(&file, "CUDA_TASK_PRIORITY"), nullptr);
  setenv("HAMI_VGPU_LIMITS_TEST_OTHER", "x", 1);
  EXPECT_STREQ(LimitsFileLookup(&file, "HAMI_VGPU_LIMITS_TEST_OTHER"), "x");  // not a limit
  VgpuConfig config;
  LoadConfig(LimitsFileLookup, &file, nullptr, nullptr, &config);
  EXPECT_EQ(config.memory_limit[0], 1ULL << 30);
  EXPECT_EQ(config.memory_limit[1], 0u);
  EXPECT_EQ(config.memory_limit[15], 1ULL << 30);
  EXPECT_EQ(config.sm_limit[3], 30u);
  EXPECT_EQ(config.policy, kPolicyForce);
  EXPECT_STREQ(config.cache_path, "/usr/local/vgpu/x.cache");
}

TEST(LimitsFileTest, RejectsWhatTheDevicePluginNeverWrites) {
  struct Case {
    std::string text, error;
  } cases[] = {
      {"CUDA_DEVICE_MEMORY_LIMIT=1g\nLD_PRELOAD=/x.so\n",
       "vgpu.limits line 2: unknown variable \"LD_PRELOAD\""},
      {"CUDA_DEVICE_MEMORY_LIMIT_16=1g", "unknown variable \"CUDA_DEVICE_MEMORY_LIMIT_16\""},
      {"just words", "vgpu.limits line 1: want NAME=VALUE, got \"just words\""},
      {"=1g", "want NAME=VALUE"},
      {"CUDA_DEVICE_SM_LIMIT=1\nCUDA_DEVICE_SM_LIMIT=2",
       "line 2: \"CUDA_DEVICE_SM_LIMIT\" set twice"},
      {std::string("CUDA_DEVICE_SM_LIMIT=1\0", 23), "want NAME=VALUE"},
  };
  static LimitsFile file;
  for (const Case& c : cases) {
    char err[256] = "";
    EXPECT_FALSE(ParseLimitsFile(c.text.data(), c.text.size(), &file, err, sizeof(err))) << c.text;
    EXPECT_NE(std::string(err).find(c.error), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace hami::vgpu
