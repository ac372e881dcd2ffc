#include "bench/soak/soak_report.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace maskd::soak {
namespace {

// One server instance's line of the summary table.
struct Row {
  int inc;
  double start, life;
  int n;
  int64_t steps;
  int64_t rss_first, rss_last, rss_max, fds_first, fds_last, fds_max;
  std::string verdict;
};

struct Flatness {
  std::vector<Row> rows;
  bool flat = true;        // every judged instance stayed within the tolerances
  bool carried_on = true;  // every instance that lived a few seconds served steps
  int judged = 0;          // instances with enough samples after the warm-up
};

void WriteSamplesCsv(const Flags& f, const std::vector<Sample_>& samples) {
  if (!f.samples_csv.empty()) {
    if (FILE* out = std::fopen(f.samples_csv.c_str(), "w")) {
      std::fprintf(out, "t_s,instance,rss_bytes,fds\n");
      for (const Sample_& s : samples) {
        std::fprintf(out, "%.1f,%d,%" PRId64 ",%" PRId64 "\n", s.t, s.incarnation, s.rss, s.fds);
      }
      std::fclose(out);
    }
  }
}

// Flatness per instance: RSS and fds from the first sample after the
// warm-up to the last.
Flatness JudgeInstances(const Flags& f, const Tally& tally, const RunRecord& run) {
  const int incarnation = run.incarnation;
  const double elapsed = run.elapsed;
  const std::vector<double>& incarnation_start = run.incarnation_start;
  const std::vector<int64_t>& incarnation_steps0 = run.incarnation_steps0;
  const std::vector<Sample_>& samples = run.samples;
  Flatness out;
  std::vector<Row>& rows = out.rows;
  bool& flat = out.flat;
  bool& carried_on = out.carried_on;
  int& judged = out.judged;
  for (int inc = 0; inc <= incarnation; ++inc) {
    Row r{inc, incarnation_start[inc], 0, 0, 0, -1, -1, 0, -1, -1, 0, ""};
    const double end = inc < incarnation ? incarnation_start[inc + 1] : elapsed;
    r.steps = (inc < incarnation ? incarnation_steps0[inc + 1] : tally.steps.load()) -
              incarnation_steps0[inc];
    // Every instance that lived a few seconds served steps: the clients
    // carried on after each restart.
    r.life = end - r.start;
    if (r.life >= 5 && r.steps == 0) carried_on = false;
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
  return out;
}

void PrintSummary(const Flags& f, Tally& T, const RunRecord& run, const Flatness& flatness,
                  bool pass) {
  const double elapsed = run.elapsed;
  const int kills = run.kills, crashes = run.crashes, incarnation = run.incarnation;
  const double restart_ms_max = run.restart_ms_max;
  const std::string& crash_log = run.crash_log;
  const std::vector<Row>& rows = flatness.rows;
  const bool carried_on = flatness.carried_on;
  const int judged = flatness.judged;
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
}

}  // namespace

bool Report(const Flags& f, Tally& tally, const RunRecord& run) {
  WriteSamplesCsv(f, run.samples);
  const Flatness flatness = JudgeInstances(f, tally, run);
  Tally& T = tally;
  const int crashes = run.crashes;
  const bool flat = flatness.flat, carried_on = flatness.carried_on;
  const bool pass = T.wrong_masks == 0 && T.unexpected_errors == 0 && crashes == 0 &&
                    T.generations_failed == 0 && flat && carried_on && T.masks_checked > 0;
  PrintSummary(f, T, run, flatness, pass);
  return pass;
}

}  // namespace maskd::soak
