// Internal to maskd_shm: the CUDA side of regions, compiled from cuda_ipc.cc
// in CUDA builds and from cuda_ipc_stub.cc otherwise. `detail` receives text
// for the server log only (CUDA error names); statuses carry client-safe text.
#ifndef MASKD_SHM_CUDA_IPC_INTERNAL_H_
#define MASKD_SHM_CUDA_IPC_INTERNAL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace maskd::shm::internal {

// True in builds with CUDA support.
bool CudaIpcSupported();

// Opens a 64-byte cudaIpcMemHandle_t on `device_id`. On success *base is the
// mapped allocation's first byte and *alloc_size its real size in bytes.
absl::Status OpenCudaIpc(const void* handle, int device_id, void** base,
                         uint64_t* alloc_size, std::string* detail);

// Closes a mapping made by OpenCudaIpc; errors are reported to `detail`.
void CloseCudaIpc(void* base, int device_id, std::string* detail);

}  // namespace maskd::shm::internal

#endif  // MASKD_SHM_CUDA_IPC_INTERNAL_H_
