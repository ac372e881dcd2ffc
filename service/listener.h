// Listeners maskd accepts on itself, instead of gRPC's own: a unix socket
// (with SO_PEERCRED, see peer_credentials.h), a plaintext TCP address, or a
// TLS TCP address. A plaintext connection is handed to a started
// grpc::Server with grpc::AddInsecureChannelFromFd (directly, or through the
// rapid-reset guard of relay.h); a TLS connection is relayed byte for byte
// to gRPC's private TLS unix socket (`upstream_path`), because fd hand-over
// in gRPC 1.51 takes plaintext only. Either way maskd, not gRPC 1.51, decides:
//   * binding: no SO_REUSEPORT (a second server on the port fails to start);
//     a unix path with a live server behind it is refused, a stale socket
//     (connect: ECONNREFUSED) is replaced, anything else at the path is
//     refused; the socket's mode is set at bind (created under umask 0777,
//     then chmod), never the process umask;
//   * how many connections are open at once (`max_connections`, all
//     listeners sharing one ConnectionLimit): past it a new connection is
//     closed at once;
//   * what a connection must do to be handed over: send its first byte
//     (for TLS, the ClientHello) within `first_byte_timeout`, else it is
//     closed;
//   * what happens when accept fails for lack of descriptors or memory
//     (EMFILE, ENFILE, ENOBUFS, ENOMEM), or when fewer than `spare_fds`
//     descriptors would be left: the listener backs off (10 ms, doubling to
//     1 s) and retries; it never stops accepting.
#ifndef MASKD_SERVICE_LISTENER_H_
#define MASKD_SERVICE_LISTENER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"

namespace maskd {

class FdHeadroom;
class Relay;

// Open connections across listeners (accepted and not yet seen closed).
struct ConnectionLimit {
  explicit ConnectionLimit(uint64_t max) : max(max) {}
  const uint64_t max;  // 0: no limit
  std::atomic<uint64_t> open{0};
  std::atomic<uint64_t> refused{0};  // closed at accept because `open` was at `max`
  // Connections relayed to gRPC's private TLS socket that gRPC has not
  // answered yet: each may still need a descriptor for gRPC's accept.
  std::atomic<uint64_t> upstream_unanswered{0};
};

struct ListenerOptions {
  mode_t socket_mode = 0660;                       // unix sockets: file mode
  absl::Duration first_byte_timeout = absl::Seconds(10);
  ConnectionLimit* limit = nullptr;                // required; outlives the listener
  // Where a connection goes once it has sent its first byte:
  //   * `upstream_path` empty, `relay` null: to gRPC, directly;
  //   * `upstream_path` empty, `relay` set: to gRPC through `relay`'s
  //     rapid-reset guard (gRPC gets one end of a socketpair);
  //   * `upstream_path` set: `relay` (required) copies its bytes, uninspected,
  //     to a new connection to the unix socket at `upstream_path` (gRPC's
  //     private TLS socket). That connection is made from a fresh autobound
  //     abstract address, so gRPC's peer string tells connections apart (the
  //     compile-fairness key) and carries no credentials (PeerCredentialsOf:
  //     nullopt). When it cannot be made (too few spare descriptors, the
  //     backlog full, gRPC gone) the client is closed and counted in
  //     upstream_failures().
  // `relay` outlives the listener.
  Relay* relay = nullptr;
  std::string upstream_path;
  // Descriptors each accept must leave free (0: none). gRPC 1.51's own
  // listener (the private TLS socket's) stops for good when its accept
  // fails with EMFILE: while one exists, every listener of the process
  // leaves it this many plus one per connection gRPC has yet to accept
  // (ConnectionLimit::upstream_unanswered, at most 64 in all), and a TLS
  // connection is relayed only while half of `spare_fds` plus those are
  // free. Free descriptors are counted without opening any (fd_headroom.h).
  // A margin, not a guarantee: other threads open descriptors too.
  int spare_fds = 0;
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
  // Connections closed because the upstream connection could not be made.
  uint64_t upstream_failures() const { return upstream_failures_.load(); }

  // Starts the accept thread; `server` must be started and outlive Stop()
  // (unused with `upstream_path`).
  void Start(grpc::Server* server);
  // Stops accepting: closes the listening sockets and connections not yet
  // handed over, joins the thread, removes the unix socket file if it is
  // still ours. Connections already handed to gRPC or the relay stay with
  // them. Idempotent.
  void Stop();

 private:
  struct Pending;
  struct Handed;
  struct LoopState;
  Listener() = default;
  // Bind's two kinds of address: they fill fds_ (and the unix socket's
  // identity, or port_ and shown_).
  absl::Status BindUnix();
  absl::Status BindTcp();

  // The accept thread: poll, then hand over the pending connections that
  // sent a byte, accept new ones, and sweep the handed ones once a second.
  void Loop();
  // Fills s->pfds for this round; the poll timeout in ms (at most 1 s: the
  // next sweep, the end of an accept back-off or a first-byte deadline).
  int PreparePoll(LoopState* s, absl::Time now) const;
  // Hands over the pending connections that sent their first byte (or hung
  // up: gRPC reads the EOF and closes), closes those past their deadline.
  void ServePending(LoopState* s, absl::Time after);
  // Accepts up to 64 connections on `listen_fd`.
  void AcceptBatch(LoopState* s, int listen_fd);
  // After accept failed with `e` (EMFILE when !spare: too few spare
  // descriptors): back off on lack of descriptors or memory, else pause.
  void OnAcceptFailure(LoopState* s, int e, bool spare);
  // A new connection into s->pending, or closed at once (counted refused)
  // when max_connections are open even after a sweep.
  void Admit(LoopState* s, int fd);
  // Forgets the handed connections gRPC has closed (their count off `open`).
  void Sweep(LoopState* s);
  // The once-a-second sweep, and the refusals logged (at most every 10 s).
  void SweepAndReport(LoopState* s, absl::Time after);
  void ClosePending(const Pending& p);
  // Sends on a connection that sent its first byte (takes ownership of
  // p.fd). True with `out` the socket to track (gRPC's end, or the client's
  // socket, which the relay closes when done); false when it was closed.
  bool HandOver(const Pending& p, Handed* out);
  // `base` descriptors plus one per unanswered upstream connection, at most 64.
  int SpareFdsNeeded(int base) const;

  std::string addr_, shown_, unix_path_;
  dev_t unix_dev_ = 0;
  ino_t unix_ino_ = 0;
  int port_ = 0;
  bool is_unix_ = false;
  ListenerOptions options_;
  std::vector<int> fds_;  // listening sockets
  int wake_fd_ = -1;      // eventfd: Stop() wakes the loop
  std::unique_ptr<FdHeadroom> headroom_;  // with spare_fds or upstream_path
  std::atomic<uint64_t> upstream_failures_{0};
  absl::Time last_upstream_log_ = absl::InfinitePast();
  grpc::Server* server_ = nullptr;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_LISTENER_H_
