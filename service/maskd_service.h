// MaskdService: the gRPC face of maskd (callback API). A thin shell: it
// validates requests, translates protos to the gRPC-free classes
// (TokenizerRegistry, IndexCache, SessionTable, StepBatch) and absl::Status
// to grpc::Status, and counts errors. Nothing here blocks a callback thread:
// requests that wait for a compilation finish from the compile thread.
#ifndef MASKD_SERVICE_MASKD_SERVICE_H_
#define MASKD_SERVICE_MASKD_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "maskd/v1/maskd.grpc.pb.h"
#include "service/call_interrupt.h"
#include "service/checked_request.h"
#include "service/client_identity.h"
#include "service/client_shares.h"
#include "service/index_cache.h"
#include "service/metrics.h"
#include "service/session_table.h"
#include "service/step_batch.h"
#include "service/tokenizer_registry.h"
#include "service/work_pool.h"

namespace maskd {

// The limits of MaskdService besides the step limits (StepBatch::limits(),
// which Step, StepStream, Mask and Detokenize follow).
struct ServiceLimits {
  uint64_t max_constraint_bytes = 1 << 20;   // --max-regex-bytes: regex / schema text
  uint64_t max_grammar_bytes = 1 << 20;      // --max-grammar-bytes: grammar text
  // --max-structural-tag-bytes: structural tag document
  uint64_t max_structural_tag_bytes = uint64_t{16} << 20;
  uint32_t max_streams = 256;                // --max-streams: open StepStreams, all clients
  uint32_t max_streams_per_client = 64;      // --max-streams-per-client (ClientKey); 0: no cap
  // --client-identity: what a client is, for every per-client share
  // (client_identity.h).
  ClientIdentity client_identity = ClientIdentity::kConnection;
  // --stream-idle-timeout: a StepStream with no request for this long is
  // finished (DEADLINE_EXCEEDED); zero: never.
  absl::Duration stream_idle_timeout = absl::Minutes(5);
};

class MaskdService final : public maskd::v1::Maskd::CallbackService {
 public:
  // Every pointer outlives the service; `metrics` may be null. `step` runs
  // the Step batches (over `sessions`). `masks` (may be null: on the
  // callback thread) runs the Mask calls, off gRPC's callback threads and
  // round-robin across clients (KeyOf), so that a client's slow grammar
  // masks keep neither gRPC's threads nor another client's masks waiting;
  // it must outlive the server's Shutdown (queued calls still finish).
  // `steps` (may be null: on the callback thread) likewise runs the Step
  // calls and StepStream messages whose batch steps a grammar session
  // (SessionTable::IsGrammarId); a batch of regex sessions only is stepped
  // on the callback thread (a table walk per token: no pool hop on the hot
  // path). A stream has one message in flight, so its replies keep order.
  MaskdService(TokenizerRegistry* tokenizers, IndexCache* cache, SessionTable* sessions,
               StepBatch* step, Metrics* metrics, const ServiceLimits& limits,
               std::string version, WorkPool* masks = nullptr, WorkPool* steps = nullptr);
  ~MaskdService() override;

  using Ctx = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;
  Reactor* Ping(Ctx* ctx, const v1::PingRequest*, v1::PingResponse*) override;
  Reactor* Stats(Ctx* ctx, const v1::StatsRequest*, v1::StatsResponse*) override;
  Reactor* ListTokenizers(Ctx* ctx, const v1::ListTokenizersRequest*,
                          v1::ListTokenizersResponse*) override;
  Reactor* RegisterTokenizer(Ctx* ctx, const v1::RegisterTokenizerRequest*,
                             v1::RegisterTokenizerResponse*) override;
  Reactor* Detokenize(Ctx* ctx, const v1::DetokenizeRequest*, v1::DetokenizeResponse*) override;
  Reactor* Compile(Ctx* ctx, const v1::CompileRequest*, v1::CompileResponse*) override;
  Reactor* GetIndex(Ctx* ctx, const v1::GetIndexRequest*, v1::CompileResponse*) override;
  Reactor* CancelCompile(Ctx* ctx, const v1::CancelCompileRequest*,
                         v1::CancelCompileResponse*) override;
  Reactor* CreateSession(Ctx* ctx, const v1::CreateSessionRequest*,
                         v1::CreateSessionResponse*) override;
  Reactor* CloseSession(Ctx* ctx, const v1::CloseSessionRequest*,
                        v1::CloseSessionResponse*) override;
  Reactor* ForkSession(Ctx* ctx, const v1::ForkSessionRequest*,
                       v1::ForkSessionResponse*) override;
  Reactor* Rollback(Ctx* ctx, const v1::RollbackRequest*, v1::RollbackResponse*) override;
  Reactor* Step(Ctx* ctx, const v1::StepRequest*, v1::StepResponse*) override;
  // StepStream: registered over Checked<StepRequest> (see OpenStepStream);
  // the generated StepStream(Ctx*) is not used.
  Reactor* Mask(Ctx* ctx, const v1::MaskRequest*, v1::MaskResponse*) override;
  // The stateless mask of `req`: its tokens replayed on a fresh guide.
  // `interrupt` (the call's; may be null) stops a grammar's parsing once the
  // client is gone.
  absl::Status DoMask(const v1::MaskRequest& req, v1::MaskResponse* resp,
                      const Interrupt* interrupt = nullptr);

  // One Step batch (unary or streamed): `req` translated for StepBatch::Run,
  // its results and rows into `resp`. A non-OK status fails the whole call;
  // entry errors are in the reply. Reuses `resp`'s buffers. `interrupt`
  // (the call's; may be null) stops the grammar parsing of a call whose
  // client is gone (StepBatch::Run).
  absl::Status DoStep(const v1::StepRequest& req, v1::StepResponse* resp,
                      const Interrupt* interrupt = nullptr);

  // Open StepStreams.
  size_t open_streams() const { return open_streams_.load(std::memory_order_relaxed); }

 private:
  // StepStream (step_stream.cc): a reactor per open stream, the refusal of
  // one past its caps, the reaper of idle ones.
  class StepStreamReactor;
  class RefusedStream;
  using StreamReactor = grpc::ServerBidiReactor<Checked<v1::StepRequest>, v1::StepResponse>;
  StreamReactor* OpenStepStream(Ctx* ctx);
  // Replaces the generated handler of unary method `index` (proto order;
  // checked against the service descriptor) by one over Checked<Req>. The
  // generated SetMessageAllocatorFor_Step must not be called afterwards (it
  // casts the handler to the generated type); pass `allocator` instead.
  template <typename Req, typename Resp>
  void CheckRequests(int index, const char* name,
                     Reactor* (MaskdService::*method)(Ctx*, const Req*, Resp*),
                     grpc::MessageAllocator<Checked<Req>, Resp>* allocator = nullptr);
  // The stream reaper: every period, finishes streams idle past
  // stream_idle_timeout and frees the reply buffer of streams idle for a
  // second or more (so an idle stream holds no mask bytes).
  void ReapStreams();
  Reactor* Done(Ctx* ctx, const char* method, const absl::Status& s);
  void FinishReactor(Reactor* r, const char* method, const absl::Status& s);
  // The pool that runs `req`'s batch: steps_ when it steps a grammar
  // session, else null (the callback thread).
  WorkPool* StepPoolFor(const v1::StepRequest& req) const;
  absl::StatusOr<CompileSpec> MakeSpec(const v1::CompileRequest& req,
                                       const grpc::CallbackServerContext& ctx);
  // The client `ctx`'s call counts against (ClientKey, limits_.client_identity).
  std::string KeyOf(const grpc::CallbackServerContext& ctx) const {
    return ClientKey(ctx, limits_.client_identity);
  }

  TokenizerRegistry* const tokenizers_;
  IndexCache* const cache_;
  SessionTable* const sessions_;
  StepBatch* const step_;
  WorkPool* const masks_;
  WorkPool* const steps_;
  Metrics* const metrics_;
  const ServiceLimits limits_;
  const std::string version_;
  const absl::Time started_;
  std::unique_ptr<grpc::MessageAllocator<Checked<v1::StepRequest>, v1::StepResponse>>
      step_allocator_;
  std::atomic<size_t> open_streams_{0};
  absl::Mutex streams_mu_;
  absl::flat_hash_set<StepStreamReactor*> streams_ ABSL_GUARDED_BY(streams_mu_);
  // Open StepStreams per client (--max-streams-per-client); each stream's
  // reactor holds its unit.
  ClientShares stream_shares_;
  absl::Notification stop_reaper_;
  std::thread reaper_;
};

// Resident set size of this process in bytes (0 when unknown).
uint64_t ProcessRssBytes();

}  // namespace maskd

#endif  // MASKD_SERVICE_MASKD_SERVICE_H_
