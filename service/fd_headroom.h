// How many more descriptors this process could open, counted without opening
// any. Probing with dup() would itself take, for a moment, the very slots
// another thread's accept needs: gRPC 1.51's own listener (the private TLS
// socket's) stops for good on one EMFILE, so a probe must never be the cause.
#ifndef MASKD_SERVICE_FD_HEADROOM_H_
#define MASKD_SERVICE_FD_HEADROOM_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace maskd {

class FdHeadroom {
 public:
  // Opens /proc/self/status and /proc/self/fd (two descriptors, held until
  // destruction); FAILED_PRECONDITION without a mounted /proc.
  static absl::StatusOr<std::unique_ptr<FdHeadroom>> Open();
  ~FdHeadroom();
  FdHeadroom(const FdHeadroom&) = delete;
  FdHeadroom& operator=(const FdHeadroom&) = delete;

  // True when at least `n` descriptor numbers below RLIMIT_NOFILE's soft
  // limit are free now. Costs a read of /proc/self/status (the fd table's
  // size bounds every open descriptor) and, only when that bound is within
  // `n` of the limit, a scan of /proc/self/fd (about 0.3 us per open
  // descriptor). Thread-safe.
  bool AtLeast(int n);

 private:
  FdHeadroom(int status_fd, int dir_fd) : status_fd_(status_fd), dir_fd_(dir_fd) {}
  // Open descriptors numbered below `limit`; -1 when /proc cannot be read.
  int CountBelow(long limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The fd table's size (FDSize in /proc/self/status); -1 when unreadable.
  long TableSize();

  const int status_fd_;
  absl::Mutex mu_;
  const int dir_fd_ ABSL_GUARDED_BY(mu_);  // its offset is rewound per scan
};

}  // namespace maskd

#endif  // MASKD_SERVICE_FD_HEADROOM_H_
