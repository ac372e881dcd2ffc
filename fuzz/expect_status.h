// What a fuzzer accepts from a parser or compiler on arbitrary bytes: OK, or
// a client error (InvalidArgument, ResourceExhausted, and DeadlineExceeded
// where the fuzzer sets a deadline), with a message of at most 4 KiB. Anything
// else aborts, so libFuzzer records the input.
#ifndef MASKD_FUZZ_EXPECT_STATUS_H_
#define MASKD_FUZZ_EXPECT_STATUS_H_

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"

namespace maskd::fuzz {

enum class Deadline { kNotSet, kSet };

inline void ExpectClientStatus(const absl::Status& s, Deadline deadline = Deadline::kNotSet) {
  const absl::StatusCode c = s.code();
  const bool expected = s.ok() || c == absl::StatusCode::kInvalidArgument ||
                        c == absl::StatusCode::kResourceExhausted ||
                        (deadline == Deadline::kSet && c == absl::StatusCode::kDeadlineExceeded);
  if (!expected) {
    std::fprintf(stderr, "unexpected status: %s\n", s.ToString().c_str());
    std::abort();
  }
  if (s.message().size() > 4096) {
    std::fprintf(stderr, "unbounded message (%zu bytes)\n", s.message().size());
    std::abort();
  }
}

}  // namespace maskd::fuzz

#endif  // MASKD_FUZZ_EXPECT_STATUS_H_
