// Table responses (src/sim/apiserver/table.h): which Accept asks for a Table, and AGE as Go's
// duration.HumanDuration prints it. tests/sim/kubectl_table_test.sh checks kubectl's output.
#include "sim/apiserver/table.h"

#include <gtest/gtest.h>

namespace hami::sim {
namespace {

using std::chrono::seconds;

TEST(TableTest, AcceptAsksForTable) {
  // What kubectl get sends.
  EXPECT_EQ(WantedTableVersion("application/json;as=Table;v=v1;g=meta.k8s.io,application/"
                               "json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"),
            "v1");
  EXPECT_EQ(WantedTableVersion("application/json; as=Table; v=v1beta1; g=meta.k8s.io"), "v1beta1");
  EXPECT_EQ(WantedTableVersion("application/json"), std::nullopt);
  EXPECT_EQ(WantedTableVersion("application/json;as=Table;v=v1;g=example.com"), std::nullopt);
  EXPECT_EQ(WantedTableVersion("application/json;as=Table;v=v2;g=meta.k8s.io"), std::nullopt);
  EXPECT_EQ(WantedTableVersion(""), std::nullopt);
}

TEST(TableTest, HumanDurationMatchesGo) {
  EXPECT_EQ(HumanDuration(seconds(-5)), "<invalid>");
  EXPECT_EQ(HumanDuration(seconds(-1)), "0s");
  EXPECT_EQ(HumanDuration(seconds(0)), "0s");
  EXPECT_EQ(HumanDuration(seconds(119)), "119s");
  EXPECT_EQ(HumanDuration(seconds(120)), "2m");
  EXPECT_EQ(HumanDuration(seconds(125)), "2m5s");
  EXPECT_EQ(HumanDuration(seconds(10 * 60 + 5)), "10m");
  EXPECT_EQ(HumanDuration(seconds(3 * 3600)), "3h");
  EXPECT_EQ(HumanDuration(seconds(3 * 3600 + 60 * 7)), "3h7m");
  EXPECT_EQ(HumanDuration(seconds(30 * 3600)), "30h");
  EXPECT_EQ(HumanDuration(seconds(3 * 86400 + 5 * 3600)), "3d5h");
  EXPECT_EQ(HumanDuration(seconds(100 * 86400)), "100d");
  EXPECT_EQ(HumanDuration(seconds(800 * 86400)), "2y70d");
  EXPECT_EQ(HumanDuration(seconds(3000 * 86400)), "8y");
}

}  // namespace
}  // namespace hami::sim
