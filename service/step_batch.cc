#include "service/step_batch.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/metrics.h"

namespace maskd {
namespace {

// Per-thread state of Run between lookup and the last step: the sessions
// found and their widths. Capacity is kept from call to call.
struct LookupScratch {
  std::vector<std::shared_ptr<Session>> sessions;
  std::vector<uint32_t> words;
};

// Drops the session references on every return path (keeps the capacity).
class SessionRefsGuard {
 public:
  explicit SessionRefsGuard(std::vector<std::shared_ptr<Session>>* refs) : refs_(refs) {}
  ~SessionRefsGuard() { refs_->clear(); }
  SessionRefsGuard(const SessionRefsGuard&) = delete;
  SessionRefsGuard& operator=(const SessionRefsGuard&) = delete;

 private:
  std::vector<std::shared_ptr<Session>>* const refs_;
};

// The translation buffers of ThreadBuffers: grown, never shrunk, so that
// results' strings keep their capacity.
struct TranslationBuffers {
  std::vector<StepEntryInput> entries;
  std::vector<StepEntryResult> results;
};

// Why an entry whose session was found is not stepped; OK when it is.
absl::Status Refusal(const Session& s, const StepRows& rows) {
  if (s.num_words() > rows.words_per_row) {
    return absl::InvalidArgumentError(absl::StrCat(
        "words_per_row ", rows.words_per_row, " is less than the session's ", s.num_words()));
  }
  if (rows.max_vocab > 0 && s.vocab_size() > rows.max_vocab) {
    return absl::InvalidArgumentError(absl::StrCat("the session's vocabulary (", s.vocab_size(),
                                                   ") is wider than the logits (", rows.max_vocab,
                                                   ")"));
  }
  return absl::OkStatus();
}

}  // namespace

StepBatch::StepBatch(SessionTable* sessions, Metrics* metrics, const StepLimits& limits)
    : sessions_(sessions), metrics_(metrics), limits_(limits) {}

absl::Status StepBatch::CheckBatchSize(size_t n) const {
  if (n <= limits_.max_batch) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("batch of ", n, " entries exceeds ", limits_.max_batch, " (--max-batch)"));
}

absl::StatusOr<StepBatch::Buffers> StepBatch::ThreadBuffers(size_t n) const {
  if (absl::Status s = CheckBatchSize(n); !s.ok()) return s;
  thread_local TranslationBuffers buffers;
  if (buffers.entries.size() < n) buffers.entries.resize(n);
  if (buffers.results.size() < n) buffers.results.resize(n);
  return Buffers{absl::MakeSpan(buffers.entries.data(), n),
                 absl::MakeSpan(buffers.results.data(), n)};
}

absl::Status StepBatch::CheckReplySize(uint64_t entries, uint64_t words_per_row) const {
  const uint64_t bytes = words_per_row * 4 * entries;  // < 2^32 * 4 * 2^32
  if (bytes + entries * 64 <= limits_.max_message_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "reply of ", bytes, " mask bytes exceeds --max-message-bytes=", limits_.max_message_bytes));
}

absl::Status StepBatch::Run(absl::Span<const StepEntryInput> entries, PlaceRows place,
                            absl::Span<StepEntryResult> results, const Interrupt* interrupt) {
  const size_t n = entries.size();
  if (absl::Status s = CheckBatchSize(n); !s.ok()) return s;
  if (results.size() != n) {
    return absl::InternalError(
        absl::StrCat("StepBatch::Run: ", results.size(), " results for ", n, " entries"));
  }
  uint64_t total_tokens = 0;
  for (const StepEntryInput& e : entries) total_tokens += e.tokens.size();
  if (total_tokens > limits_.max_tokens_per_request) {
    return absl::ResourceExhaustedError(absl::StrCat("request carries ", total_tokens,
                                                     " tokens, more than ",
                                                     limits_.max_tokens_per_request,
                                                     " (--max-request-tokens)"));
  }

  // Lookup.
  thread_local LookupScratch scratch;
  SessionRefsGuard guard(&scratch.sessions);
  scratch.sessions.resize(n);
  scratch.words.resize(n);
  uint32_t widest = 0;
  for (size_t i = 0; i < n; ++i) {
    scratch.sessions[i] = sessions_->Find(entries[i].session_id);
    scratch.words[i] = scratch.sessions[i] ? scratch.sessions[i]->num_words() : 0;
    widest = std::max(widest, scratch.words[i]);
  }

  // Placement.
  absl::StatusOr<StepRows> placed = place(StepBatchShape{scratch.words, widest});
  if (!placed.ok()) return placed.status();
  const StepRows rows = *placed;

  // Steps.
  uint64_t advanced = 0;
  for (size_t i = 0; i < n; ++i) {
    const StepEntryInput& e = entries[i];
    StepEntryResult& out = results[i];
    absl::Span<uint32_t> row(rows.base + i * rows.words_per_row, rows.words_per_row);
    Session* s = scratch.sessions[i].get();
    out.status = s == nullptr ? SessionTable::NotFound(e.session_id) : Refusal(*s, rows);
    if (out.status.ok() && interrupt != nullptr) out.status = interrupt->Check();
    if (!out.status.ok()) {
      std::fill(row.begin(), row.end(), 0u);
      out.num_tokens = 0;
      out.accepting = false;
      out.finished = false;
      out.min_bytes_to_finish = 0;
      out.forced.clear();
    } else {
      StepOutcome o =
          s->Step(e.rollback, e.tokens, row, &out.forced, e.max_tokens_left, interrupt);
      out.status = std::move(o.status);
      out.num_tokens = o.num_tokens;
      out.accepting = o.accepting;
      out.finished = o.finished;
      out.min_bytes_to_finish = o.min_bytes_to_finish;
    }
    if (out.status.ok()) {
      advanced += e.tokens.size();
    } else if (metrics_ != nullptr) {
      metrics_->StepEntryError(static_cast<int>(out.status.code()));
    }
  }
  if (metrics_ != nullptr && advanced > 0) metrics_->TokensAdvanced(advanced);
  return absl::OkStatus();
}

}  // namespace maskd
