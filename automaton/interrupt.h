// Interrupt: how a caller that no longer wants a result (cancelled, past its
// deadline) stops long work it started on another layer's thread.
//
// The worker polls Check() from inside its long loops, every few thousand
// steps (EarleyParser: every kInterruptPollSteps parser steps), and returns
// the first non-OK status it gets, unchanged, leaving its own state as if the
// call had not been made. The core never learns why: a gRPC server
// implements Check() from its call context (service/maskd_service.cc), a
// library user from a flag or a clock.
//
// Thread-safety: Check() is called from the working thread while another
// thread may be changing what it reads; implementations must be thread-safe
// and cheap (no lock held for long, no allocation on the OK path).
#ifndef MASKD_AUTOMATON_INTERRUPT_H_
#define MASKD_AUTOMATON_INTERRUPT_H_

#include <atomic>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace maskd {

class Interrupt {
 public:
  virtual ~Interrupt() = default;
  // OK while the work is wanted; else why not (CANCELLED, DEADLINE_EXCEEDED).
  virtual absl::Status Check() const = 0;
};

// An Interrupt from a flag and a deadline: CANCELLED once Cancel() was
// called, DEADLINE_EXCEEDED once absl::Now() passes `deadline`.
class FlagInterrupt final : public Interrupt {
 public:
  explicit FlagInterrupt(absl::Time deadline = absl::InfiniteFuture()) : deadline_(deadline) {}
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  absl::Status Check() const override {
    if (cancelled_.load(std::memory_order_relaxed)) {
      return absl::CancelledError("the caller cancelled the call");
    }
    if (deadline_ != absl::InfiniteFuture() && absl::Now() > deadline_) {
      return absl::DeadlineExceededError("the call's deadline passed");
    }
    return absl::OkStatus();
  }

 private:
  const absl::Time deadline_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace maskd

#endif  // MASKD_AUTOMATON_INTERRUPT_H_
