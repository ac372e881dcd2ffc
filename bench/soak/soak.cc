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
//
// Files: soak_flags (the command line), soak_oracle (the tally and the
// offline oracle), soak_worker with soak_load and soak_faults (the load and
// the hostile mix), soak_report (flatness and the summary); here the main
// thread: the server, its faults and its samples.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "bench/soak/maskd_process.h"
#include "bench/soak/soak_flags.h"
#include "bench/soak/soak_oracle.h"
#include "bench/soak/soak_report.h"
#include "bench/soak/soak_worker.h"

namespace maskd::soak {
namespace {

using Clock = std::chrono::steady_clock;

int Main(int argc, char** argv) {
  Shared sh;
  if (!ParseFlags(argc, argv, &sh.flags)) return 2;
  const Flags& f = sh.flags;
  absl::StatusOr<std::string> dir = ServerDirectory(f.dir, "maskd-soak");
  if (!dir.ok()) {
    std::fprintf(stderr, "maskd_soak: %s\n", dir.status().ToString().c_str());
    return 2;
  }
  if (absl::Status s = sh.oracle.Init(f.tokenizer_dir); !s.ok()) {
    std::fprintf(stderr, "maskd_soak: offline tokenizer: %s\n", s.ToString().c_str());
    return 2;
  }
  std::vector<std::string> server_flags = {"--session-ttl=20s", "--cache-bytes=33554432",
                                           "--compile-threads=2"};
  if (f.shm) server_flags.push_back("--allow_shm");
  MaskdServer server(f.maskd, *dir, f.tokenizer_dir, server_flags);
  server.set_die_with_parent(true);  // started and restarted from the main thread
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

  RunRecord run{elapsed, kills, crashes, incarnation, restart_ms_max, std::move(crash_log),
                std::move(incarnation_start), std::move(incarnation_steps0), std::move(samples)};
  const bool pass = Report(f, sh.tally, run);
  std::fflush(stdout);
  server.Kill();
  if (f.dir.empty()) {  // the folder ServerDirectory made
    std::error_code ignored;
    std::filesystem::remove_all(*dir, ignored);
  }
  return pass ? 0 : 1;
}

}  // namespace
}  // namespace maskd::soak

int main(int argc, char** argv) { return maskd::soak::Main(argc, argv); }
