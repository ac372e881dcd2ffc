#include "service/work_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace maskd {

WorkPool::WorkPool(const Options& options) : options_(options) {
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
        absl::StrCat("this client already has ", options_.max_per_client,
                     " Mask calls queued or running (--max-pending-masks-per-client)"));
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

void WorkPool::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    while (turn_.empty() && !stopping_) work_.Wait(&mu_);
    if (turn_.empty()) return;  // stopping, nothing queued
    // The next client in turn: one task of it, then it goes to the back of
    // the line if it has more.
    std::string key = std::move(turn_.front());
    turn_.pop_front();
    Client& c = clients_[key];
    Task task = std::move(c.tasks.front());
    c.tasks.pop_front();
    --queued_;
    ++c.running;
    if (!c.tasks.empty()) turn_.push_back(key);
    mu_.Unlock();
    std::move(task)();
    task = nullptr;  // what it holds is released outside the lock
    mu_.Lock();
    Client& after = clients_[key];  // rehashing may have moved it
    if (--after.running == 0 && after.tasks.empty()) clients_.erase(key);
  }
}

}  // namespace maskd
