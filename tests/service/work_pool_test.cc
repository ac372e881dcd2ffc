// WorkPool (service/work_pool.h): every task runs, clients are served in
// turn (one client's backlog does not delay another's next task), the
// per-client cap refuses a client's task past it and no other client's, one
// client never holds every thread, destruction runs what is queued, and a
// long task that polls its turn hands its thread back, within the long-task
// slots and its client's share of them.
#include "service/work_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
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
    ASSERT_TRUE(pool.Submit("a", [&](const Interrupt&) {
                      started.Notify();
                      release.WaitForNotification();
                      order.Add("a1");
                    }).ok());
    started.WaitForNotification();
    for (const char* name : {"a2", "a3", "a4"}) {
      ASSERT_TRUE(pool.Submit("a", [&order, name](const Interrupt&) { order.Add(name); }).ok());
    }
    ASSERT_TRUE(pool.Submit("b", [&](const Interrupt&) { order.Add("b1"); }).ok());
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
    ASSERT_TRUE(pool.Submit("a", [&](const Interrupt&) {
                      started.Notify();
                      release.WaitForNotification();
                      ++ran;
                    }).ok());
    started.WaitForNotification();
    ASSERT_TRUE(pool.Submit("a", [&](const Interrupt&) { ++ran; }).ok());  // one running, one queued
    absl::Status s = pool.Submit("a", [&](const Interrupt&) { ++ran; });
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_NE(s.message().find("--max-pending-masks-per-client"), absl::string_view::npos) << s;
    EXPECT_TRUE(pool.Submit("b", [&](const Interrupt&) { ++ran; }).ok());
    release.Notify();
  }
  EXPECT_EQ(ran.load(), 3);
}

TEST(WorkPool, ManyThreadsRunEveryTask) {
  std::atomic<int> ran{0};
  {
    WorkPool pool({/*threads=*/4, /*max_per_client=*/1000});
    for (int i = 0; i < 1000; ++i) {
      ASSERT_TRUE(pool.Submit(i % 3 == 0 ? "x" : "y", [&](const Interrupt&) { ++ran; }).ok());
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
    ASSERT_TRUE(pool.Submit("a", [&](const Interrupt&) {
                      a1_started.Notify();
                      release.WaitForNotification();
                    }).ok());
    a1_started.WaitForNotification();
    ASSERT_TRUE(pool.Submit("a", [&](const Interrupt&) { a2_started = true; }).ok());
    ASSERT_TRUE(pool.Submit("b", [&](const Interrupt&) { b1_done.Notify(); }).ok());
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
      ASSERT_TRUE(pool.Submit("a", [&](const Interrupt&) {
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
  absl::Status s = pool.Submit("a", [](const Interrupt&) {});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("grammar Step batches queued or running "
                             "(--max-pending-steps-per-client)"),
            absl::string_view::npos)
      << s;
}

// The calling thread's nice value (Linux: per thread).
int ThreadNice() {
  return getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
}

// The calling thread's name (Linux: /proc/thread-self/comm).
std::string ThreadName() {
  std::ifstream comm("/proc/thread-self/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

// A task that polls its turn, as the Earley parser does, until `release`
// is notified or the poll refuses it (kept in `status`).
struct Poller {
  absl::Notification started, release, done;
  absl::Status status;  // the poll's refusal, or OK; read after `done`
  std::atomic<int> polls{0};
  std::atomic<int> nice{0};  // its thread's, after the last poll
  std::string first_name, last_name;  // its thread's, at the start; read after `done`
  WorkPool::Task Task() {
    return [this](const Interrupt& turn) {
      nice = ThreadNice();
      first_name = ThreadName();
      started.Notify();
      while (!release.HasBeenNotified()) {
        status = turn.Check();
        nice = ThreadNice();
        last_name = ThreadName();
        ++polls;
        if (!status.ok()) break;
        absl::SleepFor(absl::Microseconds(100));
      }
      done.Notify();
    };
  }
};

// A zero slice: a task's first poll while another waits hands its thread
// back (the default 20 ms would only make the tests slower, not different).
WorkPool::Options HandOff(size_t threads, size_t max_long) {
  WorkPool::Options o;
  o.threads = threads;
  o.max_long = max_long;
  o.slice = absl::ZeroDuration();
  o.tasks = "grammar step batches";
  o.long_flag = "--max-long-steps";
  return o;
}

// Polls (every ms, at most 60 s) until `done`; false on the bound.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 60000; ++i) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return false;
}

// One thread: a's task polls past its slice (alone or while b's waits), so
// a's turn makes it long and a replacement thread runs b's task while a's
// still runs, a's thread at a lower priority (long_nice, 10 by default), b's
// as it was. Once a's task ends, its thread exits.
TEST(WorkPool, LongTaskHandsItsThreadBack) {
  Poller a;
  absl::Notification b_done;
  std::atomic<int> b_nice{-100};
  const int base = ThreadNice();  // the pool's threads start at this thread's
  WorkPool pool(HandOff(/*threads=*/1, /*max_long=*/2));
  ASSERT_TRUE(pool.Submit("a", a.Task()).ok());
  a.started.WaitForNotification();  // a may go long now, alone (there is room)
  ASSERT_TRUE(pool.Submit("b", [&](const Interrupt&) {
                    b_nice = ThreadNice();
                    b_done.Notify();
                  }).ok());
  b_done.WaitForNotification();  // hangs (test timeout) if b waits for a
  EXPECT_FALSE(a.done.HasBeenNotified());
  EXPECT_EQ(pool.long_tasks(), 1u);
  EXPECT_EQ(b_nice.load(), base);
  const int lowered = std::min(base + 10, 19);
  EXPECT_TRUE(Eventually([&] { return a.nice.load() == lowered; }))
      << "nice " << a.nice.load() << ", started at " << base;
  EXPECT_TRUE(Eventually([&] { return pool.running() == 1; }));  // a, long; b's count settles
  a.release.Notify();
  a.done.WaitForNotification();
  EXPECT_TRUE(a.status.ok()) << a.status;
  EXPECT_EQ(a.first_name, "maskd-mask");  // Options::thread_name's default
  EXPECT_EQ(a.last_name, "maskd-mask-long");
  EXPECT_TRUE(Eventually([&] { return pool.threads() == 1 && pool.long_tasks() == 0; }))
      << pool.threads() << " threads, " << pool.long_tasks() << " long";
}

// Where a task's first instruction ran: its thread's name and nice value.
struct FirstLook {
  absl::Notification done;
  std::string name;
  int nice = 0;
  WorkPool::Task Task() {
    return [this](const Interrupt&) {
      name = ThreadName();
      nice = ThreadNice();
      done.Notify();
    };
  }
};

// Client a's task goes long (b waits behind it) and ends: a is penalized.
void MakeALong(WorkPool& pool) {
  Poller a1;
  absl::Notification b_done;
  ASSERT_TRUE(pool.Submit("a", a1.Task()).ok());
  a1.started.WaitForNotification();
  ASSERT_TRUE(pool.Submit("b", [&](const Interrupt&) { b_done.Notify(); }).ok());
  b_done.WaitForNotification();  // a1 went long
  a1.release.Notify();
  a1.done.WaitForNotification();
  EXPECT_TRUE(Eventually([&] { return pool.long_tasks() == 0 && pool.running() == 0; }));
}

// A client whose task went long is penalized: its next task starts long
// (a long thread's name and priority from its first instruction) though
// nothing else waits; another client's task runs as before.
TEST(WorkPool, PenalizedClientStartsLong) {
  const int base = ThreadNice();
  WorkPool pool(HandOff(/*threads=*/1, /*max_long=*/2));
  MakeALong(pool);
  FirstLook a2, c;
  ASSERT_TRUE(pool.Submit("a", a2.Task()).ok());
  a2.done.WaitForNotification();
  ASSERT_TRUE(pool.Submit("c", c.Task()).ok());
  c.done.WaitForNotification();
  EXPECT_EQ(a2.name, "maskd-mask-long");
  EXPECT_EQ(a2.nice, std::min(base + 10, 19));
  EXPECT_EQ(c.name, "maskd-mask");
  EXPECT_EQ(c.nice, base);
  EXPECT_TRUE(Eventually([&] { return pool.threads() == 1 && pool.long_tasks() == 0; }));
}

// Without a penalty (0), or once it has expired, the next task runs as any.
TEST(WorkPool, NoPenaltyOrAnExpiredOneStartsAsAnyTask) {
  for (absl::Duration penalty : {absl::ZeroDuration(), absl::Milliseconds(30)}) {
    WorkPool::Options o = HandOff(/*threads=*/1, /*max_long=*/2);
    o.penalty = penalty;
    WorkPool pool(o);
    MakeALong(pool);
    absl::SleepFor(penalty + absl::Milliseconds(20));  // past the penalty's end
    FirstLook a2;
    ASSERT_TRUE(pool.Submit("a", a2.Task()).ok());
    a2.done.WaitForNotification();
    EXPECT_EQ(a2.name, "maskd-mask") << penalty;
  }
}

// max_long 1: a is long; b, running on the replacement, polls while c
// waits, finds no slot left and is refused naming the flag; c then runs.
// A refused task stops (here: returns), as on any interrupt.
TEST(WorkPool, LongSlotCapRefusesNamingTheFlag) {
  Poller a, b;
  absl::Notification c_done;
  WorkPool pool(HandOff(/*threads=*/1, /*max_long=*/1));
  ASSERT_TRUE(pool.Submit("a", a.Task()).ok());
  a.started.WaitForNotification();
  ASSERT_TRUE(pool.Submit("b", b.Task()).ok());
  b.started.WaitForNotification();  // a went long
  ASSERT_TRUE(pool.Submit("c", [&](const Interrupt&) { c_done.Notify(); }).ok());
  b.done.WaitForNotification();
  EXPECT_EQ(b.status.code(), absl::StatusCode::kResourceExhausted) << b.status;
  EXPECT_NE(b.status.message().find("all 1 slots for long-running grammar step batches are "
                                    "taken"),
            absl::string_view::npos)
      << b.status;
  EXPECT_NE(b.status.message().find("(--max-long-steps)"), absl::string_view::npos) << b.status;
  c_done.WaitForNotification();
  EXPECT_FALSE(a.done.HasBeenNotified());
  a.release.Notify();
  a.done.WaitForNotification();
  EXPECT_TRUE(a.status.ok()) << a.status;
}

// max_long 3 among clients a and b: a share of 1 each. a1 goes long for
// b1, b1 for a2; a2, polling while b2 waits, is refused by a's share
// though a slot is free; b2 then runs.
TEST(WorkPool, ClientHoldsAtMostItsShareOfLongSlots) {
  Poller a1, b1, a2;
  absl::Notification b2_done;
  WorkPool pool(HandOff(/*threads=*/1, /*max_long=*/3));
  ASSERT_TRUE(pool.Submit("a", a1.Task()).ok());
  a1.started.WaitForNotification();
  ASSERT_TRUE(pool.Submit("b", b1.Task()).ok());
  b1.started.WaitForNotification();  // a1 went long
  ASSERT_TRUE(pool.Submit("a", a2.Task()).ok());
  a2.started.WaitForNotification();  // b1 went long
  EXPECT_EQ(pool.long_tasks(), 2u);
  ASSERT_TRUE(pool.Submit("b", [&](const Interrupt&) { b2_done.Notify(); }).ok());
  a2.done.WaitForNotification();
  EXPECT_EQ(a2.status.code(), absl::StatusCode::kResourceExhausted) << a2.status;
  EXPECT_NE(a2.status.message().find("this client already has 1 long-running grammar step "
                                     "batches, its share of the 3 while 2 clients have work"),
            absl::string_view::npos)
      << a2.status;
  EXPECT_NE(a2.status.message().find("(--max-long-steps)"), absl::string_view::npos)
      << a2.status;
  b2_done.WaitForNotification();
  EXPECT_EQ(pool.long_tasks(), 2u);  // a1, b1: still running, never refused
  a1.release.Notify();
  b1.release.Notify();
  a1.done.WaitForNotification();
  b1.done.WaitForNotification();
  EXPECT_TRUE(a1.status.ok()) << a1.status;
  EXPECT_TRUE(b1.status.ok()) << b1.status;
}

// Destruction while two long tasks run: it refuses new tasks at once, runs
// what is queued, and returns only once the long tasks have ended, every
// thread joined.
TEST(WorkPool, DestructionWaitsForLongTasks) {
  Poller a, b;
  absl::Notification c_done;
  std::atomic<int> ran{0};
  auto pool = std::make_unique<WorkPool>(HandOff(/*threads=*/1, /*max_long=*/2));
  WorkPool* p = pool.get();
  ASSERT_TRUE(p->Submit("a", a.Task()).ok());
  a.started.WaitForNotification();
  ASSERT_TRUE(p->Submit("b", b.Task()).ok());
  b.started.WaitForNotification();  // a went long
  ASSERT_TRUE(p->Submit("c", [&](const Interrupt&) { c_done.Notify(); }).ok());
  c_done.WaitForNotification();  // b went long for c
  EXPECT_EQ(p->long_tasks(), 2u);
  std::atomic<bool> destroyed{false};
  bool long_tasks_ended_first = false;  // read after join
  std::thread destroyer([&] {
    pool.reset();
    long_tasks_ended_first = a.done.HasBeenNotified() && b.done.HasBeenNotified();
    destroyed = true;
  });
  // Stopping: Submit refuses (the pool is alive until a and b end); what
  // it accepted before runs.
  int accepted = 0;
  EXPECT_TRUE(Eventually([&] {
    const bool ok = p->Submit("d", [&](const Interrupt&) { ++ran; }).ok();
    accepted += ok ? 1 : 0;
    return !ok;
  }));
  EXPECT_FALSE(destroyed.load());
  a.release.Notify();
  b.release.Notify();
  destroyer.join();
  EXPECT_TRUE(long_tasks_ended_first);  // the destructor returned only after them
  EXPECT_TRUE(a.status.ok()) << a.status;
  EXPECT_TRUE(b.status.ok()) << b.status;
  EXPECT_EQ(ran.load(), accepted);
}

// Only another client's waiting task makes a task long while the client
// has one long already: a1, alone past its slice, goes long (a's first, a
// slot free: work past a slice runs lowered even when nothing waits) and a2
// runs on the replacement; a2 then polls on while only a's own a3 waits
// (neither made long nor refused), as one client's tasks wait behind each
// other.
TEST(WorkPool, OwnQueuedTaskDoesNotHandBack) {
  Poller a1, a2;
  absl::Notification a3_done;
  {
    WorkPool pool(HandOff(/*threads=*/1, /*max_long=*/2));
    ASSERT_TRUE(pool.Submit("a", a1.Task()).ok());
    a1.started.WaitForNotification();
    ASSERT_TRUE(Eventually([&] { return pool.long_tasks() == 1; }));
    ASSERT_TRUE(pool.Submit("a", a2.Task()).ok());
    a2.started.WaitForNotification();
    ASSERT_TRUE(pool.Submit("a", [&](const Interrupt&) { a3_done.Notify(); }).ok());
    const int polled = a2.polls.load();
    ASSERT_TRUE(Eventually([&] { return a2.polls.load() >= polled + 10; }));
    EXPECT_EQ(pool.long_tasks(), 1u);
    EXPECT_FALSE(a3_done.HasBeenNotified());
    a2.release.Notify();
    a3_done.WaitForNotification();
    a1.release.Notify();
  }
  EXPECT_TRUE(a1.status.ok()) << a1.status;
  EXPECT_TRUE(a2.status.ok()) << a2.status;
}

// With an infinite slice (--step-slice-ms=0) a task's turn never hands
// back: polled while another task waits, it stays on its thread (the poll
// that would make it long runs synchronously, so after a few polls a long
// task would show).
TEST(WorkPool, NoSliceNeverHandsBack) {
  WorkPool::Options o = HandOff(/*threads=*/1, /*max_long=*/1);
  o.slice = absl::InfiniteDuration();
  Poller a;
  absl::Notification b_done;
  {
    WorkPool pool(o);
    ASSERT_TRUE(pool.Submit("a", a.Task()).ok());
    a.started.WaitForNotification();
    ASSERT_TRUE(pool.Submit("b", [&](const Interrupt&) { b_done.Notify(); }).ok());
    const int polled = a.polls.load();
    ASSERT_TRUE(Eventually([&] { return a.polls.load() >= polled + 10; }));
    EXPECT_EQ(pool.long_tasks(), 0u);
    EXPECT_EQ(pool.threads(), 1u);
    EXPECT_FALSE(b_done.HasBeenNotified());  // one thread, held by a
    a.release.Notify();
  }
  EXPECT_TRUE(a.status.ok()) << a.status;
  EXPECT_TRUE(b_done.HasBeenNotified());
}

}  // namespace
}  // namespace maskd
