// CallInterrupt: the Interrupt (automaton/interrupt.h) of one gRPC call, so that
// the core stops parsing for a client that is gone: CANCELLED once the call
// is cancelled (by the client, or because its connection closed),
// DEADLINE_EXCEEDED once the call's deadline has passed.
//
// Check() costs a clock read and an atomic load (ServerContextBase::
// IsCancelled is valid at any time in the callback API); the context must
// outlive the work it is polled for.
#ifndef MASKD_SERVICE_CALL_INTERRUPT_H_
#define MASKD_SERVICE_CALL_INTERRUPT_H_

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "automaton/interrupt.h"
#include "grpcpp/server_context.h"

namespace maskd {

class CallInterrupt final : public Interrupt {
 public:
  explicit CallInterrupt(const grpc::ServerContextBase& ctx)
      : ctx_(ctx), deadline_(absl::FromChrono(ctx.deadline())) {}

  absl::Status Check() const override {
    if (ctx_.IsCancelled()) {
      return absl::CancelledError("the call was cancelled (the client gave up or went away)");
    }
    if (absl::Now() > deadline_) return absl::DeadlineExceededError("the call's deadline passed");
    return absl::OkStatus();
  }

 private:
  const grpc::ServerContextBase& ctx_;
  const absl::Time deadline_;
};

// Two Interrupts polled as one: the first's status if not OK, else the
// second's. maskd pairs a call's CallInterrupt with its WorkPool turn
// (service/work_pool.h), so that long work stops when its client has gone
// and when the pool refuses it a long-task slot.
class InterruptPair final : public Interrupt {
 public:
  InterruptPair(const Interrupt& first, const Interrupt& second)
      : first_(first), second_(second) {}
  absl::Status Check() const override {
    absl::Status s = first_.Check();
    if (!s.ok()) return s;
    return second_.Check();
  }

 private:
  const Interrupt& first_;
  const Interrupt& second_;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_CALL_INTERRUPT_H_
