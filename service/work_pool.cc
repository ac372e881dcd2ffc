#include "service/work_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace maskd {

namespace {

size_t RunningCap(const WorkPool::Options& o) {
  const size_t threads = std::max<size_t>(o.threads, 1);
  if (o.max_running_per_client != 0) return std::min(o.max_running_per_client, threads);
  return std::max<size_t>(threads - 1, 1);
}

}  // namespace

WorkPool::WorkPool(const Options& options) : options_(options), running_cap_(RunningCap(options)) {
  const size_t n = std::max<size_t>(options_.threads, 1);
  threads_.reserve(n);
  for (size_t i = 0; i < n; ++i) threads_.emplace_back([this] { Loop(); });
}

WorkPool::~WorkPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
}

absl::Status WorkPool::Submit(absl::string_view client, Task task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::ResourceExhaustedError("the server is stopping");
  Client& c = clients_[client];
  if (c.tasks.size() + c.running >= options_.max_per_client) {
    const bool idle = c.tasks.empty() && c.running == 0;
    if (idle) clients_.erase(std::string(client));  // max_per_client 0
    return absl::ResourceExhaustedError(
        absl::StrCat("this client already has ", options_.max_per_client, " ", options_.tasks,
                     " queued or running (", options_.cap_flag, ")"));
  }
  if (c.tasks.empty()) turn_.emplace_back(client);
  c.tasks.push_back(std::move(task));
  ++queued_;
  work_.Signal();
  return absl::OkStatus();
}

size_t WorkPool::queued() const {
  absl::MutexLock lock(&mu_);
  return queued_;
}

size_t WorkPool::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
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

void WorkPool::Loop() {
  absl::MutexLock lock(&mu_);
  std::string key;
  while (true) {
    // A thread that finds every client in line at its running cap waits: the
    // thread that ends one of their tasks takes the next turn itself.
    while (!TakeTurn(&key)) {
      if (stopping_ && turn_.empty()) {
        work_.SignalAll();  // the others may wait for a queue that is now empty
        return;
      }
      work_.Wait(&mu_);
    }
    // One task of the client in turn; then it goes to the back of the line
    // if it has more.
    Client& c = clients_[key];
    Task task = std::move(c.tasks.front());
    c.tasks.pop_front();
    --queued_;
    ++running_;
    ++c.running;
    if (!c.tasks.empty()) turn_.push_back(key);
    mu_.Unlock();
    std::move(task)();
    task = nullptr;  // what it holds is released outside the lock
    mu_.Lock();
    --running_;
    Client& after = clients_[key];  // rehashing may have moved it
    if (--after.running == 0 && after.tasks.empty()) clients_.erase(key);
  }
}

}  // namespace maskd
