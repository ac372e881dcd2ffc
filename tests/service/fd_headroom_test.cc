#include "service/fd_headroom.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace maskd {
namespace {

// Lowers the soft RLIMIT_NOFILE for one test, restoring it after.
class LowFdLimit {
 public:
  explicit LowFdLimit(rlim_t soft) {
    getrlimit(RLIMIT_NOFILE, &saved_);
    struct rlimit rl = saved_;
    rl.rlim_cur = soft;
    ok_ = setrlimit(RLIMIT_NOFILE, &rl) == 0;
  }
  ~LowFdLimit() { setrlimit(RLIMIT_NOFILE, &saved_); }
  bool ok() const { return ok_; }

 private:
  struct rlimit saved_;
  bool ok_ = false;
};

// A descriptor to duplicate (ctest may run a test with stdin closed).
int DevNull() {
  static const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return fd;
}

// The oracle: free descriptor numbers, found by opening them all.
int FreeByDup() {
  std::vector<int> fds;
  for (int fd; (fd = dup(DevNull())) >= 0;) fds.push_back(fd);
  for (int fd : fds) close(fd);
  return static_cast<int>(fds.size());
}

TEST(FdHeadroomTest, CountsFreeDescriptorsBelowTheSoftLimit) {
  auto headroom = FdHeadroom::Open();
  ASSERT_TRUE(headroom.ok()) << headroom.status();
  LowFdLimit low(64);
  ASSERT_TRUE(low.ok());
  const int free = FreeByDup();
  ASSERT_GT(free, 8);
  EXPECT_TRUE((*headroom)->AtLeast(free));
  EXPECT_FALSE((*headroom)->AtLeast(free + 1));
  std::vector<int> held;
  for (int i = 0; i < 5; ++i) held.push_back(dup(DevNull()));
  EXPECT_TRUE((*headroom)->AtLeast(free - 5));
  EXPECT_FALSE((*headroom)->AtLeast(free - 4));
  for (int fd : held) close(fd);
  EXPECT_TRUE((*headroom)->AtLeast(free));
}

TEST(FdHeadroomTest, HighLimitsAnswerFromTheTableSize) {
  auto headroom = FdHeadroom::Open();
  ASSERT_TRUE(headroom.ok()) << headroom.status();
  struct rlimit rl;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_max < 4096) GTEST_SKIP() << "hard limit " << rl.rlim_max;
  LowFdLimit high(rl.rlim_max);
  ASSERT_TRUE(high.ok());
  EXPECT_TRUE((*headroom)->AtLeast(64));
  EXPECT_FALSE((*headroom)->AtLeast(static_cast<int>(std::min<rlim_t>(rl.rlim_max, 1 << 30)) + 1));
}

// The reason the class exists: a check that finds too few free descriptors
// must not take them, even for a moment, from a thread opening one. With
// dup()-probing (what the listener did before) the opener hit EMFILE.
TEST(FdHeadroomTest, ACheckNeverTakesTheLastDescriptor) {
  auto headroom = FdHeadroom::Open();
  ASSERT_TRUE(headroom.ok()) << headroom.status();
  LowFdLimit low(64);
  ASSERT_TRUE(low.ok());
  std::vector<int> held;
  while (FreeByDup() > 2) held.push_back(dup(DevNull()));  // two left
  std::atomic<bool> done{false};
  std::atomic<bool> said_yes{false};
  std::thread checker([&] {
    while (!done.load()) {
      if ((*headroom)->AtLeast(8)) said_yes.store(true);  // there are two
    }
  });
  int emfile = 0;
  for (int i = 0; i < 20000; ++i) {
    int fd = dup(DevNull());
    if (fd < 0) {
      ++emfile;
    } else {
      close(fd);
    }
  }
  done.store(true);
  checker.join();
  for (int fd : held) close(fd);
  EXPECT_EQ(emfile, 0);
  EXPECT_FALSE(said_yes.load()) << "AtLeast(8) said yes with two free";
}

}  // namespace
}  // namespace maskd
