// ShmCuda in builds without CUDA: CUDA regions cannot be registered there
// (the registry answers UNIMPLEMENTED), so these are never reached in
// practice; they answer UNIMPLEMENTED all the same.
#include "kernels/shm_cuda.h"

namespace maskd {

class ShmCuda::Impl {};

ShmCuda::ShmCuda(std::function<void(std::string_view)>) {}
ShmCuda::~ShmCuda() = default;

bool ShmCuda::Supported() { return false; }

absl::Status ShmCuda::CopyToDevice(int, void*, const void*, size_t) {
  return absl::UnimplementedError("CUDA regions are not supported by this server build");
}

absl::Status ShmCuda::Apply(int, const LogitsBatch&, const MaskBatch&, absl::Span<const int32_t>,
                            std::string_view) {
  return absl::UnimplementedError("CUDA regions are not supported by this server build");
}

}  // namespace maskd
