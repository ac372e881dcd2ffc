// The soak's load proper: batches of resumable sessions stepped unary, over
// a StepStream and into a shared-memory region, and stateless masks; every
// mask checked against the offline oracle.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/soak/soak_worker.h"
#include "client/client.h"
#include "client/resumable_session.h"
#include "client/shm_client.h"
#include "index/guide.h"

namespace maskd::soak {

using Clock = std::chrono::steady_clock;

void Worker::Run() {
  ClientOptions o;
  o.timeout = absl::Seconds(30);
  auto c = Client::Connect(sh_->addr, o);
  if (!c.ok()) {
    sh_->tally.Unexpected(std::string(c.status().message()));
    return;
  }
  client_ = *std::move(c);
  while (!sh_->stop.load()) {
    const int r = std::uniform_int_distribution<int>(0, 99)(rng_);
    if (r < 35) Generate(false);
    else if (r < 55) Generate(true);
    else if (r < 67) Shm();
    else if (r < 77) Mask();
    else if (r < 85) Flood();
    else if (r < 93) Cancel();
    else Drop();
  }
}

const std::vector<uint32_t>* Worker::OracleMask(const Guide& g, const std::string& what) {
  scratch_.assign(g.index().num_words(), 0);
  if (absl::Status s = g.WriteMaskUnchecked(scratch_.data()); !s.ok()) {
    T().Unexpected(absl::StrCat(what, ": the oracle's mask failed: ", s.ToString()));
    return nullptr;
  }
  return &scratch_;
}

bool Worker::CheckRow(const Guide& g, absl::Span<const uint32_t> row, const std::string& what) {
  const std::vector<uint32_t>* oracle = OracleMask(g, what);
  if (oracle == nullptr) return false;
  const std::vector<uint32_t>& m = *oracle;
  T().masks_checked.fetch_add(1);
  if (row.size() < m.size() || !std::equal(m.begin(), m.end(), row.begin()) ||
      std::any_of(row.begin() + m.size(), row.end(), [](uint32_t w) { return w != 0; })) {
    T().WrongMask(absl::StrCat(what, " at ", g.num_tokens(), " tokens"));
    return false;
  }
  return true;
}

// After a confirmed step of `q` (the server applied rollback + pending and
// answered with `row`): mirror it, check the row, choose the next entry.
void Worker::AfterStep(Seq& q, absl::Span<const uint32_t> row, const char* path) {
  if (absl::Status s = q.guide.RollbackAndAdvance(q.rollback, q.pending); !s.ok()) {
    T().Unexpected(absl::StrCat(path, ": offline replay failed: ", s.message()));
    q.done = true;
    return;
  }
  T().steps.fetch_add(1);
  CheckRow(q.guide, row, path);
  q.rollback = 0;
  q.pending.clear();
  if (q.guide.IsFinished() || q.guide.num_tokens() >= q.max_tokens) {
    q.done = true;
    return;
  }
  const std::vector<uint32_t>* m = OracleMask(q.guide, path);
  if (m == nullptr) {
    q.done = true;
    return;
  }
  const uint32_t t = Sample(m->data(), static_cast<uint32_t>(m->size()), rng_);
  if (t == UINT32_MAX) {
    T().Unexpected(absl::StrCat(path, ": empty mask in a live state"));
    q.done = true;
    return;
  }
  q.pending = {t};
  // Speculative decoding: a draft token after t, rejected at the next step
  // (rollback 1 there, then a token sampled from the state after t).
  Guide ahead = q.guide.Fork();
  if (Chance(0.15) && ahead.Advance(t).ok() && !ahead.IsFinished() &&
      (m = OracleMask(ahead, path)) != nullptr) {
    const uint32_t d = Sample(m->data(), static_cast<uint32_t>(m->size()), rng_);
    if (d != UINT32_MAX && ahead.Advance(d).ok()) {
      q.pending.push_back(d);
      T().speculative.fetch_add(1);
    }
  }
}

std::unique_ptr<Seq> Worker::NewSeq(int constraint) {
  auto q = std::make_unique<Seq>(sh_->oracle.fixed(constraint));
  q->constraint = constraint;
  q->max_tokens = static_cast<size_t>(Uniform(8, 64));
  auto s = ResumableSession::Create(client_.get(), CompileFor(kFixed[constraint]));
  if (!s.ok()) {
    T().Unexpected(absl::StrCat("ResumableSession::Create: ", s.status().ToString()));
    return nullptr;
  }
  q->session = *std::move(s);
  T().sequences.fetch_add(1);
  return q;
}

void Worker::Generate(bool stream_path) {
  std::vector<std::unique_ptr<Seq>> seqs;
  const int n = Uniform(1, 6);
  for (int i = 0; i < n; ++i) {
    auto q = NewSeq(Uniform(0, kNumFixed - 1));
    if (!q) return;
    seqs.push_back(std::move(q));
  }
  std::unique_ptr<StepStream> stream;
  v1::StepResponse resp;
  bool failed = false;
  while (!sh_->stop.load()) {
    std::vector<ResumableSession*> batch;
    std::vector<v1::StepEntry> entries;
    std::vector<Seq*> live;
    for (auto& q : seqs) {
      if (q->done) continue;
      live.push_back(q.get());
      batch.push_back(q->session.get());
      v1::StepEntry e;
      e.set_rollback(q->rollback);
      e.mutable_tokens()->Add(q->pending.begin(), q->pending.end());
      entries.push_back(std::move(e));
    }
    if (live.empty()) break;
    if (stream_path && (stream == nullptr || stream->closed())) {
      auto opened = client_->OpenStepStream();
      if (opened.ok()) {
        stream = *std::move(opened);
        T().streams_opened.fetch_add(1);
      }
    }
    std::vector<int> resumes_before;
    for (auto* s : batch) resumes_before.push_back(s->resumes());
    absl::Status st = StepResumable(batch, entries, &resp, stream.get());
    if (!st.ok()) {
      T().Unexpected(absl::StrCat("StepResumable: ", st.ToString()));
      failed = true;
      break;
    }
    for (size_t i = 0; i < live.size(); ++i) {
      Seq& q = *live[i];
      T().resumes.fetch_add(batch[i]->resumes() - resumes_before[i]);
      const v1::Status& es = resp.results(static_cast<int>(i)).status();
      if (es.code() != 0) {
        T().Unexpected(absl::StrCat("step entry: code ", es.code(), ": ", es.message()));
        q.done = true;
        failed = true;
        continue;
      }
      const bool had_draft = q.pending.size() == 2;
      AfterStep(q, MaskRow(resp, static_cast<int>(i)), stream_path ? "stream" : "step");
      if (had_draft && !q.done) {
        // The draft was "rejected": the next entry undoes it and takes a
        // token sampled after t instead. The guide keeps mirroring the
        // server (…, t, d) until that entry is confirmed.
        Guide back = q.guide.Fork();
        const std::vector<uint32_t>* m = nullptr;
        if (back.Rollback(1).ok() && (m = OracleMask(back, "draft rejected")) != nullptr) {
          const uint32_t t = Sample(m->data(), static_cast<uint32_t>(m->size()), rng_);
          if (t != UINT32_MAX) {
            q.rollback = 1;
            q.pending = {t};
          }
        }
      }
      // Occasional Rollback RPC and fork.
      if (!q.done && Chance(0.03) && q.guide.num_tokens() >= 2) {
        const uint32_t k = static_cast<uint32_t>(Uniform(1, 2));
        absl::Status rs = q.session->Rollback(k);
        if (!rs.ok()) {
          T().Unexpected(absl::StrCat("Rollback: ", rs.ToString()));
          q.done = true;
          failed = true;
          continue;
        }
        T().rollbacks.fetch_add(1);
        q.guide.Rollback(k).IgnoreError();
        q.rollback = 0;
        q.pending.clear();  // a query step: the next mask is checked anyway
      }
    }
    if (seqs.size() < 8 && Chance(0.05)) {
      Seq* parent = live[Uniform(0, static_cast<int>(live.size()) - 1)];
      if (!parent->done) {
        auto child = parent->session->Fork();
        if (!child.ok()) {
          T().Unexpected(absl::StrCat("Fork: ", child.status().ToString()));
          failed = true;
        } else {
          auto q = std::make_unique<Seq>(parent->guide.shared_index());
          q->guide = parent->guide.Fork();
          q->constraint = parent->constraint;
          q->session = *std::move(child);
          q->pending = parent->pending;
          q->rollback = parent->rollback;
          q->max_tokens = parent->max_tokens;
          seqs.push_back(std::move(q));
          T().forks.fetch_add(1);
          T().sequences.fetch_add(1);
        }
      }
    }
  }
  if (stream) (void)stream->Close();
  for (auto& q : seqs) (void)q->session->Close();
  T().generations.fetch_add(1);
  if (failed) T().generations_failed.fetch_add(1);
}

void Worker::Shm() {
  if (!sh_->flags.shm) return Generate(false);
  const int n = Uniform(1, 4);
  std::vector<std::unique_ptr<Seq>> seqs;
  uint32_t words = 0;
  for (int i = 0; i < n; ++i) {
    auto q = NewSeq(Uniform(0, kNumFixed - 1));
    if (!q) return;
    words = std::max(words, q->session->words_per_row());
    seqs.push_back(std::move(q));
  }
  // Every qwen3 session has the same width (a masks target needs that).
  const std::string key = absl::StrCat("/maskd-soak-", getpid(), "-", id_);
  auto seg = shm::PosixShmSegment::Create(key, size_t{words} * 4 * n);
  if (!seg.ok()) {
    T().Unexpected(absl::StrCat("shm segment: ", seg.status().ToString()));
    return;
  }
  ShmClient shm(client_->channel(), absl::Seconds(30));
  const std::string region = absl::StrCat("soak-", id_);
  bool registered = false;
  int rounds_registered = 0;
  bool failed = false;
  v1::StepInRegionRequest req;
  v1::StepInRegionResponse resp;
  int attempts = 0;
  while (!sh_->stop.load() && !failed) {
    std::vector<Seq*> live;
    req.Clear();
    for (auto& q : seqs) {
      if (q->done) continue;
      if (q->session->session_id() == 0 && !q->session->Resume().ok()) {
        T().Unexpected("shm: resume failed");
        failed = true;
        break;
      }
      live.push_back(q.get());
      v1::StepEntry* e = req.add_entries();
      e->set_session_id(q->session->session_id());
      e->set_rollback(q->rollback);
      e->mutable_tokens()->Add(q->pending.begin(), q->pending.end());
    }
    if (failed || live.empty()) break;
    if (!registered) {
      absl::Status rs = shm.RegisterSystemRegion(region, seg->key(), 0, seg->size());
      if (rs.code() == absl::StatusCode::kAlreadyExists) {
        (void)shm.UnregisterRegion(region);
        rs = shm.RegisterSystemRegion(region, seg->key(), 0, seg->size());
      }
      if (!rs.ok()) {
        if (FaultCode(rs.code()) && ++attempts < 200) {
          T().fault_errors.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          continue;
        }
        T().Unexpected(absl::StrCat("RegisterSystemRegion: ", rs.ToString()));
        break;
      }
      if (rounds_registered++ > 0) T().shm_reregistered.fetch_add(1);
      registered = true;
    }
    req.mutable_masks()->set_region(region);
    req.mutable_masks()->set_offset(0);
    std::memset(seg->data(), 0xA5, seg->size());  // stale bytes must be overwritten
    absl::Status st = shm.StepInRegion(req, &resp);
    if (!st.ok()) {
      if (!FaultCode(st.code()) || ++attempts >= 200) {
        T().Unexpected(absl::StrCat("StepInRegion: ", st.ToString()));
        break;
      }
      T().fault_errors.fetch_add(1);
      // Unknown region (restart): register again. Transport error: the
      // call may have been applied; resume every session from its tokens.
      registered = false;
      if (st.code() != absl::StatusCode::kNotFound) {
        for (Seq* q : live) q->session->MarkLost();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      continue;
    }
    const uint32_t* rows = static_cast<const uint32_t*>(seg->data());
    for (size_t i = 0; i < live.size(); ++i) {
      Seq& q = *live[i];
      const v1::Status& es = resp.results(static_cast<int>(i)).status();
      if (es.code() == static_cast<int>(absl::StatusCode::kNotFound)) {
        T().fault_errors.fetch_add(1);
        q.session->MarkLost();  // restarted: resumed at the next round
        continue;
      }
      if (es.code() != 0) {
        T().Unexpected(absl::StrCat("shm entry: code ", es.code(), ": ", es.message()));
        q.done = true;
        failed = true;
        continue;
      }
      q.session->Accepted(q.rollback, q.pending);
      T().shm_steps.fetch_add(1);
      AfterStep(q, absl::Span<const uint32_t>(rows + i * resp.words_per_row(),
                                              resp.words_per_row()),
                "shm");
    }
  }
  if (registered) (void)shm.UnregisterRegion(region);
  for (auto& q : seqs) {
    T().resumes.fetch_add(q->session->resumes());
    (void)q->session->Close();
  }
  T().generations.fetch_add(1);
  if (failed) T().generations_failed.fetch_add(1);
}

// Retries `call` while a fault explains its failure, up to 30 s.
template <typename F>
absl::Status Worker::Retrying(F call) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  absl::Status s;
  for (;;) {
    s = call();
    if (s.ok() || !FaultCode(s.code()) || Clock::now() > deadline || sh_->stop.load()) return s;
    T().fault_errors.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Worker::Mask() {
  const int c = Uniform(0, kNumFixed - 1);
  std::string index_id;
  absl::Status s = Retrying([&] {
    auto r = client_->CompileRegex("qwen3", kFixed[c]);
    if (r.ok()) index_id = r->index_id();
    return r.status();
  });
  if (!s.ok()) {
    if (!sh_->stop.load()) T().Unexpected(absl::StrCat("Compile: ", s.ToString()));
    return;
  }
  T().compiles_cached.fetch_add(1);
  // A random prefix of an offline walk.
  Guide g(sh_->oracle.fixed(c));
  std::vector<uint32_t> prefix;
  std::vector<uint32_t> m(g.index().num_words());
  const int len = Uniform(0, 24);
  for (int i = 0; i < len && !g.IsFinished(); ++i) {
    (void)g.WriteMaskUnchecked(m.data());
    const uint32_t t = Sample(m.data(), static_cast<uint32_t>(m.size()), rng_);
    if (t == UINT32_MAX || !g.Advance(t).ok()) break;
    prefix.push_back(t);
  }
  v1::MaskResponse resp;
  s = Retrying([&] {
    auto r = client_->Mask(index_id, prefix);
    if (r.ok()) {
      resp = *std::move(r);
      return absl::OkStatus();
    }
    if (r.status().code() == absl::StatusCode::kNotFound) {
      (void)client_->CompileRegex("qwen3", kFixed[c]);  // restarted: compile again
    }
    return r.status();
  });
  if (!s.ok()) {
    if (!sh_->stop.load()) T().Unexpected(absl::StrCat("Mask: ", s.ToString()));
    return;
  }
  T().mask_calls.fetch_add(1);
  CheckRow(g, absl::Span<const uint32_t>(reinterpret_cast<const uint32_t*>(resp.mask().data()),
                                         resp.mask().size() / 4),
           "Mask");
}

}  // namespace maskd::soak
