// The soak's load: worker threads that drive the real maskd through the
// client library, each drawing actions at random (soak.cc lists them), every
// mask checked against the offline oracle. The load proper (generate, stream,
// shm, mask) is in soak_load.cc, the hostile mix (compile floods, cancels,
// drops) in soak_faults.cc.
#ifndef MASKD_BENCH_SOAK_SOAK_WORKER_H_
#define MASKD_BENCH_SOAK_SOAK_WORKER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "bench/soak/soak_flags.h"
#include "bench/soak/soak_oracle.h"
#include "client/client.h"
#include "client/resumable_session.h"
#include "index/guide.h"

namespace maskd::soak {

struct Shared {
  Flags flags;
  Oracle oracle;
  Tally tally;
  std::string addr;
  std::atomic<bool> stop{false};
};

// One generated sequence mirrored offline: `guide` is the server session's
// state as of the last confirmed step; the next entry sends `rollback` then
// `pending`.
struct Seq {
  int constraint = 0;
  std::unique_ptr<ResumableSession> session;
  Guide guide;
  std::vector<uint32_t> pending;
  uint32_t rollback = 0;
  size_t max_tokens = 48;
  bool done = false;
  explicit Seq(std::shared_ptr<const TokenIndex> ix) : guide(std::move(ix)) {}
};

class Worker {
 public:
  Worker(Shared* sh, int id) : sh_(sh), id_(id), rng_(sh->flags.seed * 1000003 + id) {}

  // Draws actions until sh->stop.
  void Run();

 private:
  Tally& T() { return sh_->tally; }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // The load (soak_load.cc).
  // The oracle's mask of `g`, in scratch_; null (reported as unexpected,
  // naming `what`) when the oracle cannot write it.
  const std::vector<uint32_t>* OracleMask(const Guide& g, const std::string& what);
  bool CheckRow(const Guide& g, absl::Span<const uint32_t> row, const std::string& what);
  // After a confirmed step of `q` (the server applied rollback + pending and
  // answered with `row`): mirror it, check the row, choose the next entry.
  void AfterStep(Seq& q, absl::Span<const uint32_t> row, const char* path);
  std::unique_ptr<Seq> NewSeq(int constraint);
  void Generate(bool stream_path);
  void Shm();
  // Retries `call` while a fault explains its failure, up to 30 s.
  template <typename F>
  absl::Status Retrying(F call);
  void Mask();

  // The hostile mix (soak_faults.cc).
  std::string FreshRegex();
  void Flood();
  void Cancel();
  void Drop();

  Shared* sh_;
  int id_;
  std::mt19937_64 rng_;
  std::unique_ptr<Client> client_;
  std::vector<uint32_t> scratch_;
  uint64_t counter_ = 0;
};

}  // namespace maskd::soak

#endif  // MASKD_BENCH_SOAK_SOAK_WORKER_H_
