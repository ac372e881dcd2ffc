// grpc_status.h: absl::Status -> grpc::Status at the gRPC edge (same numeric
// code, same message). The codes are google.rpc.Code in both libraries.
// (MaskdService keeps a private copy of this function; new services use this
// one.)
#ifndef MASKD_SERVICE_GRPC_STATUS_H_
#define MASKD_SERVICE_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace maskd {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace maskd

#endif  // MASKD_SERVICE_GRPC_STATUS_H_
