// The client code maskctl's online load generators (bench, shm-demo) share:
// the server's view of a tokenizer, a set of sessions closed on every exit
// path, feeding a session its next token, and timing a call (their
// percentiles: percentile.h).
#ifndef MASKD_TOOLS_MASKCTL_ONLINE_SESSIONS_H_
#define MASKD_TOOLS_MASKCTL_ONLINE_SESSIONS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/client.h"

namespace maskctl {

// A tokenizer the server loaded (ListTokenizers).
struct ServerTokenizer {
  uint32_t vocab_size = 0;        // logits width
  std::vector<uint32_t> eos_ids;  // sorted, unique
};

// The tokenizer the server knows as `name`; NotFound naming it when none.
absl::StatusOr<ServerTokenizer> FindServerTokenizer(maskd::Client& client, const std::string& name);

// Sessions over one client, closed by CloseAll or on destruction (errors
// ignored: the server expires what it cannot close).
class SessionSet {
 public:
  explicit SessionSet(maskd::Client* client) : client_(client) {}
  SessionSet(const SessionSet&) = delete;
  SessionSet& operator=(const SessionSet&) = delete;
  ~SessionSet() { CloseAll(); }

  // Creates `n` sessions over `compile`; the first error, naming the RPC.
  absl::Status Create(const maskd::v1::CompileRequest& compile, size_t n);
  void CloseAll();
  const std::vector<uint64_t>& ids() const { return ids_; }

 private:
  maskd::Client* client_;
  std::vector<uint64_t> ids_;
};

// "<what> entry <i>: <message>" for the first entry of `results` (a Step
// reply's repeated StepResult) whose status is not OK; "" when none.
template <typename Results>
std::string FirstFailedEntry(const Results& results, const std::string& what) {
  for (int i = 0; i < results.size(); ++i) {
    if (results.Get(i).status().code() != 0) {
      return what + " entry " + std::to_string(i) + ": " + results.Get(i).status().message();
    }
  }
  return "";
}

// Sets `entry`'s tokens to `token` alone; none when `token` is -1.
inline void SetNextToken(maskd::v1::StepEntry* entry, int64_t token) {
  entry->clear_tokens();
  if (token >= 0) entry->add_tokens(static_cast<uint32_t>(token));
}

// Runs `call` (returning absl::Status), appends its wall time in µs (steady
// clock) to *us and returns its status.
template <typename Call>
absl::Status TimeCall(std::vector<double>* us, Call&& call) {
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status s = call();
  us->push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  return s;
}

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_ONLINE_SESSIONS_H_
