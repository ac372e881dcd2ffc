// What the fresh-process drivers of bench/coldpath/ share: the clock they
// time with, fatal errors, JSON string escaping and the mask dump format.
//
// Clock: the steady clock (wall time), or with UseCpuClock(true) this
// process's CPU time (all threads), which leaves out the time other
// processes held the cores on a loaded machine. Times are in milliseconds.
// Mask dumps (--masks-out): the masks of a walk, step 0 first, each
// num_words little-endian uint32 words, back to back.
#ifndef MASKD_BENCH_COLDPATH_COLDPATH_UTIL_H_
#define MASKD_BENCH_COLDPATH_COLDPATH_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"

namespace maskd::coldpath {

inline bool& CpuClockFlag() {
  static bool cpu = false;
  return cpu;
}
inline void UseCpuClock(bool cpu) { CpuClockFlag() = cpu; }
inline const char* ClockName() { return CpuClockFlag() ? "cpu" : "wall"; }

// Milliseconds on the chosen clock (an arbitrary origin).
inline double NowMs() {
  timespec ts;
  clock_gettime(CpuClockFlag() ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}
inline double MsSince(double t0) { return NowMs() - t0; }

// Prints "PROGRAM: MSG" on stderr and exits with status 2.
[[noreturn]] inline void Die(const char* program, const std::string& msg) {
  std::fprintf(stderr, "%s: %s\n", program, msg.c_str());
  std::exit(2);
}

// `s` as the inside of a JSON string (quotes, backslashes and control bytes
// escaped; other bytes as they are).
inline std::string JsonEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// Writes `words` to `path` (the mask dump format); false on any I/O error.
inline bool WriteMasks(const std::string& path, const std::vector<uint32_t>& words) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(words.data(), 4, words.size(), f) == words.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace maskd::coldpath

#endif  // MASKD_BENCH_COLDPATH_COLDPATH_UTIL_H_
