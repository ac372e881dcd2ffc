// maskd_soak: mixed load against the real maskd while faults are injected,
// every mask checked against the core library (index/).
//
//   maskd_soak --seconds 1800 [--workers 4] [--kill-every 300] [--shm 1]
//              [--warmup 10] [--flat-min-samples 20] [--rss-tolerance-mb 64]
//              [--fd-tolerance 16] [--seed 1] [--samples-csv FILE] ...
//   bench/soak/run.sh MINUTES     (builds, runs at nice 10, prints the summary)
//
// Load (each worker thread, actions drawn at random):
//   generate  batches of ResumableSessions stepped with StepResumable (unary),
//             with speculative steps (draft + rollback in the next entry),
//             Rollback RPCs and forks;
//   stream    the same over a StepStream (reopened when it breaks);
//   shm       SharedMemory.StepInRegion into a POSIX shm region (--shm 1),
//             masks read back from the region; sessions resumed and the
//             region re-registered after a restart;
//   mask      stateless Mask at random prefixes of an offline walk;
//   flood     bursts of Compile{wait: false} of new constraints (and cached
//             ones), then a session on a new constraint, checked;
//   cancel    compiles and steps with tiny deadlines, CancelCompile, streams
//             dropped mid-way; the session is then checked against the
//             state the server reports (num_tokens);
//   drop      a fresh channel that creates sessions, steps them and goes away
//             without closing them (they expire: --session-ttl).
// Faults: the load's own cancels and disconnects, compile floods, and SIGKILL
// + restart of maskd every --kill-every seconds (jittered) on the same socket.
// The main thread samples maskd's RSS (/proc/<pid>/status) and open fds
// (/proc/<pid>/fd) every second.
//
// Pass: 0 wrong masks, 0 unexpected errors, 0 unexpected crashes (only the
// injected kills), every generation finished (clients carried on through
// every restart), and per server instance that ran long enough (at least
// --flat-min-samples samples after --warmup s): RSS growth from the first
// sample after warm-up to the last <= --rss-tolerance-mb, and fds growth
// <= --fd-tolerance. Exit 0 on pass, 1 on fail, 2 on bad flags/setup.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/soak/maskd_process.h"
#include "client/client.h"
#include "index/guide.h"
#include "index/random_walk.h"
#include "index/token_index.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"
#include "client/shm_client.h"

namespace maskd::soak {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  double seconds = 60;
  int workers = 4;
  double kill_every = 20;  // <= 0: never
  double warmup = 10;
  int flat_min_samples = 20;
  double rss_tolerance_mb = 64;
  int fd_tolerance = 16;
  bool shm = true;
  uint64_t seed = 1;
  std::string maskd = std::string(MASKD_BIN_DIR) + "/maskd";
  std::string tokenizer_dir = std::string(MASKD_SOURCE_DIR) + "/data/tokenizers";
  std::string dir;  // empty: a fresh /tmp/maskd-soak-XXXXXX
  std::string samples_csv;  // every sample: t_s,instance,rss_bytes,fds
  std::string command;
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 0; i < argc; ++i) f->command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string v;
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (i + 1 < argc) {
      v = argv[++i];
    } else {
      std::fprintf(stderr, "maskd_soak: %s needs a value\n", a.c_str());
      return false;
    }
    if (a == "--seconds") f->seconds = atof(v.c_str());
    else if (a == "--workers") f->workers = atoi(v.c_str());
    else if (a == "--kill-every") f->kill_every = atof(v.c_str());
    else if (a == "--warmup") f->warmup = atof(v.c_str());
    else if (a == "--flat-min-samples") f->flat_min_samples = atoi(v.c_str());
    else if (a == "--rss-tolerance-mb") f->rss_tolerance_mb = atof(v.c_str());
    else if (a == "--fd-tolerance") f->fd_tolerance = atoi(v.c_str());
    else if (a == "--shm") f->shm = atoi(v.c_str()) != 0;
    else if (a == "--seed") f->seed = strtoull(v.c_str(), nullptr, 10);
    else if (a == "--maskd") f->maskd = v;
    else if (a == "--tokenizer-dir") f->tokenizer_dir = v;
    else if (a == "--dir") f->dir = v;
    else if (a == "--samples-csv") f->samples_csv = v;
    else {
      std::fprintf(stderr, "maskd_soak: unknown flag %s\n", a.c_str());
      return false;
    }
  }
  if (f->seconds <= 0 || f->workers < 1 || f->workers > 64) {
    std::fprintf(stderr, "maskd_soak: need --seconds > 0 and 1 <= --workers <= 64\n");
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Tallies and the offline oracle.

struct Tally {
  std::atomic<int64_t> generations{0}, generations_failed{0}, sequences{0}, steps{0},
      masks_checked{0}, wrong_masks{0}, resumes{0}, streams_opened{0}, shm_steps{0},
      shm_reregistered{0}, mask_calls{0}, compiles_new{0}, compiles_cached{0},
      compiles_rejected{0}, cancels{0}, drops{0}, forks{0}, rollbacks{0}, speculative{0},
      fault_errors{0}, unexpected_errors{0};
  absl::Mutex mu;
  std::vector<std::string> first_errors ABSL_GUARDED_BY(mu);  // the first few unexpected ones

  void Unexpected(const std::string& what) {
    unexpected_errors.fetch_add(1);
    absl::MutexLock l(&mu);
    if (first_errors.size() < 20) first_errors.push_back(what);
  }
  void WrongMask(const std::string& what) {
    wrong_masks.fetch_add(1);
    absl::MutexLock l(&mu);
    if (first_errors.size() < 20) first_errors.push_back("wrong mask: " + what);
  }
};

// Constraints every worker uses (compiled offline once).
const char* const kFixed[] = {
    R"([a-z]{1,8}@[a-z]{2,5}\.com)",
    R"((cat|dog)s? and (cat|dog)s?)",
    R"(\{"name": "[a-z ]{1,12}", "age": [0-9]{1,3}\})",
    R"(-?[0-9]{1,6}(\.[0-9]{1,4})?)",
    R"((\+1 )?\([0-9]{3}\) [0-9]{3}-[0-9]{4})",
    R"((GET|POST|PUT|DELETE) /[a-z]{1,10}(/[a-z0-9]{1,6}){0,3} HTTP/1\.[01])",
    R"(\[([0-9]{1,3}, ){0,5}[0-9]{1,3}\])",
    R"([A-Z][a-z]{2,10}( [A-Z][a-z]{2,10}){0,2})",
};
constexpr int kNumFixed = sizeof(kFixed) / sizeof(kFixed[0]);

class Oracle {
 public:
  absl::Status Init(const std::string& tokenizer_dir) {
    auto vocab = Vocabulary::Load(tokenizer_dir + "/qwen3");
    if (!vocab.ok()) return vocab.status();
    context_ = TokenizerContext::Create(*std::move(vocab));
    for (const char* r : kFixed) {
      auto ix = CompileRegex(r, context_);
      if (!ix.ok()) return ix.status();
      fixed_.push_back(*ix);
    }
    return absl::OkStatus();
  }
  const std::shared_ptr<const TokenIndex>& fixed(int i) const { return fixed_[i]; }
  absl::StatusOr<std::shared_ptr<const TokenIndex>> Compile(const std::string& regex) const {
    return CompileRegex(regex, context_);
  }

 private:
  std::shared_ptr<const TokenizerContext> context_;
  std::vector<std::shared_ptr<const TokenIndex>> fixed_;
};

v1::CompileRequest CompileFor(const std::string& regex) {
  v1::CompileRequest c;
  c.set_tokenizer("qwen3");
  c.set_regex(regex);
  return c;
}

uint32_t Sample(const uint32_t* words, uint32_t n, std::mt19937_64& rng) {
  const uint32_t count = CountAllowedTokens(words, n);
  if (count == 0) return UINT32_MAX;
  return NthAllowedToken(words, n,
                         static_cast<uint32_t>(std::uniform_int_distribution<uint32_t>(0, count - 1)(rng)));
}

// An error a fault explains: the server was killed (UNAVAILABLE, CANCELLED,
// a plain session or index gone: NOT_FOUND), a deadline we set.
bool FaultCode(absl::StatusCode c) {
  return c == absl::StatusCode::kUnavailable || c == absl::StatusCode::kCancelled ||
         c == absl::StatusCode::kNotFound || c == absl::StatusCode::kDeadlineExceeded;
}

// ---------------------------------------------------------------------------
// Workers.

struct Shared {
  Flags flags;
  Oracle oracle;
  Tally tally;
  std::string addr;
  std::atomic<bool> stop{false};
};

// One generated sequence mirrored offline: `guide` is the server session's
// state as of the last confirmed step; the next entry sends `rollback` then
// `pending`.
struct Seq {
  int constraint = 0;
  std::unique_ptr<ResumableSession> session;
  Guide guide;
  std::vector<uint32_t> pending;
  uint32_t rollback = 0;
  size_t max_tokens = 48;
  bool done = false;
  explicit Seq(std::shared_ptr<const TokenIndex> ix) : guide(std::move(ix)) {}
};

class Worker {
 public:
  Worker(Shared* sh, int id) : sh_(sh), id_(id), rng_(sh->flags.seed * 1000003 + id) {}

  void Run() {
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

 private:
  Tally& T() { return sh_->tally; }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  bool CheckRow(const Guide& g, absl::Span<const uint32_t> row, const std::string& what) {
    std::vector<uint32_t>& m = scratch_;
    m.assign(g.index().num_words(), 0);
    g.WriteMaskUnchecked(m.data());
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
  void AfterStep(Seq& q, absl::Span<const uint32_t> row, const char* path) {
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
    std::vector<uint32_t>& m = scratch_;
    m.assign(q.guide.index().num_words(), 0);
    q.guide.WriteMaskUnchecked(m.data());
    const uint32_t t = Sample(m.data(), static_cast<uint32_t>(m.size()), rng_);
    if (t == UINT32_MAX) {
      T().Unexpected(absl::StrCat(path, ": empty mask in a live state"));
      q.done = true;
      return;
    }
    q.pending = {t};
    // Speculative decoding: a draft token after t, rejected at the next step
    // (rollback 1 there, then a token sampled from the state after t).
    Guide ahead = q.guide.Fork();
    if (Chance(0.15) && ahead.Advance(t).ok() && !ahead.IsFinished()) {
      ahead.WriteMaskUnchecked(m.data());
      const uint32_t d = Sample(m.data(), static_cast<uint32_t>(m.size()), rng_);
      if (d != UINT32_MAX && ahead.Advance(d).ok()) {
        q.pending.push_back(d);
        T().speculative.fetch_add(1);
      }
    }
  }

  std::unique_ptr<Seq> NewSeq(int constraint) {
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

  void Generate(bool stream_path) {
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
          if (back.Rollback(1).ok()) {
            std::vector<uint32_t>& m = scratch_;
            m.assign(back.index().num_words(), 0);
            back.WriteMaskUnchecked(m.data());
            const uint32_t t = Sample(m.data(), static_cast<uint32_t>(m.size()), rng_);
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

  void Shm() {
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
  absl::Status Retrying(F call) {
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    absl::Status s;
    for (;;) {
      s = call();
      if (s.ok() || !FaultCode(s.code()) || Clock::now() > deadline || sh_->stop.load()) return s;
      T().fault_errors.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  void Mask() {
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
      g.WriteMaskUnchecked(m.data());
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

  std::string FreshRegex() {
    return absl::StrCat("[a-z]{1,", Uniform(2, 9), "}-(alpha|beta|gamma)-w", id_, "n", counter_++,
                        "[0-9]{", Uniform(1, 3), "}");
  }

  void Flood() {
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

  void Cancel() {
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
    std::vector<uint32_t> m(g.index().num_words());
    g.WriteMaskUnchecked(m.data());
    const uint32_t t = Sample(m.data(), static_cast<uint32_t>(m.size()), rng_);
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

  void Drop() {
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

  Shared* sh_;
  int id_;
  std::mt19937_64 rng_;
  std::unique_ptr<Client> client_;
  std::vector<uint32_t> scratch_;
  uint64_t counter_ = 0;
};

// ---------------------------------------------------------------------------
// Main: the server, its faults and its samples.

struct Sample_ {
  double t;
  int incarnation;
  int64_t rss, fds;
};

int Main(int argc, char** argv) {
  Shared sh;
  if (!ParseFlags(argc, argv, &sh.flags)) return 2;
  const Flags& f = sh.flags;
  std::string dir = f.dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/maskd-soak-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return 2;
    dir = tmpl;
  }
  if (absl::Status s = sh.oracle.Init(f.tokenizer_dir); !s.ok()) {
    std::fprintf(stderr, "maskd_soak: offline tokenizer: %s\n", s.ToString().c_str());
    return 2;
  }
  std::vector<std::string> server_flags = {"--session-ttl=20s", "--cache-bytes=33554432",
                                           "--compile-threads=2"};
  if (f.shm) server_flags.push_back("--allow_shm");
  MaskdServer server(f.maskd, dir, f.tokenizer_dir, server_flags);
  if (absl::Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "maskd_soak: %s\n", s.ToString().c_str());
    return 2;
  }
  sh.addr = server.addr();
  std::mt19937_64 rng(f.seed);
  auto jitter = [&](double x) { return x * std::uniform_real_distribution<double>(0.8, 1.2)(rng); };

  const auto t0 = Clock::now();
  auto now_s = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < f.workers; ++i) {
    workers.push_back(std::make_unique<Worker>(&sh, i));
    threads.emplace_back([w = workers.back().get()] { w->Run(); });
  }

  int kills = 0, crashes = 0, incarnation = 0;
  std::vector<double> incarnation_start = {0};
  std::vector<int64_t> incarnation_steps0 = {0};  // tally.steps when each instance started
  std::vector<Sample_> samples;
  double next_kill = f.kill_every > 0 ? jitter(f.kill_every) : 1e300;
  double restart_ms_max = 0;
  std::string crash_log;
  while (now_s() < f.seconds) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double t = now_s();
    if (!server.Running()) {
      ++crashes;
      if (crash_log.empty()) crash_log = server.Log();
      std::fprintf(stderr, "maskd_soak: maskd died unexpectedly (wait status %d) at %.0f s\n",
                   server.exit_status(), t);
      if (!server.Start().ok()) break;
      ++incarnation;
      incarnation_start.push_back(now_s());
      incarnation_steps0.push_back(sh.tally.steps.load());
      continue;
    }
    samples.push_back({t, incarnation, server.RssBytes(), server.OpenFds()});
    if (t >= next_kill && t + 3 < f.seconds) {
      server.Kill();
      ++kills;
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::uniform_int_distribution<int>(0, 500)(rng)));
      const auto r0 = Clock::now();
      if (absl::Status s = server.Start(); !s.ok()) {
        std::fprintf(stderr, "maskd_soak: restart failed: %s\n", s.ToString().c_str());
        ++crashes;
        break;
      }
      restart_ms_max = std::max(
          restart_ms_max, std::chrono::duration<double, std::milli>(Clock::now() - r0).count());
      ++incarnation;
      incarnation_start.push_back(now_s());
      incarnation_steps0.push_back(sh.tally.steps.load());
      next_kill = now_s() + jitter(f.kill_every);
    }
  }
  sh.stop.store(true);
  for (auto& th : threads) th.join();
  const double elapsed = now_s();
  if (server.Running()) {
    samples.push_back({elapsed, incarnation, server.RssBytes(), server.OpenFds()});
  } else {
    ++crashes;
  }

  if (!f.samples_csv.empty()) {
    if (FILE* out = std::fopen(f.samples_csv.c_str(), "w")) {
      std::fprintf(out, "t_s,instance,rss_bytes,fds\n");
      for (const Sample_& s : samples) {
        std::fprintf(out, "%.1f,%d,%" PRId64 ",%" PRId64 "\n", s.t, s.incarnation, s.rss, s.fds);
      }
      std::fclose(out);
    }
  }

  // Flatness per instance.
  struct Row {
    int inc;
    double start, life;
    int n;
    int64_t steps;
    int64_t rss_first, rss_last, rss_max, fds_first, fds_last, fds_max;
    std::string verdict;
  };
  std::vector<Row> rows;
  bool flat = true;
  bool carried_on = true;
  int judged = 0;
  for (int inc = 0; inc <= incarnation; ++inc) {
    Row r{inc, incarnation_start[inc], 0, 0, 0, -1, -1, 0, -1, -1, 0, ""};
    const double end = inc < incarnation ? incarnation_start[inc + 1] : elapsed;
    r.steps = (inc < incarnation ? incarnation_steps0[inc + 1] : sh.tally.steps.load()) -
              incarnation_steps0[inc];
    // Every instance that lived a few seconds served steps: the clients
    // carried on after each restart.
    if (r.life >= 5 && r.steps == 0) carried_on = false;
    r.life = end - r.start;
    for (const Sample_& s : samples) {
      if (s.incarnation != inc || s.t < r.start + f.warmup || s.rss < 0) continue;
      if (r.n++ == 0) {
        r.rss_first = s.rss;
        r.fds_first = s.fds;
      }
      r.rss_last = s.rss;
      r.fds_last = s.fds;
      r.rss_max = std::max(r.rss_max, s.rss);
      r.fds_max = std::max(r.fds_max, s.fds);
    }
    if (r.n < f.flat_min_samples) {
      r.verdict = "short";
    } else {
      ++judged;
      const bool ok = r.rss_last - r.rss_first <= static_cast<int64_t>(f.rss_tolerance_mb * 1048576) &&
                      r.fds_last - r.fds_first <= f.fd_tolerance;
      r.verdict = ok ? "flat" : "GROWS";
      flat = flat && ok;
    }
    rows.push_back(r);
  }

  Tally& T = sh.tally;
  const bool pass = T.wrong_masks == 0 && T.unexpected_errors == 0 && crashes == 0 &&
                    T.generations_failed == 0 && flat && carried_on && T.masks_checked > 0;
  auto mb = [](int64_t b) { return b < 0 ? -1.0 : static_cast<double>(b) / 1048576.0; };
  std::printf("=== maskd soak summary ===\n");
  std::printf("command: %s\n", f.command.c_str());
  std::printf("duration_s: %.0f  workers: %d  shm: %s  kill_every_s: %.0f  warmup_s: %.0f\n", elapsed,
              f.workers, f.shm ? "on" : "off", f.kill_every, f.warmup);
  std::printf("sigkills: %d  restarts: %d  restart_ms_max: %.0f  unexpected_crashes: %d\n", kills,
              incarnation, restart_ms_max, crashes);
  std::printf("generations: %" PRId64 " (failed %" PRId64 ")  sequences: %" PRId64
              "  steps: %" PRId64 "  masks_checked: %" PRId64 "  wrong_masks: %" PRId64 "\n",
              T.generations.load(), T.generations_failed.load(), T.sequences.load(),
              T.steps.load(), T.masks_checked.load(), T.wrong_masks.load());
  std::printf("resumes: %" PRId64 "  streams: %" PRId64 "  shm_steps: %" PRId64
              " (regions re-registered %" PRId64 ")  mask_calls: %" PRId64 "\n",
              T.resumes.load(), T.streams_opened.load(), T.shm_steps.load(),
              T.shm_reregistered.load(), T.mask_calls.load());
  std::printf("compiles: new %" PRId64 ", cached %" PRId64 ", rejected %" PRId64
              "  cancels: %" PRId64 "  drops: %" PRId64 "  forks: %" PRId64
              "  rollbacks: %" PRId64 "  drafts: %" PRId64 "\n",
              T.compiles_new.load(), T.compiles_cached.load(), T.compiles_rejected.load(),
              T.cancels.load(), T.drops.load(), T.forks.load(), T.rollbacks.load(),
              T.speculative.load());
  std::printf("fault_errors (explained by a kill/cancel, retried): %" PRId64
              "  unexpected_errors: %" PRId64 "\n",
              T.fault_errors.load(), T.unexpected_errors.load());
  std::printf("clients carried on after every restart: %s\n", carried_on ? "yes" : "NO");
  std::printf("| instance | start s | life s | steps | samples | RSS first MB | RSS last MB | RSS max MB | fds first | fds last | fds max | |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
  for (const Row& r : rows) {
    std::printf("| %d | %.0f | %.0f | %" PRId64 " | %d | %.1f | %.1f | %.1f | %" PRId64 " | %" PRId64 " | %" PRId64
                " | %s |\n",
                r.inc, r.start, r.life, r.steps, r.n, mb(r.rss_first), mb(r.rss_last), mb(r.rss_max),
                r.fds_first, r.fds_last, r.fds_max, r.verdict.c_str());
  }
  std::printf("flatness: per instance with >= %d samples after %.0f s warm-up: RSS last - first <= %.0f MB, "
              "fds last - first <= %d (%d instances judged)\n",
              f.flat_min_samples, f.warmup, f.rss_tolerance_mb, f.fd_tolerance, judged);
  {
    absl::MutexLock l(&T.mu);
    for (const std::string& e : T.first_errors) std::printf("error: %s\n", e.c_str());
  }
  if (!crash_log.empty()) std::printf("crash log:\n%s\n", crash_log.c_str());
  std::printf("RESULT: %s\n", pass ? "PASS" : "FAIL");
  std::fflush(stdout);
  server.Kill();
  if (f.dir.empty() && dir.rfind("/tmp/maskd-soak-", 0) == 0) {
    (void)!system(("rm -rf '" + dir + "'").c_str());
  }
  return pass ? 0 : 1;
}

}  // namespace
}  // namespace maskd::soak

int main(int argc, char** argv) { return maskd::soak::Main(argc, argv); }
