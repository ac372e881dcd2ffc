// Who is at the other end of a call's connection, as the kernel reports it.
//
// Only connections maskd accepts itself on a unix-socket listener carry
// credentials (SO_PEERCRED, taken once at accept); a TCP connection, TLS or
// not, has none. Policy built on it (shared-memory ownership) lives with its
// users; this header only answers the question.
#ifndef MASKD_SERVICE_PEER_CREDENTIALS_H_
#define MASKD_SERVICE_PEER_CREDENTIALS_H_

#include <sys/types.h>

#include <optional>

#include "grpcpp/server_context.h"

namespace maskd {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// The credentials of the process that opened the connection `ctx` arrived
// on, or nullopt when the connection carries none (TCP, in-process, unknown).
// Thread-safe; no allocation on the lookup path beyond reading ctx.peer().
std::optional<PeerCredentials> PeerCredentialsOf(const grpc::ServerContextBase& ctx);

}  // namespace maskd

#endif  // MASKD_SERVICE_PEER_CREDENTIALS_H_
