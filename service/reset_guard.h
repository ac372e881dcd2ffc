// ResetGuard: an HTTP/2 rapid-reset (CVE-2023-44487) guard for connections
// maskd accepts itself, which gRPC 1.51 cannot bound on its own (every reset
// stream still costs a call; see docs/reliability.md).
//
// Adopt() takes an accepted client socket and returns one end of a new
// socketpair for gRPC (grpc::AddInsecureChannelFromFd); one relay thread
// copies bytes both ways through fixed per-connection buffers and reads the
// frame headers the client sends (the 24-byte preface, then 9-byte headers;
// payloads are skipped unread). RST_STREAM frames from the client draw on a
// token bucket (`resets_per_second`, burst `reset_burst`); a connection that
// overdraws it is closed at once, both ends, and counted. Nothing else about
// the traffic is changed. The relay costs one copy each way, so maskd uses it
// only where it is asked to (plaintext TCP by default, not the unix socket).
#ifndef MASKD_SERVICE_RESET_GUARD_H_
#define MASKD_SERVICE_RESET_GUARD_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace maskd {

struct ResetGuardOptions {
  double resets_per_second = 200;  // sustained RST_STREAM frames per connection
  double reset_burst = 400;        // bucket size
  size_t to_server_buffer = 32 << 10;  // bytes read from the client not yet written to gRPC
  size_t to_client_buffer = 64 << 10;  // bytes read from gRPC not yet written to the client
};

class ResetGuard {
 public:
  explicit ResetGuard(const ResetGuardOptions& options);
  ~ResetGuard();  // closes every relayed connection
  ResetGuard(const ResetGuard&) = delete;
  ResetGuard& operator=(const ResetGuard&) = delete;

  // Takes ownership of `client_fd` (non-blocking) and returns the fd to give
  // gRPC, or -1 (client_fd closed) when no socketpair could be made.
  int Adopt(int client_fd);

  // Connections closed for too many resets, since start.
  uint64_t closed_for_resets() const { return closed_for_resets_.load(); }

 private:
  struct Conn;
  struct End;
  void Loop();
  void Update(Conn* c);
  void Close(Conn* c);
  bool Pump(Conn* c);  // false: the connection is done

  const ResetGuardOptions options_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<uint64_t> closed_for_resets_{0};
  absl::Mutex mu_;
  absl::flat_hash_set<Conn*> conns_ ABSL_GUARDED_BY(mu_);
  std::vector<Conn*> adopted_ ABSL_GUARDED_BY(mu_);  // not yet in the epoll set
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_RESET_GUARD_H_
