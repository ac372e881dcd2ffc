// The CUDA apply kernel against the scalar CPU reference.
#include "kernels/apply_mask_cuda.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"
#include "tests/kernels/apply_mask_reference.h"

namespace maskd {
namespace {

using testing::GetBits;
using testing::MakeMask;
using testing::MaskKind;
using testing::RandomLogits;
using testing::ReferenceApply;

constexpr LogitsDtype kDtypes[] = {LogitsDtype::kFloat32, LogitsDtype::kFloat16,
                                   LogitsDtype::kBFloat16};

struct Case {
  LogitsDtype dtype;
  int64_t rows;
  int64_t vocab;
  int64_t stride_pad;     // elements after each row
  int64_t base_offset;    // elements before row 0 (misaligns the data)
  int64_t mask_vocab;     // 0 = words_per_row * 32
  bool use_map;
  MaskKind kind;
};

void RunCase(const Case& c, uint64_t seed) {
  SCOPED_TRACE(std::string(LogitsDtypeName(c.dtype)) + " vocab=" + std::to_string(c.vocab) +
               " pad=" + std::to_string(c.stride_pad) + " off=" + std::to_string(c.base_offset) +
               " mask_vocab=" + std::to_string(c.mask_vocab) + " map=" +
               std::to_string(c.use_map) + " kind=" + std::to_string(static_cast<int>(c.kind)));
  std::mt19937_64 rng(seed);
  const size_t elem = LogitsDtypeSize(c.dtype);
  const int64_t stride = c.vocab + c.stride_pad;
  const int64_t wpr = (c.vocab + 31) / 32;
  const int64_t mask_rows = c.use_map ? c.rows / 2 + 1 : c.rows;
  const int64_t total = c.base_offset + c.rows * stride;
  std::vector<uint8_t> host = RandomLogits(rng, c.dtype, total);
  std::vector<uint8_t> want = host;
  std::vector<uint32_t> words = MakeMask(rng, c.kind, mask_rows, wpr);
  std::vector<int32_t> map;
  if (c.use_map) {
    for (int64_t r = 0; r < c.rows; ++r) {
      map.push_back(r % 3 == 1 ? -1 : static_cast<int32_t>(rng() % mask_rows));
    }
  }
  {
    std::vector<uint8_t> rows(want.begin() + c.base_offset * elem, want.end());
    ReferenceApply(rows, c.dtype, c.rows, c.vocab, stride, words, wpr, c.mask_vocab, map);
    std::copy(rows.begin(), rows.end(), want.begin() + c.base_offset * elem);
  }
  void* d_logits = nullptr;
  uint32_t* d_words = nullptr;
  int32_t* d_map = nullptr;
  MASKD_CUDA_OK(cudaMalloc(&d_logits, host.size()));
  MASKD_CUDA_OK(cudaMalloc(&d_words, words.size() * 4));
  MASKD_CUDA_OK(cudaMemcpy(d_logits, host.data(), host.size(), cudaMemcpyHostToDevice));
  MASKD_CUDA_OK(cudaMemcpy(d_words, words.data(), words.size() * 4, cudaMemcpyHostToDevice));
  if (c.use_map) {
    MASKD_CUDA_OK(cudaMalloc(&d_map, map.size() * 4));
    MASKD_CUDA_OK(cudaMemcpy(d_map, map.data(), map.size() * 4, cudaMemcpyHostToDevice));
  }
  cudaStream_t stream;
  MASKD_CUDA_OK(cudaStreamCreate(&stream));
  LogitsBatch lb{static_cast<char*>(d_logits) + c.base_offset * elem, c.dtype, c.rows,
                 c.vocab, stride};
  MaskBatch mb{d_words, mask_rows, wpr, c.mask_vocab};
  absl::Status s = ApplyTokenBitmaskInplaceCuda(lb, mb, d_map, stream);
  ASSERT_TRUE(s.ok()) << s;
  MASKD_CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<uint8_t> got(host.size());
  MASKD_CUDA_OK(cudaMemcpy(got.data(), d_logits, got.size(), cudaMemcpyDeviceToHost));
  cudaStreamDestroy(stream);
  cudaFree(d_logits);
  cudaFree(d_words);
  if (d_map != nullptr) cudaFree(d_map);
  if (got == want) return;
  for (int64_t e = 0; e < total; ++e) {
    ASSERT_EQ(GetBits(got, elem, e), GetBits(want, elem, e))
        << "first difference at element " << e;
  }
}

TEST(ApplyMaskCuda, MatchesReferenceAllDtypesAndWidths) {
  MASKD_SKIP_WITHOUT_GPU();
  uint64_t seed = 1;
  for (LogitsDtype d : kDtypes) {
    for (int64_t vocab : {128000, 128001, 128256, 151936, 262145}) {
      for (MaskKind k : {MaskKind::kRandom, MaskKind::kRealistic, MaskKind::kAllAllowed,
                         MaskKind::kAllForbidden}) {
        RunCase({d, 4, vocab, 0, 0, vocab, false, k}, seed++);   // vector path if aligned
        RunCase({d, 5, vocab, 64, 0, vocab - 267, true, k}, seed++);  // padding ids
        RunCase({d, 3, vocab, 3, 1, 0, true, k}, seed++);        // misaligned: scalar path
      }
    }
  }
}

TEST(ApplyMaskCuda, SmallShapes) {
  MASKD_SKIP_WITHOUT_GPU();
  uint64_t seed = 1000;
  for (LogitsDtype d : kDtypes) {
    for (int64_t vocab : {1, 7, 8, 31, 32, 33, 100, 4099}) {
      for (int64_t pad : {0, 1, 8}) {
        RunCase({d, 3, vocab, pad, 0, vocab > 5 ? vocab - 5 : vocab, pad == 1,
                 MaskKind::kRandom},
                seed++);
      }
    }
  }
}

TEST(ApplyMaskCuda, ManyRows) {
  MASKD_SKIP_WITHOUT_GPU();
  RunCase({LogitsDtype::kBFloat16, 300, 1000, 0, 0, 1000, true, MaskKind::kRandom}, 7);
}

// Shape errors are reported before any CUDA call: runs without a GPU too.
TEST(ApplyMaskCuda, InvalidArgumentsWithoutLaunching) {
  uint32_t words[4] = {};
  LogitsBatch lb{reinterpret_cast<void*>(16), LogitsDtype::kFloat32, 1, 100, 50};
  MaskBatch mb{words, 1, 4, 0};
  absl::Status s = ApplyTokenBitmaskInplaceCuda(lb, mb, nullptr, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  lb.row_stride = 0;
  mb.mask_vocab = 200;
  EXPECT_EQ(ApplyTokenBitmaskInplaceCuda(lb, mb, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ApplyMaskCuda, UnavailableWithoutDevice) {
  // Meaningful only without a GPU (no GTEST_SKIP: ctest would mark the whole
  // binary skipped on a GPU machine).
  if (CudaDeviceCount() > 0) return;
  std::vector<float> host(64);
  uint32_t words[2] = {};
  absl::Status s = ApplyTokenBitmaskInplaceCuda(
      {host.data(), LogitsDtype::kFloat32, 1, 64, 0}, {words, 1, 2, 0}, nullptr, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.code() == absl::StatusCode::kUnavailable ||
              s.code() == absl::StatusCode::kInternal)
      << s;
}

}  // namespace
}  // namespace maskd
