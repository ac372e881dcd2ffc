#include "service/maskd_service.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/support/message_allocator.h"
#include "constraint/constraint_guide.h"
#include "service/client_kind_of.h"
#include "service/constraint_request.h"
#include "service/grpc_status.h"
#include "service/index_wait_reactor.h"
#include "service/log.h"
#include "service/peer_credentials.h"
#include "service/pooled_allocator.h"
#include "service/quote.h"
#include "service/step_proto.h"
#include "service/this_thread.h"

namespace maskd {

static_assert(std::endian::native == std::endian::little,
              "mask rows are written as native uint32 words: little-endian hosts only");

namespace {

v1::IndexState ToProto(IndexState s) {
  switch (s) {
    case IndexState::kCompiling: return v1::INDEX_STATE_COMPILING;
    case IndexState::kReady: return v1::INDEX_STATE_READY;
    case IndexState::kFailed: return v1::INDEX_STATE_FAILED;
  }
  return v1::INDEX_STATE_UNSPECIFIED;
}

void FillCompile(const IndexInfo& info, v1::CompileResponse* resp) {
  resp->set_index_id(info.id);
  resp->set_state(ToProto(info.state));
  resp->set_tokenizer(info.tokenizer);
  resp->set_dfa_states(info.dfa_states);
  resp->set_memory_bytes(info.memory_bytes);
  resp->set_queue_ms(info.queue_ms);
  resp->set_compile_ms(info.compile_ms);
  resp->set_cache_hit(info.cache_hit);
  resp->set_vocab_size(info.vocab_size);
  resp->set_words_per_row((info.vocab_size + 31) / 32);
  if (info.index != nullptr) resp->set_route(std::string(ConstraintRouteName(info.index->route())));
}

void FillTokenizer(const TokenizerEntry& e, v1::Tokenizer* t) {
  t->set_name(e.name);
  const Vocabulary& v = e.vocab();
  t->set_content_hash(v.content_hash());
  t->set_vocab_size(v.size());
  t->set_num_tokens(v.num_tokens());
  for (uint32_t id : v.eos_ids()) t->add_eos_ids(id);
  t->set_kind(std::string(TokenizerKindName(v.kind())));
  t->set_source(e.source);
}

// The bytes a recycled Step reply keeps allocated: its mask buffer.
size_t StepReplyBytes(const v1::StepResponse& r) { return r.masks().capacity(); }

}  // namespace

uint64_t ProcessRssBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// libprotobuf logs one ERROR line per string field that is not UTF-8 while
// parsing: a client could flood the log with bad requests, which are already
// answered INVALID_ARGUMENT and counted. Those lines are dropped; any other
// libprotobuf message goes to the log.
void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  if (message.find("invalid UTF-8") != std::string::npos) return;
  std::string text = absl::StrCat("libprotobuf ", file, ":", line, ": ", message);
  if (level >= google::protobuf::LOGLEVEL_ERROR) {
    LogError(text);
  } else {
    LogInfo(text);
  }
}

const google::protobuf::ServiceDescriptor* MaskdDescriptor() {
  return v1::StepRequest::descriptor()->file()->FindServiceByName("Maskd");
}

MaskdService::MaskdService(TokenizerRegistry* tokenizers, IndexCache* cache, SessionTable* sessions,
                           StepBatch* step, Metrics* metrics, const ServiceLimits& limits,
                           std::string version, WorkPool* masks, WorkPool* steps)
    : tokenizers_(tokenizers),
      cache_(cache),
      sessions_(sessions),
      step_(step),
      masks_(masks),
      steps_(steps),
      metrics_(metrics),
      limits_(limits),
      version_(std::move(version)),
      started_(absl::Now()),
      step_allocator_(
          std::make_unique<PooledAllocator<Checked<v1::StepRequest>, v1::StepResponse>>(
              &StepReplyBytes)),
      stream_shares_("open StepStreams", "--max-streams-per-client",
                     limits.max_streams_per_client) {
  // Every request through Checked<>: a request that does not parse gets
  // INVALID_ARGUMENT with a message, not gRPC's bare UNIMPLEMENTED.
  static std::once_flag log_once;
  std::call_once(log_once, [] { google::protobuf::SetLogHandler(&ProtobufLog); });
  CheckRequests(0, "Ping", &MaskdService::Ping);
  CheckRequests(1, "Stats", &MaskdService::Stats);
  CheckRequests(2, "ListTokenizers", &MaskdService::ListTokenizers);
  CheckRequests(3, "RegisterTokenizer", &MaskdService::RegisterTokenizer);
  CheckRequests(4, "Detokenize", &MaskdService::Detokenize);
  CheckRequests(5, "Compile", &MaskdService::Compile);
  CheckRequests(6, "GetIndex", &MaskdService::GetIndex);
  CheckRequests(7, "CancelCompile", &MaskdService::CancelCompile);
  CheckRequests(8, "CreateSession", &MaskdService::CreateSession);
  CheckRequests(9, "CloseSession", &MaskdService::CloseSession);
  CheckRequests(10, "ForkSession", &MaskdService::ForkSession);
  CheckRequests(11, "Rollback", &MaskdService::Rollback);
  CheckRequests(12, "Step", &MaskdService::Step, step_allocator_.get());
  CheckRequests(14, "Mask", &MaskdService::Mask);
  CheckMethodShape(MaskdDescriptor(), 13, "StepStream", v1::StepRequest::descriptor());
  MarkMethodCallback(13, new grpc::internal::CallbackBidiHandler<Checked<v1::StepRequest>,
                                                                 v1::StepResponse>(
                             [this](Ctx* ctx) { return OpenStepStream(ctx); }));
  reaper_ = std::thread([this] {
    NameThisThread("maskd-reaper");
    ReapStreams();
  });
}

template <typename Req, typename Resp>
void MaskdService::CheckRequests(int index, const char* name,
                                 Reactor* (MaskdService::*method)(Ctx*, const Req*, Resp*),
                                 grpc::MessageAllocator<Checked<Req>, Resp>* allocator) {
  CheckMethodShape(MaskdDescriptor(), index, name, Req::descriptor());
  auto* handler = NewCheckedUnaryHandler<Req, Resp>(
      [this, method](Ctx* ctx, const Req* req, Resp* resp) { return (this->*method)(ctx, req, resp); },
      [this, name](Ctx* ctx, const absl::Status& s) { return Done(ctx, name, s); });
  if (allocator != nullptr) handler->SetMessageAllocator(allocator);
  MarkMethodCallback(index, handler);
}

MaskdService::~MaskdService() {
  stop_reaper_.Notify();
  reaper_.join();
}

void MaskdService::FinishReactor(Reactor* r, const char* method, const absl::Status& s) {
  if (!s.ok() && metrics_) metrics_->RpcError(method, static_cast<int>(s.code()));
  if (s.code() == absl::StatusCode::kInternal || s.code() == absl::StatusCode::kUnknown ||
      s.code() == absl::StatusCode::kDataLoss) {
    LogError(absl::StrCat(method, ": ", StatusCodeName(static_cast<int>(s.code()))));
  }
  r->Finish(ToGrpcStatus(s));
}

MaskdService::Reactor* MaskdService::Done(Ctx* ctx, const char* method, const absl::Status& s) {
  Reactor* r = ctx->DefaultReactor();
  FinishReactor(r, method, s);
  return r;
}

MaskdService::Reactor* MaskdService::Ping(Ctx* ctx, const v1::PingRequest*, v1::PingResponse*) {
  Reactor* r = ctx->DefaultReactor();
  r->Finish(grpc::Status::OK);
  return r;
}

MaskdService::Reactor* MaskdService::Stats(Ctx* ctx, const v1::StatsRequest*,
                                           v1::StatsResponse* resp) {
  resp->set_pid(static_cast<uint32_t>(getpid()));
  resp->set_rss_bytes(ProcessRssBytes());
  resp->set_sessions_active(sessions_->size());
  resp->set_indexes(cache_->size());
  resp->set_cache_bytes(cache_->bytes());
  resp->set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
  resp->set_version(version_);
  return Done(ctx, "Stats", absl::OkStatus());
}

MaskdService::Reactor* MaskdService::ListTokenizers(Ctx* ctx, const v1::ListTokenizersRequest*,
                                                    v1::ListTokenizersResponse* resp) {
  for (const auto& e : tokenizers_->List()) FillTokenizer(e, resp->add_tokenizers());
  return Done(ctx, "ListTokenizers", absl::OkStatus());
}

MaskdService::Reactor* MaskdService::RegisterTokenizer(Ctx* ctx,
                                                       const v1::RegisterTokenizerRequest* req,
                                                       v1::RegisterTokenizerResponse* resp) {
  VocabularyOptions options;
  if (req->vocab_size() != 0) options.vocab_size = req->vocab_size();
  options.eos_ids.assign(req->eos_ids().begin(), req->eos_ids().end());
  // Parsing a large tokenizer takes a while; it is rare and bounded by
  // --max-message-bytes, so it runs on the callback thread.
  auto e = tokenizers_->Register(req->name(), req->tokenizer_json(), req->tokenizer_config_json(),
                                 options, KeyOf(*ctx));
  if (!e.ok()) return Done(ctx, "RegisterTokenizer", e.status());
  FillTokenizer(*e, resp->mutable_tokenizer());
  return Done(ctx, "RegisterTokenizer", absl::OkStatus());
}

MaskdService::Reactor* MaskdService::Detokenize(Ctx* ctx, const v1::DetokenizeRequest* req,
                                                v1::DetokenizeResponse* resp) {
  if (static_cast<uint64_t>(req->tokens_size()) > step_->limits().max_tokens_per_request) {
    return Done(ctx, "Detokenize",
                absl::ResourceExhaustedError("too many tokens (--max-request-tokens)"));
  }
  auto tok = tokenizers_->Get(req->tokenizer());
  if (!tok.ok()) return Done(ctx, "Detokenize", tok.status());
  const Vocabulary& v = tok->vocab();
  std::string* text = resp->mutable_text();
  for (uint32_t id : req->tokens()) {
    if (id >= v.size()) {
      return Done(ctx, "Detokenize",
                  absl::InvalidArgumentError(absl::StrCat("token id ", id, " outside the vocabulary (",
                                                          v.size(), ")")));
    }
    if (v.is_special(id) && !req->include_special()) continue;
    std::string_view b = v.bytes(id);
    text->append(b.data(), b.size());
  }
  return Done(ctx, "Detokenize", absl::OkStatus());
}

absl::StatusOr<CompileSpec> MaskdService::MakeSpec(const v1::CompileRequest& req,
                                                   const grpc::CallbackServerContext& ctx) {
  auto constraint = ConstraintFromRequest(
      req, *tokenizers_,
      {limits_.max_constraint_bytes, limits_.max_grammar_bytes, limits_.max_structural_tag_bytes});
  if (!constraint.ok()) return constraint.status();
  CompileSpec spec;
  spec.constraint = *std::move(constraint);
  spec.tokenizer = req.tokenizer();
  spec.timeout = absl::Milliseconds(req.options().timeout_ms());
  spec.client = KeyOf(ctx);
  return spec;
}

MaskdService::Reactor* MaskdService::Compile(Ctx* ctx, const v1::CompileRequest* req,
                                             v1::CompileResponse* resp) {
  auto spec = MakeSpec(*req, *ctx);
  if (!spec.ok()) return Done(ctx, "Compile", spec.status());
  auto* r = new IndexWaitReactor(cache_, ctx);
  auto finish = [this, r, resp](const IndexInfo& info) {
    FillCompile(info, resp);
    FinishReactor(r, "Compile", info.state == IndexState::kFailed ? info.status : absl::OkStatus());
  };
  auto snap = cache_->Compile(*spec, req->wait() ? IndexCache::Callback(finish) : nullptr);
  if (!snap.ok()) {
    FinishReactor(r, "Compile", snap.status());
  } else if (!req->wait() || snap->state != IndexState::kCompiling) {
    FillCompile(*snap, resp);
    FinishReactor(r, "Compile",
                  snap->state == IndexState::kFailed ? snap->status : absl::OkStatus());
  } else {
    r->WaitOn(*snap);  // `finish` runs when the compilation ends or the call leaves it
  }
  return r;
}

MaskdService::Reactor* MaskdService::GetIndex(Ctx* ctx, const v1::GetIndexRequest* req,
                                              v1::CompileResponse* resp) {
  auto* r = new IndexWaitReactor(cache_, ctx);
  auto finish = [this, r, resp](const IndexInfo& info) {
    FillCompile(info, resp);
    resp->set_cache_hit(true);
    FinishReactor(r, "GetIndex", info.state == IndexState::kFailed ? info.status : absl::OkStatus());
  };
  auto snap = cache_->Get(req->index_id(), req->wait() ? IndexCache::Callback(finish) : nullptr);
  if (!snap.ok()) {
    FinishReactor(r, "GetIndex", snap.status());
  } else if (!req->wait() || snap->state != IndexState::kCompiling) {
    finish(*snap);
  } else {
    r->WaitOn(*snap);
  }
  return r;
}

MaskdService::Reactor* MaskdService::CancelCompile(Ctx* ctx, const v1::CancelCompileRequest* req,
                                                   v1::CancelCompileResponse* resp) {
  auto snap = cache_->Get(req->index_id());
  if (!snap.ok()) return Done(ctx, "CancelCompile", snap.status());
  resp->set_cancelled(cache_->Cancel(req->index_id()));
  return Done(ctx, "CancelCompile", absl::OkStatus());
}

MaskdService::Reactor* MaskdService::CreateSession(Ctx* ctx, const v1::CreateSessionRequest* req,
                                                   v1::CreateSessionResponse* resp) {
  auto* r = new IndexWaitReactor(cache_, ctx);
  // Runs here or on a compile thread (after the call's context may be gone):
  // it keeps the client's key, not the context.
  auto finish = [this, r, resp, client = KeyOf(*ctx)](const IndexInfo& info) {
    if (info.state == IndexState::kFailed) return FinishReactor(r, "CreateSession", info.status);
    auto lease = cache_->Lease(info.id);
    if (!lease.ok()) return FinishReactor(r, "CreateSession", lease.status());
    auto s = sessions_->Create(*std::move(lease), client);
    if (!s.ok()) return FinishReactor(r, "CreateSession", s.status());
    resp->set_session_id((*s)->id());
    resp->set_index_id(info.id);
    resp->set_vocab_size((*s)->vocab_size());
    resp->set_words_per_row((*s)->num_words());
    FinishReactor(r, "CreateSession", absl::OkStatus());
  };
  absl::StatusOr<IndexInfo> snap;
  if (req->source_case() == v1::CreateSessionRequest::kIndexId) {
    snap = cache_->Get(req->index_id(), finish);
  } else if (req->source_case() == v1::CreateSessionRequest::kCompile) {
    auto spec = MakeSpec(req->compile(), *ctx);
    if (!spec.ok()) {
      FinishReactor(r, "CreateSession", spec.status());
      return r;
    }
    snap = cache_->Compile(*spec, finish);
  } else {
    FinishReactor(r, "CreateSession",
                  absl::InvalidArgumentError("no source: set index_id or compile"));
    return r;
  }
  if (!snap.ok()) {
    FinishReactor(r, "CreateSession", snap.status());
  } else if (snap->state != IndexState::kCompiling) {
    finish(*snap);
  } else {
    r->WaitOn(*snap);  // `finish` runs when the compilation ends or the call leaves it
  }
  return r;
}

MaskdService::Reactor* MaskdService::CloseSession(Ctx* ctx, const v1::CloseSessionRequest* req,
                                                  v1::CloseSessionResponse*) {
  return Done(ctx, "CloseSession", sessions_->Close(req->session_id()));
}

MaskdService::Reactor* MaskdService::ForkSession(Ctx* ctx, const v1::ForkSessionRequest* req,
                                                 v1::ForkSessionResponse* resp) {
  auto s = sessions_->Fork(req->session_id(), KeyOf(*ctx));
  if (s.ok()) resp->set_session_id((*s)->id());
  return Done(ctx, "ForkSession", s.status());
}

MaskdService::Reactor* MaskdService::Rollback(Ctx* ctx, const v1::RollbackRequest* req,
                                              v1::RollbackResponse* resp) {
  std::shared_ptr<Session> s = sessions_->Find(req->session_id());
  if (!s) return Done(ctx, "Rollback", SessionTable::NotFound(req->session_id()));
  auto n = s->Rollback(req->num_tokens());
  if (n.ok()) resp->set_num_tokens(*n);
  return Done(ctx, "Rollback", n.status());
}

absl::Status MaskdService::DoStep(const v1::StepRequest& req, v1::StepResponse* resp,
                                  const Interrupt* interrupt) {
  const int64_t t0 = absl::GetCurrentTimeNanos();
  const int n = req.entries_size();
  absl::StatusOr<StepBatch::Buffers> io = step_->ThreadBuffers(static_cast<size_t>(n));
  if (!io.ok()) return io.status();
  for (int i = 0; i < n; ++i) io->entries[i] = StepEntryFromProto(req.entries(i));
  // The rows go straight into the reply's mask bytes.
  uint32_t words = 0;
  auto place = [&](const StepBatchShape& shape) -> absl::StatusOr<StepRows> {
    words = req.words_per_row() != 0 ? req.words_per_row() : shape.widest;
    if (absl::Status s = step_->CheckReplySize(static_cast<uint64_t>(n), words); !s.ok()) return s;
    std::string* masks = resp->mutable_masks();
    masks->resize(uint64_t{words} * 4 * static_cast<uint64_t>(n));
    return StepRows{reinterpret_cast<uint32_t*>(masks->data()), words, 0};
  };
  if (absl::Status s = step_->Run(io->entries, place, io->results, interrupt); !s.ok()) return s;
  resp->set_words_per_row(words);
  auto* results = resp->mutable_results();
  results->Clear();
  for (int i = 0; i < n; ++i) StepResultToProto(io->results[i], results->Add());
  if (metrics_) {
    metrics_->ObserveStep(static_cast<double>(absl::GetCurrentTimeNanos() - t0) * 1e-9,
                          static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

WorkPool* MaskdService::StepPoolFor(const v1::StepRequest& req) const {
  if (steps_ == nullptr || !StepsGrammar(req.entries())) return nullptr;
  return steps_;
}

MaskdService::Reactor* MaskdService::Step(Ctx* ctx, const v1::StepRequest* req,
                                          v1::StepResponse* resp) {
  if (metrics_) metrics_->ClientStep(ClientKindOf(*ctx), static_cast<size_t>(req->entries_size()));
  WorkPool* pool = StepPoolFor(*req);
  if (pool == nullptr) {
    const CallInterrupt interrupt(*ctx);
    return Done(ctx, "Step", DoStep(*req, resp, &interrupt));
  }
  Reactor* r = ctx->DefaultReactor();
  auto run = [this, ctx, req, resp, r](const Interrupt& turn) {
    const CallInterrupt call(*ctx);
    const InterruptPair interrupt(call, turn);  // the caller gone, or the turn refused
    absl::Status s = call.Check();              // it may have waited in the queue
    if (s.ok()) s = DoStep(*req, resp, &interrupt);
    FinishReactor(r, "Step", s);
  };
  if (absl::Status queued = pool->Submit(KeyOf(*ctx), std::move(run)); !queued.ok()) {
    FinishReactor(r, "Step", queued);
  }
  return r;
}

MaskdService::Reactor* MaskdService::Mask(Ctx* ctx, const v1::MaskRequest* req,
                                          v1::MaskResponse* resp) {
  Reactor* r = ctx->DefaultReactor();
  auto run = [this, ctx, req, resp, r](const Interrupt& turn) {
    const int64_t t0 = absl::GetCurrentTimeNanos();
    const CallInterrupt call(*ctx);
    const InterruptPair interrupt(call, turn);  // the caller gone, or the turn refused
    absl::Status s = call.Check();              // it may have waited in the queue
    if (s.ok()) s = DoMask(*req, resp, &interrupt);
    if (metrics_ && s.ok()) {
      metrics_->ObserveMask(static_cast<double>(absl::GetCurrentTimeNanos() - t0) * 1e-9,
                            ClientKindOf(*ctx));
    }
    FinishReactor(r, "Mask", s);
  };
  if (masks_ == nullptr) {
    const FlagInterrupt no_pool;  // never fires
    run(no_pool);
  } else if (absl::Status queued = masks_->Submit(KeyOf(*ctx), run); !queued.ok()) {
    FinishReactor(r, "Mask", queued);
  }
  return r;
}

absl::Status MaskdService::DoMask(const v1::MaskRequest& req, v1::MaskResponse* resp,
                                  const Interrupt* interrupt) {
  if (static_cast<uint64_t>(req.tokens_size()) > step_->limits().max_tokens_per_request) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request carries ", req.tokens_size(), " tokens, more than ",
        step_->limits().max_tokens_per_request, " (--max-request-tokens)"));
  }
  auto info = cache_->Get(req.index_id());
  if (!info.ok()) return info.status();
  if (info->state == IndexState::kFailed) return info->status;
  if (info->state == IndexState::kCompiling) {
    return absl::FailedPreconditionError(
        absl::StrCat("index ", QuoteInput(req.index_id()), " is still compiling"));
  }
  // Polled while the grammar is parsed: a client that gives up stops the work.
  auto guide = ConstraintGuide::Replay(
      info->index, absl::MakeConstSpan(req.tokens().data(), req.tokens_size()), interrupt);
  if (!guide.ok()) return guide.status();
  uint32_t words = req.words_per_row() != 0 ? req.words_per_row() : info->index->num_words();
  if (words < info->index->num_words()) {
    return absl::InvalidArgumentError(absl::StrCat("words_per_row ", words,
                                                   " is less than the index's ",
                                                   info->index->num_words()));
  }
  if (uint64_t{words} * 4 > step_->limits().max_message_bytes) {
    return absl::ResourceExhaustedError("words_per_row exceeds --max-message-bytes");
  }
  std::string* mask = resp->mutable_mask();
  mask->resize(uint64_t{words} * 4);
  absl::Status s = guide->WriteMask(absl::Span<uint32_t>(reinterpret_cast<uint32_t*>(mask->data()), words));
  if (!s.ok()) return s;
  if (req.max_tokens_left() > 0) {
    s = guide->ApplyTokenBudget(req.max_tokens_left(),
                                absl::Span<uint32_t>(reinterpret_cast<uint32_t*>(mask->data()), words));
    if (!s.ok()) return s;
  }
  resp->set_min_bytes_to_finish(guide->MinBytesToFinish());
  resp->set_words_per_row(words);
  resp->set_accepting(guide->IsAccepting());
  resp->set_finished(guide->IsFinished());
  resp->set_forced(guide->ForcedContinuation());
  return absl::OkStatus();
}

}  // namespace maskd
