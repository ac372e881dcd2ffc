// maskd::ShmClient: a typed client of maskd.v1.SharedMemory
// (proto/maskd/v1/shm.proto) over an existing gRPC channel, e.g.
// maskd::Client::channel(). Thread-safe, like the channel. On a Client's
// channel its calls carry the Client's ClientOptions::client_id.
//
// Also re-exports the helpers that create what a region refers to:
//  - maskd::shm::PosixShmSegment (shm/posix_segment.h): create + map a POSIX
//    shared-memory object under the server's --shm_prefix;
//  - maskd::shm::ExportCudaIpcHandle (shm/cuda_export.h): the 64-byte IPC
//    handle, device and offset of a cudaMalloc'ed buffer.
//
// Typical CPU engine:
//   auto seg = maskd::shm::PosixShmSegment::Create("/maskd-engine-0", bytes).value();
//   maskd::ShmClient shm(client->channel());
//   shm.RegisterSystemRegion("logits", seg.key(), 0, seg.size());
//   each step: write logits into seg.data(); StepInRegion(logits target);
//              sample from seg.data().
//
// Library maskd_shm_client (build tree only: not part of the installed
// maskd CMake package, since it links maskd_shm and, in CUDA builds, cudart).
#ifndef MASKD_CLIENT_SHM_CLIENT_H_
#define MASKD_CLIENT_SHM_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "maskd/v1/shm.grpc.pb.h"
#include "shm/cuda_export.h"
#include "shm/posix_segment.h"

namespace maskd {

class ShmClient {
 public:
  // `timeout`: deadline of every call; zero: none.
  explicit ShmClient(std::shared_ptr<grpc::Channel> channel,
                     absl::Duration timeout = absl::ZeroDuration());

  absl::Status RegisterSystemRegion(const std::string& name, const std::string& key,
                                    uint64_t offset, uint64_t byte_size);
  // `raw_handle`: the 64 bytes of a cudaIpcMemHandle_t.
  absl::Status RegisterCudaRegion(const std::string& name, const std::string& raw_handle,
                                  int device_id, uint64_t offset, uint64_t byte_size);
  // Registers `byte_size` bytes at the exported pointer (handle, device and
  // offset from ExportCudaIpcHandle).
  absl::Status RegisterCudaRegion(const std::string& name, const shm::CudaIpcExport& exported,
                                  uint64_t byte_size);
  // Every region ("") or one.
  absl::StatusOr<std::vector<v1::RegionStatus>> ListRegions(const std::string& name = "");
  // One region, or every region ("").
  absl::Status UnregisterRegion(const std::string& name);
  // One step; entry errors are in resp->results(i).status(); a non-OK return
  // fails the whole call (then no session was stepped, except for INTERNAL
  // from a CUDA failure after the step: see docs/api.md).
  absl::Status StepInRegion(const v1::StepInRegionRequest& req, v1::StepInRegionResponse* resp);

  v1::SharedMemory::Stub* stub() { return stub_.get(); }

 private:
  void Prepare(grpc::ClientContext* ctx) const;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SharedMemory::Stub> stub_;
  absl::Duration timeout_;
};

}  // namespace maskd

#endif  // MASKD_CLIENT_SHM_CLIENT_H_
