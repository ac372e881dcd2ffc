#include "service/work_pool.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/this_thread.h"

namespace maskd {

namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

size_t RunningCap(const WorkPool::Options& o) {
  const size_t threads = std::max<size_t>(o.threads, 1);
  if (o.max_running_per_client != 0) return std::min(o.max_running_per_client, threads);
  return std::max<size_t>(threads - 1, 1);
}

size_t MaxLong(const WorkPool::Options& o) {
  return o.max_long != 0 ? o.max_long : 2 * std::max<size_t>(o.threads, 1);
}

int64_t SliceNs(absl::Duration slice) {
  if (slice == absl::InfiniteDuration()) return kNever;
  return std::max<int64_t>(absl::ToInt64Nanoseconds(slice), 0);
}

}  // namespace

// The Interrupt a running task polls. Cheap while within its slice (a clock
// read); past it, one pool lock per slice until the task is long or
// refused. Used by the task's thread only.
class WorkPool::Turn final : public Interrupt {
 public:
  // `long_from_start`: the task was made long before it began (its client is
  // penalized); the calling thread takes a long thread's name and priority.
  Turn(WorkPool* pool, const std::string& key, bool long_from_start)
      : pool_(pool),
        key_(key),
        next_ns_(long_from_start ? kNever : After(absl::GetCurrentTimeNanos())),
        long_(long_from_start) {
    if (long_) BecomeLong();
  }

  absl::Status Check() const override {
    // Long already, refused already (the task's remaining work is refused
    // too), or no slice.
    if (next_ns_ == kNever) return refused_;
    const int64_t now = absl::GetCurrentTimeNanos();
    if (now < next_ns_) return absl::OkStatus();
    next_ns_ = After(now);
    refused_ = pool_->AtSlice(key_, &long_);
    if (long_) BecomeLong();
    if (long_ || !refused_.ok()) next_ns_ = kNever;
    return refused_;
  }
  bool is_long() const { return long_; }

 private:
  int64_t After(int64_t now) const {
    const int64_t slice = pool_->slice_ns_;
    return slice > kNever - now ? kNever : now + slice;
  }
  // This thread exits after the task; its replacement was started before
  // (a new thread inherits its creator's priority).
  void BecomeLong() const {
    NameThisThread(pool_->options_.thread_name + "-long");
    LowerThisThreadPriority(pool_->options_.long_nice);
  }

  WorkPool* const pool_;
  const std::string& key_;  // the task's client
  mutable int64_t next_ns_;  // the next look at the pool; kNever: none
  mutable bool long_;
  mutable absl::Status refused_;  // AtSlice's refusal, kept; OK if none
};

WorkPool::WorkPool(const Options& options)
    : options_(options),
      running_cap_(RunningCap(options)),
      max_long_(MaxLong(options)),
      slice_ns_(SliceNs(options.slice)),
      penalty_ns_(absl::ToInt64Nanoseconds(std::max(options.penalty, absl::ZeroDuration()))) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < std::max<size_t>(options.threads, 1); ++i) StartThread();
}

WorkPool::~WorkPool() {
  std::list<std::thread> done;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_.SignalAll();
    mu_.Await(absl::Condition(+[](size_t* alive) { return *alive == 0; }, &alive_));
    done.swap(exited_);
  }
  for (std::thread& t : done) t.join();
}

absl::Status WorkPool::Submit(absl::string_view client, Task task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::ResourceExhaustedError("the server is stopping");
  Client& c = clients_[client];
  if (c.tasks.size() + c.running + c.long_tasks >= options_.max_per_client) {
    const bool idle = c.tasks.empty() && c.running == 0 && c.long_tasks == 0;
    if (idle) clients_.erase(std::string(client));  // max_per_client 0
    return absl::ResourceExhaustedError(
        absl::StrCat("this client already has ", options_.max_per_client, " ", options_.tasks,
                     " queued or running (", options_.cap_flag, ")"));
  }
  if (c.tasks.empty()) turn_.emplace_back(client);
  c.tasks.push_back(std::move(task));
  queued_.fetch_add(1, std::memory_order_relaxed);
  work_.Signal();
  return absl::OkStatus();
}

size_t WorkPool::queued() const { return queued_.load(std::memory_order_relaxed); }

size_t WorkPool::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

size_t WorkPool::long_tasks() const {
  absl::MutexLock lock(&mu_);
  return long_;
}

size_t WorkPool::threads() const {
  absl::MutexLock lock(&mu_);
  return alive_;
}

bool WorkPool::TakeTurn(std::string* key) {
  for (auto it = turn_.begin(); it != turn_.end(); ++it) {
    if (clients_[*it].running < running_cap_) {
      *key = std::move(*it);
      turn_.erase(it);
      return true;
    }
  }
  return false;
}

bool WorkPool::Waiting(const std::string& key) {
  for (const std::string& k : turn_) {
    if (k != key && clients_.find(k)->second.running < running_cap_) return true;
  }
  return false;
}

absl::Status WorkPool::AtSlice(const std::string& key, bool* is_long) {
  std::list<std::thread> exited;  // joined outside mu_: Submit and turns need not wait on it
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = GoLong(key, is_long);
    exited.swap(exited_);  // each has left Loop
  }
  for (std::thread& t : exited) t.join();
  return status;
}

absl::Status WorkPool::GoLong(const std::string& key, bool* is_long) {
  // An idle thread (or one starting: the replacement of a task that went
  // long a moment ago) takes what waits; a task no thread could start, or
  // of this task's own client, waits as before. None is a reason to refuse
  // this task.
  if (idle_ + starting_ > 0 || !Waiting(key)) {
    // No other client's task waits for this thread. Past its slice the task
    // is background work all the same: long, on a lower priority, when there
    // is room; never refused.
    if (RoomToGoLong(key) && TakeLongSlot(key).ok()) {
      Penalize(key);
      *is_long = true;
    }
    return absl::OkStatus();
  }
  Penalize(key);  // made long or refused: its next tasks start long
  absl::Status status = TakeLongSlot(key);
  *is_long = status.ok();
  return status;
}

absl::Status WorkPool::TakeLongSlot(const std::string& key) {
  Client& c = clients_.find(key)->second;
  const size_t share = std::max<size_t>(max_long_ / clients_.size(), 1);
  if (c.long_tasks >= share) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this client already has ", c.long_tasks, " long-running ", options_.tasks,
        ", its share of the ", max_long_, " while ", clients_.size(),
        " clients have work; this one ran past ", absl::FormatDuration(options_.slice),
        " while others waited (", options_.long_flag, ")"));
  }
  if (long_ >= max_long_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "all ", max_long_, " slots for long-running ", options_.tasks,
        " are taken; this one ran past ", absl::FormatDuration(options_.slice),
        " while others waited (", options_.long_flag, ")"));
  }
  --c.running;
  ++c.long_tasks;
  ++long_;
  StartThread();  // the replacement takes a turn
  return absl::OkStatus();
}

bool WorkPool::RoomToGoLong(const std::string& key) {
  const Client& c = clients_.find(key)->second;
  const size_t share = std::max<size_t>(max_long_ / (clients_.size() + 1), 1);
  return c.long_tasks < share && long_ < max_long_;
}

void WorkPool::Penalize(const std::string& key) {
  if (penalty_ns_ <= 0) return;
  const int64_t now = absl::GetCurrentTimeNanos();
  if (penalized_.size() >= prune_at_) {
    for (auto it = penalized_.begin(); it != penalized_.end();) {
      if (it->second <= now) {
        penalized_.erase(it++);
      } else {
        ++it;
      }
    }
    prune_at_ = std::max<size_t>(1024, 2 * penalized_.size());
  }
  penalized_[key] = now + penalty_ns_;
}

bool WorkPool::Penalized(const std::string& key) {
  auto it = penalized_.find(key);
  if (it == penalized_.end()) return false;
  if (it->second > absl::GetCurrentTimeNanos()) return true;
  penalized_.erase(it);
  return false;
}

void WorkPool::StartThread() {
  ++alive_;
  ++starting_;
  auto self = threads_list_.emplace(threads_list_.end());
  *self = std::thread([this, self] { Loop(self); });  // it waits for mu_
}

void WorkPool::ExitThread(Thread self) {
  --alive_;
  exited_.splice(exited_.end(), threads_list_, self);
}

void WorkPool::Loop(Thread self) {
  NameThisThread(options_.thread_name);
  absl::MutexLock lock(&mu_);
  --starting_;
  std::string key;
  while (true) {
    // A thread that finds every client in line at its running cap waits: the
    // thread that ends one of their tasks takes the next turn itself.
    while (!TakeTurn(&key)) {
      if (stopping_ && turn_.empty()) {
        work_.SignalAll();  // the others may wait for a queue that is now empty
        ExitThread(self);
        return;
      }
      ++idle_;
      work_.Wait(&mu_);
      --idle_;
    }
    // One task of the client in turn; then it goes to the back of the line
    // if it has more.
    Client& c = clients_[key];
    Task task = std::move(c.tasks.front());
    c.tasks.pop_front();
    queued_.fetch_sub(1, std::memory_order_relaxed);
    ++running_;
    ++c.running;
    if (!c.tasks.empty()) turn_.push_back(key);
    // A penalized client's task runs long from its start when a slot is
    // free (else as any task: its slice may still make it long).
    const bool start_long = Penalized(key) && RoomToGoLong(key) && TakeLongSlot(key).ok();
    if (RunTask(key, std::move(task), start_long)) {  // a long task's thread
      ExitThread(self);
      return;
    }
  }
}

bool WorkPool::RunTask(const std::string& key, Task task, bool start_long) {
  mu_.Unlock();
  bool was_long = false;
  {
    const Turn turn(this, key, start_long);
    std::move(task)(turn);
    task = nullptr;  // what it holds is released outside the lock
    was_long = turn.is_long();
  }
  mu_.Lock();
  --running_;
  Client& after = clients_[key];  // rehashing may have moved it
  if (was_long) {
    --after.long_tasks;
    --long_;
  } else {
    --after.running;
  }
  if (after.running == 0 && after.long_tasks == 0 && after.tasks.empty()) clients_.erase(key);
  // A long task's thread was replaced (the pool runs options_.threads others,
  // or fewer only while stopping, when no task is left for it) and runs at a
  // lower priority: it exits.
  return was_long;
}

}  // namespace maskd
