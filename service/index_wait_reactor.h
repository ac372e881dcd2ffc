// IndexWaitReactor: the unary reactor of a call that may wait for an
// IndexCache entry (Compile and GetIndex with wait=true, CreateSession). When
// the call is cancelled while it waits (the client cancelled it, its deadline
// passed, its connection closed), it leaves the entry (IndexCache::Leave):
// the call is finished at once with CANCELLED or DEADLINE_EXCEEDED, and a
// compilation no one else waits for is cancelled.
//
// gRPC calls OnCancel only after the handler has returned the reactor, so
// the handler calls WaitOn before returning and OnCancel reads it unlocked.
// Deletes itself in OnDone.
#ifndef MASKD_SERVICE_INDEX_WAIT_REACTOR_H_
#define MASKD_SERVICE_INDEX_WAIT_REACTOR_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "service/index_cache.h"

namespace maskd {

class IndexWaitReactor final : public grpc::ServerUnaryReactor {
 public:
  IndexWaitReactor(IndexCache* cache, const grpc::CallbackServerContext* ctx)
      : cache_(cache), deadline_(absl::FromChrono(ctx->deadline())) {}

  // The call waits on the entry of `snapshot` (its waiter ticket set, i.e.
  // Compile or Get took its callback); a snapshot without one: it does not.
  void WaitOn(const IndexInfo& snapshot) {
    id_ = snapshot.id;
    waiter_ = snapshot.waiter;
  }

  void OnCancel() override {
    if (waiter_ == 0) return;
    cache_->Leave(id_, waiter_,
                  absl::Now() >= deadline_
                      ? absl::DeadlineExceededError("the call's deadline passed while compiling")
                      : absl::CancelledError("the call was cancelled while compiling"));
  }
  void OnDone() override { delete this; }

 private:
  IndexCache* const cache_;
  const absl::Time deadline_;  // the call's
  std::string id_;
  uint64_t waiter_ = 0;  // 0: not waiting
};

}  // namespace maskd

#endif  // MASKD_SERVICE_INDEX_WAIT_REACTOR_H_
