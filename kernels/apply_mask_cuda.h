// apply_mask_cuda.h: the CUDA twin of apply_mask.h. Same semantics (see
// apply_mask.h): disallowed tokens and padding tokens [mask_vocab, vocab)
// become -inf, allowed logits keep their bits, rows mapped to -1 are untouched.
//
// Includable without CUDA headers: streams are passed as void* (a
// cudaStream_t; null = the legacy default stream). All pointers in the
// LogitsBatch, MaskBatch and the row map must be device-accessible (device or
// managed memory). Calls are asynchronous with respect to the host: one
// kernel launch per batch on `stream`; buffers must stay alive until the
// stream reaches that point. Functions never throw.
//
// Built only when the CUDA toolkit is found (MASKD_HAVE_CUDA); link
// maskd_kernels_cuda.
#ifndef MASKD_KERNELS_APPLY_MASK_CUDA_H_
#define MASKD_KERNELS_APPLY_MASK_CUDA_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/apply_mask.h"

namespace maskd {

// Checks the shapes (as ValidateApplyArgs; the map's contents stay on the
// device and are not read), then launches one kernel on `stream`.
// `device_row_map`: null = logits row i gets mask row i; otherwise
// logits.num_rows int32 entries in device memory, each -1 (row untouched) or
// a mask row. Entries outside [-1, mask.num_rows) cannot be reported from a
// kernel: such rows are left untouched.
// 16-byte vector loads/stores are used when the data pointer and the row
// stride in bytes are multiples of 16; otherwise a scalar kernel runs.
// Errors: InvalidArgument (shapes), Internal (launch failure, with the CUDA
// error name), Unavailable (no CUDA device).
absl::Status ApplyTokenBitmaskInplaceCuda(const LogitsBatch& logits,
                                          const MaskBatch& mask,
                                          const int32_t* device_row_map,
                                          void* stream);

// Number of visible CUDA devices; 0 when there is no device or no driver.
int CudaDeviceCount();

}  // namespace maskd

#endif  // MASKD_KERNELS_APPLY_MASK_CUDA_H_
