// The record behind PeerCredentialsOf (peer_credentials.h), written by the
// listener (listener.h) and nothing else.
#ifndef MASKD_SERVICE_PEER_CREDENTIALS_INTERNAL_H_
#define MASKD_SERVICE_PEER_CREDENTIALS_INTERNAL_H_

#include <optional>

#include "service/peer_credentials.h"

namespace maskd::internal {

// Records what the connection on `fd` carries, keyed by fd number and the
// socket's (st_dev, st_ino). Call after accept and before handing `fd` to
// gRPC (whose peer string for it is "fd:<fd>"), so that no call can arrive on
// `fd` before the record exists. A later record for the same number replaces
// this one; a lookup whose fd now names another file (its inode differs)
// finds nothing. `creds` nullopt: a connection without credentials (TCP).
// Returns false when fd cannot be fstat'ed (nothing recorded).
bool RecordConnection(int fd, const std::optional<PeerCredentials>& creds);

}  // namespace maskd::internal

#endif  // MASKD_SERVICE_PEER_CREDENTIALS_INTERNAL_H_
