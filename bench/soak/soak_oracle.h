// What the soak checks against: the tally of outcomes, and the offline
// oracle (the core library's index of each constraint), with the constraints
// every worker uses.
#ifndef MASKD_BENCH_SOAK_SOAK_ORACLE_H_
#define MASKD_BENCH_SOAK_SOAK_ORACLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/client.h"
#include "index/token_index.h"
#include "tokenizer/tokenizer_context.h"

namespace maskd::soak {

// What the workers saw, counted across the run; the first few unexpected
// errors and wrong masks kept for the summary.
struct Tally {
  std::atomic<int64_t> generations{0}, generations_failed{0}, sequences{0}, steps{0},
      masks_checked{0}, wrong_masks{0}, resumes{0}, streams_opened{0}, shm_steps{0},
      shm_reregistered{0}, mask_calls{0}, compiles_new{0}, compiles_cached{0},
      compiles_rejected{0}, cancels{0}, drops{0}, forks{0}, rollbacks{0}, speculative{0},
      fault_errors{0}, unexpected_errors{0};
  absl::Mutex mu;
  std::vector<std::string> first_errors ABSL_GUARDED_BY(mu);  // the first few unexpected ones

  void Unexpected(const std::string& what) {
    unexpected_errors.fetch_add(1);
    absl::MutexLock l(&mu);
    if (first_errors.size() < 20) first_errors.push_back(what);
  }
  void WrongMask(const std::string& what) {
    wrong_masks.fetch_add(1);
    absl::MutexLock l(&mu);
    if (first_errors.size() < 20) first_errors.push_back("wrong mask: " + what);
  }
};

// Constraints every worker uses (compiled offline once).
const char* const kFixed[] = {
    R"([a-z]{1,8}@[a-z]{2,5}\.com)",
    R"((cat|dog)s? and (cat|dog)s?)",
    R"(\{"name": "[a-z ]{1,12}", "age": [0-9]{1,3}\})",
    R"(-?[0-9]{1,6}(\.[0-9]{1,4})?)",
    R"((\+1 )?\([0-9]{3}\) [0-9]{3}-[0-9]{4})",
    R"((GET|POST|PUT|DELETE) /[a-z]{1,10}(/[a-z0-9]{1,6}){0,3} HTTP/1\.[01])",
    R"(\[([0-9]{1,3}, ){0,5}[0-9]{1,3}\])",
    R"([A-Z][a-z]{2,10}( [A-Z][a-z]{2,10}){0,2})",
};
constexpr int kNumFixed = sizeof(kFixed) / sizeof(kFixed[0]);

class Oracle {
 public:
  // Loads <tokenizer_dir>/qwen3 and compiles every kFixed constraint.
  absl::Status Init(const std::string& tokenizer_dir);
  const std::shared_ptr<const TokenIndex>& fixed(int i) const { return fixed_[i]; }
  absl::StatusOr<std::shared_ptr<const TokenIndex>> Compile(const std::string& regex) const {
    return CompileRegex(regex, context_);
  }

 private:
  std::shared_ptr<const TokenizerContext> context_;
  std::vector<std::shared_ptr<const TokenIndex>> fixed_;
};

// A CompileRequest for `regex` on qwen3.
v1::CompileRequest CompileFor(const std::string& regex);

// A token drawn uniformly from the `n` mask words at `words`; UINT32_MAX when
// none is allowed.
uint32_t Sample(const uint32_t* words, uint32_t n, std::mt19937_64& rng);

// An error a fault explains: the server was killed (UNAVAILABLE, CANCELLED,
// a plain session or index gone: NOT_FOUND), a deadline we set.
bool FaultCode(absl::StatusCode c);

}  // namespace maskd::soak

#endif  // MASKD_BENCH_SOAK_SOAK_ORACLE_H_
