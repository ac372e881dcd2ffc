// Copyright maskd authors.
//
// apply_mask.h: apply packed token masks to logits rows in place.
//
// A mask row is ceil(mask_vocab / 32) little-endian uint32 words; token t is
// allowed iff bit (t & 31) of word (t >> 5) is 1 (the layout of XGrammar,
// llguidance, vLLM, SGLang and TensorRT-LLM). Applying a mask sets the logit
// of every disallowed token to -inf and leaves every allowed logit untouched,
// bit for bit (NaN and +/-inf included).
//
// Logits wider than the mask: a model's logits row is often wider than its
// tokenizer (Qwen: 151,936 logits for 151,669 ids). Tokens in
// [mask_vocab, vocab) are padding ids that no tokenizer produces: they are
// ALWAYS set to -inf, whatever the mask's bits say (llguidance's rule;
// XGrammar leaves them alone). Bits of the mask at or past mask_vocab are
// ignored. Tokens past the logits row (t >= vocab) do not exist and are never
// written.
//
// Mixed batches: a row map names, for every logits row, the mask row to apply
// or -1 for "no mask": that logits row is not touched at all.
//
// Thread safety: the free functions are thread-safe (they touch only the
// caller's buffers). A CpuApplier serialises concurrent Apply calls.
#ifndef MASKD_KERNELS_APPLY_MASK_H_
#define MASKD_KERNELS_APPLY_MASK_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace maskd {

// Element type of a logits buffer. Values are stored in the machine's
// (little-endian) byte order; fp16 is IEEE binary16, bf16 the upper half of an
// IEEE binary32.
enum class LogitsDtype : uint8_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
};

// Bytes per element of `dtype` (4 or 2); 0 for a value outside the enum.
size_t LogitsDtypeSize(LogitsDtype dtype);
// "fp32", "fp16", "bf16", or "unknown".
const char* LogitsDtypeName(LogitsDtype dtype);

// A batch of logits rows, owned by the caller, modified in place.
// Row r starts at element r * row_stride of `data`; elements [0, vocab) of
// each row are logits. All counts are in elements, not bytes.
struct LogitsBatch {
  void* data = nullptr;
  LogitsDtype dtype = LogitsDtype::kFloat32;
  int64_t num_rows = 0;
  int64_t vocab = 0;       // logits per row, >= 1
  int64_t row_stride = 0;  // elements between row starts; 0 means `vocab`
};

// A batch of packed mask rows, owned by the caller, read only.
// Row m starts at word m * words_per_row of `words`.
struct MaskBatch {
  const uint32_t* words = nullptr;
  int64_t num_rows = 0;
  int64_t words_per_row = 0;  // row stride in words, >= ceil(mask_vocab / 32)
  int64_t mask_vocab = 0;     // tokens the mask covers; 0 means words_per_row*32
};

// Checks the arguments of an apply call and returns InvalidArgument naming
// the first problem found, or OK. `row_map_size` is the number of entries of
// the row map, or -1 when there is none (then mask row i applies to logits row
// i, and mask.num_rows must be >= logits.num_rows). `row_map`, when not null,
// is checked entry by entry (host memory only; pass null for a device map).
absl::Status ValidateApplyArgs(const LogitsBatch& logits, const MaskBatch& mask,
                               int64_t row_map_size,
                               const int32_t* row_map = nullptr);

// Single-threaded, vectorised, allocation-free apply on the calling thread.
// `row_map` empty: logits row i gets mask row i. Otherwise row_map.size() ==
// logits.num_rows and row_map[i] is the mask row for logits row i, or -1
// (row left untouched). Returns InvalidArgument (and touches nothing) when the
// arguments are inconsistent.
absl::Status ApplyTokenBitmaskInplace(const LogitsBatch& logits,
                                      const MaskBatch& mask,
                                      absl::Span<const int32_t> row_map = {});

// Same without any check. Precondition: ValidateApplyArgs(...) is OK.
void ApplyTokenBitmaskInplaceUnchecked(const LogitsBatch& logits,
                                       const MaskBatch& mask,
                                       absl::Span<const int32_t> row_map = {});

// Multi-threaded apply with a small persistent thread pool: no thread
// creation and no allocation per call. The calling thread takes part in the
// work. Small batches (below Options::min_parallel_bytes of logits, 4 MiB by
// default, since waking the pool costs tens of microseconds) run on the
// calling thread alone.
class CpuApplier {
 public:
  struct Options {
    // Threads that work on one call, the caller included; 0 = the number of
    // hardware threads, capped at 8. 1 = no pool.
    int num_threads = 0;
    // Batches with fewer logits bytes than this run on the calling thread
    // (4 MiB = 16 rows of 128k bf16 logits, 8 rows of fp32).
    int64_t min_parallel_bytes = int64_t{4} << 20;
    // Work is cut into (row, column range) tasks of about this many bytes.
    int64_t task_bytes = int64_t{256} << 10;
  };

  CpuApplier();
  explicit CpuApplier(const Options& options);
  ~CpuApplier();
  CpuApplier(const CpuApplier&) = delete;
  CpuApplier& operator=(const CpuApplier&) = delete;

  // Same contract as ApplyTokenBitmaskInplace.
  absl::Status Apply(const LogitsBatch& logits, const MaskBatch& mask,
                     absl::Span<const int32_t> row_map = {});
  // Precondition: ValidateApplyArgs(...) is OK.
  void ApplyUnchecked(const LogitsBatch& logits, const MaskBatch& mask,
                      absl::Span<const int32_t> row_map = {});

  // Threads used per call, the caller included.
  int num_threads() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace maskd

#endif  // MASKD_KERNELS_APPLY_MASK_H_
