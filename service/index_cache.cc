#include "service/index_cache.h"

#include <openssl/evp.h>

#include <algorithm>
#include <deque>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "service/metrics.h"
#include "service/quote.h"
#include "service/this_thread.h"

namespace maskd {

struct IndexCache::Entry {
  std::string id;
  Constraint constraint;   // its text cleared once compiled
  std::string tokenizer;   // name, reported back
  std::string client;      // whose share of the queue it counts against (Shared::mu)
  bool in_fast_lane = true;  // not yet tried on the fast lane
  absl::Time created;
  absl::Time deadline;
  std::atomic<bool> cancel{false};

  // Guarded by Shared::mu.
  IndexState state = IndexState::kCompiling;
  absl::Status status;
  std::shared_ptr<const ConstraintIndex> index;
  double queue_ms = 0, compile_ms = 0;
  absl::Time finished_at;
  uint64_t tick = 0;   // last use, for LRU
  uint64_t bytes = 0;  // MemoryBytes at the last Maintain
  struct Waiter {
    Callback callback;
    bool cache_hit;
    absl::Time deadline;  // of the request that waits
    uint64_t id;          // its ticket (IndexInfo::waiter), unique in the cache
  };
  std::vector<Waiter> waiters;
  // A request without a callback (wait=false) asked for it: it runs on when
  // every waiter has left. `background_client`: the first such request's.
  bool background = false;
  std::string background_client;
  std::weak_ptr<IndexLease> lease;
};

namespace {

// Compilations waiting for a thread, served round-robin across clients: each
// pop takes the oldest entry of the client least recently served, so one
// client's backlog delays another's compile by at most one compile per lane
// thread, whatever its size.
template <typename Entry>
class FairQueue {
 public:
  bool empty() const { return turns_.empty(); }
  void Push(std::shared_ptr<Entry> e, const std::string& client) {
    auto& q = by_client_[client];
    if (q.empty()) turns_.push_back(client);
    q.push_back(std::move(e));
  }
  std::shared_ptr<Entry> Pop() {
    std::string client = std::move(turns_.front());
    turns_.pop_front();
    auto it = by_client_.find(client);
    std::shared_ptr<Entry> e = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) {
      by_client_.erase(it);
    } else {
      turns_.push_back(std::move(client));
    }
    return e;
  }
  std::vector<std::shared_ptr<Entry>> TakeAll() {
    std::vector<std::shared_ptr<Entry>> out;
    while (!empty()) out.push_back(Pop());
    return out;
  }

 private:
  std::deque<std::string> turns_;  // clients with queued entries, next first
  absl::flat_hash_map<std::string, std::deque<std::shared_ptr<Entry>>> by_client_;
};

}  // namespace

struct IndexLease::Shared {
  IndexCacheOptions options;
  std::shared_ptr<MaskBudget> mask_budget;  // null: no bound
  std::unique_ptr<const ConstraintCompiler> compiler;  // under options.compile and mask_budget
  Metrics* metrics = nullptr;
  absl::Mutex mu;
  absl::CondVar cv;
  bool stop ABSL_GUARDED_BY(mu) = false;
  uint64_t tick ABSL_GUARDED_BY(mu) = 0;
  uint64_t last_waiter ABSL_GUARDED_BY(mu) = 0;  // the last ticket given out
  size_t pending ABSL_GUARDED_BY(mu) = 0;  // queued or running
  absl::flat_hash_map<std::string, size_t> pending_by_client ABSL_GUARDED_BY(mu);
  uint64_t leased_bytes ABSL_GUARDED_BY(mu) = 0;  // ready entries with a live lease, last Maintain
  absl::flat_hash_map<std::string, std::shared_ptr<IndexCache::Entry>> entries ABSL_GUARDED_BY(mu);
  // Lane 0: the fast lane (first try of every compilation, bounded by
  // fast_lane_budget); lane 1: the compile threads proper.
  FairQueue<IndexCache::Entry> queue[2] ABSL_GUARDED_BY(mu);
  std::vector<std::thread> threads;

  // The compilation time a request may have: its own timeout, capped.
  absl::Duration TimeoutOf(const CompileSpec& spec) const {
    absl::Duration timeout = options.compile_timeout;
    if (spec.timeout > absl::ZeroDuration() && spec.timeout < timeout) timeout = spec.timeout;
    return timeout;
  }

  IndexInfo Snapshot(const IndexCache::Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    IndexInfo info;
    info.id = e.id;
    info.state = e.state;
    info.status = e.status;
    info.index = e.index;
    info.kind = e.constraint.kind;
    info.tokenizer = e.tokenizer;
    info.vocab_size = e.constraint.tokenizer->vocabulary().size();
    if (e.index) {
      info.dfa_states = e.index->num_dfa_states();
      info.memory_bytes = e.index->MemoryBytes();
    }
    info.queue_ms = e.queue_ms;
    info.compile_ms = e.compile_ms;
    return info;
  }

  void MaintainLocked(std::vector<std::shared_ptr<IndexCache::Entry>>* dropped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    absl::Time now = absl::Now();
    uint64_t total = 0, mru = 0, leased = 0;
    std::vector<IndexCache::Entry*> candidates;
    for (auto it = entries.begin(); it != entries.end();) {
      IndexCache::Entry& e = *it->second;
      if (e.state == IndexState::kFailed && now - e.finished_at >= options.failure_ttl) {
        dropped->push_back(it->second);
        entries.erase(it++);
        continue;
      }
      if (e.state == IndexState::kReady) {
        e.bytes = e.index->MemoryBytes();
        total += e.bytes;
        if (!e.lease.expired()) leased += e.bytes;
        mru = std::max(mru, e.tick);
      }
      ++it;
    }
    if (total > options.max_bytes) {
      for (auto& [id, e] : entries) {
        if (e->state == IndexState::kReady && e->lease.expired() && e->tick != mru) {
          candidates.push_back(e.get());
        }
      }
      std::sort(candidates.begin(), candidates.end(),
                [](const auto* a, const auto* b) { return a->tick < b->tick; });
      uint64_t evicted = 0;
      for (IndexCache::Entry* e : candidates) {
        if (total <= options.max_bytes) break;
        total -= e->bytes;
        auto it = entries.find(e->id);
        dropped->push_back(it->second);  // destroyed outside the lock
        entries.erase(it);
        ++evicted;
      }
      if (metrics && evicted) metrics->CacheEvicted(evicted);
    }
    leased_bytes = leased;
    if (metrics) {
      metrics->SetCacheBytes(total);
      if (mask_budget != nullptr) {
        metrics->SetMaskBudget(mask_budget->used(), mask_budget->refused());
      }
      if (const grammar::TerminalDfas* dfas = compiler->terminal_dfas(); dfas != nullptr) {
        const grammar::TerminalDfas::Stats s = dfas->stats();
        metrics->SetTerminalDfas(s.bytes, s.misses, s.hits);
      }
    }
  }

  // The hard bound on the cache: RESOURCE_EXHAUSTED when the bytes of
  // indexes leased by live sessions (which eviction cannot drop) are at the
  // budget (extra == 0: a new compilation), or would pass it once `extra`
  // more bytes are leased (a first lease on an index). Re-measures first.
  absl::Status CheckLeasedBudget(uint64_t extra,
                                 std::vector<std::shared_ptr<IndexCache::Entry>>* dropped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    MaintainLocked(dropped);
    const bool fits = extra == 0 ? leased_bytes < options.max_bytes
                                 : leased_bytes == 0 || leased_bytes + extra <= options.max_bytes;
    if (fits) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat(
        "index cache full: indexes leased by live sessions hold ", leased_bytes,
        " bytes", extra ? absl::StrCat(" (+", extra, " for this one)") : "", " of --cache-bytes=",
        options.max_bytes, "; close sessions or raise --cache-bytes"));
  }

  // While other clients hold compilations, `client` (holding `mine`) may
  // hold at most max_pending / (holders + 1), at least one: the holders
  // together leave room for one more client, so two clients at their fixed
  // share cannot fill --max-pending-compiles for everyone else (issue #24).
  // RESOURCE_EXHAUSTED past it. Alone, a client has only its fixed share.
  absl::Status CheckFairShare(const std::string& client, size_t mine) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const size_t others = pending_by_client.size() - (mine > 0 ? 1 : 0);
    if (others == 0) return absl::OkStatus();
    const size_t holders = others + 1;
    const size_t share = std::max<size_t>(1, options.max_pending / (holders + 1));
    if (mine < share) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat(
        "client ", client, " has ", mine, " compilations in progress, its fair share while ",
        holders, " clients hold compilations (--max-pending-compiles=", options.max_pending, " / ",
        holders + 1, ": room is kept for one more client; clients are told apart by "
        "--client-identity)"));
  }

  // Adds a waiter with `callback` to compiling entry `e`; its ticket.
  uint64_t AddWaiter(IndexCache::Entry& e, IndexCache::Callback callback, bool cache_hit,
                     absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    e.waiters.push_back({std::move(callback), cache_hit, deadline, ++last_waiter});
    return last_waiter;
  }

  // A wait=false request of `client` asked for compiling entry `e`. An entry
  // compiling in the map has waiters or is background already (AbandonLocked
  // drops it otherwise), so `client` is charged only once they all leave.
  void AddBackground(IndexCache::Entry& e, const std::string& client)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (e.background) return;
    e.background = true;
    e.background_client = client;
  }

  // `e` runs on only for its wait=false requests: it counts against the
  // share of the first of them from now on.
  void ChargeBackgroundClient(IndexCache::Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (e.background_client == e.client) return;
    Uncharge(e.client);
    ++pending_by_client[e.background_client];
    e.client = e.background_client;
  }

  void Uncharge(const std::string& client) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (auto it = pending_by_client.find(client);
        it != pending_by_client.end() && --it->second == 0) {
      pending_by_client.erase(it);
    }
  }

  // Compiling entry `e` has no waiter left: unless a wait=false request
  // asked for it, its compilation is cancelled (it stops at its next check
  // and finishes CANCELLED, with no one to tell) and it leaves the map, so
  // an identical request starts afresh.
  void AbandonLocked(const std::shared_ptr<IndexCache::Entry>& e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (e->background) return ChargeBackgroundClient(*e);
    e->cancel.store(true);
    if (auto it = entries.find(e->id); it != entries.end() && it->second == e) entries.erase(it);
    if (metrics) metrics->CompileAbandoned();
  }

  void Maintain() {
    std::vector<std::shared_ptr<IndexCache::Entry>> dropped;
    absl::MutexLock lock(&mu);
    MaintainLocked(&dropped);
  }
};

IndexLease::~IndexLease() { cache_->Maintain(); }

IndexCache::IndexCache(const IndexCacheOptions& options, Metrics* metrics)
    : shared_(std::make_shared<IndexLease::Shared>()) {
  shared_->options = options;
  if (options.max_mask_bytes != 0) {
    shared_->mask_budget = std::make_shared<MaskBudget>(options.max_mask_bytes);
  }
  CompileLimits limits = options.compile;
  limits.mask_budget = shared_->mask_budget;
  shared_->compiler = std::make_unique<const ConstraintCompiler>(std::move(limits));
  shared_->metrics = metrics;
  int n = std::max(1, options.compile_threads);
  for (int i = 0; i < n; ++i) shared_->threads.emplace_back([this] { Worker(1); });
  if (options.fast_lane_budget > absl::ZeroDuration()) {
    shared_->threads.emplace_back([this] { Worker(0); });
  }
}

IndexCache::~IndexCache() {
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->stop = true;
    for (auto& [id, e] : shared_->entries) e->cancel.store(true);
    shared_->cv.SignalAll();
  }
  for (auto& t : shared_->threads) t.join();
  // Entries still queued never ran: fail them so their waiters finish.
  std::vector<std::shared_ptr<Entry>> left;
  {
    absl::MutexLock lock(&shared_->mu);
    for (auto& q : shared_->queue) {
      for (auto& e : q.TakeAll()) left.push_back(std::move(e));
    }
  }
  for (auto& e : left) Finish(e, absl::CancelledError("server shutting down"), nullptr, 0, 0);
}

std::string IndexCache::IndexId(const Constraint& constraint) {
  return absl::StrCat("ix-", constraint.CacheKey());
}

absl::StatusOr<IndexInfo> IndexCache::Compile(const CompileSpec& spec, Callback on_done) {
  if (!spec.constraint.tokenizer) return absl::InvalidArgumentError("no tokenizer");
  std::string id = IndexId(spec.constraint);
  auto& s = *shared_;
  std::vector<std::shared_ptr<Entry>> dropped;  // destroyed after the lock is released
  absl::MutexLock lock(&s.mu);
  auto it = s.entries.find(id);
  if (it != s.entries.end()) {
    Entry& e = *it->second;
    e.tick = ++s.tick;
    if (s.metrics) s.metrics->CacheHit();
    IndexInfo info = s.Snapshot(e);
    info.cache_hit = true;
    if (e.state == IndexState::kCompiling && on_done) {
      info.waiter = s.AddWaiter(e, std::move(on_done), true, absl::Now() + s.TimeoutOf(spec));
    } else if (e.state == IndexState::kCompiling) {
      s.AddBackground(e, spec.client);
    }
    return info;
  }
  if (s.stop) return absl::UnavailableError("server shutting down");
  if (s.pending >= s.options.max_pending) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many compilations in progress (", s.pending, "; --max-pending-compiles)"));
  }
  // Looked up, not inserted: a refused client leaves no entry behind.
  auto held = s.pending_by_client.find(spec.client);
  const size_t mine = held == s.pending_by_client.end() ? 0 : held->second;
  if (s.options.max_pending_per_client != 0 && mine >= s.options.max_pending_per_client) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "client ", spec.client, " has ", mine, " compilations in progress, its whole share (",
        "--max-pending-compiles-per-client=", s.options.max_pending_per_client,
        "; clients are told apart by --client-identity)"));
  }
  if (auto st = s.CheckFairShare(spec.client, mine); !st.ok()) return st;
  if (auto st = s.CheckLeasedBudget(0, &dropped); !st.ok()) return st;
  if (s.metrics) s.metrics->CacheMiss();
  auto e = std::make_shared<Entry>();
  e->id = id;
  e->constraint = spec.constraint;
  e->tokenizer = spec.tokenizer;
  e->client = spec.client;
  e->in_fast_lane = s.options.fast_lane_budget > absl::ZeroDuration();
  e->created = absl::Now();
  e->deadline = e->created + s.TimeoutOf(spec);
  e->tick = ++s.tick;
  uint64_t waiter = 0;
  if (on_done) {
    waiter = s.AddWaiter(*e, std::move(on_done), false, e->deadline);
  } else {
    e->background = true;
    e->background_client = spec.client;
  }
  s.entries[id] = e;
  s.queue[e->in_fast_lane ? 0 : 1].Push(e, e->client);
  ++s.pending;
  ++s.pending_by_client[spec.client];
  s.cv.SignalAll();  // workers of both lanes wait on cv
  IndexInfo info = s.Snapshot(*e);
  info.waiter = waiter;
  return info;
}

absl::StatusOr<IndexInfo> IndexCache::Get(absl::string_view id, Callback on_done) {
  auto& s = *shared_;
  absl::MutexLock lock(&s.mu);
  auto it = s.entries.find(id);
  if (it == s.entries.end()) {
    return absl::NotFoundError(absl::StrCat("unknown index ", QuoteInput(id)));
  }
  Entry& e = *it->second;
  e.tick = ++s.tick;
  uint64_t waiter = 0;
  if (e.state == IndexState::kCompiling && on_done) {
    waiter = s.AddWaiter(e, std::move(on_done), true, e.deadline);  // no deadline of its own
  }
  IndexInfo info = s.Snapshot(e);
  info.cache_hit = true;
  info.waiter = waiter;
  return info;
}

void IndexCache::Leave(absl::string_view id, uint64_t waiter, const absl::Status& why) {
  auto& s = *shared_;
  Callback callback;
  IndexInfo info;
  {
    absl::MutexLock lock(&s.mu);
    auto it = s.entries.find(id);
    if (it == s.entries.end() || it->second->state != IndexState::kCompiling) return;
    std::shared_ptr<Entry> e = it->second;
    auto w = std::find_if(e->waiters.begin(), e->waiters.end(),
                          [&](const Entry::Waiter& x) { return x.id == waiter; });
    if (w == e->waiters.end()) return;  // its callback has run or is running
    callback = std::move(w->callback);
    info = s.Snapshot(*e);
    info.state = IndexState::kFailed;
    info.status = why;
    info.cache_hit = w->cache_hit;
    e->waiters.erase(w);
    if (e->waiters.empty()) s.AbandonLocked(e);
  }
  callback(info);
}

bool IndexCache::Cancel(absl::string_view id) {
  auto& s = *shared_;
  absl::MutexLock lock(&s.mu);
  auto it = s.entries.find(id);
  if (it == s.entries.end() || it->second->state != IndexState::kCompiling) return false;
  it->second->cancel.store(true);
  return true;
}

void IndexCache::CancelAll() {
  auto& s = *shared_;
  absl::MutexLock lock(&s.mu);
  for (auto& [id, e] : s.entries) {
    if (e->state == IndexState::kCompiling) e->cancel.store(true);
  }
}

absl::StatusOr<std::shared_ptr<IndexLease>> IndexCache::Lease(absl::string_view id) {
  auto& s = *shared_;
  std::vector<std::shared_ptr<Entry>> dropped;  // destroyed after the lock is released
  absl::MutexLock lock(&s.mu);
  auto it = s.entries.find(id);
  if (it == s.entries.end()) {
    return absl::NotFoundError(absl::StrCat("unknown index ", QuoteInput(id)));
  }
  Entry& e = *it->second;
  if (e.state == IndexState::kCompiling) {
    return absl::FailedPreconditionError(
        absl::StrCat("index ", QuoteInput(id), " is still compiling"));
  }
  if (e.state == IndexState::kFailed) return e.status;
  e.tick = ++s.tick;
  if (auto lease = e.lease.lock()) return lease;
  // A first lease pins the entry: refused when that would take the leased
  // bytes past the budget (other sessions on leased indexes are still fine).
  auto entry = it->second;  // MaintainLocked may drop it from the map
  if (auto st = s.CheckLeasedBudget(entry->index->MemoryBytes(), &dropped); !st.ok()) return st;
  Entry& e2 = *entry;
  std::shared_ptr<IndexLease> lease(new IndexLease(shared_, e2.id, e2.index));
  e2.lease = lease;
  return lease;
}

void IndexCache::Maintain() { shared_->Maintain(); }

uint64_t IndexCache::bytes() const {
  auto& s = *shared_;
  absl::MutexLock lock(&s.mu);
  uint64_t total = 0;
  for (auto& [id, e] : s.entries) {
    if (e->state == IndexState::kReady) total += e->index->MemoryBytes();
  }
  return total;
}

size_t IndexCache::size() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->entries.size();
}

void IndexCache::Worker(int lane) {
  auto& s = *shared_;
  NameThisThread(lane == 0 ? "maskd-fastlane" : "maskd-compile");
  LowerThisThreadPriority(s.options.compile_nice);
  for (;;) {
    std::shared_ptr<Entry> e;
    {
      absl::MutexLock lock(&s.mu);
      while (!s.stop && s.queue[lane].empty()) s.cv.Wait(&s.mu);
      if (s.stop) return;
      e = s.queue[lane].Pop();
    }
    Run(e);
  }
}

void IndexCache::Run(const std::shared_ptr<Entry>& e) {
  absl::Time start = absl::Now();
  double queue_ms = absl::ToDoubleMilliseconds(start - e->created);
  const bool fast = e->in_fast_lane;
  CompileBudget budget;
  budget.deadline =
      fast ? std::min(e->deadline, start + shared_->options.fast_lane_budget) : e->deadline;
  budget.cancel = &e->cancel;
  absl::StatusOr<std::shared_ptr<const ConstraintIndex>> index;
  if (e->cancel.load()) {
    index = absl::CancelledError("compilation cancelled");
  } else if (start >= e->deadline) {
    index = absl::DeadlineExceededError("compilation deadline passed while queued");
  } else {
    // The schema's warnings (keywords not enforced) are not reported.
    if (shared_->metrics) shared_->metrics->CompileStarted();
    auto compiled = shared_->compiler->Compile(e->constraint, budget);
    if (shared_->metrics) shared_->metrics->CompileStopped();
    if (compiled.ok()) {
      index = std::move(compiled->index);
    } else {
      index = compiled.status();
    }
  }
  double compile_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (fast && !index.ok() && index.status().code() == absl::StatusCode::kDeadlineExceeded &&
      absl::Now() < e->deadline && !e->cancel.load()) {
    // Not cheap: off the fast lane, to the compile threads, to start again
    // (at most fast_lane_budget of work lost).
    auto& s = *shared_;
    absl::MutexLock lock(&s.mu);
    e->in_fast_lane = false;
    if (!s.stop) {
      s.queue[1].Push(e, e->client);
      s.cv.SignalAll();
      return;
    }
  }
  if (index.ok()) {
    Finish(e, absl::OkStatus(), *std::move(index), queue_ms, compile_ms);
  } else {
    Finish(e, index.status(), nullptr, queue_ms, compile_ms);
  }
}

void IndexCache::Finish(const std::shared_ptr<Entry>& e, absl::Status status,
                        std::shared_ptr<const ConstraintIndex> index, double queue_ms,
                        double compile_ms) {
  auto& s = *shared_;
  if (status.ok() && index->MemoryBytes() > s.options.max_bytes) {
    status = absl::ResourceExhaustedError(absl::StrCat("index needs ", index->MemoryBytes(),
                                                       " bytes, more than the cache's ",
                                                       s.options.max_bytes, " (--cache-bytes)"));
    index = nullptr;
  }
  if (s.metrics) {
    std::string result = status.ok() ? "ok" : absl::AsciiStrToLower(std::string(StatusCodeName(static_cast<int>(status.code()))));
    s.metrics->ObserveCompile(compile_ms / 1e3, std::string(ConstraintKindName(e->constraint.kind)),
                              result);
  }
  std::vector<Entry::Waiter> waiters;
  IndexInfo info;
  std::vector<std::shared_ptr<Entry>> dropped;
  {
    absl::ReleasableMutexLock lock(&s.mu);
    if (status.code() == absl::StatusCode::kDeadlineExceeded && !s.stop && !e->cancel.load()) {
      // The deadline was the first request's. Requests that joined with a
      // later one keep waiting: the entry is queued again with the latest of
      // their deadlines; only the requests whose own deadline passed fail.
      const absl::Time now = absl::Now();
      absl::Time latest = now;
      std::vector<Entry::Waiter> keep;
      for (auto& w : e->waiters) {
        if (w.deadline > now) {
          latest = std::max(latest, w.deadline);
          keep.push_back(std::move(w));
        } else {
          waiters.push_back(std::move(w));
        }
      }
      if (!keep.empty()) {
        e->waiters.swap(keep);
        e->deadline = latest;
        e->in_fast_lane = false;
        s.queue[1].Push(e, e->client);
        s.cv.SignalAll();
        info = s.Snapshot(*e);
        info.state = IndexState::kFailed;
        info.status = status;
        lock.Release();
        for (auto& w : waiters) {
          info.cache_hit = w.cache_hit;
          w.callback(info);
        }
        return;
      }
      e->waiters.swap(waiters);  // none kept: all of them fail, below
      waiters.clear();
    }
    --s.pending;
    s.Uncharge(e->client);
    e->finished_at = absl::Now();
    e->queue_ms = queue_ms;
    e->compile_ms = compile_ms;
    e->constraint.text.clear();
    e->constraint.text.shrink_to_fit();
    if (status.ok()) {
      e->state = IndexState::kReady;
      e->index = std::move(index);
    } else {
      e->state = IndexState::kFailed;
      e->status = status;
    }
    info = s.Snapshot(*e);
    waiters.swap(e->waiters);
    // Only failures that are a property of the constraint are cached: a
    // deadline (the first request's, maybe far shorter than the next one's),
    // a cancel or a spent mask budget says nothing of it, so the next
    // identical request starts afresh.
    auto it = s.entries.find(e->id);
    if ((status.code() == absl::StatusCode::kCancelled ||
         status.code() == absl::StatusCode::kDeadlineExceeded ||
         MaskBudget::IsExhausted(status)) &&
        it != s.entries.end() && it->second == e) {
      s.entries.erase(it);
    }
    s.MaintainLocked(&dropped);
  }
  for (auto& w : waiters) {
    info.cache_hit = w.cache_hit;
    w.callback(info);
  }
}

}  // namespace maskd
