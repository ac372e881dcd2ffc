// ServerTransport: how connections reach maskd's gRPC server. The unix and
// TCP addresses of --listen are maskd's own Listeners (listener.h), bound
// before gRPC starts so that a taken address fails at start; the relay
// (relay.h) guards plaintext connections against rapid resets and carries
// TLS ones to gRPC's private TLS socket; what is left (unix-abstract:) goes
// to gRPC itself, without SO_REUSEPORT.
//
// With TLS (--tls_cert), gRPC serves TLS on one private unix socket only,
// `tls.sock` in a fresh directory of mode 0700 (nobody else can connect),
// removed when the transport is destroyed; each TLS address is a Listener
// that relays to it, so that TLS connections get the same connection cap,
// first-byte timeout and accept back-off as the others (docs/reliability.md,
// Threat model). Without TLS, plaintext TCP is on loopback only unless
// --allow_insecure_tcp (checked by ReadServerConfig).
#ifndef MASKD_SERVICE_SERVER_TRANSPORT_H_
#define MASKD_SERVICE_SERVER_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "service/listener.h"
#include "service/metrics.h"
#include "service/relay.h"
#include "service/server_config.h"

namespace maskd {

class ServerTransport {
 public:
  explicit ServerTransport(const TransportConfig& config);
  // Stops the listeners; removes the private TLS socket's directory.
  ~ServerTransport();
  ServerTransport(const ServerTransport&) = delete;
  ServerTransport& operator=(const ServerTransport&) = delete;

  // Binds maskd's listeners and gives `builder` the addresses gRPC listens
  // on itself (before its BuildAndStart). The error's message names the
  // address that failed.
  absl::Status Bind(grpc::ServerBuilder* builder);
  // After BuildAndStart: an error naming the address gRPC could not listen on.
  absl::Status CheckGrpcPorts() const;
  // Starts accepting; `server` is started and outlives Stop().
  void Start(grpc::Server* server);
  // No new connections; those handed to gRPC stay with it. Idempotent.
  void Stop();

  // The connection counts for the metrics (open, refused, upstream failures,
  // closed for resets).
  Metrics::TransportCounts Counts() const;
  // The --listen addresses as served (TCP ports filled in), comma-separated.
  std::string Shown() const;

 private:
  // The private directory of gRPC's TLS socket, removed with the transport.
  struct RemoveDir {
    std::string path;
    ~RemoveDir();
  };
  // Makes gRPC's private TLS socket (tls_socket_) and gives it to `builder`.
  absl::Status ListenTls(grpc::ServerBuilder* builder);
  // The options of the listener for `addr` (unix: or host:port).
  ListenerOptions OptionsFor(const std::string& addr) const;

  const TransportConfig config_;
  const bool tls_;
  ConnectionLimit connection_limit_;
  ListenerOptions listener_options_;  // shared by every listener
  // The rapid-reset guard of plaintext connections and the path of TLS
  // connections to gRPC; null when neither is wanted.
  std::unique_ptr<Relay> relay_;
  Relay* reset_guard_ = nullptr;  // relay_ when it guards resets, else null
  RemoveDir tls_dir_;
  std::string tls_socket_;
  int tls_port_ = 0;  // set by gRPC's BuildAndStart; 0: it could not listen
  // By position in config_.listen: maskd's listener, or null for an address
  // gRPC serves (its port set by BuildAndStart; 0: it could not listen).
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::vector<int> ports_;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_SERVER_TRANSPORT_H_
