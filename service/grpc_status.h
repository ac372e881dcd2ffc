// grpc_status.h: absl::Status -> grpc::Status at the gRPC edge: the same
// numeric code (google.rpc.Code in both libraries) and the message, bounded
// (BoundMessage, service/quote.h). Every service answers through it.
#ifndef MASKD_SERVICE_GRPC_STATUS_H_
#define MASKD_SERVICE_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"
#include "service/quote.h"

namespace maskd {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), BoundMessage(s.message()));
}

}  // namespace maskd

#endif  // MASKD_SERVICE_GRPC_STATUS_H_
