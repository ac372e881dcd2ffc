#include "service/log.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace maskd {
namespace {

void Log(const char* level, absl::string_view message) {
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()), " maskd ", level,
      " ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write: lines never interleave
  std::fflush(stderr);
}

}  // namespace

void LogInfo(absl::string_view message) { Log("INFO", message); }
void LogError(absl::string_view message) { Log("ERROR", message); }

}  // namespace maskd
