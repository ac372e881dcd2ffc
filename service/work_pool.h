// WorkPool: a few threads that run the expensive part of calls (grammar
// masks, grammar steps) off gRPC's callback threads, so that health checks,
// Ping and cheap calls keep their latency while some client's calls are slow
// (issue #24, finding 1c). maskd has two: one for Mask calls, one for Step,
// StepStream and StepInRegion batches that step a grammar session.
//
// Fairness: each client (ClientKey) has its own queue, and the threads take
// tasks from the clients with work queued in turn (round-robin), so one
// client's burst of slow calls waits behind itself, not in front of another
// client's call. A client has at most `max_per_client` tasks queued or
// running; past it Submit refuses the task (the caller answers
// RESOURCE_EXHAUSTED), so neither memory nor the wait of the others grows
// with one client's backlog. A client's tasks run on at most
// `max_running_per_client` threads at once (default: all threads but one),
// so one client alone never holds every thread: another client's task
// starts at once while it is the only other one waiting.
//
// Long tasks hand their thread back. A task gets a `turn`, an Interrupt
// (automaton/interrupt.h) it polls from its long loops (the Earley parser:
// every few thousand steps). Once the task has run longer than `slice` and a
// queued task of another client could start on its thread (no thread being
// idle), the poll makes it *long*:
// the pool starts a replacement thread, so the queued tasks are served by
// `threads` threads as before, and the long task goes on on its own, now
// extra, thread, time-sliced by the OS at a lower priority (`long_nice`), so
// that short tasks get the CPU first. A long task no longer counts in its
// client's running tasks. The long tasks are bounded: at most `max_long` at
// once in the pool, and a client holds at most its share of them
// (max_long / clients with work in the pool, at least 1); a task that would
// exceed either at its slice gets RESOURCE_EXHAUSTED naming `long_flag`
// from that poll and every later one, and stops as on any interrupt (its
// work undone). Neither happens while a thread is idle (or starting) or no
// other client's queued task could start on the task's thread: such a task
// keeps its thread (one client's tasks wait behind each other) and looks
// again one slice later; it is made long all the same, never refused, when
// there is room (a slot free, and its client under the share that leaves
// room for one more client: max_long / (clients + 1), at least 1), so that
// work past a slice runs at the lower priority whether or not the pool is
// busy (the CPU may be: gRPC's threads serve cheap calls beside it). Only
// polling tasks hand back: a task that does not poll runs to its end on its
// thread, as before. The thread of a long task exits when the task ends
// (the replacement took its place; its priority goes with it). So: threads
// + max_long threads at most, a client's tasks on max_running_per_client +
// its share of them.
//
// Slow clients are remembered. A client one of whose tasks was made long or
// refused at its slice is *penalized* for `penalty`: each of its tasks that
// starts meanwhile starts long (the replacement started first: a new thread
// inherits its creator's priority) when there is room as above, else runs
// as any task; so a client known to be expensive competes at the
// lower priority from its first instruction rather than after a slice at
// full priority. Penalties outlive the client's tasks (a client between two
// calls has none) and are dropped when expired.
//
// Tasks run in submission order per client. A task must not block on
// another task of the pool. Destruction stops accepting tasks, runs every
// task already queued (each owes its caller an answer), waits for the long
// ones, then joins.
//
// Thread-safe. A task's `turn` is polled from the task's own thread only.
#ifndef MASKD_SERVICE_WORK_POOL_H_
#define MASKD_SERVICE_WORK_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "automaton/interrupt.h"

namespace maskd {

class WorkPool {
 public:
  struct Options {
    size_t threads = 2;          // --mask-threads, --step-threads; at least 1
    size_t max_per_client = 64;  // --max-pending-{masks,steps}-per-client: queued or running
    // Threads one client's tasks may hold at once (long tasks not counted);
    // 0: threads - 1 (at least 1).
    size_t max_running_per_client = 0;
    // --{mask,step}-slice-ms: how long a task runs before its poll may hand
    // its thread back; InfiniteDuration: never (tasks run to their end on
    // their thread).
    absl::Duration slice = absl::Milliseconds(20);
    // --max-long-{masks,steps}: long tasks at once; 0: 2 * threads.
    size_t max_long = 0;
    // --long-task-nice: added to the nice value of a long task's thread
    // (Linux: per thread), so the OS favours the threads serving the queue;
    // 0: unchanged.
    int long_nice = 10;
    // --slow-client-penalty: how long a client whose task was made long (or
    // refused) at its slice has its next tasks start long; zero: never.
    absl::Duration penalty = absl::Seconds(10);
    // The refusal past max_per_client says "this client already has N
    // <tasks> queued or running (<cap_flag>)"; the long-task refusals name
    // <long_flag>.
    std::string tasks = "Mask calls";
    std::string cap_flag = "--max-pending-masks-per-client";
    std::string long_flag = "--max-long-masks";
    // The threads' name (service/this_thread.h); a long task's thread adds
    // "-long". At most 10 bytes, so that both fit the OS's 15.
    std::string thread_name = "maskd-mask";
  };
  // `turn`: polled by the task from its long loops (see above); it outlives
  // the call and is valid only during it.
  using Task = absl::AnyInvocable<void(const Interrupt& turn) &&>;

  explicit WorkPool(const Options& options);
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Queues `task` for `client`. ResourceExhausted (the task destroyed, not
  // run) when the client already has max_per_client tasks queued or running,
  // or the pool is being destroyed.
  absl::Status Submit(absl::string_view client, Task task);

  // Tasks queued, not yet running (all clients).
  size_t queued() const;
  // Tasks running now, long ones included (all clients).
  size_t running() const;
  // Long tasks running now (all clients).
  size_t long_tasks() const;
  // Threads alive now: `threads` plus one per long task (plus, for a moment,
  // a long task's thread on its way out).
  size_t threads() const;

 private:
  class Turn;
  struct Client {
    std::deque<Task> tasks;  // queued, in submission order
    size_t running = 0;      // running on this client's share of threads
    size_t long_tasks = 0;   // running long, on threads of their own
  };
  using Thread = std::list<std::thread>::iterator;

  void Loop(Thread self);
  // Runs `task` of `key` outside the lock (long from its start when
  // `start_long`: its slot taken, its replacement started), then settles the
  // counts; true when the thread is extra now and must exit.
  bool RunTask(const std::string& key, Task task, bool start_long)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes from turn_ and returns the first client in line whose running
  // tasks are under running_cap_; false when none.
  bool TakeTurn(std::string* key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A queued task of a client other than `key` could start now.
  bool Waiting(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Turn::Check's slow path, past the slice with tasks queued: makes the
  // running task of `key` long (*is_long) if a queued task could start on
  // its thread, or refuses it past its client's share or max_long_.
  absl::Status AtSlice(const std::string& key, bool* is_long) ABSL_LOCKS_EXCLUDED(mu_);
  // AtSlice's decision, under mu_ (it may start the replacement thread).
  absl::Status GoLong(const std::string& key, bool* is_long) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves one running task of `key` to a long slot and starts the replacement
  // thread; refused past the client's share of max_long_ or max_long_ itself.
  absl::Status TakeLongSlot(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A task of `key` may take a long slot though no other client waits: a
  // slot is free and the client holds fewer long tasks than the share that
  // leaves room for one more client (max_long / (clients with work + 1), at
  // least 1).
  bool RoomToGoLong(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Penalize(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Penalized(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartThread() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExitThread(Thread self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const size_t running_cap_;     // max_running_per_client, resolved
  const size_t max_long_;        // max_long, resolved
  const int64_t slice_ns_;       // INT64_MAX: never
  const int64_t penalty_ns_;     // 0: no penalties
  mutable absl::Mutex mu_;
  absl::CondVar work_;  // signalled when a task is queued or stopping_ is set
  // Clients with an entry have a task queued, running or long.
  absl::flat_hash_map<std::string, Client> clients_ ABSL_GUARDED_BY(mu_);
  // The clients with a task queued, each once, in the order they are served
  // (a client at running_cap_ keeps its place until one of its tasks ends).
  std::deque<std::string> turn_ ABSL_GUARDED_BY(mu_);
  // Penalized clients: when the penalty ends (absl::GetCurrentTimeNanos).
  // Expired entries are dropped when looked up, and all at once when the map
  // reaches prune_at_ (then twice what is left, at least 1024): amortized
  // O(1) per penalty, bounded by the penalties of the last `penalty`.
  absl::flat_hash_map<std::string, int64_t> penalized_ ABSL_GUARDED_BY(mu_);
  size_t prune_at_ ABSL_GUARDED_BY(mu_) = 1024;
  // Written under mu_; read without it by Turn::Check's slow path.
  std::atomic<size_t> queued_{0};
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;  // long ones included
  size_t long_ ABSL_GUARDED_BY(mu_) = 0;
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;     // threads waiting for a turn
  size_t starting_ ABSL_GUARDED_BY(mu_) = 0; // threads started, not yet in Loop
  size_t alive_ ABSL_GUARDED_BY(mu_) = 0;    // threads alive
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Every thread started, alive first; one that exits moves itself to
  // exited_, joined (outside mu_) by the next AtSlice or the destructor.
  std::list<std::thread> threads_list_ ABSL_GUARDED_BY(mu_);
  std::list<std::thread> exited_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maskd

#endif  // MASKD_SERVICE_WORK_POOL_H_
