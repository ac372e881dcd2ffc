#include "client/resumable_session.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace maskd {

namespace {

// A Step entry whose session the server does not know: lost with a restart
// (or expired); resumable.
constexpr int kNotFound = static_cast<int>(grpc::StatusCode::NOT_FOUND);

// A call that failed because the server could not be reached, or (while
// recovering, with wait_for_ready) did not come back before the deadline.
bool IsTransportLoss(const grpc::Status& s, bool recovering) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         (recovering && s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
}

// A call that ended so (the client's deadline, a cancel) may or may not have
// been applied by the server.
bool OutcomeUnknown(absl::StatusCode code) {
  return code == absl::StatusCode::kDeadlineExceeded || code == absl::StatusCode::kCancelled;
}

void ZeroRows(v1::StepResponse* resp, size_t rows, uint32_t words) {
  resp->set_words_per_row(words);
  resp->mutable_masks()->assign(rows * words * 4, '\0');
}

}  // namespace

void ResumableSession::PrepareContext(grpc::ClientContext* ctx, absl::Time deadline,
                                      bool recovering) const {
  absl::Time d = deadline;
  const absl::Duration timeout = client_->options().timeout;
  if (timeout > absl::ZeroDuration()) d = std::min(d, absl::Now() + timeout);
  if (d != absl::InfiniteFuture()) ctx->set_deadline(absl::ToChronoTime(d));
  // While recovering, wait for the channel to (re)connect instead of failing
  // at once; the deadline bounds the wait.
  if (recovering) ctx->set_wait_for_ready(true);
}

template <typename F>
absl::Status ResumableSession::WithRecovery(const char* what, F attempt) {
  if (closed_) return absl::FailedPreconditionError(absl::StrCat(what, ": session closed"));
  const absl::Time start = absl::Now();
  absl::Time deadline = absl::InfiniteFuture();  // set at the first loss
  absl::Duration backoff = options_.initial_backoff;
  absl::Status last;
  int attempts = 0;
  bool recovering = false;
  while (attempts < options_.max_attempts) {
    ++attempts;
    bool wait = false;  // back off before the next attempt
    if (session_id_ == 0) {
      recovering = true;
      if (deadline == absl::InfiniteFuture()) deadline = start + options_.recovery_timeout;
      last = Recreate(deadline);
      if (!last.ok()) {
        if (last.code() != absl::StatusCode::kUnavailable &&
            last.code() != absl::StatusCode::kDeadlineExceeded) {
          return last;
        }
        wait = true;
      }
    }
    if (session_id_ != 0) {
      bool lost = false;
      last = attempt(deadline, recovering, &lost);
      if (!lost) {
        // Its outcome unknown, the server session is never stepped again: the
        // next call re-creates it from the confirmed tokens. The error is the
        // caller's to see; the call is not retried.
        if (OutcomeUnknown(last.code())) session_id_ = 0;
        return last;
      }
      wait = last.code() != absl::StatusCode::kNotFound;
      session_id_ = 0;  // abandoned: never stepped again
      recovering = true;
      if (deadline == absl::InfiniteFuture()) deadline = absl::Now() + options_.recovery_timeout;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) break;
    if (wait) {
      absl::SleepFor(std::min(backoff, deadline - now));
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
  }
  return absl::UnavailableError(absl::StrCat(
      what, ": maskd did not come back (", attempts, " attempts in ",
      absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1))),
      "): ", last.message()));
}

absl::Status ResumableSession::Recreate(absl::Time deadline) {
  {
    // A restarted maskd accepts connections before its tokenizers are loaded
    // (health NOT_SERVING; CreateSession would say "unknown tokenizer"), and
    // a draining one says NOT_SERVING too: wait for SERVING.
    auto health = grpc::health::v1::Health::NewStub(client_->channel());
    grpc::ClientContext ctx;
    PrepareContext(&ctx, deadline, /*recovering=*/true);
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status s = health->Check(&ctx, req, &resp);
    if (!s.ok()) return FromGrpc(s);
    if (resp.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::UnavailableError(absl::StrCat(
          "maskd is ", grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status())));
    }
  }
  v1::CreateSessionRequest req;
  *req.mutable_compile() = compile_;
  v1::CreateSessionResponse created;
  {
    grpc::ClientContext ctx;
    PrepareContext(&ctx, deadline, /*recovering=*/true);
    grpc::Status s = client_->stub()->CreateSession(&ctx, req, &created);
    if (!s.ok()) return FromGrpc(s);
  }
  const uint64_t id = created.session_id();
  // Replay the accepted tokens, in chunks under --max-request-tokens.
  const size_t chunk = std::max<size_t>(1, options_.replay_chunk_tokens);
  v1::StepRequest step;
  v1::StepResponse reply;
  v1::StepEntry* entry = step.add_entries();
  entry->set_session_id(id);
  for (size_t at = 0; at < tokens_.size(); at += chunk) {
    const size_t n = std::min(chunk, tokens_.size() - at);
    entry->mutable_tokens()->Assign(tokens_.begin() + at, tokens_.begin() + at + n);
    grpc::ClientContext ctx;
    PrepareContext(&ctx, deadline, /*recovering=*/true);
    grpc::Status s = client_->stub()->Step(&ctx, step, &reply);
    if (!s.ok()) return FromGrpc(s);
    const v1::Status& r = reply.results(0).status();
    if (r.code() == kNotFound) return absl::UnavailableError("session lost during replay");
    if (r.code() != 0) {
      // Masks are a function of (constraint, tokenizer, tokens): tokens this
      // constraint accepted before are refused only if the tokenizer changed.
      return absl::FailedPreconditionError(absl::StrCat(
          "resume: the server refused the replayed tokens ", at, "..", at + n,
          " (tokenizer changed?): ", r.message()));
    }
  }
  const bool first = index_id_.empty();
  session_id_ = id;
  index_id_ = created.index_id();
  words_per_row_ = created.words_per_row();
  if (!first) ++resumes_;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ResumableSession>> ResumableSession::Create(
    Client* client, const v1::CompileRequest& compile, const ResumeOptions& options) {
  if (client == nullptr) return absl::InvalidArgumentError("null client");
  std::unique_ptr<ResumableSession> rs(new ResumableSession(client, compile, options));
  // session_id_ == 0: WithRecovery creates it, retrying while unreachable.
  absl::Status s = rs->WithRecovery("CreateSession", [](absl::Time, bool, bool*) {
    return absl::OkStatus();
  });
  if (!s.ok()) {
    rs->closed_ = true;  // nothing to close
    return s;
  }
  return rs;
}

ResumableSession::~ResumableSession() {
  if (!closed_) (void)Close();
}

void ResumableSession::Commit(uint32_t rollback, absl::Span<const uint32_t> tokens) {
  tokens_.resize(tokens_.size() - std::min<size_t>(rollback, tokens_.size()));
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
}

absl::Status ResumableSession::StepOnce(absl::Span<const uint32_t> tokens, uint32_t rollback,
                                        uint32_t max_tokens_left, uint32_t words_per_row, v1::StepResponse* resp,
                                        absl::Time deadline, bool recovering, bool* lost) {
  v1::StepRequest req;
  v1::StepEntry* e = req.add_entries();
  e->set_session_id(session_id_);
  e->set_rollback(rollback);
  e->mutable_tokens()->Add(tokens.begin(), tokens.end());
  e->set_max_tokens_left(max_tokens_left);
  req.set_words_per_row(words_per_row);
  grpc::ClientContext ctx;
  PrepareContext(&ctx, deadline, recovering);
  grpc::Status s = client_->stub()->Step(&ctx, req, resp);
  if (!s.ok()) {
    resp->Clear();
    *lost = IsTransportLoss(s, recovering);
    return FromGrpc(s);
  }
  const v1::Status& r = resp->results(0).status();
  if (r.code() == kNotFound) *lost = true;
  if (r.code() != 0) return absl::Status(static_cast<absl::StatusCode>(r.code()), r.message());
  Commit(rollback, tokens);
  return absl::OkStatus();
}

absl::Status ResumableSession::Step(absl::Span<const uint32_t> tokens, v1::StepResponse* resp,
                                    uint32_t rollback, uint32_t words_per_row,
                                    uint32_t max_tokens_left) {
  absl::Status s = WithRecovery("Step", [&](absl::Time deadline, bool recovering, bool* lost) {
    return StepOnce(tokens, rollback, max_tokens_left, words_per_row, resp, deadline, recovering,
                    lost);
  });
  if (!s.ok() && (resp->results_size() == 0 || resp->results(0).status().code() == 0 ||
                  resp->results(0).status().code() == kNotFound)) {
    // Gave up (or failed before any reply): one result saying why.
    resp->Clear();
    v1::Status* st = resp->add_results()->mutable_status();
    st->set_code(static_cast<int>(s.code()));
    st->set_message(std::string(s.message()));
    ZeroRows(resp, 1, std::max(words_per_row, words_per_row_));
  }
  return s;
}

absl::Status ResumableSession::Rollback(uint32_t n) {
  if (n > tokens_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rollback of ", n, " tokens past the start (", tokens_.size(), " accepted)"));
  }
  return WithRecovery("Rollback", [&](absl::Time deadline, bool recovering, bool* lost) {
    v1::RollbackRequest req;
    req.set_session_id(session_id_);
    req.set_num_tokens(n);
    v1::RollbackResponse resp;
    grpc::ClientContext ctx;
    PrepareContext(&ctx, deadline, recovering);
    grpc::Status s = client_->stub()->Rollback(&ctx, req, &resp);
    if (s.ok()) {
      tokens_.resize(tokens_.size() - n);
      return absl::OkStatus();
    }
    *lost = s.error_code() == grpc::StatusCode::NOT_FOUND || IsTransportLoss(s, recovering);
    return FromGrpc(s);
  });
}

absl::StatusOr<std::unique_ptr<ResumableSession>> ResumableSession::Fork() {
  std::unique_ptr<ResumableSession> child;
  absl::Status st = WithRecovery("Fork", [&](absl::Time deadline, bool recovering, bool* lost) {
    v1::ForkSessionRequest req;
    req.set_session_id(session_id_);
    v1::ForkSessionResponse resp;
    grpc::ClientContext ctx;
    PrepareContext(&ctx, deadline, recovering);
    grpc::Status s = client_->stub()->ForkSession(&ctx, req, &resp);
    if (!s.ok()) {
      *lost = s.error_code() == grpc::StatusCode::NOT_FOUND || IsTransportLoss(s, recovering);
      return FromGrpc(s);
    }
    child.reset(new ResumableSession(client_, compile_, options_));
    child->session_id_ = resp.session_id();
    child->index_id_ = index_id_;
    child->words_per_row_ = words_per_row_;
    child->tokens_ = tokens_;
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return child;
}

absl::Status ResumableSession::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  if (session_id_ == 0) return absl::OkStatus();
  v1::CloseSessionRequest req;
  req.set_session_id(session_id_);
  v1::CloseSessionResponse resp;
  grpc::ClientContext ctx;
  PrepareContext(&ctx, absl::InfiniteFuture(), /*recovering=*/false);
  grpc::Status s = client_->stub()->CloseSession(&ctx, req, &resp);
  session_id_ = 0;
  // Already gone (expired, or the server restarted): what Close wanted.
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) return absl::OkStatus();
  return FromGrpc(s);
}

absl::Status ResumableSession::Resume() {
  return WithRecovery("Resume", [](absl::Time, bool, bool*) { return absl::OkStatus(); });
}

absl::Status StepResumable(absl::Span<ResumableSession* const> sessions,
                           absl::Span<const v1::StepEntry> entries, v1::StepResponse* resp,
                           StepStream* stream) {
  if (sessions.size() != entries.size()) {
    return absl::InvalidArgumentError(absl::StrCat(sessions.size(), " sessions for ",
                                                   entries.size(), " entries"));
  }
  const size_t n = sessions.size();
  resp->Clear();
  if (n == 0) return absl::OkStatus();
  uint32_t words = 0;
  for (ResumableSession* s : sessions) {
    if (s == nullptr) return absl::InvalidArgumentError("null session");
    if (s->closed_) return absl::FailedPreconditionError("Step: session closed");
    if (s->client_ != sessions[0]->client_) {
      return absl::InvalidArgumentError("StepResumable: sessions of different clients");
    }
    words = std::max(words, s->words_per_row_);
  }
  Client* client = sessions[0]->client_;
  for (size_t i = 0; i < n; ++i) resp->add_results();
  ZeroRows(resp, n, words);
  char* rows = resp->mutable_masks()->data();

  // One batched call for every live session.
  std::vector<size_t> redo;
  v1::StepRequest req;
  std::vector<size_t> batch;
  for (size_t i = 0; i < n; ++i) {
    if (sessions[i]->session_id_ == 0) {
      redo.push_back(i);
      continue;
    }
    v1::StepEntry* e = req.add_entries();
    *e = entries[i];
    e->set_session_id(sessions[i]->session_id_);
    batch.push_back(i);
  }
  if (!batch.empty()) {
    req.set_words_per_row(words);
    v1::StepResponse got;
    absl::Status s;
    if (stream != nullptr && !stream->closed()) {
      s = stream->Step(req, &got);
    } else {
      grpc::ClientContext ctx;
      sessions[0]->PrepareContext(&ctx, absl::InfiniteFuture(), /*recovering=*/false);
      s = FromGrpc(client->stub()->Step(&ctx, req, &got));
    }
    if (!s.ok()) {
      // A broken stream ends with UNAVAILABLE (or CANCELLED when the
      // connection dropped under it); anything else is the request's fault.
      const bool lost = s.code() == absl::StatusCode::kUnavailable ||
                        (stream != nullptr && s.code() == absl::StatusCode::kCancelled);
      if (!lost) {
        if (OutcomeUnknown(s.code())) {
          for (size_t i : batch) sessions[i]->session_id_ = 0;  // see WithRecovery
        }
        return s;
      }
      for (size_t i : batch) {
        sessions[i]->session_id_ = 0;  // abandoned: the call may have been applied
        redo.push_back(i);
      }
    } else if (got.results_size() != static_cast<int>(batch.size()) ||
               got.words_per_row() != words ||
               got.masks().size() < batch.size() * words * size_t{4}) {
      return absl::InternalError("StepResumable: reply does not match the request");
    } else {
      for (size_t j = 0; j < batch.size(); ++j) {
        const size_t i = batch[j];
        const v1::StepResult& r = got.results(static_cast<int>(j));
        if (r.status().code() == kNotFound) {
          sessions[i]->session_id_ = 0;
          redo.push_back(i);
          continue;
        }
        *resp->mutable_results(static_cast<int>(i)) = r;
        std::memcpy(rows + i * words * 4, got.masks().data() + j * words * 4, words * 4);
        if (r.status().code() == 0) {
          sessions[i]->Commit(entries[i].rollback(), entries[i].tokens());
        }
      }
    }
  }
  // Lost sessions: resume each and redo its entry alone.
  std::sort(redo.begin(), redo.end());
  absl::Status overall;
  v1::StepResponse one;
  for (size_t i : redo) {
    if (!overall.ok()) {
      // The server did not come back for an earlier entry: do not wait again.
      v1::Status* st = resp->mutable_results(static_cast<int>(i))->mutable_status();
      st->set_code(static_cast<int>(overall.code()));
      st->set_message(std::string(overall.message()));
      continue;
    }
    const v1::StepEntry& e = entries[i];
    absl::Status s = sessions[i]->Step(e.tokens(), &one, e.rollback(), words);
    if (one.results_size() > 0) *resp->mutable_results(static_cast<int>(i)) = one.results(0);
    if (one.words_per_row() == words && one.masks().size() >= size_t{words} * 4) {
      std::memcpy(rows + i * words * 4, one.masks().data(), size_t{words} * 4);
    }
    // Entry errors stay in results(i); only a server that did not come back
    // fails the call.
    if (s.code() == absl::StatusCode::kUnavailable) overall = s;
  }
  return overall;
}

}  // namespace maskd
