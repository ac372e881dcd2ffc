// maskd::ResumableSession against the real maskd binary: sessions survive a
// SIGKILL and restart of the server on the same unix socket, and every mask
// the engine sees is the one the core library computes offline (index/,
// as `maskctl walk` does) for the same tokens.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/soak/maskd_process.h"
#include "client/client.h"
#include "client/resumable_session.h"
#include "gtest/gtest.h"
#include "index/guide.h"
#include "index/token_index.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace maskd {
namespace {

const char* const kRegexes[] = {
    R"([a-z]{1,8}@[a-z]{2,5}\.com)",
    R"((cat|dog)s? and (cat|dog)s?)",
    R"(\{"name": "[a-z ]{1,12}", "age": [0-9]{1,3}\})",
    R"(-?[0-9]{1,6}(\.[0-9]{1,4})?)",
};
constexpr int kNumRegexes = sizeof(kRegexes) / sizeof(kRegexes[0]);

std::string TempDir() {
  char tmpl[] = "/tmp/maskd-resume-XXXXXX";
  char* d = mkdtemp(tmpl);
  return d ? d : "";
}

// The vocabulary maskd loads from the bundled folder, and the offline index
// of each regex over it.
class Offline {
 public:
  static Offline& Get() {
    static Offline* o = new Offline();
    return *o;
  }
  std::shared_ptr<const TokenIndex> index(int i) const { return indexes_[i]; }

 private:
  Offline() {
    auto vocab = Vocabulary::Load(std::string(MASKD_SOURCE_DIR) + "/data/tokenizers/qwen3");
    EXPECT_TRUE(vocab.ok()) << vocab.status();
    auto context = TokenizerContext::Create(*vocab);
    for (const char* r : kRegexes) {
      auto ix = CompileRegex(r, context);
      EXPECT_TRUE(ix.ok()) << ix.status();
      indexes_.push_back(*ix);
    }
  }
  std::vector<std::shared_ptr<const TokenIndex>> indexes_;
};

v1::CompileRequest CompileFor(int i) {
  v1::CompileRequest c;
  c.set_tokenizer("qwen3");
  c.set_regex(kRegexes[i]);
  return c;
}

// A uniformly random allowed token of `row` (EOS included).
uint32_t Sample(absl::Span<const uint32_t> row, std::mt19937_64& rng) {
  std::vector<uint32_t> allowed = AllowedTokens(row);
  if (allowed.empty()) return UINT32_MAX;
  return allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
}

// One generated sequence and its offline twin.
struct Sequence {
  int regex = 0;
  std::mt19937_64 rng;
  std::unique_ptr<ResumableSession> session;
  Guide guide;
  std::vector<uint32_t> last;  // sampled last step, sent with the next
  std::vector<uint32_t> generated;
  bool done = false;
  bool stepped_after_kill = false;
  int mismatches = 0;
  Sequence(int r, uint64_t seed) : regex(r), rng(seed), guide(Offline::Get().index(r)) {}
};

// The tokens the uninterrupted reference run (core library only) generates
// for regex `r` and `seed`.
std::vector<uint32_t> ReferenceRun(int r, uint64_t seed, size_t max_tokens) {
  std::mt19937_64 rng(seed);
  Guide g(Offline::Get().index(r));
  std::vector<uint32_t> mask(g.index().num_words());
  std::vector<uint32_t> out;
  while (!g.IsFinished() && out.size() < max_tokens) {
    EXPECT_TRUE(g.WriteMaskUnchecked(mask.data()).ok());
    uint32_t t = Sample(mask, rng);
    if (t == UINT32_MAX || !g.Advance(t).ok()) break;
    out.push_back(t);
  }
  return out;
}

class ResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    ASSERT_FALSE(dir_.empty());
    server_ = std::make_unique<soak::MaskdServer>(
        std::string(MASKD_BIN_DIR) + "/maskd", dir_,
        std::string(MASKD_SOURCE_DIR) + "/data/tokenizers");
    ASSERT_TRUE(server_->Start().ok()) << server_->Log();
    ClientOptions o;
    o.timeout = absl::Seconds(30);
    client_ = *Client::Connect(server_->addr(), o);
    (void)Offline::Get();
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    if (dir_.rfind("/tmp/maskd-resume-", 0) == 0) (void)!system(("rm -rf '" + dir_ + "'").c_str());
  }
  std::string dir_;
  std::unique_ptr<soak::MaskdServer> server_;
  std::unique_ptr<Client> client_;
};

// N sequences generate in batches (StepResumable) with seeded sampling; the
// server is SIGKILLed mid-generation and restarted on the same socket 300 ms
// later. Every sequence finishes with exactly the masks and tokens of the
// uninterrupted reference run.
class GenerateTest : public ResumeTest, public ::testing::WithParamInterface<bool> {};

TEST_P(GenerateTest, SequencesSurviveSigkillAndRestart) {
  const bool use_stream = GetParam();
  std::unique_ptr<StepStream> stream;
  int streams_opened = 0;
  constexpr int kSequences = 12;
  constexpr size_t kMaxTokens = 40;
  constexpr int kKillAtStep = 6;
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < kSequences; ++i) {
    seqs.push_back(std::make_unique<Sequence>(i % kNumRegexes, 1000 + i));
    auto s = ResumableSession::Create(client_.get(), CompileFor(i % kNumRegexes));
    ASSERT_TRUE(s.ok()) << s.status();
    seqs.back()->session = *std::move(s);
  }
  // A plain session: what an engine without resume sees after the restart.
  auto plain = client_->CreateSession(CompileFor(0));
  ASSERT_TRUE(plain.ok()) << plain.status();
  const pid_t first_pid = server_->pid();

  std::thread restarter;
  struct Joiner {
    std::thread* t;
    ~Joiner() {
      if (t->joinable()) t->join();
    }
  } joiner{&restarter};
  int killed_status = 0;
  v1::StepResponse resp;
  std::vector<uint32_t> offline(Offline::Get().index(0)->num_words());
  for (int step = 0;; ++step) {
    if (step == kKillAtStep) {
      killed_status = server_->Kill();
      restarter = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        EXPECT_TRUE(server_->Start().ok()) << server_->Log();
      });
    }
    std::vector<ResumableSession*> batch;
    std::vector<v1::StepEntry> entries;
    std::vector<Sequence*> live;
    for (auto& q : seqs) {
      if (q->done) continue;
      live.push_back(q.get());
      if (step >= kKillAtStep) q->stepped_after_kill = true;
      batch.push_back(q->session.get());
      v1::StepEntry e;
      e.mutable_tokens()->Add(q->last.begin(), q->last.end());
      entries.push_back(std::move(e));
    }
    if (live.empty()) break;
    if (use_stream && (stream == nullptr || stream->closed())) {
      auto opened = client_->OpenStepStream();
      ASSERT_TRUE(opened.ok()) << opened.status();
      stream = *std::move(opened);
      ++streams_opened;
    }
    ASSERT_TRUE(StepResumable(batch, entries, &resp, stream.get()).ok());
    for (size_t i = 0; i < live.size(); ++i) {
      Sequence& q = *live[i];
      ASSERT_EQ(resp.results(static_cast<int>(i)).status().code(), 0)
          << resp.results(static_cast<int>(i)).status().message();
      for (uint32_t t : q.last) ASSERT_TRUE(q.guide.Advance(t).ok());
      EXPECT_TRUE(q.guide.WriteMaskUnchecked(offline.data()).ok());
      auto row = MaskRow(resp, static_cast<int>(i));
      ASSERT_EQ(row.size(), q.guide.index().num_words());
      if (!std::equal(row.begin(), row.end(), offline.begin())) ++q.mismatches;
      EXPECT_EQ(resp.results(static_cast<int>(i)).num_tokens(), q.generated.size());
      if (q.guide.IsFinished() || q.generated.size() >= kMaxTokens) {
        q.done = true;
        continue;
      }
      uint32_t t = Sample(row, q.rng);
      ASSERT_NE(t, UINT32_MAX);
      q.generated.push_back(t);
      q.last = {t};
    }
  }
  restarter.join();
  if (use_stream) {
    EXPECT_EQ(streams_opened, 2);  // the first broke with the kill
  }
  EXPECT_TRUE(WIFSIGNALED(killed_status) && WTERMSIG(killed_status) == SIGKILL);
  EXPECT_NE(server_->pid(), first_pid);
  EXPECT_EQ(server_->starts(), 2);
  int resumed = 0;
  for (auto& q : seqs) resumed += q->stepped_after_kill;
  EXPECT_GE(resumed, kSequences / 2);
  for (int i = 0; i < kSequences; ++i) {
    const Sequence& q = *seqs[i];
    EXPECT_EQ(q.mismatches, 0) << "sequence " << i;
    EXPECT_EQ(q.generated, ReferenceRun(q.regex, 1000 + i, kMaxTokens)) << "sequence " << i;
    EXPECT_EQ(q.session->tokens(), q.generated) << "sequence " << i;
    EXPECT_EQ(q.session->resumes(), q.stepped_after_kill ? 1 : 0) << "sequence " << i;
  }
  // The fault this guards against: the plain session is gone after restart.
  v1::StepRequest req;
  req.add_entries()->set_session_id(plain->session_id());
  ASSERT_TRUE(client_->Step(req, &resp).ok());
  EXPECT_EQ(resp.results(0).status().code(), static_cast<int>(absl::StatusCode::kNotFound));
}

INSTANTIATE_TEST_SUITE_P(UnaryAndStream, GenerateTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "StepStream" : "UnaryStep";
                         });

// Single-session Step, Rollback and Fork across a restart: the resumed
// session is in the state the local tokens say, forks carry on independently.
TEST_F(ResumeTest, StepRollbackForkAcrossRestart) {
  const int r = 2;  // the JSON-like regex: long enough to roll back and fork
  auto s = ResumableSession::Create(client_.get(), CompileFor(r));
  ASSERT_TRUE(s.ok()) << s.status();
  ResumableSession& sess = **s;
  Guide guide(Offline::Get().index(r));
  std::vector<uint32_t> mask(guide.index().num_words());
  std::mt19937_64 rng(7);
  v1::StepResponse resp;
  std::vector<uint32_t> last;
  auto step_and_check = [&](ResumableSession& rs, Guide& g, std::vector<uint32_t>& toks,
                            uint32_t rollback) {
    ASSERT_TRUE(rs.Step(toks, &resp, rollback).ok()) << resp.results(0).status().message();
    ASSERT_TRUE(g.RollbackAndAdvance(rollback, toks).ok());
    EXPECT_TRUE(g.WriteMaskUnchecked(mask.data()).ok());
    auto row = MaskRow(resp, 0);
    ASSERT_TRUE(std::equal(row.begin(), row.end(), mask.begin()));
    toks = {Sample(row, rng)};
  };
  for (int i = 0; i < 6; ++i) step_and_check(sess, guide, last, 0);
  ASSERT_EQ(sess.tokens().size(), 5u);

  server_->Kill();
  ASSERT_TRUE(server_->Start().ok()) << server_->Log();

  // Rollback on the lost session: resumed, then rolled back on the server.
  ASSERT_TRUE(sess.Rollback(2).ok());
  ASSERT_TRUE(guide.Rollback(2).ok());
  EXPECT_EQ(sess.resumes(), 1);
  EXPECT_EQ(sess.tokens().size(), 3u);
  last.clear();
  step_and_check(sess, guide, last, 0);
  auto child = sess.Fork();
  ASSERT_TRUE(child.ok()) << child.status();
  Guide child_guide = guide.Fork();
  std::vector<uint32_t> child_last = last;
  step_and_check(sess, guide, last, 0);
  step_and_check(**child, child_guide, child_last, 0);

  // Another restart: both resume independently; a rollback inside the step.
  server_->Kill();
  ASSERT_TRUE(server_->Start().ok()) << server_->Log();
  std::vector<uint32_t> redo = {sess.tokens().back()};  // rolled back, then taken again
  step_and_check(sess, guide, redo, 1);
  step_and_check(**child, child_guide, child_last, 0);
  EXPECT_EQ(sess.resumes(), 2);
  EXPECT_EQ((*child)->resumes(), 1);
  EXPECT_EQ(sess.tokens().size(), 4u);  // 5, -2, +1, then -1 +1 in one step
  EXPECT_EQ((*child)->tokens().size(), 5u);  // 3 at the fork, +1, +1

  // Entry errors are returned as they are and change nothing.
  const std::vector<uint32_t> before = sess.tokens();
  uint32_t bad = 0;
  while (guide.IsAllowed(bad)) ++bad;
  std::vector<uint32_t> bad_tokens = {bad};
  absl::Status st = sess.Step(bad_tokens, &resp);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_EQ(sess.tokens(), before);
  EXPECT_EQ(sess.resumes(), 2);
  EXPECT_TRUE(sess.Rollback(1000).code() == absl::StatusCode::kInvalidArgument);
}

// A session that expired (closed behind the client's back) is resumed on the
// same server with the same mask.
TEST_F(ResumeTest, NotFoundWithoutRestartResumes) {
  auto s = ResumableSession::Create(client_.get(), CompileFor(0));
  ASSERT_TRUE(s.ok()) << s.status();
  v1::StepResponse a, b;
  std::vector<uint32_t> none;
  ASSERT_TRUE((*s)->Step(none, &a).ok());
  std::mt19937_64 rng(3);
  std::vector<uint32_t> t = {Sample(MaskRow(a, 0), rng)};
  ASSERT_TRUE((*s)->Step(t, &a).ok());
  const uint64_t old_id = (*s)->session_id();
  ASSERT_TRUE(client_->CloseSession(old_id).ok());
  ASSERT_TRUE((*s)->Step(none, &b).ok()) << b.results(0).status().message();
  EXPECT_NE((*s)->session_id(), old_id);
  EXPECT_EQ((*s)->resumes(), 1);
  EXPECT_EQ(a.masks(), b.masks());
  EXPECT_EQ(b.results(0).num_tokens(), 1u);
}

// The state letter of /proc/<pid>/stat ('R', 'S', 'T', ...); '?' when unreadable.
char ProcessState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() ? '?' : line[paren + 2];
}

// A call whose outcome is unknown (the client's deadline passed while the
// server was stalled; the server may have applied it) must not leave the
// session stepping on from a state the client does not know: the next call
// re-creates it from the confirmed tokens, and its mask is exact.
TEST_F(ResumeTest, DeadlineExceededAbandonsTheServerSession) {
  ClientOptions o;
  o.timeout = absl::Milliseconds(500);
  auto short_client = Client::Connect(server_->addr(), o);
  ASSERT_TRUE(short_client.ok());
  auto s = ResumableSession::Create(short_client->get(), CompileFor(0));
  ASSERT_TRUE(s.ok()) << s.status();
  Guide guide(Offline::Get().index(0));
  std::vector<uint32_t> mask(guide.index().num_words());
  std::mt19937_64 rng(11);
  v1::StepResponse resp;
  std::vector<uint32_t> none;
  ASSERT_TRUE((*s)->Step(none, &resp).ok());
  std::vector<uint32_t> first = {Sample(MaskRow(resp, 0), rng)};
  ASSERT_TRUE((*s)->Step(first, &resp).ok());
  ASSERT_TRUE(guide.Advance(first[0]).ok());
  const uint64_t old_id = (*s)->session_id();
  std::vector<uint32_t> lost = {Sample(MaskRow(resp, 0), rng)};

  kill(server_->pid(), SIGSTOP);
  // kill() returns before the stop: wait until the process is stopped ('T').
  for (int i = 0; i < 500 && ProcessState(server_->pid()) != 'T'; ++i) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_EQ(ProcessState(server_->pid()), 'T');
  absl::Status timed_out = (*s)->Step(lost, &resp);
  kill(server_->pid(), SIGCONT);
  EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded) << timed_out;
  EXPECT_EQ((*s)->tokens(), first);  // not confirmed, not kept
  // Whether the server applied the stalled step is unknown to the client;
  // here it did (done through another client, as a server that handled the
  // request before the cancel arrived would).
  v1::StepResponse applied;
  v1::StepRequest req;
  v1::StepEntry* e = req.add_entries();
  e->set_session_id(old_id);
  e->add_tokens(lost[0]);
  ASSERT_TRUE(client_->Step(req, &applied).ok());
  ASSERT_EQ(applied.results(0).num_tokens(), 2u) << applied.results(0).status().message();

  // The next step starts from the confirmed tokens on a new server session.
  ASSERT_TRUE((*s)->Step(none, &resp).ok()) << resp.results(0).status().message();
  EXPECT_NE((*s)->session_id(), old_id);
  EXPECT_EQ((*s)->resumes(), 1);
  EXPECT_EQ(resp.results(0).num_tokens(), 1u);
  EXPECT_TRUE(guide.WriteMaskUnchecked(mask.data()).ok());
  auto row = MaskRow(resp, 0);
  EXPECT_TRUE(std::equal(row.begin(), row.end(), mask.begin()));
}

// In one StepResumable batch: a lost session is resumed, an entry error stays
// that entry's (zero row, nothing changed), the others step normally.
TEST_F(ResumeTest, BatchMixesResumedFailedAndNormalEntries) {
  std::vector<std::unique_ptr<ResumableSession>> s;
  for (int i = 0; i < 3; ++i) {
    auto c = ResumableSession::Create(client_.get(), CompileFor(3));
    ASSERT_TRUE(c.ok()) << c.status();
    s.push_back(*std::move(c));
  }
  std::vector<ResumableSession*> batch = {s[0].get(), s[1].get(), s[2].get()};
  std::vector<v1::StepEntry> entries(3);
  for (auto& e : entries) e.add_tokens(0);  // set below
  Guide g(Offline::Get().index(3));
  uint32_t good = 0, bad = 0;
  while (!g.IsAllowed(good)) ++good;
  while (g.IsAllowed(bad)) ++bad;
  for (auto& e : entries) e.set_tokens(0, good);
  entries[1].set_tokens(0, bad);
  ASSERT_TRUE(client_->CloseSession(s[0]->session_id()).ok());  // lost behind its back
  v1::StepResponse resp;
  ASSERT_TRUE(StepResumable(batch, entries, &resp).ok());
  ASSERT_EQ(resp.results_size(), 3);
  EXPECT_EQ(resp.results(0).status().code(), 0) << resp.results(0).status().message();
  EXPECT_EQ(resp.results(1).status().code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(resp.results(2).status().code(), 0);
  EXPECT_EQ(s[0]->resumes(), 1);
  EXPECT_EQ(s[1]->resumes(), 0);
  EXPECT_EQ(s[0]->tokens(), std::vector<uint32_t>{good});
  EXPECT_TRUE(s[1]->tokens().empty());
  EXPECT_EQ(s[2]->tokens(), std::vector<uint32_t>{good});
  ASSERT_TRUE(g.Advance(good).ok());
  std::vector<uint32_t> mask(g.index().num_words());
  EXPECT_TRUE(g.WriteMaskUnchecked(mask.data()).ok());
  for (int i : {0, 2}) {
    auto row = MaskRow(resp, i);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), mask.begin())) << "row " << i;
  }
  auto row1 = MaskRow(resp, 1);
  EXPECT_TRUE(std::all_of(row1.begin(), row1.end(), [](uint32_t w) { return w == 0; }));
}

// When the server does not come back, a call gives up within the recovery
// timeout with UNAVAILABLE naming the problem, and changes nothing.
TEST_F(ResumeTest, ServerThatStaysDownGivesBoundedUnavailable) {
  ResumeOptions o;
  o.recovery_timeout = absl::Seconds(2);
  auto s = ResumableSession::Create(client_.get(), CompileFor(3), o);
  ASSERT_TRUE(s.ok()) << s.status();
  v1::StepResponse resp;
  std::vector<uint32_t> none;
  ASSERT_TRUE((*s)->Step(none, &resp).ok());
  server_->Kill();
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status st = (*s)->Step(none, &resp);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(st.message().find("did not come back"), absl::string_view::npos) << st;
  EXPECT_LT(secs, 6.0);
  EXPECT_GE(secs, 1.5);
  ASSERT_EQ(resp.results_size(), 1);
  EXPECT_EQ(resp.results(0).status().code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_TRUE((*s)->tokens().empty());
  // Creating one while the server is down fails the same way.
  auto none_session = ResumableSession::Create(client_.get(), CompileFor(3), o);
  EXPECT_EQ(none_session.status().code(), absl::StatusCode::kUnavailable);
  // And once it is back, the same session carries on.
  ASSERT_TRUE(server_->Start().ok());
  EXPECT_TRUE((*s)->Step(none, &resp).ok()) << resp.results(0).status().message();
}

// maskctl generate --resume (ResumableSession) generates what plain
// generate does for the same seed, and says how often it resumed.
TEST_F(ResumeTest, MaskctlGenerateResume) {
  auto run = [&](const std::string& extra) {
    std::string cmd = std::string(MASKD_BIN_DIR) + "/maskctl --addr " + server_->addr() +
                      " generate --tokenizer qwen3 --regex '" + kRegexes[2] +
                      "' --seed 5 --max-tokens 24" + extra;
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      EXPECT_EQ(pclose(p), 0) << cmd;
    }
    return out;
  };
  auto field = [](const std::string& line, const std::string& name) {
    size_t at = line.find("\"" + name + "\": ");
    if (at == std::string::npos) return std::string("<none>");
    at += name.size() + 4;
    return line.substr(at, line.find_first_of(",}", line[at] == '[' ? line.find(']', at) : at) - at);
  };
  const std::string plain = run("");
  const std::string resumed = run(" --resume");
  ASSERT_NE(field(plain, "tokens"), "<none>") << plain;
  ASSERT_GT(field(plain, "tokens").size(), 10u) << plain;  // "[n, n, ...]"
  EXPECT_EQ(field(plain, "tokens"), field(resumed, "tokens")) << plain << resumed;
  EXPECT_EQ(field(plain, "text_hex"), field(resumed, "text_hex"));
  EXPECT_EQ(field(resumed, "resumes"), "0") << resumed;
  EXPECT_EQ(field(plain, "resumes"), "<none>") << plain;
}

}  // namespace
}  // namespace maskd
