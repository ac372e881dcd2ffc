// Who is at the other end of a call's connection, as the kernel reports it.
//
// Only connections maskd accepts itself on a unix-socket listener carry
// credentials (SO_PEERCRED, taken once at accept); a TCP connection, TLS or
// not, has none. Every connection maskd hands to gRPC itself (unix socket and
// plaintext TCP, not TLS: gRPC accepts those) also has a connection number.
// Policy built on it (shared-memory ownership, per-client shares) lives with
// its users; this header only answers the question.
#ifndef MASKD_SERVICE_PEER_CREDENTIALS_H_
#define MASKD_SERVICE_PEER_CREDENTIALS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>

#include "grpcpp/server_context.h"

namespace maskd {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// A connection maskd accepted and handed to gRPC.
struct ConnectionInfo {
  // Unique for the life of the process (1, 2, ...; never reused, unlike the
  // fd number in gRPC's peer string "fd:N").
  uint64_t id = 0;
  std::optional<PeerCredentials> creds;  // unix socket only
};

// The connection `ctx` arrived on, or nullopt when maskd did not hand it to
// gRPC (TLS, gRPC's own listeners, in-process). Thread-safe.
std::optional<ConnectionInfo> ConnectionOf(const grpc::ServerContextBase& ctx);

// The credentials of the process that opened the connection `ctx` arrived
// on, or nullopt when the connection carries none (TCP, in-process, unknown).
// Thread-safe; no allocation on the lookup path beyond reading ctx.peer().
std::optional<PeerCredentials> PeerCredentialsOf(const grpc::ServerContextBase& ctx);

}  // namespace maskd

#endif  // MASKD_SERVICE_PEER_CREDENTIALS_H_
