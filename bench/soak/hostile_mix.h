// The hostile-mix driver's shared state (bench/soak/hostile_mix.cc): its
// flags, the phase clock, the tallies of the good clients and of the hostile
// actors, and the requests and connections both kinds make.
#ifndef MASKD_BENCH_SOAK_HOSTILE_MIX_H_
#define MASKD_BENCH_SOAK_HOSTILE_MIX_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/client.h"

namespace maskd::soak::hostile {

using Clock = std::chrono::steady_clock;

// The command line (hostile_mix.cc's header comment names the flags).
struct Flags {
  double seconds = 240;
  double phase_seconds = 60;
  double settle = 5;
  int good_clients = 4;
  double pace_ms = 5;
  int good_fresh_every = 0;  // > 0: every Nth good session is on a regex never seen before
  int grammar_actors = 3;
  int flood_actors = 2;
  int abandon_actors = 2;
  int compile_actors = 2;
  double warmup = 30;
  double rss_tolerance_mb = 64;
  int fd_tolerance = 16;
  double p99_ratio_goal = 2;
  // Added to the hostile actors' nice value (the child process's, or with
  // --hostile-in-process their threads'): a diagnostic that takes the
  // attackers' own client-side CPU out of the contention, as if they ran on
  // other machines; 0 (the goal runs): they compete as equals.
  int hostile_nice = 0;
  // The hostile actors as threads of this process (the old driver, to compare
  // with): they then share gRPC's process-wide client machinery (poller,
  // timers, executor threads) with the good clients, which a deployment,
  // whose attackers are other processes, does not.
  bool hostile_in_process = false;
  // Set by the driver for the process it starts to run the hostile actors
  // (RunHostileChild): --role hostile --addr A --t0-unix-ns N.
  std::string role;        // "" (the driver) or "hostile"
  std::string addr;        // maskd's address
  int64_t t0_unix_ns = 0;  // the phase clock's origin, CLOCK_REALTIME in ns
  uint64_t seed = 1;
  std::string maskd = std::string(MASKD_BIN_DIR) + "/maskd";
  std::string tokenizer_dir = std::string(MASKD_SOURCE_DIR) + "/data/tokenizers";
  std::string dir;          // empty: a fresh /tmp/maskd-hostile-XXXXXX
  std::string samples_csv;  // every sample: t_s,hostile,rss_bytes,fds
  std::vector<std::string> maskd_flags;  // --maskd-flag X (repeatable): added to maskd's
  std::string command;
};

inline v1::CompileRequest RegexRequest(const std::string& regex) {
  v1::CompileRequest c;
  c.set_tokenizer("qwen3");
  c.set_regex(regex);
  return c;
}

inline v1::CompileRequest SchemaRequest(const std::string& schema) {
  v1::CompileRequest c;
  c.set_tokenizer("qwen3");
  c.set_json_schema(schema);
  return c;
}

inline v1::CompileRequest GrammarRequest(const std::string& text, v1::Grammar::Format format) {
  v1::CompileRequest c;
  c.set_tokenizer("qwen3");
  c.mutable_grammar()->set_text(text);
  c.mutable_grammar()->set_format(format);
  return c;
}

// CLOCK_REALTIME in ns since the Unix epoch.
inline int64_t UnixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The phase clock: seconds since t0, cut into quiet and hostile phases of
// phase_s in turn (quiet first).
struct Phases {
  Clock::time_point t0;
  double phase_s = 60, settle_s = 5;
  // Puts t0 at a wall-clock instant, so that the driver and the hostile
  // process share one phase schedule; each maps it once onto its own steady
  // clock (Now() then ignores later wall-clock steps).
  void SetOrigin(int64_t t0_unix_ns) {
    t0 = Clock::now() - std::chrono::nanoseconds(UnixNowNs() - t0_unix_ns);
  }
  double Now() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }
  bool HostileAt(double t) const { return static_cast<int64_t>(t / phase_s) % 2 == 1; }
  bool Hostile() const { return HostileAt(Now()); }
  // Whether a step started at t counts (not in the first settle_s of its phase).
  bool Counted(double t) const {
    return t - phase_s * static_cast<double>(static_cast<int64_t>(t / phase_s)) >= settle_s;
  }
};

// One hostile actor kind's outcomes.
struct ActorTally {
  std::atomic<int64_t> attempts{0};
  std::atomic<int64_t> by_code[17] = {};
  absl::Mutex mu;
  std::map<int, std::string> first_message ABSL_GUARDED_BY(mu);  // per code, for the summary
  void Count(const absl::Status& s) {
    attempts.fetch_add(1);
    const int i = static_cast<int>(s.code());
    const int code = i >= 0 && i < 17 ? i : 2;
    if (by_code[code].fetch_add(1) == 0 && !s.ok()) {
      absl::MutexLock l(&mu);
      first_message[code] = std::string(s.message().substr(0, 200));
    }
  }
};

inline constexpr int kRoutes = 3;
inline constexpr const char* kRouteNames[kRoutes] = {"regex", "schema", "lark"};

struct GoodTally {
  absl::Mutex mu;
  // [hostile][route]: route 0 regex, 1 JSON Schema, 2 Lark (GoodConstraints).
  std::vector<uint32_t> latency_us[2][kRoutes] ABSL_GUARDED_BY(mu);
  int64_t errors[2] ABSL_GUARDED_BY(mu) = {0, 0};
  int64_t sessions ABSL_GUARDED_BY(mu) = 0;
  int64_t steps_uncounted ABSL_GUARDED_BY(mu) = 0;
  std::vector<std::string> first_errors ABSL_GUARDED_BY(mu);
};

// What the driver's threads (or the hostile process's) share.
struct Shared {
  Flags flags;
  Phases phases;
  std::string addr;
  std::atomic<bool> stop{false};
  GoodTally good;
  ActorTally grammar, flood, abandon, compile;
  std::atomic<uint64_t> unique{0};  // fresh constraints across actors
  std::atomic<int64_t> flood_peak{0};  // most sessions one flood actor held
};

// The hostile actor kinds, in the summary's order.
inline constexpr std::pair<const char*, ActorTally Shared::*> kActorKinds[] = {
    {"grammar", &Shared::grammar},
    {"flood", &Shared::flood},
    {"abandon", &Shared::abandon},
    {"compile", &Shared::compile},
};

// A client on a connection of its own; nullptr when it cannot connect.
inline std::unique_ptr<Client> ConnectAs(const std::string& addr, const std::string& name,
                                         absl::Duration timeout) {
  ClientOptions o;
  o.client_name = name;  // distinct channel arguments: a connection of its own
  o.timeout = timeout;
  auto c = Client::Connect(addr, o);
  return c.ok() ? *std::move(c) : nullptr;
}

}  // namespace maskd::soak::hostile

#endif  // MASKD_BENCH_SOAK_HOSTILE_MIX_H_
