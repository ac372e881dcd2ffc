// The soak's report: every sample as CSV, flatness per server instance, and
// the summary block (paste it into docs/reliability.md) with the verdict.
#ifndef MASKD_BENCH_SOAK_SOAK_REPORT_H_
#define MASKD_BENCH_SOAK_SOAK_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/soak/soak_flags.h"
#include "bench/soak/soak_oracle.h"

namespace maskd::soak {

// One sample of the server: its RSS and open fds (-1: unreadable) at `t` s.
struct Sample_ {
  double t;
  int incarnation;
  int64_t rss, fds;
};

// What the main thread saw: server instances 0..`incarnation`, instance i
// started at incarnation_start[i] s when the tally had incarnation_steps0[i]
// steps; the injected kills, the unexpected crashes (and the first one's
// log), the slowest restart.
struct RunRecord {
  double elapsed = 0;
  int kills = 0, crashes = 0, incarnation = 0;
  double restart_ms_max = 0;
  std::string crash_log;
  std::vector<double> incarnation_start;
  std::vector<int64_t> incarnation_steps0;
  std::vector<Sample_> samples;
};

// Writes f.samples_csv (when set), judges each instance's flatness and prints
// the summary block; whether the run passed.
bool Report(const Flags& f, Tally& tally, const RunRecord& run);

}  // namespace maskd::soak

#endif  // MASKD_BENCH_SOAK_SOAK_REPORT_H_
