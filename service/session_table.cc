#include "service/session_table.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/metrics.h"
#include "service/this_thread.h"

namespace maskd {
namespace {

int64_t NowNs() { return absl::GetCurrentTimeNanos(); }

// Random 64-bit words from the kernel CSPRNG, drawn 64 at a time per thread:
// one getrandom(2) per 64 session ids, no lock.
struct RandomBatch {
  uint64_t words[64];
  size_t next = 64;
  uint64_t Next() {
    if (next == 64) {
      size_t got = 0;
      while (got < sizeof words) {
        ssize_t n = getrandom(reinterpret_cast<char*>(words) + got, sizeof words - got, 0);
        if (n < 0) {
          if (errno == EINTR) continue;
          // getrandom cannot fail on Linux >= 3.17 with these arguments once
          // the pool is initialised; ids must never be predictable.
          std::fprintf(stderr, "maskd: getrandom failed: %s\n", std::strerror(errno));
          std::abort();
        }
        got += static_cast<size_t>(n);
      }
      next = 0;
    }
    uint64_t w = words[next];
    words[next++] = 0;  // drawn words do not linger
    return w;
  }
};

}  // namespace

absl::StatusOr<std::shared_ptr<Session>> Session::Create(std::shared_ptr<IndexLease> lease,
                                                         size_t rollback_window,
                                                         std::shared_ptr<MaskBudget> chart_budget) {
  auto guide = ConstraintGuide::Create(lease->index(), rollback_window, std::move(chart_budget));
  if (!guide.ok()) return guide.status();
  return std::make_shared<Session>(std::move(lease), *std::move(guide));
}

Session::Session(std::shared_ptr<IndexLease> lease, ConstraintGuide guide)
    : lease_(std::move(lease)),
      num_words_(lease_->index()->num_words()),
      vocab_size_(lease_->index()->vocabulary().size()),
      last_used_ns_(NowNs()),
      guide_(std::move(guide)) {}

size_t Session::history_bytes() const {
  absl::MutexLock lock(&mu_);
  return guide_.history_bytes();
}

absl::StatusOr<std::shared_ptr<Session>> Session::Clone() const {
  absl::MutexLock lock(&mu_);
  auto guide = guide_.Fork();
  if (!guide.ok()) return guide.status();
  return std::make_shared<Session>(lease_, *std::move(guide));
}

void Session::Touch() { last_used_ns_.store(NowNs(), std::memory_order_relaxed); }

StepOutcome Session::Step(uint32_t rollback, absl::Span<const uint32_t> tokens,
                          absl::Span<uint32_t> row, std::string* forced,
                          uint32_t max_tokens_left, const Interrupt* interrupt) {
  Touch();
  StepOutcome out;
  absl::MutexLock lock(&mu_);
  guide_.SetInterrupt(interrupt);
  struct Clear {
    ConstraintGuide& guide;
    ~Clear() { guide.SetInterrupt(nullptr); }
  } clear{guide_};
  out.status = guide_.Step(rollback, tokens, row, max_tokens_left);
  out.num_tokens = guide_.num_tokens();
  out.accepting = guide_.IsAccepting();
  out.finished = guide_.IsFinished();
  if (!out.status.ok()) {
    if (forced) forced->clear();
    return out;
  }
  out.min_bytes_to_finish = guide_.MinBytesToFinish();
  if (forced) *forced = guide_.ForcedContinuation();
  return out;
}

absl::StatusOr<uint64_t> Session::Rollback(uint32_t n) {
  Touch();
  absl::MutexLock lock(&mu_);
  absl::Status s = guide_.Rollback(n);
  if (!s.ok()) return s;
  return guide_.num_tokens();
}

SessionTable::SessionTable(const SessionTableOptions& options, Metrics* metrics)
    : options_(options),
      metrics_(metrics),
      shares_("sessions", "--max-sessions-per-client", options.max_sessions_per_client) {
  absl::Duration period = options_.sweep_period;
  if (period <= absl::ZeroDuration()) {
    period = std::min(options_.ttl / 4, absl::Seconds(1));
    if (period < absl::Milliseconds(10)) period = absl::Milliseconds(10);
  }
  sweeper_ = std::thread([this, period] {
    NameThisThread("maskd-sweeper");
    while (!stop_.WaitForNotificationWithTimeout(period)) Sweep();
  });
}

SessionTable::~SessionTable() {
  stop_.Notify();
  sweeper_.join();
  for (auto& shard : shards_) {
    absl::flat_hash_map<uint64_t, std::shared_ptr<Session>> map;
    {
      absl::MutexLock lock(&shard.mu);
      map.swap(shard.map);
    }
  }
}

absl::Status SessionTable::NotFound(uint64_t id) {
  return absl::NotFoundError(absl::StrCat("unknown session ", id));
}

uint64_t SessionTable::NewId(bool grammar) {
  thread_local RandomBatch batch;
  for (;;) {
    const uint64_t id = (batch.Next() & ~uint64_t{1}) | static_cast<uint64_t>(grammar);
    if (id != 0) return id;
  }
}

absl::StatusOr<std::shared_ptr<Session>> SessionTable::Insert(std::shared_ptr<Session> s) {
  for (;;) {  // `s` is not shared yet: its id may still change
    s->id_ = NewId(s->route() == ConstraintRoute::kGrammar);
    Shard& shard = ShardOf(s->id_);
    absl::MutexLock lock(&shard.mu);
    if (shard.map.emplace(s->id_, s).second) break;  // else: a live id, draw again
  }
  if (metrics_) metrics_->SetSessionsActive(count_.load(std::memory_order_relaxed));
  return s;
}

absl::StatusOr<ClientShares::Charge> SessionTable::Reserve(absl::string_view client) {
  // The client's share first: a client past it is told so, not that the
  // server is full.
  absl::StatusOr<ClientShares::Charge> charge = shares_.Take(client);
  if (!charge.ok()) return charge.status();
  if (count_.fetch_add(1) >= options_.max_sessions) {
    count_.fetch_sub(1);
    return absl::ResourceExhaustedError(
        absl::StrCat("at most ", options_.max_sessions, " live sessions (--max-sessions)"));
  }
  return charge;
}

absl::StatusOr<std::shared_ptr<Session>> SessionTable::Admit(
    absl::string_view client, absl::FunctionRef<absl::StatusOr<std::shared_ptr<Session>>()> make) {
  absl::StatusOr<ClientShares::Charge> charge = Reserve(client);
  if (!charge.ok()) return charge.status();
  absl::StatusOr<std::shared_ptr<Session>> s = make();
  if (!s.ok()) {
    count_.fetch_sub(1);
    return s.status();  // the charge goes back with it
  }
  (*s)->charge_ = *std::move(charge);
  return Insert(*std::move(s));
}

absl::StatusOr<std::shared_ptr<Session>> SessionTable::Create(std::shared_ptr<IndexLease> lease,
                                                              absl::string_view client) {
  return Admit(client, [&] {
    return Session::Create(std::move(lease), options_.rollback_window,
                           options_.grammar_chart_budget);
  });
}

absl::StatusOr<std::shared_ptr<Session>> SessionTable::Fork(uint64_t id, absl::string_view client) {
  std::shared_ptr<Session> from = Find(id);
  if (!from) return NotFound(id);
  return Admit(client, [&] {
    from->Touch();
    return from->Clone();
  });
}

absl::Status SessionTable::Close(uint64_t id) {
  std::shared_ptr<Session> s;
  Shard& shard = ShardOf(id);
  {
    absl::MutexLock lock(&shard.mu);
    auto it = shard.map.find(id);
    if (it == shard.map.end()) return NotFound(id);
    s = std::move(it->second);
    shard.map.erase(it);
  }
  // The share's unit goes back now, not when the last call holding `s`
  // lets go: a client that closed a session may create the next at once.
  ClientShares::Charge released = std::move(s->charge_);
  count_.fetch_sub(1);
  if (metrics_) metrics_->SetSessionsActive(count_.load(std::memory_order_relaxed));
  return absl::OkStatus();  // `s` (and maybe the index lease) released outside the lock
}

std::shared_ptr<Session> SessionTable::Find(uint64_t id) const {
  Shard& shard = ShardOf(id);
  absl::ReaderMutexLock lock(&shard.mu);
  auto it = shard.map.find(id);
  return it == shard.map.end() ? nullptr : it->second;
}

size_t SessionTable::ExpireIdle(absl::Time now) {
  const int64_t cutoff = absl::ToUnixNanos(now - options_.ttl);
  size_t expired = 0;
  std::vector<std::shared_ptr<Session>> dropped;
  std::vector<ClientShares::Charge> released;  // as Close: shares go back now
  for (auto& shard : shards_) {
    {
      absl::MutexLock lock(&shard.mu);
      for (auto it = shard.map.begin(); it != shard.map.end();) {
        if (it->second->last_used_ns() < cutoff) {
          released.push_back(std::move(it->second->charge_));
          dropped.push_back(std::move(it->second));
          shard.map.erase(it++);
        } else {
          ++it;
        }
      }
    }
    expired += dropped.size();
    count_.fetch_sub(dropped.size());
    dropped.clear();  // outside the shard lock
    released.clear();
  }
  if (metrics_ && expired) {
    metrics_->SessionsExpired(expired);
    metrics_->SetSessionsActive(count_.load(std::memory_order_relaxed));
  }
  return expired;
}

void SessionTable::Sweep() {
  ExpireIdle(absl::Now());
  if (options_.on_sweep) options_.on_sweep();
}

}  // namespace maskd
