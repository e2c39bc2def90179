#include "scheduler/extender_args.h"

#include <string>
#include <vector>

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

// A NodeNames list is read straight into a capped, de-duplicated list (issue 30 item 9: a 24.7
// MiB body of names peaked at 2.1 GiB): names past the cap are only counted.
TEST(ExtenderArgsTest, NodeNamesAreDeduplicatedAndCapped) {
  auto r = ParseExtenderArgs(
      R"({"Pod":{"metadata":{"name":"p","labels":{"a":["x",1]}}},)"
      R"("nodeNames":["n1","n2","n1","n3","n4","n2"],"Other":[1,{"NodeNames":7}]})",
      3);
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(r->node_names);
  EXPECT_EQ(*r->node_names, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(r->node_names_dropped, 1u);
  EXPECT_EQ(r->pod["metadata"]["name"], "p");
  EXPECT_EQ(r->pod["metadata"]["labels"]["a"][1], 1);
}

TEST(ExtenderArgsTest, NodeNamesShapeErrorsNameTheField) {
  EXPECT_EQ(ParseExtenderArgs(R"({"NodeNames":["a",7]})").error(),
            "ExtenderArgs.NodeNames: want strings, got 7");
  EXPECT_EQ(ParseExtenderArgs(R"({"NodeNames":["a",{}]})").error(),
            "ExtenderArgs.NodeNames: want strings, got an object");
  EXPECT_EQ(ParseExtenderArgs(R"({"NodeNames":"a"})").error(),
            "ExtenderArgs.NodeNames: want a list of strings");
  auto absent = ParseExtenderArgs(R"({"NodeNames":null})");
  ASSERT_TRUE(absent);
  EXPECT_FALSE(absent->node_names);
  EXPECT_EQ(ParseExtenderArgs("[]").error(), "ExtenderArgs: want a JSON object");
}

TEST(ExtenderArgsTest, ManyNodeNamesCostNothingPastTheCap) {
  std::string body = R"({"Pod":{},"NodeNames":[)";
  for (int i = 0; i < 400000; ++i) body += (i ? ",\"n" : "\"n") + std::to_string(i) + "\"";
  body += "]}";
  auto r = ParseExtenderArgs(body, 10000);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->node_names->size(), 10000u);
  EXPECT_EQ(r->node_names_dropped, 390000u);
}

}  // namespace
}  // namespace hami::scheduler
