// ShmCuda with the CUDA runtime (built only when MASKD_HAVE_CUDA).
#include "kernels/shm_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/apply_mask_cuda.h"

namespace maskd {
namespace {

static_assert(sizeof(cudaIpcEventHandle_t) == 64, "cudaIpcEventHandle_t is 64 bytes");

// Sets the thread's current device for a scope, restores the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) prev_ = -1;
    err_ = cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (prev_ >= 0) cudaSetDevice(prev_);
  }
  cudaError_t error() const { return err_; }

 private:
  int prev_ = -1;
  cudaError_t err_ = cudaSuccess;
};

}  // namespace

class ShmCuda::Impl {
 public:
  explicit Impl(std::function<void(std::string_view)> log) : log_(std::move(log)) {}
  ~Impl() {
    for (auto& [device, d] : devices_) {
      DeviceScope scope(device);
      if (d.scratch) cudaFree(d.scratch);
      if (d.stream) cudaStreamDestroy(d.stream);
    }
  }

  struct Device {
    cudaStream_t stream = nullptr;
    void* scratch = nullptr;
    size_t capacity = 0;
  };

  // A client-safe error; the detail (CUDA error name) goes to the log.
  absl::Status Fail(const char* what, cudaError_t e) {
    cudaGetLastError();  // clear a non-sticky error
    if (log_) log_(absl::StrCat("shm: CUDA ", what, ": ", cudaGetErrorName(e)));
    return absl::InternalError(absl::StrCat("CUDA ", what, " failed (details in the server log)"));
  }

  // The device's stream and at least `bytes` of scratch. mu_ held; the
  // device is current.
  absl::StatusOr<Device*> Get(int device, size_t bytes) {
    Device& d = devices_[device];
    if (!d.stream) {
      cudaError_t e = cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking);
      if (e != cudaSuccess) {
        d.stream = nullptr;
        return Fail("stream creation", e);
      }
    }
    if (bytes > d.capacity) {
      if (d.scratch) cudaFree(d.scratch);
      d.scratch = nullptr;
      d.capacity = 0;
      size_t want = std::max<size_t>(bytes, 1 << 20);
      want = std::max(want, bytes + bytes / 2);  // grow geometrically
      cudaError_t e = cudaMalloc(&d.scratch, want);
      if (e != cudaSuccess) return Fail("scratch allocation", e);
      d.capacity = want;
    }
    return &d;
  }

  absl::Mutex mu_;
  std::function<void(std::string_view)> log_;
  std::map<int, Device> devices_;
};

ShmCuda::ShmCuda(std::function<void(std::string_view)> log)
    : impl_(std::make_unique<Impl>(std::move(log))) {}
ShmCuda::~ShmCuda() = default;

bool ShmCuda::Supported() { return true; }

absl::Status ShmCuda::CopyToDevice(int device, void* dst, const void* src, size_t bytes) {
  absl::MutexLock lock(&impl_->mu_);
  DeviceScope scope(device);
  if (scope.error() != cudaSuccess) return impl_->Fail("device selection", scope.error());
  auto d = impl_->Get(device, 0);
  if (!d.ok()) return d.status();
  cudaStream_t stream = (*d)->stream;
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);
  if (e != cudaSuccess) return impl_->Fail("mask copy", e);
  e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return impl_->Fail("mask copy", e);
  return absl::OkStatus();
}

absl::Status ShmCuda::Apply(int device, const LogitsBatch& logits, const MaskBatch& mask,
                            absl::Span<const int32_t> row_map, std::string_view wait_event) {
  const size_t mask_bytes = static_cast<size_t>(mask.num_rows * mask.words_per_row) * 4;
  const size_t map_offset = (mask_bytes + 255) & ~size_t{255};
  const size_t map_bytes = row_map.size() * sizeof(int32_t);
  absl::MutexLock lock(&impl_->mu_);
  DeviceScope scope(device);
  if (scope.error() != cudaSuccess) return impl_->Fail("device selection", scope.error());
  auto d = impl_->Get(device, map_offset + map_bytes);
  if (!d.ok()) return d.status();
  cudaStream_t stream = (*d)->stream;
  char* scratch = static_cast<char*>((*d)->scratch);
  cudaEvent_t event = nullptr;
  if (!wait_event.empty()) {
    cudaIpcEventHandle_t h;
    std::memcpy(&h, wait_event.data(), sizeof h);
    cudaError_t e = cudaIpcOpenEventHandle(&event, h);
    if (e != cudaSuccess) {
      cudaGetLastError();
      if (impl_->log_) impl_->log_(absl::StrCat("shm: cudaIpcOpenEventHandle: ", cudaGetErrorName(e)));
      return absl::InvalidArgumentError("wait_event was rejected by the CUDA driver");
    }
  }
  auto destroy_event = [&] {
    if (event) cudaEventDestroy(event);
  };
  cudaError_t e = cudaSuccess;
  if (event) e = cudaStreamWaitEvent(stream, event, 0);
  if (e == cudaSuccess && mask_bytes > 0) {
    e = cudaMemcpyAsync(scratch, mask.words, mask_bytes, cudaMemcpyHostToDevice, stream);
  }
  if (e == cudaSuccess && map_bytes > 0) {
    e = cudaMemcpyAsync(scratch + map_offset, row_map.data(), map_bytes, cudaMemcpyHostToDevice,
                        stream);
  }
  if (e != cudaSuccess) {
    destroy_event();
    return impl_->Fail("copy to device", e);
  }
  MaskBatch device_mask = mask;
  device_mask.words = reinterpret_cast<const uint32_t*>(scratch);
  absl::Status s = ApplyTokenBitmaskInplaceCuda(
      logits, device_mask,
      row_map.empty() ? nullptr : reinterpret_cast<const int32_t*>(scratch + map_offset), stream);
  if (!s.ok()) {
    cudaStreamSynchronize(stream);
    destroy_event();
    if (s.code() == absl::StatusCode::kInvalidArgument) return s;  // names client inputs only
    if (impl_->log_) impl_->log_(absl::StrCat("shm: CUDA apply: ", s.message()));
    return absl::InternalError("CUDA apply failed (details in the server log)");
  }
  e = cudaStreamSynchronize(stream);
  destroy_event();
  if (e != cudaSuccess) return impl_->Fail("apply", e);
  return absl::OkStatus();
}

}  // namespace maskd
