#include "k8s/selector.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hami::k8s {
namespace {

TEST(LabelSelector, MatchesTable) {
  const StringMap labels = {{"app", "web"}, {"tier", "gpu"}, {"env", "prod"}};
  struct Case {
    const char* selector;
    bool match;
  };
  const Case cases[] = {
      {"", true},
      {"app=web", true},
      {"app==web", true},
      {"app=db", false},
      {"app!=db", true},
      {"app!=web", false},
      {"missing!=x", true},
      {"tier in (gpu,cpu)", true},
      {"tier in ( cpu , npu )", false},
      {"tier notin (cpu)", true},
      {"tier notin (gpu)", false},
      {"missing notin (gpu)", true},
      {"app", true},
      {"missing", false},
      {"!missing", true},
      {"!app", false},
      {"app=web,tier in (gpu),!missing", true},
      {"app=web,tier=cpu", false},
      {"example.com/key=web", false},
  };
  for (const auto& c : cases) {
    auto sel = LabelSelector::Parse(c.selector);
    ASSERT_TRUE(sel) << c.selector << ": " << sel.error();
    EXPECT_EQ(sel->Matches(labels), c.match) << c.selector;
  }
}

TEST(LabelSelector, RejectsMalformedNamingTheRequirement) {
  for (const char* bad : {"a in (b", "a foo (b)", "=x", "a=b c", "in (a)", "a=(b)", "a b"}) {
    auto sel = LabelSelector::Parse(bad);
    ASSERT_FALSE(sel) << bad;
    EXPECT_NE(sel.error().find("label selector requirement"), std::string::npos) << sel.error();
  }
}

TEST(LabelSelector, MatchesObjectLabels) {
  auto sel = LabelSelector::Parse("a=1");
  ASSERT_TRUE(sel);
  EXPECT_TRUE(sel->MatchesObject(Json::parse(R"({"metadata":{"labels":{"a":"1"}}})")));
  EXPECT_FALSE(sel->MatchesObject(Json::parse(R"({"metadata":{}})")));
  EXPECT_FALSE(sel->MatchesObject(Json::parse(R"({"metadata":"junk"})")));
}

TEST(FieldSelector, MatchesTable) {
  Json pod = Json::parse(R"({"metadata":{"name":"p","namespace":"ns"},
      "spec":{"nodeName":"n1","priority":3,"hostNetwork":true},"status":{"phase":"Running"}})");
  struct Case {
    const char* selector;
    bool match;
  };
  const Case cases[] = {
      {"", true},
      {"metadata.name=p", true},
      {"metadata.namespace==ns", true},
      {"spec.nodeName=n1,status.phase=Running", true},
      {"spec.nodeName=n2", false},
      {"spec.nodeName!=n2", true},
      {"spec.nodeName=", false},
      {"spec.schedulerName=", true},
      {"spec.priority=3", true},
      {"spec.hostNetwork=true", true},
      {"status.phase!=Running", false},
  };
  for (const auto& c : cases) {
    auto sel = FieldSelector::Parse(c.selector);
    ASSERT_TRUE(sel) << c.selector << ": " << sel.error();
    EXPECT_EQ(sel->Matches(pod), c.match) << c.selector;
  }
  EXPECT_FALSE(FieldSelector::Parse("nooperator"));
  EXPECT_FALSE(FieldSelector::Parse("=x"));
}

}  // namespace
}  // namespace hami::k8s
