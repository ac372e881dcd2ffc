// WorkPool (service/work_pool.h): every task runs, clients are served in
// turn (one client's backlog does not delay another's next task), the
// per-client cap refuses a client's task past it and no other client's, one
// client never holds every thread, and destruction runs what is queued.
#include "service/work_pool.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
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

// Two threads, so one client's tasks run on one at a time (threads - 1): a's
// second task waits while its first is held, and b's task runs meanwhile on
// the thread a may not take. (Without the cap, a2 would take that thread and
// b1 would wait for a1.)
TEST(WorkPool, OneClientNeverHoldsEveryThread) {
  absl::Notification a1_started, release, b1_done;
  std::atomic<bool> a2_started{false};
  {
    WorkPool pool({/*threads=*/2, /*max_per_client=*/64});
    ASSERT_TRUE(pool.Submit("a", [&] {
                      a1_started.Notify();
                      release.WaitForNotification();
                    }).ok());
    a1_started.WaitForNotification();
    ASSERT_TRUE(pool.Submit("a", [&] { a2_started = true; }).ok());
    ASSERT_TRUE(pool.Submit("b", [&] { b1_done.Notify(); }).ok());
    b1_done.WaitForNotification();  // hangs (test timeout) if b waits for a1
    EXPECT_FALSE(a2_started.load());
    EXPECT_EQ(pool.queued(), 1u);  // a2
    release.Notify();
  }
  EXPECT_TRUE(a2_started.load());
}

// An explicit max_running_per_client: a client's tasks run on that many
// threads at once, not more, however many it queues.
TEST(WorkPool, MaxRunningPerClientBoundsOneClient) {
  absl::Mutex mu;
  int running = 0, most = 0;
  {
    WorkPool::Options o;
    o.threads = 4;
    o.max_per_client = 1000;
    o.max_running_per_client = 2;
    WorkPool pool(o);
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(pool.Submit("a", [&] {
                        {
                          absl::MutexLock lock(&mu);
                          most = std::max(most, ++running);
                        }
                        absl::SleepFor(absl::Microseconds(200));
                        absl::MutexLock lock(&mu);
                        --running;
                      }).ok());
    }
  }
  EXPECT_LE(most, 2);
  EXPECT_GE(most, 1);
}

// The refusal names the pool's own tasks and flag.
TEST(WorkPool, RefusalNamesThePoolsFlag) {
  WorkPool::Options o;
  o.threads = 1;
  o.max_per_client = 0;
  o.tasks = "grammar Step batches";
  o.cap_flag = "--max-pending-steps-per-client";
  WorkPool pool(o);
  absl::Status s = pool.Submit("a", [] {});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("grammar Step batches queued or running "
                             "(--max-pending-steps-per-client)"),
            absl::string_view::npos)
      << s;
}

}  // namespace
}  // namespace maskd
