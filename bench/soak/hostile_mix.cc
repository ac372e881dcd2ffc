// maskd_hostile_mix: well-behaved clients' step latency and errors with and
// without hostile clients beside them, against the real maskd at its default
// flags (docs/reliability.md, "Hostile mix"; issue #24).
//
//   maskd_hostile_mix --seconds 1800 [--phase-seconds 60] [--settle 5]
//                     [--good-clients 4] [--pace-ms 5] [--warmup 30]
//                     [--rss-tolerance-mb 64] [--fd-tolerance 16]
//                     [--p99-ratio-goal 2] [--seed 1] [--samples-csv FILE]
//                     [--hostile-nice 0] [--hostile-in-process 0]
//   bench/soak/hostile_mix.sh MINUTES   (builds, runs at nice 5, prints the summary)
//
// Time is cut into phases of --phase-seconds: quiet, hostile, quiet, hostile,
// ... Good clients run throughout; hostile actors act only in hostile phases,
// so background noise on the machine hits both kinds alike. Step latencies
// are kept per phase kind, leaving out the first --settle seconds of every
// phase (work the previous phase left in flight). Every client is its own
// connection (its own ClientOptions::client_name, so gRPC does not share one
// subchannel between them); maskd runs with --client-identity=connection, its
// default.
//
// Good clients (one thread and one connection each): a session over a regex,
// a JSON Schema or a small Lark grammar (in turn), stepped one token at a time
// along a random walk of the masks the server returns (so every token is
// valid), one Step per --pace-ms, up to 24 tokens, then closed and the next
// one opened. Any non-OK status (call or entry) is a good client's error.
//
// Hostile actors (each a thread with its own connection):
//   grammar  ambiguous Lark/GBNF grammars (`start: start start | "a"`, over
//            /./, the GBNF twin) stepped 8 tokens at a time, or Mask of a long
//            prefix, until the server refuses (RESOURCE_EXHAUSTED expected);
//   flood    CreateSession past the per-client share, then every one closed;
//   abandon  slow compiles (32,770-state regexes, a slow JSON Schema) with
//            20-200 ms deadlines, CreateSession{compile} with a 50 ms deadline,
//            and Compile{wait: false} + CancelCompile;
//   compile  Compile{wait: false} of fresh regexes as fast as accepted.
// Their outcomes are counted by status code, never against the goals.
// (With --good-fresh-every N, every Nth good session is on a regex compiled
// for it, as an engine's new request schema would be; default off.)
//
// The hostile actors run in a process of their own, as attackers would:
// gRPC's client side is process-wide (poller, event engine, timer and
// executor threads), so actors inside the driver would slow the good clients
// there too, not only in maskd. The driver starts maskd, then runs itself
// (/proc/self/exe) with --role hostile --addr A --t0-unix-ns N and the actor
// flags; that process keeps the same phase schedule (both map the wall-clock
// origin N onto their own steady clock), ends at --seconds (or on SIGTERM,
// sent when maskd died) and writes its tallies on its stdout, a pipe the
// driver reads into the summary (WriteActorReport). It dies with the driver
// (PR_SET_PDEATHSIG). A hostile process that fails, or whose report is
// missing or cut short, fails the run ("hostile actors: ..." in the summary).
// --hostile-in-process 1 runs the actors as threads of the driver instead
// (the old way, to compare); the summary's header line says which ran
// ("actors: separate process" / "actors: in process"). --hostile-nice N (a
// diagnostic) lowers the hostile process's priority (all its threads), or
// with --hostile-in-process the actor threads'.
//
// Goals (exit 0 when all hold, 1 otherwise, 2 on bad flags/setup): good
// clients' errors == 0; hostile p99 / quiet p99 <= --p99-ratio-goal; maskd's
// RSS last - first after --warmup, less the index cache's growth over the same
// samples (memory maskd keeps on purpose, bounded by --cache-bytes), <=
// --rss-tolerance-mb; fds last - first <= --fd-tolerance.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "bench/soak/flag_pairs.h"
#include "bench/soak/hostile_actors.h"
#include "bench/soak/hostile_mix.h"
#include "bench/soak/maskd_process.h"
#include "bench/soak/child_process.h"
#include "client/client.h"

namespace maskd::soak::hostile {
namespace {

bool SetFlag(Flags* f, const std::string& a, const std::string& v) {
  if (a == "--seconds") f->seconds = atof(v.c_str());
  else if (a == "--phase-seconds") f->phase_seconds = atof(v.c_str());
  else if (a == "--settle") f->settle = atof(v.c_str());
  else if (a == "--good-clients") f->good_clients = atoi(v.c_str());
  else if (a == "--pace-ms") f->pace_ms = atof(v.c_str());
  else if (a == "--good-fresh-every") f->good_fresh_every = atoi(v.c_str());
  else if (a == "--grammar-actors") f->grammar_actors = atoi(v.c_str());
  else if (a == "--flood-actors") f->flood_actors = atoi(v.c_str());
  else if (a == "--abandon-actors") f->abandon_actors = atoi(v.c_str());
  else if (a == "--compile-actors") f->compile_actors = atoi(v.c_str());
  else if (a == "--warmup") f->warmup = atof(v.c_str());
  else if (a == "--rss-tolerance-mb") f->rss_tolerance_mb = atof(v.c_str());
  else if (a == "--fd-tolerance") f->fd_tolerance = atoi(v.c_str());
  else if (a == "--p99-ratio-goal") f->p99_ratio_goal = atof(v.c_str());
  else if (a == "--hostile-nice") f->hostile_nice = atoi(v.c_str());
  else if (a == "--hostile-in-process") f->hostile_in_process = atoi(v.c_str()) != 0;
  else if (a == "--role") f->role = v;
  else if (a == "--addr") f->addr = v;
  else if (a == "--t0-unix-ns") f->t0_unix_ns = strtoll(v.c_str(), nullptr, 10);
  else if (a == "--seed") f->seed = strtoull(v.c_str(), nullptr, 10);
  else if (a == "--maskd") f->maskd = v;
  else if (a == "--tokenizer-dir") f->tokenizer_dir = v;
  else if (a == "--dir") f->dir = v;
  else if (a == "--samples-csv") f->samples_csv = v;
  else if (a == "--maskd-flag") f->maskd_flags.push_back(v);
  else return false;
  return true;
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  auto set = [f](const std::string& a, const std::string& v) { return SetFlag(f, a, v); };
  if (!ReadFlagPairs(argc, argv, "maskd_hostile_mix", &f->command, set)) return false;
  if (f->seconds <= 0 || f->phase_seconds <= f->settle || f->good_clients < 1 ||
      f->good_clients > 64 || f->pace_ms < 0) {
    std::fprintf(stderr,
                 "maskd_hostile_mix: need --seconds > 0, --phase-seconds > --settle, "
                 "1 <= --good-clients <= 64, --pace-ms >= 0\n");
    return false;
  }
  if (!f->role.empty() && (f->role != "hostile" || f->addr.empty() || f->t0_unix_ns <= 0)) {
    std::fprintf(stderr, "maskd_hostile_mix: --role hostile needs --addr and --t0-unix-ns > 0\n");
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Good clients.

// What the good clients generate: one of each engine route.
std::vector<v1::CompileRequest> GoodConstraints() {
  return {
      RegexRequest(R"(\{"name": "[a-z ]{1,12}", "age": [0-9]{1,3}\})"),
      SchemaRequest(R"({"type": "object", "properties": {"id": {"type": "integer"},)"
                    R"( "tags": {"type": "array", "items": {"type": "string", "maxLength": 8},)"
                    R"( "maxItems": 3}}, "required": ["id", "tags"]})"),
      GrammarRequest("start: expr\n"
                     "expr: term ((\"+\" | \"-\") term)*\n"
                     "term: NUMBER | \"(\" expr \")\"\n"
                     "NUMBER: /[0-9]{1,4}/\n",
                     v1::Grammar::FORMAT_LARK),
  };
}

// A token the server allows next, at random; UINT32_MAX when none is.
uint32_t PickAllowed(const v1::StepResponse& resp, std::mt19937_64& rng) {
  std::vector<uint32_t> allowed = AllowedTokens(MaskRow(resp, 0));
  if (allowed.empty()) return UINT32_MAX;
  return allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
}

// A well-behaved client.
class GoodClient {
 public:
  GoodClient(Shared* sh, int id) : sh_(sh), id_(id), rng_(sh->flags.seed * 7919 + id) {}

  void Run() {
    client_ = ConnectAs(sh_->addr, absl::StrCat("good-", id_), absl::Seconds(10));
    if (client_ == nullptr) {
      Error("connect failed");
      return;
    }
    const std::vector<v1::CompileRequest> constraints = GoodConstraints();
    next_ = Clock::now();
    const int fresh_every = sh_->flags.good_fresh_every;
    for (int n = id_; !sh_->stop.load(); ++n) {
      route_ = n % kRoutes;
      if (fresh_every > 0 && n % fresh_every == 0) {
        // A constraint no one compiled yet (an engine's new request schema).
        route_ = 0;
        Generate(RegexRequest(absl::StrCat("g", id_, "-", n, "[a-z]{1,8}( [a-z]{1,8}){0,3}")));
        continue;
      }
      Generate(constraints[route_]);
    }
    absl::MutexLock l(&sh_->good.mu);
    for (int k = 0; k < 2; ++k) {
      for (int r = 0; r < kRoutes; ++r) {
        auto& to = sh_->good.latency_us[k][r];
        to.insert(to.end(), latency_us_[k][r].begin(), latency_us_[k][r].end());
      }
    }
    sh_->good.steps_uncounted += uncounted_;
  }

 private:
  void Error(const std::string& what) {
    const bool hostile = sh_->phases.Hostile();
    absl::MutexLock l(&sh_->good.mu);
    ++sh_->good.errors[hostile ? 1 : 0];
    if (sh_->good.first_errors.size() < 20) {
      sh_->good.first_errors.push_back(absl::StrCat(
          "good-", id_, " at ", static_cast<int>(sh_->phases.Now()), " s (",
          hostile ? "hostile" : "quiet", "): ", what));
    }
  }

  // Sleeps to the next tick of --pace-ms (an engine's decoding cadence).
  void Pace() {
    next_ += std::chrono::microseconds(static_cast<int64_t>(sh_->flags.pace_ms * 1000));
    const auto now = Clock::now();
    if (next_ > now) std::this_thread::sleep_until(next_);
    else next_ = now;
  }

  // One timed Step; false (error counted) unless the call and entry are OK.
  bool TimedStep(const v1::StepRequest& req, v1::StepResponse* resp) {
    const double t = sh_->phases.Now();
    const auto start = Clock::now();
    absl::Status s = client_->Step(req, resp);
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    if (sh_->phases.Counted(t)) {
      latency_us_[sh_->phases.HostileAt(t) ? 1 : 0][route_].push_back(static_cast<uint32_t>(us.count()));
    } else {
      ++uncounted_;
    }
    if (!s.ok()) {
      Error(absl::StrCat("Step: ", s.ToString()));
      return false;
    }
    if (resp->results(0).status().code() != 0) {
      Error(absl::StrCat("Step entry: code ", resp->results(0).status().code(), ": ",
                         resp->results(0).status().message()));
      return false;
    }
    return true;
  }

  void Generate(const v1::CompileRequest& constraint) {
    auto created = client_->CreateSession(constraint);
    if (!created.ok()) {
      Error(absl::StrCat("CreateSession: ", created.status().ToString()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return;
    }
    {
      absl::MutexLock l(&sh_->good.mu);
      ++sh_->good.sessions;
    }
    v1::StepRequest req;
    v1::StepEntry* e = req.add_entries();
    e->set_session_id(created->session_id());
    v1::StepResponse resp;
    for (int i = 0; i < 25 && !sh_->stop.load(); ++i) {
      Pace();
      if (!TimedStep(req, &resp) || resp.results(0).finished()) break;
      const uint32_t t = PickAllowed(resp, rng_);
      if (t == UINT32_MAX) break;
      e->clear_tokens();
      e->add_tokens(t);
    }
    if (absl::Status s = client_->CloseSession(created->session_id()); !s.ok()) {
      Error(absl::StrCat("CloseSession: ", s.ToString()));
    }
  }

  Shared* sh_;
  int id_;
  std::mt19937_64 rng_;
  std::unique_ptr<Client> client_;
  Clock::time_point next_;
  std::vector<uint32_t> latency_us_[2][kRoutes];
  int route_ = 0;
  int64_t uncounted_ = 0;
};

// ---------------------------------------------------------------------------
// Summary.

struct Percentiles {
  size_t n = 0;
  double p50 = 0, p99 = 0, max = 0;
};

Percentiles Summarize(std::vector<uint32_t> v) {
  Percentiles p;
  p.n = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return static_cast<double>(v[static_cast<size_t>(q * (v.size() - 1))]); };
  p.p50 = at(0.50);
  p.p99 = at(0.99);
  p.max = static_cast<double>(v.back());
  return p;
}

std::vector<uint32_t> AllRoutes(const std::vector<uint32_t> (&by_route)[kRoutes]) {
  std::vector<uint32_t> all;
  for (const auto& v : by_route) all.insert(all.end(), v.begin(), v.end());
  return all;
}

struct Sample {
  double t;
  bool hostile;
  int64_t rss, fds;
  int64_t cache_bytes, indexes, sessions;  // maskd's Stats; -1 when the call failed
};

struct Growth {
  int n = 0;
  int64_t first = -1, last = -1, max = -1;
};

Growth GrowthOf(const std::vector<Sample>& samples, double warmup, int64_t Sample::*field) {
  Growth g;
  for (const Sample& s : samples) {
    const int64_t v = s.*field;
    if (s.t < warmup || v < 0) continue;
    if (g.n++ == 0) g.first = v;
    g.last = v;
    g.max = std::max(g.max, v);
  }
  return g;
}

void PrintActor(const char* name, ActorTally& a) {
  std::printf("hostile %-8s attempts: %" PRId64 " ", name, a.attempts.load());
  for (int c = 0; c < 17; ++c) {
    const int64_t n = a.by_code[c].load();
    if (n == 0) continue;
    std::printf(" %s: %" PRId64, absl::StatusCodeToString(static_cast<absl::StatusCode>(c)).c_str(),
                n);
  }
  std::printf("\n");
  absl::MutexLock l(&a.mu);
  for (const auto& [code, message] : a.first_message) {
    std::printf("  first %s: %s\n",
                absl::StatusCodeToString(static_cast<absl::StatusCode>(code)).c_str(), message.c_str());
  }
}

struct Verdict {
  bool errors_ok, ratio_ok, rss_ok, fds_ok, crashed, actors_ok;
  bool pass() const { return errors_ok && ratio_ok && rss_ok && fds_ok && !crashed && actors_ok; }
};

// `actors_problem`: empty, or why the hostile actors' tallies are missing or
// incomplete (the hostile process failed); the run then fails.
Verdict Report(Shared& sh, const std::vector<Sample>& samples, double elapsed, bool crashed,
               const std::string& commit, const std::string& actors_problem) {
  const Flags& f = sh.flags;
  absl::MutexLock l(&sh.good.mu);
  const Percentiles quiet = Summarize(AllRoutes(sh.good.latency_us[0]));
  const Percentiles hostile = Summarize(AllRoutes(sh.good.latency_us[1]));
  const double ratio = quiet.p99 > 0 ? hostile.p99 / quiet.p99 : 0;
  const Growth rss = GrowthOf(samples, f.warmup, &Sample::rss);
  const Growth fds = GrowthOf(samples, f.warmup, &Sample::fds);
  const Growth cache = GrowthOf(samples, f.warmup, &Sample::cache_bytes);
  const Growth indexes = GrowthOf(samples, f.warmup, &Sample::indexes);
  const Growth sessions = GrowthOf(samples, 0, &Sample::sessions);
  Verdict v;
  v.errors_ok = sh.good.errors[0] + sh.good.errors[1] == 0;
  v.ratio_ok = quiet.n > 0 && hostile.n > 0 && ratio <= f.p99_ratio_goal;
  // The index cache is memory maskd is meant to keep (bounded by --cache-bytes,
  // reported below); the goal is about what grows beside it.
  const int64_t cache_growth = cache.n > 0 && cache.first >= 0 && cache.last >= 0 ? cache.last - cache.first : 0;
  const int64_t rss_beyond_cache = rss.last - rss.first - cache_growth;  // what the goal judges
  v.rss_ok = rss.n > 0 && rss_beyond_cache <= static_cast<int64_t>(f.rss_tolerance_mb * 1048576);
  v.fds_ok = fds.n > 0 && fds.last - fds.first <= f.fd_tolerance;
  v.crashed = crashed;
  v.actors_ok = actors_problem.empty();
  auto mb = [](int64_t b) { return b < 0 ? -1.0 : static_cast<double>(b) / 1048576.0; };
  std::printf("=== maskd hostile mix summary ===\n");
  std::printf("command: %s\ncommit: %s\n", f.command.c_str(), commit.c_str());
  std::printf("duration_s: %.0f  phase_s: %.0f (quiet, hostile, ...; first %.0f s of each not timed)"
              "  good_clients: %d  pace_ms: %.1f  hostile_nice: %d  actors: %s  maskd flags: %s\n",
              elapsed, f.phase_seconds, f.settle, f.good_clients, f.pace_ms, f.hostile_nice,
              f.hostile_in_process ? "in process" : "separate process",
              f.maskd_flags.empty() ? "defaults" : absl::StrJoin(f.maskd_flags, " ").c_str());
  std::printf("good sessions: %" PRId64 "  steps not timed (settle): %" PRId64 "\n", sh.good.sessions,
              sh.good.steps_uncounted);
  std::printf("| phase | good steps | p50 us | p99 us | max us | good errors |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  std::printf("| quiet | %zu | %.0f | %.0f | %.0f | %" PRId64 " |\n", quiet.n, quiet.p50, quiet.p99,
              quiet.max, sh.good.errors[0]);
  std::printf("| hostile | %zu | %.0f | %.0f | %.0f | %" PRId64 " |\n", hostile.n, hostile.p50,
              hostile.p99, hostile.max, sh.good.errors[1]);
  for (int r = 0; r < kRoutes; ++r) {
    for (int k = 0; k < 2; ++k) {
      const Percentiles p = Summarize(sh.good.latency_us[k][r]);
      std::printf("| %s, %s sessions | %zu | %.0f | %.0f | %.0f | |\n", k ? "hostile" : "quiet",
                  kRouteNames[r], p.n, p.p50, p.p99, p.max);
    }
  }
  for (const auto& [kind, tally] : kActorKinds) PrintActor(kind, sh.*tally);
  std::printf("flood: most sessions one connection held: %" PRId64 "\n", sh.flood_peak.load());
  if (!actors_problem.empty()) std::printf("hostile actors: %s\n", actors_problem.c_str());
  const Growth all_rss = GrowthOf(samples, 0, &Sample::rss);
  std::printf("RSS at the start (before any hostile phase): %.1f MB\n", mb(all_rss.first));
  std::printf("RSS after %.0f s: first %.1f MB, last %.1f MB, max %.1f MB, growth %.1f MB (tolerance %.0f)\n",
              f.warmup, mb(rss.first), mb(rss.last), mb(rss.max), mb(rss.last) - mb(rss.first),
              f.rss_tolerance_mb);
  std::printf("fds after %.0f s: first %" PRId64 ", last %" PRId64 ", max %" PRId64
              ", growth %" PRId64 " (tolerance %d)\n",
              f.warmup, fds.first, fds.last, fds.max, fds.last - fds.first, f.fd_tolerance);
  std::printf("maskd index cache after %.0f s: first %.1f MB (%" PRId64 " indexes), last %.1f MB (%" PRId64
              " indexes), max %.1f MB (bounded by --cache-bytes); RSS growth beyond the cache's: %.1f MB;"
              " most sessions open: %" PRId64 "\n",
              f.warmup, mb(cache.first), indexes.first, mb(cache.last), indexes.last, mb(cache.max),
              static_cast<double>(rss_beyond_cache) / 1048576.0, sessions.max);  // may be < 0
  for (const std::string& e : sh.good.first_errors) std::printf("good error: %s\n", e.c_str());
  std::printf("goal good errors == 0: %s\n", v.errors_ok ? "PASS" : "FAIL");
  std::printf("goal hostile p99 / quiet p99 = %.2f <= %.1f: %s\n", ratio, f.p99_ratio_goal,
              v.ratio_ok ? "PASS" : "FAIL");
  std::printf("goal RSS flat beyond the index cache: %s\ngoal fds flat: %s\nmaskd crashed: %s\n", v.rss_ok ? "PASS" : "FAIL",
              v.fds_ok ? "PASS" : "FAIL", crashed ? "YES" : "no");
  std::printf("RESULT: %s\n", v.pass() ? "PASS" : "FAIL");
  std::fflush(stdout);
  return v;
}

// ---------------------------------------------------------------------------
// The driver's side of the hostile process.

std::string FlagNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The hostile process's command line: its role, maskd's address, the phase
// clock's origin and the flags of the driver's that its actors use.
std::vector<std::string> HostileChildArgs(const Flags& f, const std::string& addr,
                                          int64_t t0_unix_ns) {
  std::vector<std::string> args = {"maskd_hostile_mix", "--role", "hostile"};
  auto add = [&args](const char* name, std::string value) {
    args.push_back(name);
    args.push_back(std::move(value));
  };
  add("--addr", addr);
  add("--t0-unix-ns", absl::StrCat(t0_unix_ns));
  add("--seconds", FlagNumber(f.seconds));
  add("--phase-seconds", FlagNumber(f.phase_seconds));
  add("--settle", FlagNumber(f.settle));
  add("--seed", absl::StrCat(f.seed));
  add("--grammar-actors", absl::StrCat(f.grammar_actors));
  add("--flood-actors", absl::StrCat(f.flood_actors));
  add("--abandon-actors", absl::StrCat(f.abandon_actors));
  add("--compile-actors", absl::StrCat(f.compile_actors));
  add("--hostile-nice", absl::StrCat(f.hostile_nice));
  return args;
}

// How long the driver waits, once its own run is over, for the hostile
// process's report: an actor ends its round first (a grammar Step may take up
// to its client's 30 s timeout; a flood closes up to a share of sessions).
constexpr double kChildGraceS = 120;

// Reaps the hostile process and reads its report into `sh`. Empty when it
// exited 0 with a whole report; else the summary's line on what went wrong.
std::string CollectHostileChild(ChildProcess* child, Shared* sh) {
  const std::string text = child->Finish(kChildGraceS);
  const std::string problem = ReadActorReport(text, sh);
  std::string what;
  if (child->killed()) {
    what = absl::StrCat("child did not exit within ", kChildGraceS, " s of the end and was killed");
  } else if (child->exit_status() != 0) {
    what = absl::StrCat("child ", DescribeWaitStatus(child->exit_status()));
  } else if (!problem.empty()) {
    what = "child exited with status 0";
  } else {
    return "";
  }
  return problem.empty() ? what : absl::StrCat(what, "; ", problem);
}

// ---------------------------------------------------------------------------
// Main.

void WriteSamples(const std::string& path, const std::vector<Sample>& samples) {
  if (path.empty()) return;
  FILE* out = std::fopen(path.c_str(), "w");
  if (out == nullptr) return;
  std::fprintf(out, "t_s,hostile,rss_bytes,fds,cache_bytes,indexes,sessions\n");
  for (const Sample& s : samples) {
    std::fprintf(out, "%.1f,%d,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "\n", s.t,
                 s.hostile ? 1 : 0, s.rss, s.fds, s.cache_bytes, s.indexes, s.sessions);
  }
  std::fclose(out);
}

// Samples maskd once a second until --seconds; false when maskd died.
bool SampleUntilEnd(Shared& sh, MaskdServer& server, std::vector<Sample>* samples) {
  std::unique_ptr<Client> sampler = ConnectAs(sh.addr, "sampler", absl::Seconds(5));
  while (sh.phases.Now() < sh.flags.seconds) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    if (!server.Running()) {
      std::fprintf(stderr, "maskd_hostile_mix: maskd died (wait status %d)\n%s\n",
                   server.exit_status(), server.Log().c_str());
      return false;
    }
    const double t = sh.phases.Now();
    Sample s{t, sh.phases.HostileAt(t), server.RssBytes(), server.OpenFds(), -1, -1, -1};
    if (auto st = sampler ? sampler->Stats() : absl::UnavailableError(""); st.ok()) {
      s.cache_bytes = static_cast<int64_t>(st->cache_bytes());
      s.indexes = static_cast<int64_t>(st->indexes());
      s.sessions = static_cast<int64_t>(st->sessions_active());
    }
    samples->push_back(s);
  }
  return true;
}

// The driver: maskd, the hostile process (or threads), the good clients, the
// sampling, the summary. `dir`: maskd's folder.
int RunDriver(Shared& sh, const std::string& dir) {
  const Flags& f = sh.flags;
  MaskdServer server(f.maskd, dir, f.tokenizer_dir, f.maskd_flags);
  server.set_die_with_parent(true);  // started from the main thread
  if (absl::Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "maskd_hostile_mix: %s\n", s.ToString().c_str());
    return 2;
  }
  sh.addr = server.addr();
  sh.phases.phase_s = f.phase_seconds;
  sh.phases.settle_s = f.settle;
  const int64_t t0_unix_ns = UnixNowNs();
  sh.phases.SetOrigin(t0_unix_ns);
  ChildProcess child;  // started before any thread of ours: a fork of a quiet process
  if (!f.hostile_in_process) {
    const std::vector<std::string> args = HostileChildArgs(f, sh.addr, t0_unix_ns);
    if (absl::Status s = child.Start("/proc/self/exe", args); !s.ok()) {
      std::fprintf(stderr, "maskd_hostile_mix: hostile process: %s\n", s.ToString().c_str());
      return 2;
    }
  }
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<GoodClient>> good;
  for (int i = 0; i < f.good_clients; ++i) {
    good.push_back(std::make_unique<GoodClient>(&sh, i));
    threads.emplace_back([g = good.back().get()] { g->Run(); });
  }
  HostileActors actors;
  if (f.hostile_in_process) actors.Start(&sh, f.hostile_nice);
  std::vector<Sample> samples;
  bool crashed = !SampleUntilEnd(sh, server, &samples);
  if (crashed) child.Terminate();  // its report, now
  sh.stop.store(true);
  for (auto& th : threads) th.join();
  actors.Join();
  const double elapsed = sh.phases.Now();
  const std::string actors_problem = f.hostile_in_process ? "" : CollectHostileChild(&child, &sh);
  if (!crashed && !server.Running()) crashed = true;
  WriteSamples(f.samples_csv, samples);
  const char* commit = std::getenv("MASKD_COMMIT");
  const Verdict v =
      Report(sh, samples, elapsed, crashed, commit ? commit : "(unknown)", actors_problem);
  server.Kill();
  return v.pass() ? 0 : 1;
}

int Main(int argc, char** argv) {
  Shared sh;
  if (!ParseFlags(argc, argv, &sh.flags)) return 2;
  if (sh.flags.role == "hostile") return RunHostileChild(&sh);
  absl::StatusOr<std::string> dir = ServerDirectory(sh.flags.dir, "maskd-hostile");
  if (!dir.ok()) {
    std::fprintf(stderr, "maskd_hostile_mix: %s\n", dir.status().ToString().c_str());
    return 2;
  }
  const int rc = RunDriver(sh, *dir);
  if (sh.flags.dir.empty()) {  // the folder ServerDirectory made
    std::error_code ignored;
    std::filesystem::remove_all(*dir, ignored);
  }
  return rc;
}

}  // namespace
}  // namespace maskd::soak::hostile

int main(int argc, char** argv) { return maskd::soak::hostile::Main(argc, argv); }

