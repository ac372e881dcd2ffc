// The soak drivers' command lines: `--name value` or `--name=value` pairs.
#ifndef MASKD_BENCH_SOAK_FLAG_PAIRS_H_
#define MASKD_BENCH_SOAK_FLAG_PAIRS_H_

#include <functional>
#include <string>

namespace maskd::soak {

// Hands every pair of argv[1..] to `set(name, value)`; `command` gets the
// whole line (argv[0] included). False, after a line on stderr naming
// `program`, for a flag without a value or one `set` refuses (unknown).
bool ReadFlagPairs(int argc, char** argv, const char* program, std::string* command,
                   const std::function<bool(const std::string&, const std::string&)>& set);

}  // namespace maskd::soak

#endif  // MASKD_BENCH_SOAK_FLAG_PAIRS_H_
