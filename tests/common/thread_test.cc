// common/thread.h: a background thread's name and a lowered priority, and nothing else's.
#include "common/thread.h"

#include <pthread.h>

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/thread_nice.h"

namespace hami {
namespace {

TEST(ThreadTest, NamesAndLowersOnlyTheCallingThread) {
  const int main_nice = ThisThreadNice();
  int before = 0, after = 0, capped = 0;
  std::string name;
  Status zero = OkStatus(), negative = OkStatus(), big = OkStatus();
  std::map<std::string, std::vector<int>> seen;
  std::thread t([&] {
    NameThisThread("hami-test-thread-long-name");
    char buf[32] = {};
    pthread_getname_np(pthread_self(), buf, sizeof buf);
    name = buf;
    before = ThisThreadNice();
    zero = LowerThisThreadPriority(0);
    negative = LowerThisThreadPriority(-1);  // raising priority back is never asked for
    big = LowerThisThreadPriority(20);
    EXPECT_TRUE(LowerThisThreadPriority(3));
    after = ThisThreadNice();
    seen = testing::ThreadNices();
    EXPECT_TRUE(LowerThisThreadPriority(19));
    capped = ThisThreadNice();
  });
  t.join();
  EXPECT_EQ(name, "hami-test-threa");  // Linux keeps 15 bytes
  EXPECT_TRUE(zero);
  ASSERT_FALSE(negative);
  EXPECT_EQ(negative.error(), "nice increment -1: want 0 to 19");
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error(), "nice increment 20: want 0 to 19");
  EXPECT_EQ(after, std::min(before + 3, 19));
  EXPECT_EQ(capped, 19);
  EXPECT_EQ(ThisThreadNice(), main_nice);
  ASSERT_EQ(seen["hami-test-threa"].size(), 1u);
  EXPECT_EQ(seen["hami-test-threa"][0], after);  // what ps and top show
}

}  // namespace
}  // namespace hami
