// SessionTable: the guide state of every live sequence, by session id.
//
// Invariants:
//  - Session ids are unique among live sessions, never 0, and 64 bits from
//    the kernel's CSPRNG (getrandom(2), drawn in per-thread batches): one id
//    says nothing of any other, so a client cannot find another's sessions
//    from its own. A draw that hits a live id is drawn again.
//  - A session on the regex route keeps the states before its last
//    `rollback_window` tokens (4 bytes each; see Guide): its memory is bounded
//    however long it runs, and a rollback past the window is OUT_OF_RANGE. A
//    session on the grammar route can roll back to its start; its memory is
//    bounded by the grammar's max_chart_items (constraint/constraint_guide.h).
//  - At most `max_sessions` live sessions (RESOURCE_EXHAUSTED past that),
//    and at most `max_sessions_per_client` of them charged to one client
//    (the key given to Create or Fork; ClientShares). A session's charge is
//    given back when the session is gone (closed, expired, or the table
//    destroyed), whatever became of the client's connection.
//  - Grammar sessions' parser charts together stay within
//    `grammar_chart_budget` (a step or fork past it is RESOURCE_EXHAUSTED).
//  - A session unused for `ttl` is removed by the sweeper thread and counted
//    as expired; later calls on it get NOT_FOUND.
//  - Every session holds a lease on its index (IndexLease): a live session's
//    index is never evicted.
// Hot path (Find + Session::Step): one shard lock (reader) for the lookup,
// the session's own mutex for the step; no table-wide lock, no allocation
// (except a forced continuation longer than the string's inline capacity).
#ifndef MASKD_SERVICE_SESSION_TABLE_H_
#define MASKD_SERVICE_SESSION_TABLE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "constraint/constraint_guide.h"
#include "service/client_shares.h"
#include "service/index_cache.h"

namespace maskd {

class Metrics;

struct SessionTableOptions {
  size_t max_sessions = 100000;           // --max-sessions
  size_t max_sessions_per_client = 0;     // --max-sessions-per-client; 0: no cap
  // Tokens a session can roll back (--rollback-window); memory per session's
  // history is at most 4 bytes times this.
  size_t rollback_window = 4096;
  absl::Duration ttl = absl::Minutes(10);  // --session-ttl
  // The parser charts of all grammar sessions together
  // (--max-grammar-chart-bytes; ConstraintGuide's chart budget); null: none.
  std::shared_ptr<MaskBudget> grammar_chart_budget;
  // Sweeper period; zero: min(ttl / 4, 1 s).
  absl::Duration sweep_period = absl::ZeroDuration();
  // Run by the sweeper thread after each sweep (e.g. IndexCache::Maintain,
  // which re-measures indexes whose masks grew). May be empty.
  std::function<void()> on_sweep;
};

// The result of one session step.
struct StepOutcome {
  absl::Status status;
  bool accepting = false;
  bool finished = false;
  uint64_t num_tokens = 0;  // since the start, after the step
  uint32_t min_bytes_to_finish = 0;  // ConstraintGuide::MinBytesToFinish after the step
};

class Session {
 public:
  // A session at the start of `lease`'s index; id 0 until
  // SessionTable::Insert draws one. Fails only when a grammar's start set
  // passes a parser limit.
  static absl::StatusOr<std::shared_ptr<Session>> Create(
      std::shared_ptr<IndexLease> lease,
      size_t rollback_window = ConstraintGuide::kUnboundedHistory,
      std::shared_ptr<MaskBudget> chart_budget = nullptr);
  Session(std::shared_ptr<IndexLease> lease, ConstraintGuide guide);
  // A new session in this one's state (fork), id 0 until inserted.
  // ResourceExhausted when its copy of a grammar chart does not fit the
  // chart budget.
  absl::StatusOr<std::shared_ptr<Session>> Clone() const;

  uint64_t id() const { return id_; }
  const std::string& index_id() const { return lease_->id(); }
  uint32_t num_words() const { return num_words_; }
  uint32_t vocab_size() const { return vocab_size_; }
  // kGrammar: a step may parse for long (up to --max-grammar-parser-steps
  // per mask or advance); kRegex: a table walk per token.
  ConstraintRoute route() const { return lease_->index()->route(); }

  // ConstraintGuide::Step (undoes `rollback` tokens, advances by `tokens`,
  // writes the next mask into `row`, all or nothing; every word of `row` is
  // written either way: StepBatch's row rule, service/step_batch.h), then
  // the forced continuation into `forced` (cleared; may be null).
  // `max_tokens_left` > 0: budget mode (Guide::ApplyTokenBudget on the mask).
  // `interrupt` (may be null) is polled while a grammar is parsed
  // (ConstraintGuide::SetInterrupt): once it fails, so does the step, undone.
  StepOutcome Step(uint32_t rollback, absl::Span<const uint32_t> tokens, absl::Span<uint32_t> row,
                   std::string* forced, uint32_t max_tokens_left = 0,
                   const Interrupt* interrupt = nullptr);
  // Undoes the last n tokens; returns the count left. Errors as
  // ConstraintGuide::Rollback's; state unchanged on error.
  absl::StatusOr<uint64_t> Rollback(uint32_t n);

  int64_t last_used_ns() const { return last_used_ns_.load(std::memory_order_relaxed); }
  // Bytes held by the per-token history (ConstraintGuide::history_bytes).
  size_t history_bytes() const;

 private:
  friend class SessionTable;
  void Touch();

  uint64_t id_ = 0;  // set once, by SessionTable::Insert, before it is shared
  ClientShares::Charge charge_;  // the creator's unit of its session share;
                                // moved out (released) when the table drops it
  const std::shared_ptr<IndexLease> lease_;
  const uint32_t num_words_;
  const uint32_t vocab_size_;
  std::atomic<int64_t> last_used_ns_;
  mutable absl::Mutex mu_;
  ConstraintGuide guide_ ABSL_GUARDED_BY(mu_);
};

class SessionTable {
 public:
  SessionTable(const SessionTableOptions& options, Metrics* metrics /* nullable */);
  // Stops the sweeper; drops every session.
  ~SessionTable();
  SessionTable(const SessionTable&) = delete;
  SessionTable& operator=(const SessionTable&) = delete;

  // A new session charged to `client`'s share (its ClientKey; "" for an
  // in-process caller). RESOURCE_EXHAUSTED naming --max-sessions-per-client
  // when the client holds its whole share, --max-sessions when the table is
  // full.
  absl::StatusOr<std::shared_ptr<Session>> Create(std::shared_ptr<IndexLease> lease,
                                                  absl::string_view client = "");
  // NOT_FOUND when unknown.
  absl::Status Close(uint64_t id);
  // A copy of session `id`, charged to `client` (the caller, which need not
  // be the session's creator), with Create's refusals.
  absl::StatusOr<std::shared_ptr<Session>> Fork(uint64_t id, absl::string_view client = "");
  // Null when unknown. Does not refresh the TTL (Session::Step does).
  std::shared_ptr<Session> Find(uint64_t id) const;
  // Whether `id` names a grammar-route session, read from the id itself (its
  // lowest bit, set at creation): no lookup, so callers can route a batch
  // before stepping it. An id no session has may answer either way.
  static bool IsGrammarId(uint64_t id) { return (id & 1) != 0; }

  // Removes sessions idle since before `now - ttl`; returns how many.
  size_t ExpireIdle(absl::Time now);
  size_t size() const { return count_.load(std::memory_order_relaxed); }
  // Sessions charged to `client`: a closed or expired session stops counting
  // at once, even while a call that found it still holds it.
  uint64_t held_by(absl::string_view client) const { return shares_.held(client); }

  static absl::Status NotFound(uint64_t id);

 private:
  static constexpr int kShards = 64;
  struct Shard {
    mutable absl::Mutex mu;
    absl::flat_hash_map<uint64_t, std::shared_ptr<Session>> map ABSL_GUARDED_BY(mu);
  };
  Shard& ShardOf(uint64_t id) const { return shards_[(id ^ (id >> 29)) % kShards]; }
  // 63 random bits (getrandom(2), buffered per thread) above the kind bit
  // (IsGrammarId), never 0.
  static uint64_t NewId(bool grammar);
  absl::StatusOr<std::shared_ptr<Session>> Insert(std::shared_ptr<Session> s);
  // A place for one more session charged to `client`: its share's unit, and
  // one of max_sessions (given back by the caller when it fails later).
  absl::StatusOr<ClientShares::Charge> Reserve(absl::string_view client);
  // Create's and Fork's one path: a place reserved for `client` (Reserve),
  // then the session `make` builds (id 0) charged to it and inserted; the
  // place given back when `make` fails.
  absl::StatusOr<std::shared_ptr<Session>> Admit(
      absl::string_view client,
      absl::FunctionRef<absl::StatusOr<std::shared_ptr<Session>>()> make);
  void Sweep();

  const SessionTableOptions options_;
  Metrics* const metrics_;
  ClientShares shares_;
  std::atomic<size_t> count_{0};
  mutable Shard shards_[kShards];
  absl::Notification stop_;
  std::thread sweeper_;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_SESSION_TABLE_H_
