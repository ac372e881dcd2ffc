// The client id of ClientOptions::client_id: its rule, and the channel
// interceptor that sends it as the `maskd-client-id` metadata of every call
// (what maskd --client-identity=header reads; service/client_identity.h).
// Internal to maskd_client: not installed.
#ifndef MASKD_CLIENT_CLIENT_ID_H_
#define MASKD_CLIENT_CLIENT_ID_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/client_interceptor.h"

namespace maskd {

// The metadata key; the same as the server's kClientIdHeader.
inline constexpr char kClientIdMetadataKey[] = "maskd-client-id";

// OK when `id` is 1 to 128 bytes of [A-Za-z0-9._:@/+-] (the server's rule:
// an id of another form counts as the connection); INVALID_ARGUMENT naming
// the rule and the offending byte otherwise.
absl::Status ValidateClientId(absl::string_view id);

// Adds `maskd-client-id: <id>` to the initial metadata of every call on the
// channel it is installed in. `id` must be valid.
std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> ClientIdInterceptorFactory(
    std::string id);

}  // namespace maskd

#endif  // MASKD_CLIENT_CLIENT_ID_H_
