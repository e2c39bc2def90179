// The MPS control daemons (mps_daemon.h) with a fake nvidia-cuda-mps-control: a shell script the
// test writes, which records each call (its args, the daemon env, the command read on stdin) and
// emulates a daemon with a file in the pipe directory. Start launches one per GPU, a daemon that
// stops answering is started again once the watch interval has passed on the fake clock, Stop
// sends quit; no binary: nothing is run.
#include "deviceplugin/mps_daemon.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "deviceplugin/mps.h"

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

class MpsDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hami-mps-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    control_ = (dir_ / "bin/nvidia-cuda-mps-control").string();
    record_ = dir_ / "record";
    // -d: "launch" records and leaves a running marker, as the real -d returns once the daemon
    // runs. Otherwise a client: reads one command, fails when no daemon runs, quit stops it.
    std::ofstream(control_)
        << "#!/bin/sh\n"
           "rec="
        << record_.string()
        << "\n"
           "gpu=$CUDA_VISIBLE_DEVICES\n"
           "if [ \"$1\" = -d ]; then\n"
           "  echo \"launch $* $gpu $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY\" >> $rec\n"
           "  touch \"$CUDA_MPS_PIPE_DIRECTORY/running\"\n"
           "  exit 0\n"
           "fi\n"
           "read cmd\n"
           "if [ ! -e \"$CUDA_MPS_PIPE_DIRECTORY/running\" ]; then\n"
           "  echo \"Cannot find MPS control daemon process\"; exit 1\n"
           "fi\n"
           "if [ \"$cmd\" = quit ]; then\n"
           "  echo \"quit $gpu\" >> $rec; rm -f \"$CUDA_MPS_PIPE_DIRECTORY/running\"\n"
           "fi\n"
           "echo 100\n";
    fs::permissions(control_, fs::perms::owner_all);
  }
  void TearDown() override { fs::remove_all(dir_); }

  MpsDaemonOptions Options() const {
    MpsDaemonOptions o;
    o.control = control_;
    o.root = (dir_ / "mps").string();
    return o;
  }
  std::string Pipe(const std::string& uuid) const {
    return MpsPipeHostDir((dir_ / "mps").string(), uuid);
  }
  std::string Log(const std::string& uuid) const {
    return MpsLogHostDir((dir_ / "mps").string(), uuid);
  }

  fs::path dir_, record_;
  std::string control_;
  FakeClock clock_;
};

TEST_F(MpsDaemonTest, StartsOnePerGpuRestartsTheGoneAndQuits) {
  MpsDaemons daemons(Options(), {"GPU-a", "GPU-b"}, clock_);
  ASSERT_TRUE(daemons.Start());
  EXPECT_EQ(daemons.control(), control_);
  EXPECT_EQ(Lines(record_),
            (std::vector<std::string>{"launch -d GPU-a " + Pipe("GPU-a") + " " + Log("GPU-a"),
                                      "launch -d GPU-b " + Pipe("GPU-b") + " " + Log("GPU-b")}));
  EXPECT_TRUE(fs::is_directory(Log("GPU-a")));

  // GPU-b's daemon dies. Nothing is checked before the watch interval has passed.
  fs::remove(Pipe("GPU-b") + "/running");
  clock_.Advance(kMpsWatchInterval - std::chrono::seconds(1));
  daemons.Tick();
  EXPECT_EQ(Lines(record_).size(), 2u);
  clock_.Advance(std::chrono::seconds(1));
  daemons.Tick();
  EXPECT_EQ(Lines(record_).size(), 3u);
  EXPECT_EQ(Lines(record_).back(), "launch -d GPU-b " + Pipe("GPU-b") + " " + Log("GPU-b"));
  EXPECT_EQ(daemons.launches(), 3);

  daemons.Stop();
  daemons.Stop();  // idempotent
  auto lines = Lines(record_);
  EXPECT_EQ(std::vector<std::string>(lines.begin() + 3, lines.end()),
            (std::vector<std::string>{"quit GPU-a", "quit GPU-b"}));
  daemons.Tick();  // stopped: no restart
  EXPECT_EQ(Lines(record_).size(), 5u);
}

TEST_F(MpsDaemonTest, AdoptsADaemonThatAlreadyAnswers) {
  fs::create_directories(Pipe("GPU-a"));
  std::ofstream(Pipe("GPU-a") + "/running");
  MpsDaemons daemons(Options(), {"GPU-a"}, clock_);
  ASSERT_TRUE(daemons.Start());
  EXPECT_EQ(daemons.launches(), 0);
  EXPECT_FALSE(fs::exists(record_));
}

TEST_F(MpsDaemonTest, WithoutTheBinaryNothingRuns) {
  MpsDaemonOptions o = Options();
  o.control = "no-such-mps-control";
  MpsDaemons daemons(o, {"GPU-a"}, clock_);
  ASSERT_TRUE(daemons.Start());
  EXPECT_EQ(daemons.control(), "");
  clock_.Advance(kMpsWatchInterval);
  daemons.Tick();
  daemons.Stop();
  EXPECT_EQ(daemons.launches(), 0);
  EXPECT_FALSE(fs::exists(dir_ / "mps"));
}

TEST_F(MpsDaemonTest, AFailingLaunchIsAnErrorNamingTheGpu) {
  std::ofstream(control_) << "#!/bin/sh\necho 'An instance of this daemon is already running'\n"
                             "exit 3\n";
  MpsDaemons daemons(Options(), {"GPU-a"}, clock_);
  Status s = daemons.Start();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), "MPS daemon of GPU \"GPU-a\": \"" + control_ +
                           "\" -d exited 3: \"An instance of this daemon is already running\"");
}

TEST_F(MpsDaemonTest, FindExecutableTakesAPathOrAName) {
  const std::string bin = (dir_ / "bin").string();
  EXPECT_EQ(FindExecutable("nvidia-cuda-mps-control", "/nonexistent::" + bin), control_);
  EXPECT_EQ(FindExecutable(control_, ""), control_);
  EXPECT_EQ(FindExecutable("no-such-binary", bin), "");
  EXPECT_EQ(FindExecutable(bin, ""), "");  // a directory
  fs::permissions(control_, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(FindExecutable(control_, ""), "");  // not executable
  EXPECT_EQ(FindExecutable("", bin), "");
}

TEST(RunCommand, StdinStatusOutputAndTimeout) {
  auto r = RunCommand({"/bin/sh", "-c", "read x; echo \"got $x $HAMI_T\" >&2; exit 4"},
                      {"HAMI_T=v"}, "hello\n", std::chrono::seconds(10));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 4);
  EXPECT_EQ(r->output, "got hello v\n");
  // A command that exits without reading its input is no SIGPIPE for us.
  auto early = RunCommand({"/bin/true"}, {}, std::string(1 << 20, 'x'), std::chrono::seconds(10));
  ASSERT_TRUE(early) << early.error();
  EXPECT_EQ(early->status, 0);
  // Without input stdin is /dev/null: `read` returns at once. A command that hangs is killed.
  auto no_input = RunCommand({"/bin/sh", "-c", "read x; exit 5"}, {}, "", std::chrono::seconds(10));
  ASSERT_TRUE(no_input) << no_input.error();
  EXPECT_EQ(no_input->status, 5);
  auto hang = RunCommand({"/bin/sleep", "30"}, {}, "", std::chrono::milliseconds(50));
  ASSERT_FALSE(hang);
  EXPECT_EQ(hang.error(), "\"/bin/sleep\" did not exit within 50 ms");
  auto missing = RunCommand({"/nonexistent/bin"}, {}, "", std::chrono::seconds(1));
  EXPECT_FALSE(missing);
}

}  // namespace
}  // namespace hami::deviceplugin
