#include "bench/soak/hostile_actors.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <csignal>
#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace maskd::soak::hostile {
namespace {

// Exponentially ambiguous grammars (issue #24, finding 1).
std::vector<v1::CompileRequest> BombConstraints() {
  return {
      GrammarRequest("start: start start | \"a\"\n", v1::Grammar::FORMAT_LARK),
      GrammarRequest("start: start start | /./\n", v1::Grammar::FORMAT_LARK),
      GrammarRequest("root ::= root root | \"a\"\n", v1::Grammar::FORMAT_GBNF),
  };
}

// A fresh regex of 32,770 DFA states (tens of seconds of eager compile).
std::string SlowRegex(uint64_t n) { return absl::StrCat("z", n, "[a-z]*a[a-z]{14}"); }

std::string SlowSchema(uint64_t n) {
  return absl::StrCat(R"({"type": "object", "properties": {"k)", n,
                      R"(": {"type": "string", "pattern": "^[a-z]*a[a-z]{12}$"},)"
                      R"( "v": {"type": "array", "items": {"type": "integer"}, "minItems": 3,)"
                      R"( "maxItems": 40}}, "required": ["k)", n, R"(", "v"]})");
}

}  // namespace

// ---------------------------------------------------------------------------
// Hostile actors. Each loops while the run lasts, acting only in hostile
// phases.

class Actor {
 public:
  Actor(Shared* sh, std::string name, uint64_t seed) : sh_(sh), name_(std::move(name)), rng_(seed) {}
  virtual ~Actor() = default;
  void Run() {
    client_ = ConnectAs(sh_->addr, name_, absl::Seconds(30));
    if (client_ == nullptr) return;
    while (!sh_->stop.load()) {
      if (!sh_->phases.Hostile()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      Round();
    }
  }

 protected:
  virtual void Round() = 0;
  bool Active() const { return !sh_->stop.load() && sh_->phases.Hostile(); }
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  void SetDeadline(grpc::ClientContext* ctx, int ms) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
  }

  Shared* sh_;
  std::string name_;
  std::mt19937_64 rng_;
  std::unique_ptr<Client> client_;
};

namespace {

// Ambiguous grammars stepped (or masked) with ever longer inputs until the
// server refuses.
class GrammarActor : public Actor {
 public:
  using Actor::Actor;

 private:
  void Round() override {
    const std::vector<v1::CompileRequest> bombs = BombConstraints();
    const v1::CompileRequest& bomb = bombs[round_++ % bombs.size()];
    auto created = client_->CreateSession(bomb);
    if (!created.ok()) {
      sh_->grammar.Count(created.status());
      return;
    }
    v1::StepRequest req;
    v1::StepEntry* e = req.add_entries();
    e->set_session_id(created->session_id());
    v1::StepResponse resp;
    absl::Status s = client_->Step(req, &resp);
    std::vector<uint32_t> allowed;
    if (s.ok() && resp.results(0).status().code() == 0) allowed = AllowedTokens(MaskRow(resp, 0));
    std::vector<uint32_t> prefix;
    while (!allowed.empty() && Active() && prefix.size() < 4096) {
      e->clear_tokens();
      for (int i = 0; i < 8; ++i) {
        const uint32_t t = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng_)];
        e->add_tokens(t);
        prefix.push_back(t);
      }
      s = client_->Step(req, &resp);
      if (s.ok() && resp.results(0).status().code() != 0) {
        s = absl::Status(static_cast<absl::StatusCode>(resp.results(0).status().code()),
                         resp.results(0).status().message());
      }
      sh_->grammar.Count(s);
      if (!s.ok()) break;
    }
    if (round_ % 2 == 0 && !prefix.empty() && Active()) {
      auto m = client_->Mask(created->index_id(), prefix);  // the stateless path too
      sh_->grammar.Count(m.status());
    }
    (void)client_->CloseSession(created->session_id());
  }
  uint64_t round_ = 0;
};

// Sessions created past the per-client share, then all closed.
class FloodActor : public Actor {
 public:
  using Actor::Actor;

 private:
  void Round() override {
    if (index_id_.empty()) {
      auto c = client_->CompileRegex("qwen3", "[a-z]{1,8}");
      if (!c.ok()) {
        sh_->flood.Count(c.status());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return;
      }
      index_id_ = c->index_id();
    }
    std::vector<uint64_t> ids;
    int refused = 0;
    while (refused < 100 && Active()) {
      auto s = client_->CreateSession(index_id_);
      sh_->flood.Count(s.status());
      if (s.ok()) {
        ids.push_back(s->session_id());
      } else {
        ++refused;
      }
    }
    int64_t peak = sh_->flood_peak.load();
    const int64_t held = static_cast<int64_t>(ids.size());
    while (held > peak && !sh_->flood_peak.compare_exchange_weak(peak, held)) {
    }
    for (uint64_t id : ids) (void)client_->CloseSession(id);
  }
  std::string index_id_;
};

// Slow compiles the caller walks away from.
class AbandonActor : public Actor {
 public:
  using Actor::Actor;

 private:
  void Round() override {
    const uint64_t n = sh_->unique.fetch_add(1);
    grpc::ClientContext ctx;
    SetDeadline(&ctx, Uniform(20, 200));
    v1::CompileRequest req = (n % 3 == 2) ? SchemaRequest(SlowSchema(n)) : RegexRequest(SlowRegex(n));
    req.mutable_options()->set_eager(true);
    req.set_wait(true);
    v1::CompileResponse resp;
    sh_->abandon.Count(FromGrpc(client_->stub()->Compile(&ctx, req, &resp)));
    if (!Active()) return;
    {  // a session on a slow constraint, given up after 50 ms
      grpc::ClientContext c2;
      SetDeadline(&c2, 50);
      v1::CreateSessionRequest cs;
      *cs.mutable_compile() = RegexRequest(SlowRegex(sh_->unique.fetch_add(1)));
      v1::CreateSessionResponse cr;
      sh_->abandon.Count(FromGrpc(client_->stub()->CreateSession(&c2, cs, &cr)));
    }
    // In the background, then cancelled.
    v1::CompileRequest bg = RegexRequest(SlowRegex(sh_->unique.fetch_add(1)));
    bg.mutable_options()->set_eager(true);
    bg.set_wait(false);
    auto r = client_->Compile(bg);
    sh_->abandon.Count(r.status());
    if (!r.ok()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(Uniform(1, 20)));
    sh_->abandon.Count(client_->CancelCompile(r->index_id()).status());
  }
};

// Compile{wait: false} of fresh constraints, as fast as the server takes them.
class CompileFloodActor : public Actor {
 public:
  using Actor::Actor;

 private:
  void Round() override {
    const uint64_t n = sh_->unique.fetch_add(1);
    v1::CompileRequest req =
        RegexRequest(absl::StrCat("f", n, R"([a-z]{1,8}@[a-z]{2,5}\.(com|org|net))"));
    req.set_wait(false);
    auto r = client_->Compile(req);
    sh_->compile.Count(r.status());
    if (!r.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

}  // namespace

// ---------------------------------------------------------------------------
// The hostile actors' threads.

namespace {

template <typename A>
void StartActors(Shared* sh, int n, const char* kind, int thread_nice,
                 std::vector<std::unique_ptr<Actor>>* actors, std::vector<std::thread>* threads) {
  for (int i = 0; i < n; ++i) {
    actors->push_back(std::make_unique<A>(sh, absl::StrCat("hostile-", kind, "-", i),
                                          sh->flags.seed * 104729 + actors->size()));
    threads->emplace_back([a = actors->back().get(), nice = thread_nice] {
      if (nice > 0) {
        const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
        (void)setpriority(PRIO_PROCESS, tid, std::min(getpriority(PRIO_PROCESS, tid) + nice, 19));
      }
      a->Run();
    });
  }
}

}  // namespace

HostileActors::HostileActors() = default;

HostileActors::~HostileActors() { Join(); }

void HostileActors::Start(Shared* sh, int thread_nice) {
  const Flags& f = sh->flags;
  StartActors<GrammarActor>(sh, f.grammar_actors, "grammar", thread_nice, &actors_, &threads_);
  StartActors<FloodActor>(sh, f.flood_actors, "flood", thread_nice, &actors_, &threads_);
  StartActors<AbandonActor>(sh, f.abandon_actors, "abandon", thread_nice, &actors_, &threads_);
  StartActors<CompileFloodActor>(sh, f.compile_actors, "compile", thread_nice, &actors_, &threads_);
}

void HostileActors::Join() {
  for (auto& th : threads_) {
    if (th.joinable()) th.join();
  }
}

// ---------------------------------------------------------------------------
// The hostile process's report: its tallies as text lines on its stdout,
//   actor KIND attempts N
//   actor KIND code CODE N          (CODE: absl::StatusCode as an integer)
//   actor KIND first CODE MESSAGE   (MESSAGE: absl::CEscape'd, one line)
//   flood_peak N
//   end                             (the report is whole)

void WriteActorReport(Shared& sh, FILE* out) {
  for (const auto& [kind, member] : kActorKinds) {
    ActorTally& a = sh.*member;
    std::fprintf(out, "actor %s attempts %" PRId64 "\n", kind, a.attempts.load());
    for (int c = 0; c < 17; ++c) {
      const int64_t n = a.by_code[c].load();
      if (n > 0) std::fprintf(out, "actor %s code %d %" PRId64 "\n", kind, c, n);
    }
    absl::MutexLock l(&a.mu);
    for (const auto& [code, message] : a.first_message) {
      std::fprintf(out, "actor %s first %d %s\n", kind, code, absl::CEscape(message).c_str());
    }
  }
  std::fprintf(out, "flood_peak %" PRId64 "\nend\n", sh.flood_peak.load());
  std::fflush(out);
}

namespace {

ActorTally* TallyOf(Shared* sh, absl::string_view kind) {
  for (const auto& [name, member] : kActorKinds) {
    if (kind == name) return &(sh->*member);
  }
  return nullptr;
}

// One line of the report into `sh`; false when it is not one.
bool ReadReportLine(absl::string_view line, Shared* sh) {
  const std::vector<absl::string_view> w = absl::StrSplit(line, absl::MaxSplits(' ', 4));
  int64_t n = 0;
  int code = 0;
  if (w.size() == 2 && w[0] == "flood_peak" && absl::SimpleAtoi(w[1], &n)) {
    sh->flood_peak.store(n);
    return true;
  }
  ActorTally* a = w.size() >= 4 && w[0] == "actor" ? TallyOf(sh, w[1]) : nullptr;
  if (a == nullptr) return false;
  if (w.size() == 4 && w[2] == "attempts" && absl::SimpleAtoi(w[3], &n)) {
    a->attempts.store(n);
    return true;
  }
  if (w.size() != 5 || !absl::SimpleAtoi(w[3], &code) || code < 0 || code >= 17) return false;
  if (w[2] == "code" && absl::SimpleAtoi(w[4], &n)) {
    a->by_code[code].store(n);
    return true;
  }
  std::string message;
  if (w[2] != "first" || !absl::CUnescape(w[4], &message)) return false;
  absl::MutexLock l(&a->mu);
  a->first_message[code] = std::move(message);
  return true;
}

}  // namespace

std::string ReadActorReport(const std::string& text, Shared* sh) {
  if (text.empty()) return "it reported nothing";
  bool ended = false;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (ended) return "its report goes on after its end line";
    if (line == "end") {
      ended = true;
    } else if (!ReadReportLine(line, sh)) {
      return absl::StrCat("unreadable report line: ", line.substr(0, 120));
    }
  }
  return ended ? "" : "its report has no end line (cut short)";
}

// ---------------------------------------------------------------------------
// The hostile process (--role hostile): the actors alone, on the driver's
// phase schedule, until --seconds after the shared origin or SIGTERM; then
// the report on stdout.

namespace {

volatile std::sig_atomic_t g_terminate = 0;

void OnTerminate(int) { g_terminate = 1; }

}  // namespace

int RunHostileChild(Shared* sh) {
  const Flags& f = sh->flags;
  if (f.hostile_nice > 0) {  // before any thread: every thread (gRPC's too) inherits it
    (void)setpriority(PRIO_PROCESS, 0, std::min(getpriority(PRIO_PROCESS, 0) + f.hostile_nice, 19));
  }
  struct sigaction sa = {};
  sa.sa_handler = OnTerminate;
  sigaction(SIGTERM, &sa, nullptr);
  sh->addr = f.addr;
  sh->phases.phase_s = f.phase_seconds;
  sh->phases.settle_s = f.settle;
  sh->phases.SetOrigin(f.t0_unix_ns);
  HostileActors actors;
  actors.Start(sh, /*thread_nice=*/0);
  while (sh->phases.Now() < f.seconds && g_terminate == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  sh->stop.store(true);
  actors.Join();
  WriteActorReport(*sh, stdout);
  return 0;
}

}  // namespace maskd::soak::hostile
