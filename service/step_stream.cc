// MaskdService's StepStream (maskd_service.h): one reactor per open stream,
// the refusal of a stream past --max-streams or --max-streams-per-client,
// and the reaper that trims idle streams' buffers and finishes streams idle
// past --stream-idle-timeout.
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service/client_kind_of.h"
#include "service/grpc_status.h"
#include "service/maskd_service.h"

namespace maskd {

// One reactor per stream: reads a StepRequest, answers it, reads the next.
// A message whose batch steps a grammar session is stepped on the step pool
// (StepPoolFor), others in OnReadDone; either way the next read starts only
// after the reply is written, so replies keep the order of the requests.
// The request and reply objects live as long as the stream, so their buffers
// (the mask bytes above all) are reused from one message to the next; a
// reply buffer far larger than the current reply is freed after the write,
// and the reaper frees it on a stream idle for a second (so a stream holds at
// most one reply's bytes while in use, none while idle), or finishes the
// stream past --stream-idle-timeout.
//
// Lifetime: a reference for gRPC (dropped in OnDone) plus one per reaper
// visit and one per queued step, so neither the reaper nor the pool touches
// a deleted reactor. mu_ orders the reactions against the reaper; the step
// runs outside it (reading_ is false then: the reaper leaves req_ and resp_
// alone), and Finish is called outside it (it may run reactions inline on a
// non-gRPC thread).
class MaskdService::StepStreamReactor final : public MaskdService::StreamReactor {
 public:
  StepStreamReactor(MaskdService* service, ClientShares::Charge share, ClientKind kind,
                    const Ctx& ctx)
      : service_(service),
        share_(std::move(share)),
        kind_(kind),
        interrupt_(ctx) {
    Touch();
    {
      absl::MutexLock lock(&service_->streams_mu_);
      service_->streams_.insert(this);
    }
    absl::MutexLock lock(&mu_);
    reading_ = true;
    StartRead(&req_);
  }

  void OnReadDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      reading_ = false;
      if (finished_) return;  // the reaper finished the stream
      if (!ok) finished_ = true;
    }
    if (!ok) {  // the client half-closed (or the call is gone)
      Finish(grpc::Status::OK);
      return;
    }
    Touch();
    if (!req_.ok) {
      Fail(req_.Error());
      return;
    }
    if (service_->metrics_) {
      service_->metrics_->ClientStep(kind_, static_cast<size_t>(req_.msg.entries_size()));
    }
    WorkPool* pool = service_->StepPoolFor(req_.msg);
    if (pool == nullptr) {
      StepAndWrite(interrupt_);
      return;
    }
    Ref();
    absl::Status queued = pool->Submit(share_.client(), [this](const Interrupt& turn) {
      absl::Status s = interrupt_.Check();  // it may have waited in the queue
      if (s.ok()) {
        StepAndWrite(InterruptPair(interrupt_, turn));
      } else {
        Fail(s);
      }
      Unref();
    });
    if (!queued.ok()) {
      Unref();  // the task was not run; gRPC's reference remains
      Fail(queued);
    }
  }
  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      if (ok) {
        // After a large reply, do not keep its buffer for smaller ones.
        std::string* masks = resp_.mutable_masks();
        if (masks->capacity() > kKeepBytes && masks->capacity() > 2 * masks->size()) {
          std::string().swap(*masks);
        }
        Touch();
        reading_ = true;
        StartRead(&req_);
        return;
      }
      finished_ = true;
    }
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream write failed"));
  }
  void OnDone() override {
    {
      absl::MutexLock lock(&service_->streams_mu_);
      service_->streams_.erase(this);
      service_->open_streams_.fetch_sub(1, std::memory_order_relaxed);
    }
    share_ = ClientShares::Charge();  // the client's unit back when the call ends
    Unref();
  }

  int64_t last_ns() const { return last_ns_.load(std::memory_order_relaxed); }
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  // Finishes a stream waiting for its next request (the reaper).
  void Expire(absl::Duration idle) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || !reading_) return;
      finished_ = true;
    }
    if (service_->metrics_) {
      service_->metrics_->RpcError("StepStream",
                                   static_cast<int>(absl::StatusCode::kDeadlineExceeded));
    }
    Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        absl::StrCat("StepStream idle for ", absl::FormatDuration(idle),
                                     " (--stream-idle-timeout); open a new stream")));
  }
  // Frees the reply buffer of a stream waiting for its next request; the
  // bytes freed.
  size_t TrimIdle() {
    absl::MutexLock lock(&mu_);
    if (finished_ || !reading_) return 0;
    const size_t bytes = resp_.masks().capacity();
    if (bytes <= kIdleKeepBytes) return 0;
    std::string().swap(*resp_.mutable_masks());
    return bytes;
  }

 private:
  // Steps req_ into resp_ and writes it, or fails the stream; polls
  // `interrupt` (the stream's, and on the step pool its turn's).
  void StepAndWrite(const Interrupt& interrupt) {
    absl::Status s = service_->DoStep(req_.msg, &resp_, &interrupt);
    if (!s.ok()) {
      Fail(s);
      return;
    }
    // A large request (many tokens) is not kept for the stream's life.
    size_t tokens = 0;
    for (const v1::StepEntry& e : req_.msg.entries()) {
      tokens += static_cast<size_t>(e.tokens_size());
    }
    if (static_cast<size_t>(req_.msg.entries_size()) > kKeepEntries || tokens > kKeepTokens) {
      v1::StepRequest().Swap(&req_.msg);
    }
    StartWrite(&resp_);
  }
  // Finishes the stream with `s` (not OK), counted.
  void Fail(const absl::Status& s) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    if (service_->metrics_) service_->metrics_->RpcError("StepStream", static_cast<int>(s.code()));
    Finish(ToGrpcStatus(s));
  }

  static constexpr size_t kKeepBytes = size_t{1} << 20;
  static constexpr size_t kIdleKeepBytes = size_t{64} << 10;
  static constexpr size_t kKeepEntries = 4096;
  static constexpr size_t kKeepTokens = size_t{1} << 16;
  ~StepStreamReactor() override = default;
  void Touch() { last_ns_.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed); }

  MaskdService* const service_;
  // The caller's unit of --max-streams-per-client; its client() (KeyOf) is
  // the caller's queue in the step pool. Held until OnDone.
  ClientShares::Charge share_;
  const ClientKind kind_;     // for the per-client step counters
  const CallInterrupt interrupt_;  // of the stream's context (lives until OnDone)
  std::atomic<int> refs_{1};
  std::atomic<int64_t> last_ns_{0};
  absl::Mutex mu_;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;   // a read is pending (no Step, no write)
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish called or about to be
  Checked<v1::StepRequest> req_;
  v1::StepResponse resp_;
};

// A stream refused at open (--max-streams).
class MaskdService::RefusedStream final : public MaskdService::StreamReactor {
 public:
  explicit RefusedStream(const grpc::Status& s) { Finish(s); }
  void OnDone() override { delete this; }
};

MaskdService::StreamReactor* MaskdService::OpenStepStream(Ctx* ctx) {
  absl::StatusOr<ClientShares::Charge> share = stream_shares_.Take(KeyOf(*ctx));
  absl::Status refusal = share.status();
  if (refusal.ok()) {
    absl::MutexLock lock(&streams_mu_);
    if (open_streams_.load(std::memory_order_relaxed) >= limits_.max_streams) {
      refusal = absl::ResourceExhaustedError(
          absl::StrCat("at most ", limits_.max_streams, " open StepStreams (--max-streams)"));
    } else {
      open_streams_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (!refusal.ok()) {  // `share`, if taken, is given back here
    if (metrics_) metrics_->RpcError("StepStream", static_cast<int>(refusal.code()));
    return new RefusedStream(ToGrpcStatus(refusal));
  }
  return new StepStreamReactor(this, *std::move(share), ClientKindOf(*ctx), *ctx);
}

void MaskdService::ReapStreams() {
  const absl::Duration idle = limits_.stream_idle_timeout;
  absl::Duration period = absl::Seconds(1);
  if (idle > absl::ZeroDuration()) {
    period = std::clamp(idle / 4, absl::Milliseconds(10), absl::Seconds(1));
  }
  std::vector<StepStreamReactor*> expire, trim;
  while (!stop_reaper_.WaitForNotificationWithTimeout(period)) {
    const int64_t now = absl::GetCurrentTimeNanos();
    {
      absl::MutexLock lock(&streams_mu_);
      for (StepStreamReactor* r : streams_) {
        const int64_t quiet = now - r->last_ns();
        if (idle > absl::ZeroDuration() && quiet >= absl::ToInt64Nanoseconds(idle)) {
          r->Ref();
          expire.push_back(r);
        } else if (quiet >= 1'000'000'000) {
          r->Ref();
          trim.push_back(r);
        }
      }
    }
    for (StepStreamReactor* r : expire) {
      r->Expire(idle);
      r->Unref();
    }
    size_t freed = 0;
    for (StepStreamReactor* r : trim) {
      freed += r->TrimIdle();
      r->Unref();
    }
    // gRPC serialized the large reply in heap chunks under the mmap
    // threshold; once freed they stay resident until the heap is trimmed.
    if (freed >= (size_t{1} << 20)) malloc_trim(0);
    expire.clear();
    trim.clear();
  }
}

}  // namespace maskd
