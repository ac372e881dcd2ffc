// The stop check that every stage of a DFA build polls. Internal to
// maskd_automaton.
#ifndef MASKD_AUTOMATON_INTERNAL_BUILD_ABORT_H_
#define MASKD_AUTOMATON_INTERNAL_BUILD_ABORT_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "automaton/dfa.h"

namespace maskd::automaton_internal {

// Cancelled when options.cancel is set and true, DeadlineExceeded past
// options.deadline, OK otherwise. Reads the clock only when a deadline is set.
inline absl::Status CheckBuildAbort(const DfaOptions& options) {
  if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) {
    return absl::CancelledError("regex compilation cancelled");
  }
  if (options.deadline != absl::InfiniteFuture() && absl::Now() > options.deadline) {
    return absl::DeadlineExceededError("regex compilation exceeded its deadline");
  }
  return absl::OkStatus();
}

// Polls CheckBuildAbort once per kCheckWork units spent. A stage charges
// each step its cost (a fixed part plus the states it touches), so a few
// huge steps are checked as often as many small ones.
class AbortMeter {
 public:
  static constexpr uint64_t kCheckWork = uint64_t{1} << 16;

  explicit AbortMeter(const DfaOptions& options) : options_(options) {}
  absl::Status Spend(uint64_t units) {
    spent_ += units;
    if (spent_ < kCheckWork) return absl::OkStatus();
    spent_ = 0;
    return CheckBuildAbort(options_);
  }

 private:
  const DfaOptions& options_;
  uint64_t spent_ = 0;  // since the last check
};

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_BUILD_ABORT_H_
