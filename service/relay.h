// Relay: copies bytes both ways between pairs of sockets maskd holds, for
// connections its listeners (listener.h) accept but cannot hand to gRPC
// directly. Two uses:
//   * the HTTP/2 rapid-reset (CVE-2023-44487) guard, which gRPC 1.51 cannot
//     bound on its own (every reset stream still costs a call; see
//     docs/reliability.md): the client's plaintext bytes are relayed to one
//     end of a socketpair whose other end gRPC owns, and the relay reads the
//     frame headers the client sends (the 24-byte preface, then 9-byte
//     headers; payloads are skipped unread). RST_STREAM frames from the
//     client draw on a token bucket (`resets_per_second`, burst
//     `reset_burst`); a connection that overdraws it is closed at once, both
//     ends, and counted;
//   * TLS: the client's bytes are relayed, uninspected, to a connection to
//     gRPC's private TLS socket (the listener's `upstream_path`).
// Nothing about the traffic is changed. One thread serves every connection
// (epoll); each connection has two fixed buffers, allocated when it is added
// and never grown. The relay costs one copy each way, so maskd uses it only
// where it is asked to.
#ifndef MASKD_SERVICE_RELAY_H_
#define MASKD_SERVICE_RELAY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace maskd {

struct RelayOptions {
  // The rapid-reset guard, for connections added with guard_resets.
  double resets_per_second = 200;  // sustained RST_STREAM frames per connection
  double reset_burst = 400;        // bucket size
  size_t to_server_buffer = 32 << 10;  // bytes read from the client not yet written upstream
  size_t to_client_buffer = 64 << 10;  // bytes read upstream not yet written to the client
};

class Relay {
 public:
  explicit Relay(const RelayOptions& options);
  ~Relay();  // closes every relayed connection
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  // Takes ownership of both (non-blocking, connected) sockets and relays
  // between them until either side is done (closed, an error), then closes
  // both. `guard_resets`: the client's bytes are read as HTTP/2 frames and
  // RST_STREAM is rate-limited (plaintext only). `unanswered`, when set, is
  // raised by one now and lowered once the upstream side sends its first
  // byte or the connection ends (it outlives the relay).
  void Add(int client_fd, int upstream_fd, bool guard_resets,
           std::atomic<uint64_t>* unanswered = nullptr);

  // Connections closed for too many resets, since start.
  uint64_t closed_for_resets() const { return closed_for_resets_.load(); }

 private:
  struct Conn;
  struct End;
  void Loop();
  void Update(Conn* c);
  void Close(Conn* c);
  bool Pump(Conn* c);  // false: the connection is done
  // The rapid-reset guard over bytes the client sent; false: close it.
  bool GuardResets(Conn* c, const uint8_t* b, size_t len);

  const RelayOptions options_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<uint64_t> closed_for_resets_{0};
  absl::Mutex mu_;
  absl::flat_hash_set<Conn*> conns_ ABSL_GUARDED_BY(mu_);
  std::vector<Conn*> added_ ABSL_GUARDED_BY(mu_);  // not yet in the epoll set
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_RELAY_H_
