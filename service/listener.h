// Listeners maskd accepts on itself, instead of gRPC's own: a unix socket
// (with SO_PEERCRED, see peer_credentials.h) or a plaintext TCP address.
// Each accepted connection is handed to a started grpc::Server with
// grpc::AddInsecureChannelFromFd, so that maskd, not gRPC 1.51, decides:
//   * binding: no SO_REUSEPORT (a second server on the port fails to start);
//     a unix path with a live server behind it is refused, a stale socket
//     (connect: ECONNREFUSED) is replaced, anything else at the path is
//     refused; the socket's mode is set at bind (created under umask 0777,
//     then chmod), never the process umask;
//   * how many connections are open at once (`max_connections`, all
//     listeners sharing one ConnectionLimit): past it a new connection is
//     closed at once;
//   * what a connection must do to be handed over: send its first byte
//     within `first_byte_timeout`, else it is closed;
//   * what happens when accept fails for lack of descriptors or memory
//     (EMFILE, ENFILE, ENOBUFS, ENOMEM): the listener backs off (10 ms,
//     doubling to 1 s) and retries; it never stops accepting.
// TLS listeners stay with gRPC (AddInsecureChannelFromFd takes plaintext
// only); docs/reliability.md says what bounds them.
#ifndef MASKD_SERVICE_LISTENER_H_
#define MASKD_SERVICE_LISTENER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"

namespace maskd {

class ResetGuard;

// Open connections across listeners (accepted and not yet seen closed).
struct ConnectionLimit {
  explicit ConnectionLimit(uint64_t max) : max(max) {}
  const uint64_t max;  // 0: no limit
  std::atomic<uint64_t> open{0};
  std::atomic<uint64_t> refused{0};  // closed at accept because `open` was at `max`
};

struct ListenerOptions {
  mode_t socket_mode = 0660;                       // unix sockets: file mode
  absl::Duration first_byte_timeout = absl::Seconds(10);
  ConnectionLimit* limit = nullptr;                // required; outlives the listener
  // When set, connections go to gRPC through this guard (reset_guard.h)
  // instead of directly; outlives the listener.
  ResetGuard* guard = nullptr;
};

// True for addresses Listener serves ("unix:" paths; "host:port" TCP).
bool IsUnixAddress(const std::string& addr);

// The addresses `host:port` names, resolved passively (for binding); an
// error for a malformed address or an unknown host.
absl::StatusOr<std::vector<std::string>> ResolveForBind(const std::string& host_port);
// True when every address `host:port` resolves to is loopback (127/8, ::1).
absl::StatusOr<bool> IsLoopbackTcp(const std::string& host_port);

class Listener {
 public:
  // Binds and listens on `addr` (unix:///abs, unix:rel, host:port, [v6]:port;
  // port 0 picks one). FAILED_PRECONDITION with a message naming the address
  // when it is taken or not a socket; INVALID_ARGUMENT when malformed.
  static absl::StatusOr<std::unique_ptr<Listener>> Bind(const std::string& addr,
                                                        const ListenerOptions& options);
  ~Listener();  // Stop()
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // The TCP port bound (0 for unix sockets).
  int port() const { return port_; }
  // The address as shown to users (the TCP port filled in).
  const std::string& shown() const { return shown_; }

  // Starts the accept thread; `server` must be started and outlive Stop().
  void Start(grpc::Server* server);
  // Stops accepting: closes the listening sockets and connections not yet
  // handed over, joins the thread, removes the unix socket file if it is
  // still ours. Connections already handed to gRPC stay with it. Idempotent.
  void Stop();

 private:
  struct Pending;
  struct Handed;
  Listener() = default;
  void Loop();

  std::string addr_, shown_, unix_path_;
  dev_t unix_dev_ = 0;
  ino_t unix_ino_ = 0;
  int port_ = 0;
  bool is_unix_ = false;
  ListenerOptions options_;
  std::vector<int> fds_;  // listening sockets
  int wake_fd_ = -1;      // eventfd: Stop() wakes the loop
  grpc::Server* server_ = nullptr;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_LISTENER_H_
