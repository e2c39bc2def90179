#include "vgpu/log.h"

#include <gtest/gtest.h>

#include <string>

namespace hami::vgpu {
namespace {

TEST(LogTest, HamiCoreLineShapes) {
  char buf[256];
  std::size_t n =
      FormatLogLine(buf, sizeof(buf), "Warn", 42, 140001, "/src/vgpu/region.cc", 17, "hello");
  EXPECT_EQ(std::string(buf, n), "[HAMI-core Warn(42:140001:region.cc:17)]: hello\n");
  n = FormatLogLine(buf, sizeof(buf), "ERROR", 42, -5, "cuda_hooks.cc", 9, "Device 0 OOM 3 / 2");
  EXPECT_EQ(std::string(buf, n),
            "[HAMI-core ERROR (pid:42 thread=-5 cuda_hooks.cc:9)]: Device 0 OOM 3 / 2\n");
}

TEST(LogTest, TruncatedLineKeepsNewline) {
  char buf[24];
  std::size_t n = FormatLogLine(buf, sizeof(buf), "Msg", 1, 1, "a.cc", 1, "a long message here");
  EXPECT_EQ(n, sizeof(buf) - 1);
  EXPECT_EQ(buf[n - 1], '\n');
}

}  // namespace
}  // namespace hami::vgpu
