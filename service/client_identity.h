// The client a call counts against: the unit of every per-client share
// (client_shares.h: sessions, registered tokenizers, StepStreams, shared-
// memory regions; IndexCache's pending compiles; the Mask work pool's
// queues). Chosen by --client-identity:
//   * connection (the default): the connection the call arrived on. On the
//     unix socket every engine process of a pod usually runs as one uid, so
//     only the connection tells them apart. Key "conn:<n>" for connections
//     maskd accepts and hands to gRPC itself (unix socket, plaintext TCP; n
//     is never reused, see peer_credentials.h), else "peer:<gRPC's peer
//     string>" (TLS, relayed from its own abstract address; connections on a
//     gRPC-served unix-abstract: listener all share one peer string).
//   * uid: the caller's uid on the unix socket ("uid:<n>", SO_PEERCRED):
//     every connection of one user is one client; the connection elsewhere.
//   * header: the `maskd-client-id` request metadata ("id:<value>"), 1 to
//     128 bytes of [A-Za-z0-9._:@/+-]; the connection when absent or not of
//     that form. A client can claim any id, so this is for operators who
//     trust their clients (or a proxy that sets the header).
//   * tls: the verified TLS client identity (mutual TLS, --tls_client_ca:
//     the certificate's SAN or CN as gRPC's AuthContext reports it,
//     "tls:<identity>"); the connection when there is none.
// A share charged to a key outlives the connection: a session belongs to
// the key that created it until it is closed or expires.
#ifndef MASKD_SERVICE_CLIENT_IDENTITY_H_
#define MASKD_SERVICE_CLIENT_IDENTITY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"

namespace maskd {

enum class ClientIdentity : uint8_t { kConnection = 0, kUid, kHeader, kTls };

// The metadata key of --client-identity=header.
inline constexpr char kClientIdHeader[] = "maskd-client-id";

// "connection", "uid", "header", "tls".
absl::string_view ClientIdentityName(ClientIdentity identity);
// The inverse of ClientIdentityName; nullopt for anything else.
std::optional<ClientIdentity> ParseClientIdentity(absl::string_view name);

// The key of the client `ctx`'s call counts against (see above). Takes a
// reader lock and one fstat for "conn:" keys; not for the Step hot path.
std::string ClientKey(const grpc::ServerContextBase& ctx, ClientIdentity identity);

}  // namespace maskd

#endif  // MASKD_SERVICE_CLIENT_IDENTITY_H_
