// ClientKindOf: the ClientKind (client_label.h) of a call, from the user agent
// its client sent. A lookup in the call's metadata; no allocation.
#ifndef MASKD_SERVICE_CLIENT_KIND_OF_H_
#define MASKD_SERVICE_CLIENT_KIND_OF_H_

#include <grpcpp/server_context.h>

#include "absl/strings/string_view.h"
#include "service/client_label.h"

namespace maskd {

inline ClientKind ClientKindOf(const grpc::ServerContextBase& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("user-agent");
  if (it == md.end()) return ClientKind::kUnknown;
  return ClientKindFromUserAgent(absl::string_view(it->second.data(), it->second.size()));
}

}  // namespace maskd

#endif  // MASKD_SERVICE_CLIENT_KIND_OF_H_
