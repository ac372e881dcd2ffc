// StepBatch: one batch of session steps, the core of Maskd.Step,
// Maskd.StepStream and SharedMemory.StepInRegion, without gRPC or protobuf.
// The services only translate their messages to StepEntryInput and back from
// StepEntryResult; the rules below are written once, here.
//
// A batch (Run), in order:
//  1. Limits (StepLimits): more than max_batch entries, or more than
//     max_tokens_per_request tokens over all entries, fails the call with
//     RESOURCE_EXHAUSTED.
//  2. Lookup: each entry's session is found in the SessionTable (one shard
//     reader lock each). An unknown id is that entry's NOT_FOUND.
//  3. Placement: the caller's `place` gets the mask width of every session
//     found (StepBatchShape) and says where the rows go (StepRows), or fails
//     the call. Request-level checks of a target (reply size, region range,
//     logits geometry) go there: they run before any session is stepped.
//  4. Steps: each entry, in order, is stepped all or nothing
//     (Session::Step: on error the session is unchanged) and its outcome is
//     written to results[i]. Besides the session's own errors an entry fails
//     with INVALID_ARGUMENT when its session's mask is wider than the rows
//     (StepRows::words_per_row) or its vocabulary wider than the logits the
//     masks go to (StepRows::max_vocab).
// An error in 1-3 fails the call: no session is stepped, no row written,
// `results` untouched. Once in 4, the call succeeds; entries fail one by one.
//
// Rows (the one zeroing rule): in step 4 every row is written in full,
// whatever the entry's outcome. OK: the session's mask (budget applied), then
// zeros up to words_per_row. Error: all zeros. Session::Step writes the row
// of an entry that reaches its session (mask and padding, or zeros on its
// own error: service/session_table.h); StepBatch zeroes the row of an entry
// refused before that (unknown id, mask or vocabulary too wide). No other
// layer zeroes or rewrites a row: a Step reply carries the rows as written;
// a logits target skips a failed entry's row (row map -1) and leaves those
// logits untouched.
//
// Allocation: none per call in steady state when every entry is OK. The
// session references and widths live in per-thread vectors that keep their
// capacity; so do ThreadBuffers' entries and results. An error status
// allocates its message, and a forced continuation longer than a string's
// inline capacity may allocate (as in Session::Step).
//
// Metrics (nullable): StepEntryError(code) per failed entry, TokensAdvanced
// with the tokens of the entries that succeeded.
//
// Thread safety: Run is thread-safe; concurrent batches touching one session
// are serialised by that session's mutex, in no particular order.
#ifndef MASKD_SERVICE_STEP_BATCH_H_
#define MASKD_SERVICE_STEP_BATCH_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/session_table.h"

namespace maskd {

class Metrics;

// The step limits of every service (one flag each, service/main.cc).
struct StepLimits {
  uint32_t max_batch = 1024;                   // --max-batch: entries per call
  uint64_t max_tokens_per_request = 1 << 20;   // --max-request-tokens: tokens per call, all entries
  uint64_t max_message_bytes = 64ull << 20;    // --max-message-bytes: bytes of one reply
};

// One entry of a batch.
struct StepEntryInput {
  uint64_t session_id = 0;
  uint32_t rollback = 0;              // tokens to undo first
  absl::Span<const uint32_t> tokens;  // then to accept (not owned)
  uint32_t max_tokens_left = 0;       // > 0: budget mode (Guide::ApplyTokenBudget)
};

// The outcome of one entry. On error, num_tokens, accepting and finished
// describe the unchanged session (all zero when the entry never reached it),
// min_bytes_to_finish is 0 and forced is empty.
struct StepEntryResult {
  absl::Status status;
  uint64_t num_tokens = 0;           // tokens accepted since the start
  bool accepting = false;
  bool finished = false;
  uint32_t min_bytes_to_finish = 0;  // Guide::MinBytesToFinish
  std::string forced;                // Guide::ForcedContinuation
};

// What placement sees: the sessions found, before any is stepped.
struct StepBatchShape {
  // Per entry: its session's mask width in uint32 words; 0 when not found.
  absl::Span<const uint32_t> words;
  uint32_t widest = 0;  // the largest of `words`
};

// Where the rows of a batch go: row i is the words_per_row uint32 words at
// base + i * words_per_row (base may be null when words_per_row is 0).
struct StepRows {
  uint32_t* base = nullptr;
  uint32_t words_per_row = 0;
  // > 0: an entry whose session's vocabulary exceeds this fails (its mask
  // would not cover every logit it is applied to). 0: no such check.
  uint32_t max_vocab = 0;
};

class StepBatch {
 public:
  // `sessions` and `metrics` (nullable) outlive the StepBatch.
  StepBatch(SessionTable* sessions, Metrics* metrics, const StepLimits& limits);
  StepBatch(const StepBatch&) = delete;
  StepBatch& operator=(const StepBatch&) = delete;

  const StepLimits& limits() const { return limits_; }

  // Decides where the rows go (step 3 above); an error fails the call.
  using PlaceRows = absl::FunctionRef<absl::StatusOr<StepRows>(const StepBatchShape&)>;

  // Runs one batch (steps 1-4 above). results.size() == entries.size().
  // Returns OK once entries are being stepped (their errors are in
  // `results`), else the call's error. `interrupt` (may be null: the caller
  // cannot go away) is polled before each entry and while a grammar entry is
  // parsed (Session::Step): once it fails, the entries not done yet fail
  // with its status (CANCELLED, DEADLINE_EXCEEDED), their sessions unchanged.
  absl::Status Run(absl::Span<const StepEntryInput> entries, PlaceRows place,
                   absl::Span<StepEntryResult> results, const Interrupt* interrupt = nullptr);

  // This thread's translation buffers for a batch of `n` entries: `entries`
  // to fill, `results` for Run. Valid until the thread's next call; capacity
  // kept. RESOURCE_EXHAUSTED past max_batch (checked before anything grows,
  // so the buffers never hold more than max_batch entries).
  struct Buffers {
    absl::Span<StepEntryInput> entries;
    absl::Span<StepEntryResult> results;
  };
  absl::StatusOr<Buffers> ThreadBuffers(size_t n) const;

  // The bound of a reply that carries the rows (Maskd.Step):
  // RESOURCE_EXHAUSTED when `entries` rows of `words_per_row` words, plus 64
  // bytes per entry for its result, exceed max_message_bytes.
  absl::Status CheckReplySize(uint64_t entries, uint64_t words_per_row) const;

 private:
  absl::Status CheckBatchSize(size_t n) const;

  SessionTable* const sessions_;
  Metrics* const metrics_;
  const StepLimits limits_;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_STEP_BATCH_H_
