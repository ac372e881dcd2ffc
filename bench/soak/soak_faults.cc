// The soak's hostile mix: bursts of background compiles of new constraints,
// calls cancelled or past tiny deadlines (the session then checked against
// the state the server reports), and clients that vanish without closing
// their sessions.
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/soak/soak_worker.h"
#include "client/client.h"
#include "client/resumable_session.h"
#include "index/guide.h"

namespace maskd::soak {

std::string Worker::FreshRegex() {
  return absl::StrCat("[a-z]{1,", Uniform(2, 9), "}-(alpha|beta|gamma)-w", id_, "n", counter_++,
                      "[0-9]{", Uniform(1, 3), "}");
}

void Worker::Flood() {
  std::vector<std::string> fresh;
  for (int i = 0; i < 16; ++i) {
    v1::CompileRequest req = CompileFor(i % 4 == 0 ? kFixed[Uniform(0, kNumFixed - 1)]
                                                   : FreshRegex());
    req.set_wait(false);
    auto r = client_->Compile(req);
    if (r.ok()) {
      (i % 4 == 0 ? T().compiles_cached : T().compiles_new).fetch_add(1);
      if (i % 4 != 0) fresh.push_back(req.regex());
    } else if (r.status().code() == absl::StatusCode::kResourceExhausted) {
      T().compiles_rejected.fetch_add(1);
    } else if (FaultCode(r.status().code())) {
      T().fault_errors.fetch_add(1);
    } else {
      T().Unexpected(absl::StrCat("Compile flood: ", r.status().ToString()));
    }
  }
  if (fresh.empty() || sh_->stop.load()) return;
  // A session on one of them, every mask checked against its own offline
  // compile.
  const std::string& regex = fresh[Uniform(0, static_cast<int>(fresh.size()) - 1)];
  auto ix = sh_->oracle.Compile(regex);
  if (!ix.ok()) {
    T().Unexpected(absl::StrCat("offline compile: ", ix.status().ToString()));
    return;
  }
  auto s = ResumableSession::Create(client_.get(), CompileFor(regex));
  if (!s.ok()) {
    T().Unexpected(absl::StrCat("Create on a new constraint: ", s.status().ToString()));
    return;
  }
  Seq q(*ix);
  q.session = *std::move(s);
  q.max_tokens = 16;
  T().sequences.fetch_add(1);
  v1::StepResponse resp;
  while (!q.done && !sh_->stop.load()) {
    const int before = q.session->resumes();
    absl::Status st = q.session->Step(q.pending, &resp, q.rollback);
    T().resumes.fetch_add(q.session->resumes() - before);
    if (!st.ok()) {
      T().Unexpected(absl::StrCat("Step on a new constraint: ", st.ToString()));
      break;
    }
    AfterStep(q, MaskRow(resp, 0), "new-constraint");
    if (q.pending.size() == 2) q.pending.resize(1);  // no drafts here
  }
  (void)q.session->Close();
}

void Worker::Cancel() {
  T().cancels.fetch_add(1);
  const int kind = Uniform(0, 2);
  if (kind == 0) {
    // A compile the client gives up on after 2 ms, then CancelCompile of a
    // background one.
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(2));
    v1::CompileRequest req = CompileFor(FreshRegex());
    req.set_wait(true);
    v1::CompileResponse resp;
    grpc::Status s = client_->stub()->Compile(&ctx, req, &resp);
    if (!s.ok() && !FaultCode(static_cast<absl::StatusCode>(s.error_code()))) {
      T().Unexpected(absl::StrCat("Compile with a 2 ms deadline: ", s.error_message()));
    }
    req = CompileFor(FreshRegex());
    req.set_wait(false);
    auto r = client_->Compile(req);
    if (r.ok()) {
      auto c = client_->CancelCompile(r->index_id());
      if (!c.ok() && !FaultCode(c.status().code())) {
        T().Unexpected(absl::StrCat("CancelCompile: ", c.status().ToString()));
      }
    }
    return;
  }
  // A plain session stepped with a deadline too short to be sure of (kind
  // 1) or through a stream dropped mid-way (kind 2); then the state the
  // server reports must be one of the two possible and its mask right.
  const int c = Uniform(0, kNumFixed - 1);
  auto created = client_->CreateSession(CompileFor(kFixed[c]));
  if (!created.ok()) {
    if (!FaultCode(created.status().code())) {
      T().Unexpected(absl::StrCat("CreateSession: ", created.status().ToString()));
    } else {
      T().fault_errors.fetch_add(1);
    }
    return;
  }
  const uint64_t id = created->session_id();
  Guide g(sh_->oracle.fixed(c));
  const std::vector<uint32_t>* m = OracleMask(g, "drop");
  if (m == nullptr) {
    (void)client_->CloseSession(id);
    return;
  }
  const uint32_t t = Sample(m->data(), static_cast<uint32_t>(m->size()), rng_);
  v1::StepRequest req;
  v1::StepEntry* e = req.add_entries();
  e->set_session_id(id);
  e->add_tokens(t);
  v1::StepResponse resp;
  if (kind == 1) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::microseconds(Uniform(0, 300)));
    (void)client_->stub()->Step(&ctx, req, &resp);
  } else {
    auto stream = client_->OpenStepStream();
    if (stream.ok()) {
      if (Chance(0.5)) {
        (void)(*stream)->Step(req, &resp);
      } else {
        // Write only, and drop the stream without reading the reply.
        (*stream)->Close().IgnoreError();
      }
    }
    // ~StepStream cancels a stream that is still open.
  }
  // What did the server keep? A query step says.
  e->clear_tokens();
  absl::Status s = client_->Step(req, &resp);
  if (!s.ok() || resp.results(0).status().code() != 0) {
    if (!s.ok() ? FaultCode(s.code())
                : resp.results(0).status().code() == static_cast<int>(absl::StatusCode::kNotFound)) {
      T().fault_errors.fetch_add(1);  // killed meanwhile
    } else {
      T().Unexpected(absl::StrCat("query step after a cancel: ", s.ToString(), " ",
                                  resp.results_size() ? resp.results(0).status().message() : ""));
    }
    return;
  }
  const uint64_t n = resp.results(0).num_tokens();
  if (n == 1) {
    (void)g.Advance(t);
  } else if (n != 0) {
    T().Unexpected(absl::StrCat("session has ", n, " tokens after one cancelled step"));
  }
  T().steps.fetch_add(1);
  CheckRow(g, MaskRow(resp, 0), "after-cancel");
  (void)client_->CloseSession(id);
}

void Worker::Drop() {
  T().drops.fetch_add(1);
  ClientOptions o;
  o.timeout = absl::Seconds(10);
  auto c = Client::Connect(sh_->addr, o);
  if (!c.ok()) return;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto s = (*c)->CreateSession(CompileFor(kFixed[Uniform(0, kNumFixed - 1)]));
    if (!s.ok()) {
      if (!FaultCode(s.status().code())) {
        T().Unexpected(absl::StrCat("CreateSession (drop): ", s.status().ToString()));
      }
      return;
    }
    ids.push_back(s->session_id());
  }
  v1::StepRequest req;
  for (uint64_t id : ids) req.add_entries()->set_session_id(id);
  v1::StepResponse resp;
  (void)(*c)->Step(req, &resp);
  auto stream = (*c)->OpenStepStream();
  if (stream.ok()) (void)(*stream)->Step(req, &resp);
  // Leave: the stream is cancelled, the channel closed, the sessions left
  // for --session-ttl.
}

}  // namespace maskd::soak
