// libFuzzer: bytes -> Regex::Parse -> Dfa::Compile, with small limits so that
// no input can legitimately take long. Any crash, sanitizer report, hang or
// status other than OK / InvalidArgument / ResourceExhausted is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "absl/status/status.h"
#include "fuzz/expect_status.h"
#include "absl/time/clock.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view pattern(reinterpret_cast<const char*>(data), size);
  maskd::RegexLimits limits;
  limits.max_pattern_bytes = 4096;
  limits.max_repeat = 64;
  limits.max_nodes = 1 << 14;
  auto re = maskd::Regex::Parse(pattern, limits);
  maskd::fuzz::ExpectClientStatus(re.status());
  if (!re.ok()) return 0;
  maskd::DfaOptions options;
  options.max_states = 2000;
  options.max_nfa_states = 1 << 16;
  options.deadline = absl::Now() + absl::Seconds(2);
  auto dfa = maskd::Dfa::Compile(*re, options);
  maskd::fuzz::ExpectClientStatus(dfa.status(), maskd::fuzz::Deadline::kSet);
  if (dfa.ok()) {
    // Walk the input itself and check the automaton's invariants on the way.
    auto d = *dfa;
    maskd::Dfa::State s = d->start();
    for (size_t i = 0; i < size && s != maskd::Dfa::kDead; ++i) {
      if (s >= d->num_states()) abort();
      s = d->Next(s, data[i]);
    }
    if (s != maskd::Dfa::kDead && d->IsAccepting(s) != (d->DistanceToAccept(s) == 0)) abort();
  }
  return 0;
}
