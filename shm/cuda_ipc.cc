// CUDA half of maskd_shm (CUDA builds only). Uses the runtime API; the
// driver's address-range query is reached through cudaGetDriverEntryPoint so
// that nothing links libcuda directly (binaries start on machines without a
// driver and report Unavailable instead).
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "shm/cuda_export.h"
#include "shm/cuda_ipc_internal.h"
#include "shm/region_registry.h"

namespace maskd::shm {
namespace {

using AddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

// Looks up cuMemGetAddressRange once per call (cheap; registration is rare).
AddressRangeFn GetAddressRangeFn() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000,
                                       cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<AddressRangeFn>(fn);
}

// Restores the calling thread's current device on scope exit.
class DeviceGuard {
 public:
  DeviceGuard() { ok_ = cudaGetDevice(&saved_) == cudaSuccess; }
  ~DeviceGuard() {
    if (ok_) cudaSetDevice(saved_);
  }

 private:
  int saved_ = 0;
  bool ok_ = false;
};

absl::Status NoDevice(cudaError_t e, std::string* detail) {
  *detail = absl::StrCat("CUDA: ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
  cudaGetLastError();
  return absl::UnavailableError("no usable CUDA device on the server");
}

}  // namespace

namespace internal {

bool CudaIpcSupported() { return true; }

absl::Status OpenCudaIpc(const void* handle, int device_id, void** base,
                         uint64_t* alloc_size, std::string* detail) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return NoDevice(e, detail);
  if (device_id >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA device id ", device_id, " is not visible to the server (",
        count, " device(s))"));
  }
  DeviceGuard guard;
  e = cudaSetDevice(device_id);
  if (e != cudaSuccess) return NoDevice(e, detail);
  cudaIpcMemHandle_t h;
  static_assert(sizeof(h) == kCudaIpcHandleSize);
  std::memcpy(&h, handle, sizeof(h));
  void* p = nullptr;
  e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    *detail = absl::StrCat("cudaIpcOpenMemHandle on device ", device_id, ": ",
                           cudaGetErrorName(e), ": ", cudaGetErrorString(e));
    cudaGetLastError();
    return absl::InvalidArgumentError(
        "the CUDA IPC handle could not be opened on that device (wrong "
        "device, or the exporting allocation is gone)");
  }
  AddressRangeFn range = GetAddressRangeFn();
  CUdeviceptr rbase = 0;
  size_t rsize = 0;
  CUresult r = range == nullptr ? CUDA_ERROR_NOT_FOUND
                                : range(&rbase, &rsize, reinterpret_cast<CUdeviceptr>(p));
  if (r != CUDA_SUCCESS) {
    *detail = absl::StrCat("cuMemGetAddressRange failed: CUresult ", static_cast<int>(r));
    cudaIpcCloseMemHandle(p);
    return absl::InternalError("could not size the CUDA allocation");
  }
  // The handle maps the whole allocation, so p is its base.
  *base = p;
  *alloc_size = rsize - (reinterpret_cast<CUdeviceptr>(p) - rbase);
  return absl::OkStatus();
}

void CloseCudaIpc(void* base, int device_id, std::string* detail) {
  DeviceGuard guard;
  cudaSetDevice(device_id);
  cudaError_t e = cudaIpcCloseMemHandle(base);
  if (e != cudaSuccess) {
    *detail = absl::StrCat("cudaIpcCloseMemHandle: ", cudaGetErrorName(e));
    cudaGetLastError();
  }
}

}  // namespace internal

absl::StatusOr<CudaIpcExport> ExportCudaIpcHandle(const void* device_ptr) {
  if (device_ptr == nullptr) {
    return absl::InvalidArgumentError("device pointer is null");
  }
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    return absl::UnavailableError("no usable CUDA device");
  }
  cudaPointerAttributes attr{};
  e = cudaPointerGetAttributes(&attr, device_ptr);
  if (e != cudaSuccess || attr.type != cudaMemoryTypeDevice) {
    cudaGetLastError();
    return absl::InvalidArgumentError("pointer is not cudaMalloc'd device memory");
  }
  DeviceGuard guard;
  if (cudaSetDevice(attr.device) != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError("cannot select the pointer's CUDA device");
  }
  AddressRangeFn range = GetAddressRangeFn();
  CUdeviceptr rbase = 0;
  size_t rsize = 0;
  if (range == nullptr ||
      range(&rbase, &rsize, reinterpret_cast<CUdeviceptr>(device_ptr)) != CUDA_SUCCESS) {
    return absl::InternalError("could not find the allocation of the pointer");
  }
  cudaIpcMemHandle_t h;
  e = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(rbase));
  if (e != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(
        absl::StrCat("cudaIpcGetMemHandle failed: ", cudaGetErrorName(e)));
  }
  CudaIpcExport out;
  out.handle.assign(reinterpret_cast<const char*>(&h), sizeof(h));
  out.device_id = attr.device;
  out.offset = reinterpret_cast<CUdeviceptr>(device_ptr) - rbase;
  out.allocation_size = rsize;
  return out;
}

}  // namespace maskd::shm
