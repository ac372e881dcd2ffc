// WorkPool (service/work_pool.h): every task runs, clients are served in
// turn (one client's backlog does not delay another's next task), the
// per-client cap refuses a client's task past it and no other client's, and
// destruction runs what is queued.
#include "service/work_pool.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace maskd {
namespace {

// Records task names in the order they run.
class Order {
 public:
  void Add(const std::string& name) {
    absl::MutexLock lock(&mu_);
    names_.push_back(name);
  }
  std::vector<std::string> names() {
    absl::MutexLock lock(&mu_);
    return names_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> names_;
};

TEST(WorkPool, ClientsAreServedInTurn) {
  Order order;
  absl::Notification started, release;
  {
    WorkPool pool({/*threads=*/1, /*max_per_client=*/64});
    // Client a's first task holds the only thread while a queues three more,
    // then b queues one.
    ASSERT_TRUE(pool.Submit("a", [&] {
                      started.Notify();
                      release.WaitForNotification();
                      order.Add("a1");
                    }).ok());
    started.WaitForNotification();
    for (const char* name : {"a2", "a3", "a4"}) {
      ASSERT_TRUE(pool.Submit("a", [&order, name] { order.Add(name); }).ok());
    }
    ASSERT_TRUE(pool.Submit("b", [&] { order.Add("b1"); }).ok());
    EXPECT_EQ(pool.queued(), 4u);
    release.Notify();
  }  // destruction runs every queued task
  EXPECT_EQ(order.names(), (std::vector<std::string>{"a1", "a2", "b1", "a3", "a4"}));
}

TEST(WorkPool, PerClientCapRefusesOnlyThatClient) {
  absl::Notification started, release;
  std::atomic<int> ran{0};
  {
    WorkPool pool({/*threads=*/1, /*max_per_client=*/2});
    ASSERT_TRUE(pool.Submit("a", [&] {
                      started.Notify();
                      release.WaitForNotification();
                      ++ran;
                    }).ok());
    started.WaitForNotification();
    ASSERT_TRUE(pool.Submit("a", [&] { ++ran; }).ok());  // one running, one queued
    absl::Status s = pool.Submit("a", [&] { ++ran; });
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_NE(s.message().find("--max-pending-masks-per-client"), absl::string_view::npos) << s;
    EXPECT_TRUE(pool.Submit("b", [&] { ++ran; }).ok());
    release.Notify();
  }
  EXPECT_EQ(ran.load(), 3);
}

TEST(WorkPool, ManyThreadsRunEveryTask) {
  std::atomic<int> ran{0};
  {
    WorkPool pool({/*threads=*/4, /*max_per_client=*/1000});
    for (int i = 0; i < 1000; ++i) {
      ASSERT_TRUE(pool.Submit(i % 3 == 0 ? "x" : "y", [&] { ++ran; }).ok());
    }
  }
  EXPECT_EQ(ran.load(), 1000);
}

}  // namespace
}  // namespace maskd
