// cuda_export.h: client helper that exports a CUDA device buffer for a
// RegionRegistry::RegisterCuda call in another process. Includable without
// CUDA headers; in builds without CUDA it returns Unimplemented.
#ifndef MASKD_SHM_CUDA_EXPORT_H_
#define MASKD_SHM_CUDA_EXPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace maskd::shm {

struct CudaIpcExport {
  std::string handle;           // raw cudaIpcMemHandle_t, 64 bytes
  int device_id = 0;            // device owning the allocation
  uint64_t offset = 0;          // of the pointer within its allocation
  uint64_t allocation_size = 0; // bytes of the whole cudaMalloc allocation
};

// A handle covers a whole cudaMalloc allocation: pass `offset` as the region
// offset to register exactly the buffer at `device_ptr`. The allocation must
// outlive every process that opened the handle. Errors: InvalidArgument (not
// device memory), Unavailable (no device), Unimplemented (no CUDA).
absl::StatusOr<CudaIpcExport> ExportCudaIpcHandle(const void* device_ptr);

}  // namespace maskd::shm

#endif  // MASKD_SHM_CUDA_EXPORT_H_
