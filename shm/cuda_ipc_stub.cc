// maskd_shm without CUDA: CUDA regions are refused with Unimplemented.
#include "shm/cuda_export.h"
#include "shm/cuda_ipc_internal.h"

namespace maskd::shm {
namespace internal {

bool CudaIpcSupported() { return false; }

absl::Status OpenCudaIpc(const void*, int, void**, uint64_t*, std::string*) {
  return absl::UnimplementedError(
      "CUDA shared-memory regions are not supported by this server build");
}

void CloseCudaIpc(void*, int, std::string*) {}

}  // namespace internal

absl::StatusOr<CudaIpcExport> ExportCudaIpcHandle(const void*) {
  return absl::UnimplementedError("maskd was built without CUDA");
}

}  // namespace maskd::shm
