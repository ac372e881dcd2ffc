// CUDA apply kernel. One launch per batch: blockIdx.y walks logits rows,
// blockIdx.x * blockDim.x + threadIdx.x walks 16-byte vectors of a row
// (8 bf16/fp16 or 4 fp32 logits per thread), so a warp reads and writes 512
// contiguous bytes. A thread reads its 8 (or 4) mask bits; all ones: no memory
// touched; all zeros: store -inf without loading; otherwise load, select,
// store. Logits are handled as raw bits (never converted).
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/apply_mask_cuda.h"
#include "kernels/apply_mask_cuda_internal.h"

namespace maskd {
namespace {

struct CudaPlan {
  char* data;
  int64_t rows;
  int64_t vocab;
  int64_t stride;  // elements
  const uint32_t* words;
  int64_t words_per_row;
  int64_t covered;  // min(mask_vocab, vocab)
  const int32_t* row_map;
  int64_t mask_rows;
};

template <typename T>
__host__ __device__ __forceinline__ T DecideOne(T v, const uint32_t* mrow,
                                                int64_t t, int64_t covered,
                                                T neg) {
  if (t >= covered) return neg;
  return ((mrow[t >> 5] >> (t & 31)) & 1u) ? v : neg;
}

__host__ __device__ __forceinline__ uint32_t LoadWord(const uint32_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  return *p;
#endif
}

// Resolves the mask row of logits row r; null when the row is untouched.
__host__ __device__ __forceinline__ const uint32_t* MaskRow(const CudaPlan& p,
                                                            int64_t r) {
  const int64_t m = p.row_map == nullptr ? r : p.row_map[r];
  if (m < 0 || m >= p.mask_rows) return nullptr;
  return p.words + m * p.words_per_row;
}

// The work of one thread: 16-byte vector v of row `row` (kVec = 16 /
// sizeof(T) elements). Shared by the kernel and the host emulation.
template <typename T, bool kVector>
__host__ __device__ __forceinline__ void ApplyVector(const CudaPlan& p,
                                                     const uint32_t* mrow,
                                                     T* row, int64_t v, T neg) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t t0 = v * kVec;
  union Vec {
    uint4 u;
    T e[kVec];
  };
  if (kVector && t0 + kVec <= p.covered) {
    // kVec (4 or 8) bits, aligned within one word.
    const uint32_t bits =
        (LoadWord(mrow + (t0 >> 5)) >> (t0 & 31)) & ((1u << kVec) - 1);
    if (bits == (1u << kVec) - 1) return;
    uint4* ptr = reinterpret_cast<uint4*>(row + t0);
    Vec x;
    if (bits == 0) {
      for (int i = 0; i < kVec; ++i) x.e[i] = neg;
    } else {
      x.u = *ptr;
      for (int i = 0; i < kVec; ++i) {
        if (((bits >> i) & 1u) == 0) x.e[i] = neg;
      }
    }
    *ptr = x.u;
  } else if (kVector && t0 >= p.covered && t0 + kVec <= p.vocab) {
    Vec x;
    for (int i = 0; i < kVec; ++i) x.e[i] = neg;
    *reinterpret_cast<uint4*>(row + t0) = x.u;
  } else {
    const int64_t t1 = t0 + kVec < p.vocab ? t0 + kVec : p.vocab;
    for (int64_t t = t0; t < t1; ++t) {
      row[t] = DecideOne(row[t], mrow, t, p.covered, neg);
    }
  }
}

template <typename T>
int64_t VecsPerRow(const CudaPlan& p) {
  constexpr int kVec = 16 / sizeof(T);
  return (p.vocab + kVec - 1) / kVec;
}

// One launch per batch: blockIdx.y strides over rows, the x dimension over
// the 16-byte vectors of a row.
template <typename T, bool kVector>
__global__ void ApplyKernel(CudaPlan p, T neg) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t vecs_per_row = (p.vocab + kVec - 1) / kVec;
  for (int64_t r = blockIdx.y; r < p.rows; r += gridDim.y) {
    const uint32_t* mrow = MaskRow(p, r);
    if (mrow == nullptr) continue;
    T* row = reinterpret_cast<T*>(p.data) + r * p.stride;
    for (int64_t v = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
         v < vecs_per_row; v += int64_t{gridDim.x} * blockDim.x) {
      ApplyVector<T, kVector>(p, mrow, row, v, neg);
    }
  }
}

// Host emulation of the kernel: every (row, vector) in order.
template <typename T, bool kVector>
void Emulate(const CudaPlan& p, T neg) {
  for (int64_t r = 0; r < p.rows; ++r) {
    const uint32_t* mrow = MaskRow(p, r);
    if (mrow == nullptr) continue;
    T* row = reinterpret_cast<T*>(p.data) + r * p.stride;
    for (int64_t v = 0; v < VecsPerRow<T>(p); ++v) {
      ApplyVector<T, kVector>(p, mrow, row, v, neg);
    }
  }
}

template <typename T>
cudaError_t Launch(const CudaPlan& p, T neg, bool vector, cudaStream_t s) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kThreads = 256;
  const int64_t vecs_per_row = (p.vocab + kVec - 1) / kVec;
  int64_t gx = (vecs_per_row + kThreads - 1) / kThreads;
  if (gx > 65535) gx = 65535;
  int64_t gy = p.rows < 65535 ? p.rows : 65535;
  dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  if (vector) {
    ApplyKernel<T, true><<<grid, kThreads, 0, s>>>(p, neg);
  } else {
    ApplyKernel<T, false><<<grid, kThreads, 0, s>>>(p, neg);
  }
  return cudaGetLastError();
}

}  // namespace

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  return n;
}

// Validates and resolves a call; *vector tells whether 16-byte accesses are
// aligned for every row.
static absl::Status MakeCudaPlan(const LogitsBatch& logits, const MaskBatch& mask,
                                 const int32_t* row_map, CudaPlan* p,
                                 bool* vector) {
  absl::Status st = ValidateApplyArgs(
      logits, mask, row_map == nullptr ? -1 : logits.num_rows, nullptr);
  if (!st.ok()) return st;
  p->data = static_cast<char*>(logits.data);
  p->rows = logits.num_rows;
  p->vocab = logits.vocab;
  p->stride = logits.row_stride == 0 ? logits.vocab : logits.row_stride;
  p->words = mask.words;
  p->words_per_row = mask.words_per_row;
  const int64_t mask_vocab =
      mask.mask_vocab == 0 ? mask.words_per_row * 32 : mask.mask_vocab;
  p->covered = mask_vocab < logits.vocab ? mask_vocab : logits.vocab;
  p->row_map = row_map;
  p->mask_rows = mask.num_rows;
  const size_t elem = LogitsDtypeSize(logits.dtype);
  *vector = reinterpret_cast<uintptr_t>(logits.data) % 16 == 0 &&
            (static_cast<uint64_t>(p->stride) * elem) % 16 == 0;
  return absl::OkStatus();
}

absl::Status ApplyTokenBitmaskInplaceCuda(const LogitsBatch& logits,
                                          const MaskBatch& mask,
                                          const int32_t* device_row_map,
                                          void* stream) {
  CudaPlan p;
  bool vector = false;
  absl::Status st = MakeCudaPlan(logits, mask, device_row_map, &p, &vector);
  if (!st.ok()) return st;
  if (logits.num_rows == 0) return absl::OkStatus();
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t err;
  switch (logits.dtype) {
    case LogitsDtype::kFloat32:
      err = Launch<uint32_t>(p, 0xFF800000u, vector, s);
      break;
    case LogitsDtype::kFloat16:
      err = Launch<uint16_t>(p, uint16_t{0xFC00}, vector, s);
      break;
    default:
      err = Launch<uint16_t>(p, uint16_t{0xFF80}, vector, s);
      break;
  }
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    return absl::UnavailableError(
        absl::StrCat("no usable CUDA device: ", cudaGetErrorName(err)));
  }
  if (err != cudaSuccess) {
    return absl::InternalError(
        absl::StrCat("apply kernel launch failed: ", cudaGetErrorName(err)));
  }
  return absl::OkStatus();
}

namespace internal {

absl::Status ApplyTokenBitmaskInplaceCudaEmulated(const LogitsBatch& logits,
                                                  const MaskBatch& mask,
                                                  const int32_t* row_map) {
  CudaPlan p;
  bool vector = false;
  absl::Status st = MakeCudaPlan(logits, mask, row_map, &p, &vector);
  if (!st.ok()) return st;
  switch (logits.dtype) {
    case LogitsDtype::kFloat32:
      vector ? Emulate<uint32_t, true>(p, 0xFF800000u)
             : Emulate<uint32_t, false>(p, 0xFF800000u);
      break;
    case LogitsDtype::kFloat16:
      vector ? Emulate<uint16_t, true>(p, uint16_t{0xFC00})
             : Emulate<uint16_t, false>(p, uint16_t{0xFC00});
      break;
    default:
      vector ? Emulate<uint16_t, true>(p, uint16_t{0xFF80})
             : Emulate<uint16_t, false>(p, uint16_t{0xFF80});
      break;
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace maskd
