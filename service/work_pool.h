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
// Tasks run in submission order per client. A task must not block on
// another task of the pool. Destruction stops accepting tasks, runs every
// task already queued (each owes its caller an answer), then joins.
//
// Thread-safe.
#ifndef MASKD_SERVICE_WORK_POOL_H_
#define MASKD_SERVICE_WORK_POOL_H_

#include <cstddef>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace maskd {

class WorkPool {
 public:
  struct Options {
    size_t threads = 2;          // --mask-threads, --step-threads; at least 1
    size_t max_per_client = 64;  // --max-pending-{masks,steps}-per-client: queued or running
    // Threads one client's tasks may hold at once; 0: threads - 1 (at least 1).
    size_t max_running_per_client = 0;
    // The refusal past max_per_client says "this client already has N
    // <tasks> queued or running (<cap_flag>)".
    std::string tasks = "Mask calls";
    std::string cap_flag = "--max-pending-masks-per-client";
  };
  using Task = absl::AnyInvocable<void() &&>;

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
  // Tasks running now (all clients).
  size_t running() const;

 private:
  struct Client {
    std::deque<Task> tasks;  // queued, in submission order
    size_t running = 0;
  };
  void Loop();
  // Removes from turn_ and returns the first client in line whose running
  // tasks are under running_cap_; false when none.
  bool TakeTurn(std::string* key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const size_t running_cap_;  // max_running_per_client, resolved
  mutable absl::Mutex mu_;
  absl::CondVar work_;  // signalled when a task is queued or stopping_ is set
  // Clients with an entry have a task queued or running.
  absl::flat_hash_map<std::string, Client> clients_ ABSL_GUARDED_BY(mu_);
  // The clients with a task queued, each once, in the order they are served
  // (a client at running_cap_ keeps its place until one of its tasks ends).
  std::deque<std::string> turn_ ABSL_GUARDED_BY(mu_);
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_WORK_POOL_H_
