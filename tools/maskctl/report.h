// What maskctl's offline commands print: one JSON object per line on stdout,
// times in milliseconds of the steady clock.
#ifndef MASKD_TOOLS_MASKCTL_REPORT_H_
#define MASKD_TOOLS_MASKCTL_REPORT_H_

#include <chrono>

#include <nlohmann/json.hpp>

namespace maskctl {

// Milliseconds from `start` to now, on the steady clock.
double MsSince(std::chrono::steady_clock::time_point start);

// Writes `j` compactly and a newline to stdout. Invalid UTF-8 in strings is
// replaced (U+FFFD), never thrown on.
void PrintJsonLine(const nlohmann::json& j);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_REPORT_H_
