#include "common/flags.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace hami::flags {
namespace {

using Args = std::vector<std::string>;

FlagSet Sample() {
  FlagSet set;
  set.long_options = {{"v", Arity::kOne},        {"http_bind", Arity::kOne},
                      {"debug", Arity::kNone},   {"leader-elect", Arity::kOne},
                      {"kube-qps", Arity::kOne}, {"help", Arity::kNone},
                      {"names", Arity::kMany}};
  set.short_options = {{'v', Arity::kOne}, {'h', Arity::kNone}, {'o', Arity::kOne}};
  FlagSet run;
  run.long_options = {{"report", Arity::kOne}, {"serve", Arity::kNone}};
  set.subcommands["run"] = run;
  return set;
}

TEST(NormalizeGoArgs, SingleDashLongNamesGetTwoDashes) {
  EXPECT_EQ(NormalizeGoArgs(Sample(), {"prog", "-v=4", "-debug", "-http_bind=0.0.0.0:80"}),
            (Args{"prog", "--v=4", "--debug", "--http_bind=0.0.0.0:80"}));
  // Already Go/pflag's double-dash forms: kept.
  EXPECT_EQ(NormalizeGoArgs(Sample(), {"prog", "--v=4", "--debug", "--leader-elect=true"}),
            (Args{"prog", "--v=4", "--debug", "--leader-elect=true"}));
}

TEST(NormalizeGoArgs, SeparateValuesAreJoinedAndNeverRewritten) {
  EXPECT_EQ(NormalizeGoArgs(Sample(), {"prog", "-v", "4", "--kube-qps", "-1"}),
            (Args{"prog", "--v=4", "--kube-qps=-1"}));
  // A value that looks like a known flag stays a value.
  EXPECT_EQ(NormalizeGoArgs(Sample(), {"prog", "-http_bind", "-debug", "--v", "-v=3"}),
            (Args{"prog", "--http_bind=-debug", "--v=-v=3"}));
  // The value part of -name=value is kept byte for byte ('=' and '-' in it included).
  EXPECT_EQ(NormalizeGoArgs(Sample(), {"prog", "-http_bind=a=b-c", "-v="}),
            (Args{"prog", "--http_bind=a=b-c", "--v="}));
  // A missing value is left to CLI11 to report.
  EXPECT_EQ(NormalizeGoArgs(Sample(), {"prog", "-v"}), (Args{"prog", "--v"}));
}

TEST(NormalizeGoArgs, DoubleDashEndsFlagParsing) {
  EXPECT_EQ(NormalizeGoArgs(Sample(), {"prog", "-v=1", "--", "-v=4", "-debug"}),
            (Args{"prog", "--v=1", "--", "-v=4", "-debug"}));
}

TEST(NormalizeGoArgs, UnknownNamesAndPositionalsAreLeftAlone) {
  EXPECT_EQ(NormalizeGoArgs(Sample(), {"prog", "-nope=1", "--nope", "file", "-", "---x", "-=1"}),
            (Args{"prog", "-nope=1", "--nope", "file", "-", "---x", "-=1"}));
  // Flags after a positional are still read (pflag's interspersed flags)...
  EXPECT_EQ(NormalizeGoArgs(Sample(), {"prog", "file", "-debug"}),
            (Args{"prog", "file", "--debug"}));
  // ... unless the set reads them as Go's flag package does.
  FlagSet go = Sample();
  go.stop_at_first_positional = true;
  EXPECT_EQ(NormalizeGoArgs(go, {"prog", "-debug", "file", "-debug"}),
            (Args{"prog", "--debug", "file", "-debug"}));
}

TEST(NormalizeGoArgs, ShortOnlyOptionsAndManyValueOptions) {
  EXPECT_EQ(NormalizeGoArgs(Sample(), {"prog", "-o=x", "-o", "-y", "-h"}),
            (Args{"prog", "-o", "x", "-o", "-y", "-h"}));
  EXPECT_EQ(NormalizeGoArgs(Sample(), {"prog", "-names", "a", "b"}),
            (Args{"prog", "--names", "a", "b"}));
}

TEST(NormalizeGoArgs, SubcommandsHaveTheirOwnOptionsAndSeeTheirParents) {
  EXPECT_EQ(
      NormalizeGoArgs(Sample(), {"prog", "-report=x", "run", "-report", "r.json", "-serve", "-v=2",
                                 "scenario.yaml"}),
      (Args{"prog", "-report=x", "run", "--report=r.json", "--serve", "--v=2", "scenario.yaml"}));
  EXPECT_EQ(NormalizeGoArgs(Sample(), {}), Args{});
}

// With a real CLI::App: HAMi's chart arguments parse to the values Go would give them.
TEST(GoStyleArgs, CliAppParsesGoStyleCommandLines) {
  CLI::App app{"test"};
  int v = 0;
  bool debug = false;
  bool leader = false;
  std::string bind;
  double qps = 0;
  app.add_option("-v,--v", v, "verbosity");
  app.add_flag("--debug", debug, "debug");
  app.add_flag("--leader-elect", leader, "leader");
  app.add_option("--http_bind", bind, "bind");
  app.add_option("--kube-qps", qps, "qps");
  const char* argv[] = {
      "prog",      "-v=4", "-debug", "-leader-elect=true", "-http_bind=0.0.0.0:443",
      "-kube-qps", "-1.5"};
  GoStyleArgs args(app, 7, argv);
  ASSERT_NO_THROW(app.parse(args.argc(), args.argv()));
  EXPECT_EQ(v, 4);
  EXPECT_TRUE(debug);
  EXPECT_TRUE(leader);
  EXPECT_EQ(bind, "0.0.0.0:443");
  EXPECT_EQ(qps, -1.5);
  EXPECT_EQ(args.argv()[args.argc()], nullptr);

  // Without the rewrite CLI11 reads "-v=4" as -v with the value "=4" and fails.
  CLI::App plain{"plain"};
  int w = 0;
  plain.add_option("-v,--v", w, "verbosity");
  const char* bad[] = {"prog", "-v=4"};
  EXPECT_THROW(plain.parse(2, bad), CLI::ParseError);
}

TEST(FlagSetOf, CollectsLongShortFlagsSubcommandsAndHelp) {
  CLI::App app{"test"};
  int v = 0;
  bool b = false;
  std::vector<std::string> many;
  std::string s;
  app.add_option("-v,--v", v, "verbosity");
  app.add_flag("--debug", b, "debug");
  app.add_option("--many", many, "many");
  CLI::App* run = app.add_subcommand("run", "run");
  run->add_option("--report", s, "report");
  const FlagSet set = FlagSetOf(app);
  EXPECT_EQ(set.long_options.at("v"), Arity::kOne);
  EXPECT_EQ(set.short_options.at('v'), Arity::kOne);
  EXPECT_EQ(set.long_options.at("debug"), Arity::kNone);
  EXPECT_EQ(set.long_options.at("many"), Arity::kMany);
  EXPECT_EQ(set.long_options.at("help"), Arity::kNone);
  EXPECT_EQ(set.subcommands.at("run").long_options.at("report"), Arity::kOne);
  EXPECT_EQ(set.long_options.count("report"), 0u);
}

TEST(IgnoredFlags, AcceptedListedInHelpAndReportedWhenGiven) {
  CLI::App app{"test"};
  IgnoredFlags ignored;
  ignored.Add(app, {{"debug", false, "HAMi parses it and never reads it"},
                    {"log_dir", true, "klog's"},
                    {"profiling", false, "no pprof here"}});
  const char* argv[] = {"prog", "-debug", "-log_dir", "/var/log"};
  GoStyleArgs args(app, 4, argv);
  ASSERT_NO_THROW(app.parse(args.argc(), args.argv()));
  EXPECT_EQ(ignored.Messages(),
            (std::vector<std::string>{"--debug=true ignored: HAMi parses it and never reads it",
                                      "--log_dir=/var/log ignored: klog's"}));
  const std::string help = app.help();
  EXPECT_NE(help.find(IgnoredFlags::kGroup), std::string::npos) << help;
  EXPECT_NE(help.find("--profiling"), std::string::npos) << help;

  CLI::App none{"none"};
  IgnoredFlags unused;
  unused.Add(none, KlogFlags());
  const char* bare[] = {"prog"};
  ASSERT_NO_THROW(none.parse(1, bare));
  EXPECT_TRUE(unused.Messages().empty());
}

TEST(KlogFlags, NamesKlogsFlagsWithTheirKinds) {
  bool saw_logtostderr = false;
  bool saw_log_dir = false;
  for (const IgnoredFlag& f : KlogFlags()) {
    if (f.name == "logtostderr") saw_logtostderr = !f.takes_value;
    if (f.name == "log_dir") saw_log_dir = f.takes_value;
    EXPECT_NE(f.name, "v");  // -v is ours, not ignored
  }
  EXPECT_TRUE(saw_logtostderr);
  EXPECT_TRUE(saw_log_dir);
}

}  // namespace
}  // namespace hami::flags
