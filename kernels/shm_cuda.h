// ShmCuda: host mask rows onto device memory another process shares (CUDA
// IPC): copy them there, or apply them to device logits with the CUDA kernel
// (kernels/apply_mask_cuda.h). The device-side counterpart of CpuApplier,
// used by SharedMemory.StepInRegion on CUDA regions. It holds, per device,
// one stream and one device scratch buffer (grown as needed, never shrunk)
// that receives the masks and the row map. No gRPC, no region bookkeeping:
// callers pass device addresses they have validated.
//
// Every call runs under one mutex: CUDA work of concurrent calls is
// serialised (the scratch buffer is shared). Each call sets the thread's
// current device for its duration and restores it, and synchronises its
// stream before returning: when a call returns OK, the device memory it was
// given is written.
//
// Errors are client-safe: CUDA error names and server details go to `log`;
// clients see INTERNAL "CUDA ... failed", INVALID_ARGUMENT (a rejected event
// handle) or UNIMPLEMENTED (a build without CUDA). Nothing is initialised
// before the first call, so a server without a GPU never touches the driver.
#ifndef MASKD_KERNELS_SHM_CUDA_H_
#define MASKD_KERNELS_SHM_CUDA_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/apply_mask.h"

namespace maskd {

class ShmCuda {
 public:
  // `log` receives details not sent to clients (null: dropped).
  explicit ShmCuda(std::function<void(std::string_view)> log);
  ~ShmCuda();
  ShmCuda(const ShmCuda&) = delete;
  ShmCuda& operator=(const ShmCuda&) = delete;

  // Whether this build has CUDA support.
  static bool Supported();

  // Copies `bytes` host bytes to device address `dst` (on `device`), waits.
  absl::Status CopyToDevice(int device, void* dst, const void* src, size_t bytes);

  // Applies `mask` (host words: mask.words is a host pointer) to `logits`
  // (logits.data a device pointer on `device`) with `row_map` (host, one
  // entry per logits row, each -1 or a mask row; already validated). When
  // `wait_event` is not empty it is a 64-byte cudaIpcEventHandle_t the stream
  // waits on first. Waits for completion.
  absl::Status Apply(int device, const LogitsBatch& logits, const MaskBatch& mask,
                     absl::Span<const int32_t> row_map, std::string_view wait_event);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace maskd

#endif  // MASKD_KERNELS_SHM_CUDA_H_
