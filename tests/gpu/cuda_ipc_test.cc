// Two-process CUDA IPC round trip: the parent allocates logits on the GPU and
// masks in POSIX shared memory, exports a CUDA IPC handle, and starts
// cuda_ipc_child, which opens both through the region registry and applies
// the kernel; the parent then checks the logits against the CPU reference.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "shm/cuda_export.h"
#include "shm/posix_segment.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/kernels/apply_mask_reference.h"

extern char** environ;

namespace maskd {
namespace {

std::string Hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

void RoundTrip(LogitsDtype dtype) {
  const int64_t rows = 8, vocab = 128256, wpr = (vocab + 31) / 32;
  const size_t elem = LogitsDtypeSize(dtype);
  std::mt19937_64 rng(5);
  std::vector<uint8_t> host = testing::RandomLogits(rng, dtype, rows * vocab);
  std::vector<uint32_t> words = testing::MakeMask(rng, testing::MaskKind::kRandom, rows, wpr);
  std::vector<uint8_t> want = host;
  testing::ReferenceApply(want, dtype, rows, vocab, 0, words, wpr, vocab, {});

  // Logits at a 4 KiB offset inside a larger allocation: the region offset
  // must be honoured.
  const size_t pre = 4096;
  char* d_alloc = nullptr;
  MASKD_CUDA_OK(cudaMalloc(&d_alloc, pre + host.size() + 4096));
  char* d_logits = d_alloc + pre;
  MASKD_CUDA_OK(cudaMemcpy(d_logits, host.data(), host.size(), cudaMemcpyHostToDevice));
  MASKD_CUDA_OK(cudaDeviceSynchronize());
  auto exported = shm::ExportCudaIpcHandle(d_logits);
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_EQ(exported->handle.size(), 64u);
  ASSERT_EQ(exported->offset, pre);

  const std::string key = "/maskd-ipc-test-" + std::to_string(getpid());
  auto seg = shm::PosixShmSegment::Create(key, words.size() * 4);
  ASSERT_TRUE(seg.ok()) << seg.status();
  std::memcpy(seg->data(), words.data(), words.size() * 4);

  const std::string child = std::string(MASKD_BIN_DIR) + "/cuda_ipc_child";
  std::vector<std::string> args = {child,
                                   Hex(exported->handle),
                                   std::to_string(exported->device_id),
                                   std::to_string(exported->offset),
                                   std::to_string(host.size()),
                                   key,
                                   std::to_string(words.size() * 4),
                                   std::to_string(rows),
                                   std::to_string(vocab),
                                   std::to_string(static_cast<int>(dtype))};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  ASSERT_EQ(posix_spawn(&pid, child.c_str(), nullptr, nullptr, argv.data(), environ), 0)
      << "cannot start " << child;
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "child failed, status " << status;

  std::vector<uint8_t> got(host.size());
  MASKD_CUDA_OK(cudaMemcpy(got.data(), d_logits, got.size(), cudaMemcpyDeviceToHost));
  cudaFree(d_alloc);
  ASSERT_EQ(got.size(), want.size());
  for (int64_t e = 0; e < rows * vocab; ++e) {
    ASSERT_EQ(testing::GetBits(got, elem, e), testing::GetBits(want, elem, e))
        << "first difference at element " << e;
  }
}

TEST(CudaIpc, TwoProcessRoundTripBf16) {
  MASKD_SKIP_WITHOUT_GPU();
  RoundTrip(LogitsDtype::kBFloat16);
}

TEST(CudaIpc, TwoProcessRoundTripFp32) {
  MASKD_SKIP_WITHOUT_GPU();
  RoundTrip(LogitsDtype::kFloat32);
}

}  // namespace
}  // namespace maskd
