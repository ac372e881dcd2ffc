#include "service/maskd_service.h"

#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/message_allocator.h"
#include "index/guide.h"
#include "service/log.h"
#include "service/pooled_allocator.h"

namespace maskd {

static_assert(std::endian::native == std::endian::little,
              "mask rows are written as native uint32 words: little-endian hosts only");

namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

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
}

void FillTokenizer(const TokenizerEntry& e, v1::Tokenizer* t) {
  t->set_name(e.name);
  t->set_content_hash(e.vocab->content_hash());
  t->set_vocab_size(e.vocab->size());
  t->set_num_tokens(e.vocab->num_tokens());
  for (uint32_t id : e.vocab->eos_ids()) t->add_eos_ids(id);
  t->set_kind(std::string(TokenizerKindName(e.vocab->kind())));
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

absl::Status RunStepEntry(Session* s, const v1::StepEntry& e, const absl::Status& refusal,
                          absl::Span<uint32_t> row, v1::StepResult* out, Metrics* metrics) {
  absl::Status status;
  if (s == nullptr) {
    status = SessionTable::NotFound(e.session_id());
  } else if (!refusal.ok()) {
    status = refusal;
  } else {
    StepOutcome o = s->Step(e.rollback(), absl::MakeConstSpan(e.tokens().data(), e.tokens_size()),
                            row, out->mutable_forced(), e.max_tokens_left());
    status = std::move(o.status);
    out->set_min_bytes_to_finish(o.min_bytes_to_finish);
    out->set_accepting(o.accepting);
    out->set_finished(o.finished);
    out->set_num_tokens(o.num_tokens);
  }
  if (status.ok()) {
    if (out->has_status()) out->clear_status();
    return status;
  }
  if (s == nullptr || !refusal.ok()) {
    std::fill(row.begin(), row.end(), 0u);  // Session::Step zeroes its own failures
    out->clear_forced();
  }
  v1::Status* st = out->mutable_status();
  st->set_code(static_cast<int32_t>(status.code()));
  st->set_message(std::string(status.message()));
  if (metrics != nullptr) metrics->StepEntryError(static_cast<int>(status.code()));
  return status;
}

MaskdService::MaskdService(TokenizerRegistry* tokenizers, IndexCache* cache, SessionTable* sessions,
                           Metrics* metrics, const ServiceLimits& limits, std::string version)
    : tokenizers_(tokenizers),
      cache_(cache),
      sessions_(sessions),
      metrics_(metrics),
      limits_(limits),
      version_(std::move(version)),
      started_(absl::Now()),
      step_allocator_(std::make_unique<PooledAllocator<v1::StepRequest, v1::StepResponse>>(
          &StepReplyBytes)) {
  SetMessageAllocatorFor_Step(step_allocator_.get());
}

MaskdService::~MaskdService() = default;

void MaskdService::FinishReactor(Reactor* r, const char* method, const absl::Status& s) {
  if (!s.ok() && metrics_) metrics_->RpcError(method, static_cast<int>(s.code()));
  if (s.code() == absl::StatusCode::kInternal || s.code() == absl::StatusCode::kUnknown ||
      s.code() == absl::StatusCode::kDataLoss) {
    LogError(absl::StrCat(method, ": ", StatusCodeName(static_cast<int>(s.code()))));
  }
  r->Finish(ToGrpc(s));
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
                                 options);
  if (!e.ok()) return Done(ctx, "RegisterTokenizer", e.status());
  FillTokenizer(*e, resp->mutable_tokenizer());
  return Done(ctx, "RegisterTokenizer", absl::OkStatus());
}

MaskdService::Reactor* MaskdService::Detokenize(Ctx* ctx, const v1::DetokenizeRequest* req,
                                                v1::DetokenizeResponse* resp) {
  if (static_cast<uint64_t>(req->tokens_size()) > limits_.max_tokens_per_request) {
    return Done(ctx, "Detokenize",
                absl::ResourceExhaustedError("too many tokens (--max-request-tokens)"));
  }
  auto tok = tokenizers_->Get(req->tokenizer());
  if (!tok.ok()) return Done(ctx, "Detokenize", tok.status());
  const Vocabulary& v = *tok->vocab;
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

absl::StatusOr<CompileSpec> MaskdService::MakeSpec(const v1::CompileRequest& req) {
  CompileSpec spec;
  switch (req.constraint_case()) {
    case v1::CompileRequest::kRegex:
      spec.kind = ConstraintKind::kRegex;
      spec.constraint = req.regex();
      break;
    case v1::CompileRequest::kJsonSchema:
      spec.kind = ConstraintKind::kJsonSchema;
      spec.constraint = req.json_schema();
      break;
    default:
      return absl::InvalidArgumentError("no constraint: set regex or json_schema");
  }
  if (spec.constraint.size() > limits_.max_constraint_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "constraint of ", spec.constraint.size(), " bytes exceeds ", limits_.max_constraint_bytes,
        " (--max-regex-bytes)"));
  }
  auto tok = tokenizers_->Get(req.tokenizer());
  if (!tok.ok()) return tok.status();
  spec.tokenizer = tok->name;
  spec.vocab = tok->vocab;
  spec.eager = req.options().eager();
  spec.timeout = absl::Milliseconds(req.options().timeout_ms());
  return spec;
}

MaskdService::Reactor* MaskdService::Compile(Ctx* ctx, const v1::CompileRequest* req,
                                             v1::CompileResponse* resp) {
  auto spec = MakeSpec(*req);
  if (!spec.ok()) return Done(ctx, "Compile", spec.status());
  Reactor* r = ctx->DefaultReactor();
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
  }  // else: `finish` runs when the compilation ends
  return r;
}

MaskdService::Reactor* MaskdService::GetIndex(Ctx* ctx, const v1::GetIndexRequest* req,
                                              v1::CompileResponse* resp) {
  Reactor* r = ctx->DefaultReactor();
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
  Reactor* r = ctx->DefaultReactor();
  auto finish = [this, r, resp](const IndexInfo& info) {
    if (info.state == IndexState::kFailed) return FinishReactor(r, "CreateSession", info.status);
    auto lease = cache_->Lease(info.id);
    if (!lease.ok()) return FinishReactor(r, "CreateSession", lease.status());
    auto s = sessions_->Create(*std::move(lease));
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
    auto spec = MakeSpec(req->compile());
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
  }
  return r;
}

MaskdService::Reactor* MaskdService::CloseSession(Ctx* ctx, const v1::CloseSessionRequest* req,
                                                  v1::CloseSessionResponse*) {
  return Done(ctx, "CloseSession", sessions_->Close(req->session_id()));
}

MaskdService::Reactor* MaskdService::ForkSession(Ctx* ctx, const v1::ForkSessionRequest* req,
                                                 v1::ForkSessionResponse* resp) {
  auto s = sessions_->Fork(req->session_id());
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

absl::Status MaskdService::DoStep(const v1::StepRequest& req, v1::StepResponse* resp) {
  const int64_t t0 = absl::GetCurrentTimeNanos();
  const int n = req.entries_size();
  if (static_cast<uint64_t>(n) > limits_.max_batch) {
    return absl::ResourceExhaustedError(
        absl::StrCat("batch of ", n, " entries exceeds ", limits_.max_batch, " (--max-batch)"));
  }
  // Pass 1: find every session (kept in a per-thread scratch vector, reused).
  thread_local std::vector<std::shared_ptr<Session>> refs;
  refs.resize(static_cast<size_t>(n));
  uint64_t widest = 0, total_tokens = 0;
  for (int i = 0; i < n; ++i) {
    const v1::StepEntry& e = req.entries(i);
    refs[i] = sessions_->Find(e.session_id());
    if (refs[i]) widest = std::max<uint64_t>(widest, refs[i]->num_words());
    total_tokens += static_cast<uint64_t>(e.tokens_size());
  }
  if (total_tokens > limits_.max_tokens_per_request) {
    refs.clear();
    return absl::ResourceExhaustedError(absl::StrCat("request carries ", total_tokens,
                                                     " tokens, more than ",
                                                     limits_.max_tokens_per_request,
                                                     " (--max-request-tokens)"));
  }
  const uint64_t words = req.words_per_row() != 0 ? req.words_per_row() : widest;
  const uint64_t bytes = words * 4 * static_cast<uint64_t>(n);
  if (bytes + static_cast<uint64_t>(n) * 64 > limits_.max_message_bytes) {
    refs.clear();
    return absl::ResourceExhaustedError(absl::StrCat(
        "reply of ", bytes, " mask bytes exceeds --max-message-bytes=", limits_.max_message_bytes));
  }
  // Pass 2: step each session, writing its row straight into the reply.
  std::string* masks = resp->mutable_masks();
  masks->resize(bytes);
  uint32_t* base = reinterpret_cast<uint32_t*>(masks->data());
  auto* results = resp->mutable_results();
  results->Clear();
  resp->set_words_per_row(static_cast<uint32_t>(words));
  uint64_t advanced = 0;
  for (int i = 0; i < n; ++i) {
    const v1::StepEntry& e = req.entries(i);
    v1::StepResult* out = results->Add();
    absl::Span<uint32_t> row(base + static_cast<size_t>(i) * words, words);
    Session* s = refs[i].get();
    const absl::Status status = RunStepEntry(
        s, e,
        s != nullptr && s->num_words() > words
            ? absl::InvalidArgumentError(absl::StrCat("words_per_row ", words,
                                                      " is less than the session's ", s->num_words()))
            : absl::OkStatus(),
        row, out, metrics_);
    if (status.ok()) advanced += static_cast<uint64_t>(e.tokens_size());
  }
  refs.clear();  // keeps capacity; drops the session references
  if (metrics_) {
    if (advanced) metrics_->TokensAdvanced(advanced);
    metrics_->ObserveStep(static_cast<double>(absl::GetCurrentTimeNanos() - t0) * 1e-9,
                          static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

MaskdService::Reactor* MaskdService::Step(Ctx* ctx, const v1::StepRequest* req,
                                          v1::StepResponse* resp) {
  return Done(ctx, "Step", DoStep(*req, resp));
}

// One reactor per stream: reads a StepRequest, answers it, reads the next.
// The request and reply objects live as long as the stream, so their buffers
// (the mask bytes above all) are reused from one message to the next.
class MaskdService::StepStreamReactor final
    : public grpc::ServerBidiReactor<v1::StepRequest, v1::StepResponse> {
 public:
  explicit StepStreamReactor(MaskdService* service) : service_(service) { StartRead(&req_); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed (or the call is gone)
      Finish(grpc::Status::OK);
      return;
    }
    absl::Status s = service_->DoStep(req_, &resp_);
    if (!s.ok()) {
      if (service_->metrics_) service_->metrics_->RpcError("StepStream", static_cast<int>(s.code()));
      Finish(ToGrpc(s));
      return;
    }
    StartWrite(&resp_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream write failed"));
      return;
    }
    StartRead(&req_);
  }
  void OnDone() override { delete this; }

 private:
  MaskdService* const service_;
  v1::StepRequest req_;
  v1::StepResponse resp_;
};

grpc::ServerBidiReactor<v1::StepRequest, v1::StepResponse>* MaskdService::StepStream(Ctx* ctx) {
  return new StepStreamReactor(this);
}

MaskdService::Reactor* MaskdService::Mask(Ctx* ctx, const v1::MaskRequest* req,
                                          v1::MaskResponse* resp) {
  if (static_cast<uint64_t>(req->tokens_size()) > limits_.max_tokens_per_request) {
    return Done(ctx, "Mask",
                absl::ResourceExhaustedError(absl::StrCat(
                    "request carries ", req->tokens_size(), " tokens, more than ",
                    limits_.max_tokens_per_request, " (--max-request-tokens)")));
  }
  auto info = cache_->Get(req->index_id());
  if (!info.ok()) return Done(ctx, "Mask", info.status());
  if (info->state == IndexState::kFailed) return Done(ctx, "Mask", info->status);
  if (info->state == IndexState::kCompiling) {
    return Done(ctx, "Mask",
                absl::FailedPreconditionError(
                    absl::StrCat("index '", req->index_id(), "' is still compiling")));
  }
  auto guide = Guide::Replay(info->index,
                             absl::MakeConstSpan(req->tokens().data(), req->tokens_size()));
  if (!guide.ok()) return Done(ctx, "Mask", guide.status());
  uint32_t words = req->words_per_row() != 0 ? req->words_per_row() : info->index->num_words();
  if (words < info->index->num_words()) {
    return Done(ctx, "Mask",
                absl::InvalidArgumentError(absl::StrCat("words_per_row ", words,
                                                        " is less than the index's ",
                                                        info->index->num_words())));
  }
  if (uint64_t{words} * 4 > limits_.max_message_bytes) {
    return Done(ctx, "Mask", absl::ResourceExhaustedError("words_per_row exceeds --max-message-bytes"));
  }
  std::string* mask = resp->mutable_mask();
  mask->resize(uint64_t{words} * 4);
  absl::Status s = guide->WriteMask(absl::Span<uint32_t>(reinterpret_cast<uint32_t*>(mask->data()), words));
  if (!s.ok()) return Done(ctx, "Mask", s);
  if (req->max_tokens_left() > 0) {
    guide->ApplyTokenBudget(req->max_tokens_left(), reinterpret_cast<uint32_t*>(mask->data()));
  }
  resp->set_min_bytes_to_finish(guide->MinBytesToFinish());
  resp->set_words_per_row(words);
  resp->set_accepting(guide->IsAccepting());
  resp->set_finished(guide->IsFinished());
  resp->set_forced(guide->ForcedContinuation());
  return Done(ctx, "Mask", absl::OkStatus());
}

}  // namespace maskd
