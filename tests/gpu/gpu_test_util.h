// Helpers for the GPU tests: skip cleanly when no GPU is visible.
#ifndef MASKD_TESTS_GPU_GPU_TEST_UTIL_H_
#define MASKD_TESTS_GPU_GPU_TEST_UTIL_H_

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#define MASKD_SKIP_WITHOUT_GPU()                                              \
  do {                                                                        \
    int n_ = 0;                                                               \
    const cudaError_t e_ = cudaGetDeviceCount(&n_);                           \
    if (e_ != cudaSuccess || n_ == 0) {                                       \
      cudaGetLastError();                                                     \
      GTEST_SKIP() << "no CUDA GPU visible (cudaGetDeviceCount: "             \
                   << (e_ == cudaSuccess ? "0 devices" : cudaGetErrorName(e_)) \
                   << "): skipping GPU test";                                 \
    }                                                                         \
  } while (0)

#define MASKD_CUDA_OK(expr)                                                   \
  do {                                                                        \
    const cudaError_t e_ = (expr);                                            \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorName(e_);      \
  } while (0)

#endif  // MASKD_TESTS_GPU_GPU_TEST_UTIL_H_
