// The plan's files on the host: the limits file libvgpu reads (allocate.h FileSpec).
#include "deviceplugin/container_files.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ContainerFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami_container_files_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ContainerFilesTest, WritesEveryFileReadOnlyForTheContainerReplacingOldOnes) {
  AllocateEnv env;
  env.hook_path = dir_;
  auto a = BuildContainerAllocation({{"GPU-a", "NVIDIA", 1000, 30}}, {"main"}, "uid-1", "id1", env);
  auto b = BuildContainerAllocation({{"GPU-b", "NVIDIA", 2000, 0}}, {"side"}, "uid-1", "id2", env);
  const std::string path = dir_ + "/vgpu/limits/uid-1_main.limits";
  {
    std::ofstream stale(dir_ + "/stale");  // an earlier pod's file under the same name
  }
  fs::create_directories(dir_ + "/vgpu/limits");
  fs::rename(dir_ + "/stale", path);
  ASSERT_TRUE(WriteContainerFiles({a, b}));
  EXPECT_EQ(ReadAll(path), a.files[0].content);
  EXPECT_NE(ReadAll(path).find("CUDA_DEVICE_MEMORY_LIMIT_0=1000m\n"), std::string::npos);
  EXPECT_EQ(ReadAll(dir_ + "/vgpu/limits/uid-1_side.limits"), b.files[0].content);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  // The region file: empty, writable by any container user.
  const std::string cache = dir_ + "/vgpu/containers/uid-1_main/id1.cache";
  ASSERT_EQ(stat(cache.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
}

TEST_F(ContainerFilesTest, ErrorNamesThePath) {
  { std::ofstream blocker(dir_ + "/vgpu"); }  // a file where the directory should be
  ContainerAllocation a;
  a.files.push_back({dir_ + "/vgpu/limits/x.limits", "CUDA_DEVICE_SM_LIMIT=1\n"});
  Status s = WriteContainerFiles({a});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("\"" + dir_ + "/vgpu/limits/x.limits\""), std::string::npos)
      << s.error();
}

}  // namespace
}  // namespace hami::deviceplugin
