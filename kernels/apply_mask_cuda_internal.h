// Internal to maskd_kernels_cuda, for tests: the CUDA kernel's per-thread
// code run on the host, thread by thread, over host memory. Lets machines
// without a GPU check the kernel's indexing, vector/scalar choice, tails and
// padding against the CPU reference. Not for production use (slow).
#ifndef MASKD_KERNELS_APPLY_MASK_CUDA_INTERNAL_H_
#define MASKD_KERNELS_APPLY_MASK_CUDA_INTERNAL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/apply_mask.h"

namespace maskd::internal {

// Same contract as ApplyTokenBitmaskInplaceCuda, but every pointer is host
// memory and it runs synchronously on the calling thread.
absl::Status ApplyTokenBitmaskInplaceCudaEmulated(const LogitsBatch& logits,
                                                  const MaskBatch& mask,
                                                  const int32_t* row_map);

}  // namespace maskd::internal

#endif  // MASKD_KERNELS_APPLY_MASK_CUDA_INTERNAL_H_
