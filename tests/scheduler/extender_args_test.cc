#include "scheduler/extender_args.h"

#include <string>

#include <gtest/gtest.h>

namespace hami::scheduler {
namespace {

std::string Deep() { return std::string(100000, '[') + std::string(100000, ']'); }

// 100,000 levels in a request body crashed the scheduler with no authentication needed.
TEST(ExtenderArgsTest, DeepNodeNamesIsACleanError) {
  auto r = ParseExtenderArgs(R"({"Pod":{},"NodeNames":)" + Deep() + "}");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("ExtenderArgs: body is nested deeper than 10000 levels"),
            std::string::npos)
      << r.error();
}

TEST(ExtenderArgsTest, DeepPodNameIsACleanError) {
  auto r = ParseBindingArgs(R"({"PodName":)" + Deep() + R"(,"Node":"n"})");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("body is nested deeper than 10000 levels"), std::string::npos)
      << r.error();
}

TEST(ExtenderArgsTest, NotJsonNamesTheBody) {
  auto r = ParseExtenderArgs("{");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), "ExtenderArgs: body is not valid JSON");
}

}  // namespace
}  // namespace hami::scheduler
