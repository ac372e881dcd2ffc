// IndexCache: compiled indexes keyed by their Constraint (kind, text,
// options, tokenizer: constraint/constraint.h).
//
// Invariants:
//  - One entry per Constraint::CacheKey(), named by its index id ("ix-" + the
//    key's 32 hex digits). Identical concurrent requests share the entry and
//    its one compilation. Every entry is compiled by one ConstraintCompiler
//    under the options' CompileLimits.
//  - Entries are compiled on `compile_threads` threads, each against a
//    deadline (request timeout capped at `compile_timeout`) and a cancel flag.
//  - Fair scheduling: each new entry is first tried on the fast lane (one
//    thread of its own) for at most `fast_lane_budget`; one not done by then
//    goes to the compile threads and starts again. So a cheap compilation
//    never waits behind expensive ones. Both lanes serve clients
//    (CompileSpec::client) round-robin, and a client has at most
//    `max_pending_per_client` entries queued or running and, while other
//    clients hold entries, at most max_pending / (holders + 1): together
//    they always leave room for one more client.
//  - A failed compilation stays cached for `failure_ttl`, returning the same
//    error, when the failure is a property of the constraint; a cancelled or
//    timed-out one (DEADLINE_EXCEEDED) is dropped at once.
//  - Abandoned work stops: a request that waits for an entry (Compile or Get
//    with a callback) can leave it (Leave: its call was cancelled, its
//    deadline passed, its connection closed). When the last waiter leaves an
//    entry still compiling and no request without a callback (wait=false:
//    "compile it in the background") asked for it, its cancel flag is set, so
//    the compilation stops at its next check, and the entry is dropped at
//    once: the next identical request starts afresh. Single-flight is kept:
//    the entry runs while any of its requests still wants it.
//  - An entry counts against the share of the client that started it until
//    it is done; when its waiters have all left and it runs on only for
//    wait=false requests of another client, the charge moves to the first of
//    them (which may take that client past its share: a join is never
//    refused, but its next new compile is).
//  - A request joining an entry being compiled keeps its own deadline: when
//    the entry's deadline passes, waiters whose deadline has not are kept
//    and the entry is queued again with the latest of theirs.
//  - Ready indexes are bounded in bytes (ConstraintIndex::MemoryBytes, which
//    grows as masks are computed lazily): past `max_bytes`, least recently
//    used entries are evicted, except entries leased by live sessions and the
//    most recently used one. An index larger than `max_bytes` on its own fails
//    with RESOURCE_EXHAUSTED.
//  - Hard bound: leased entries cannot be evicted, so a new compilation is
//    refused (RESOURCE_EXHAUSTED) while leased bytes are at `max_bytes`, and a
//    first lease on an entry is refused when it would take them past it. The
//    cache then holds at most max_bytes + one unleased most-recent index,
//    plus what leased lazy indexes grow by as their masks are computed;
//    that growth, and every index's kept masks, are bounded by one
//    MaskBudget of max_mask_bytes shared by all indexes of the cache.
//  - Grammar indexes are entries like any other; their memo counts against
//    the same max_bytes and max_mask_bytes.
// Thread-safe. No method is on the Step path (sessions hold their index).
#ifndef MASKD_SERVICE_INDEX_CACHE_H_
#define MASKD_SERVICE_INDEX_CACHE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "constraint/constraint_compiler.h"

namespace maskd {

class Metrics;

struct IndexCacheOptions {
  uint64_t max_bytes = uint64_t{1} << 30;            // --cache-bytes
  // Masks kept by all indexes together, leased or not (tokenizer/mask_budget.h):
  // past it a state's mask is computed at each use. 0: no bound.
  uint64_t max_mask_bytes = uint64_t{1} << 30;       // --max-mask-bytes
  int compile_threads = 2;                           // --compile-threads
  absl::Duration compile_timeout = absl::Seconds(30);  // --compile-timeout
  absl::Duration failure_ttl = absl::Seconds(10);    // --failure-ttl
  size_t max_pending = 256;                          // --max-pending-compiles
  size_t max_pending_per_client = 128;               // --max-pending-compiles-per-client; 0: no cap
  // Every compilation is first tried for at most this long on a thread of its
  // own (the fast lane), then, if not done, queued for the compile threads
  // and started again; zero: no fast lane.  --compile-fast-lane
  absl::Duration fast_lane_budget = absl::Milliseconds(100);
  // Added to the nice value of the compile threads and the fast lane's, so
  // that compilations yield the CPU to steps and masks when they compete
  // (service/this_thread.h); 0: unchanged.
  int compile_nice = 0;                              // --compile-nice (5)
  // What one compilation may do: the --max-regex-*, --max-dfa-states,
  // --max-nfa-states, --max-schema-*, --max-pattern-nesting and
  // --max-grammar-* flags (constraint/constraint_compiler.h). Its mask_budget
  // is replaced by the cache's (max_mask_bytes).
  CompileLimits compile;
};

struct CompileSpec {
  // What to compile; the entry's key (IndexId).
  Constraint constraint;
  std::string tokenizer;  // the tokenizer's name, reported back
  absl::Duration timeout = absl::ZeroDuration();  // zero: options' compile_timeout
  // Who asks (its ClientKey, service/client_identity.h); the queues are shared
  // round-robin between clients and each has max_pending_per_client. Not
  // part of the key: identical requests of two clients share one entry.
  std::string client;
};

enum class IndexState { kCompiling, kReady, kFailed };

// A snapshot of one entry.
struct IndexInfo {
  std::string id;
  IndexState state = IndexState::kCompiling;
  absl::Status status;                       // the error when kFailed
  std::shared_ptr<const ConstraintIndex> index;   // when kReady
  ConstraintKind kind = ConstraintKind::kRegex;
  std::string tokenizer;
  uint32_t vocab_size = 0;
  uint32_t dfa_states = 0;
  uint64_t memory_bytes = 0;
  double queue_ms = 0;
  double compile_ms = 0;
  bool cache_hit = false;
  // In Compile's or Get's answer when the request waits (its callback will
  // run): its ticket for Leave(). 0 otherwise.
  uint64_t waiter = 0;
};

// Keeps an index from eviction while alive. Shared by the sessions using it.
class IndexLease {
 public:
  ~IndexLease();
  const std::shared_ptr<const ConstraintIndex>& index() const { return index_; }
  const std::string& id() const { return id_; }

 private:
  friend class IndexCache;
  struct Shared;
  IndexLease(std::shared_ptr<Shared> cache, std::string id, std::shared_ptr<const ConstraintIndex> index)
      : cache_(std::move(cache)), id_(std::move(id)), index_(std::move(index)) {}
  std::shared_ptr<Shared> cache_;
  std::string id_;
  std::shared_ptr<const ConstraintIndex> index_;
};

class IndexCache {
 public:
  // Called once with the final snapshot (kReady or kFailed), on a compile
  // thread (or the caller's, for Cancel/CancelAll and Leave). Must not block.
  using Callback = std::function<void(const IndexInfo&)>;

  IndexCache(const IndexCacheOptions& options, Metrics* metrics /* nullable */);
  // Cancels pending compilations (their callbacks run) and joins the threads.
  ~IndexCache();
  IndexCache(const IndexCache&) = delete;
  IndexCache& operator=(const IndexCache&) = delete;

  // The id of `constraint`'s entry: "ix-" + its CacheKey().
  static std::string IndexId(const Constraint& constraint);

  // Finds or starts the entry for `spec`. Returns its snapshot now. When that
  // snapshot is kCompiling and `on_done` is set, `on_done` runs later, once.
  // Errors (not compile failures, which are in the snapshot):
  // RESOURCE_EXHAUSTED when `max_pending` compilations are queued (or
  // `max_pending_per_client` of spec.client's, or its fair share), or (for a
  // new entry) when leased indexes hold `max_bytes`.
  absl::StatusOr<IndexInfo> Compile(const CompileSpec& spec, Callback on_done = nullptr);
  // The entry `id`, with the same waiting rule. NOT_FOUND when unknown
  // (never compiled, evicted, failure expired or cancelled).
  absl::StatusOr<IndexInfo> Get(absl::string_view id, Callback on_done = nullptr);
  // The request with ticket `waiter` (IndexInfo::waiter) on entry `id` no
  // longer waits: its callback runs now, on this thread, with a kFailed
  // snapshot of status `why` (CANCELLED or DEADLINE_EXCEEDED), unless it has
  // run or is running already. When it was the entry's last waiter and no
  // wait=false request asked for the entry, the compilation is cancelled and
  // the entry dropped (counted in maskd_compiles_abandoned_total).
  void Leave(absl::string_view id, uint64_t waiter, const absl::Status& why);
  // Requests cancellation of a compiling entry; false when not compiling.
  bool Cancel(absl::string_view id);
  // Cancels every compiling entry (shutdown).
  void CancelAll();

  // A lease on ready entry `id`. NOT_FOUND when unknown,
  // FAILED_PRECONDITION when compiling, the entry's error when failed,
  // RESOURCE_EXHAUSTED when it is not leased yet and leasing it would take
  // the leased bytes past `max_bytes`.
  absl::StatusOr<std::shared_ptr<IndexLease>> Lease(absl::string_view id);

  // Drops expired failures and evicts over budget. Runs after each
  // compilation and lease release; call it periodically too (masks grow).
  void Maintain();

  // Ready bytes, entries.
  uint64_t bytes() const;
  size_t size() const;

 private:
  friend struct IndexLease::Shared;
  struct Entry;
  void Worker(int lane);
  void Run(const std::shared_ptr<Entry>& e);
  void Finish(const std::shared_ptr<Entry>& e, absl::Status status,
              std::shared_ptr<const ConstraintIndex> index, double queue_ms, double compile_ms);

  std::shared_ptr<IndexLease::Shared> shared_;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_INDEX_CACHE_H_
