// CPU apply: argument checks, row/column tiling, and the persistent pool.
#include "kernels/apply_mask.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/apply_mask_internal.h"

namespace maskd {
namespace {

constexpr uint32_t kNegInf32 = 0xFF800000u;  // fp32 -inf
constexpr uint16_t kNegInfF16 = 0xFC00u;     // fp16 -inf
constexpr uint16_t kNegInfBF16 = 0xFF80u;    // bf16 -inf

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The resolved shape of one call, shared by every tile of it.
struct Plan {
  char* data;
  size_t elem;        // bytes per element
  uint32_t neg_inf;   // bit pattern, low `elem` bytes
  int64_t rows;
  int64_t vocab;
  int64_t stride;     // elements
  const uint32_t* words;
  int64_t words_per_row;
  int64_t covered;    // min(mask_vocab, vocab): tokens the mask decides
  int64_t full_words; // covered / 32: words applied by the SIMD loop
  const int32_t* row_map;  // null: identity
  int64_t chunk_words;     // words per tile (multiple of 1, >= 1)
  int64_t chunks_per_row;  // tiles per row, >= 1
};

Plan MakePlan(const LogitsBatch& logits, const MaskBatch& mask,
              absl::Span<const int32_t> row_map) {
  Plan p;
  p.data = static_cast<char*>(logits.data);
  p.elem = LogitsDtypeSize(logits.dtype);
  p.neg_inf = logits.dtype == LogitsDtype::kFloat32   ? kNegInf32
              : logits.dtype == LogitsDtype::kFloat16 ? kNegInfF16
                                                      : kNegInfBF16;
  p.rows = logits.num_rows;
  p.vocab = logits.vocab;
  p.stride = logits.row_stride == 0 ? logits.vocab : logits.row_stride;
  p.words = mask.words;
  p.words_per_row = mask.words_per_row;
  const int64_t mask_vocab =
      mask.mask_vocab == 0 ? mask.words_per_row * 32 : mask.mask_vocab;
  p.covered = std::min(mask_vocab, logits.vocab);
  p.full_words = p.covered / 32;
  p.row_map = row_map.empty() ? nullptr : row_map.data();
  p.chunk_words = std::max<int64_t>(p.full_words, 1);
  p.chunks_per_row = 1;
  return p;
}

// Cuts each row into column tiles of about `task_bytes`.
void Tile(Plan& p, int64_t task_bytes) {
  const int64_t words_per_task =
      std::max<int64_t>(1, task_bytes / (32 * static_cast<int64_t>(p.elem)));
  if (p.full_words > words_per_task) {
    p.chunks_per_row = CeilDiv(p.full_words, words_per_task);
    p.chunk_words = CeilDiv(p.full_words, p.chunks_per_row);
  }
}

template <typename T>
void TailAndPadding(T* row, const uint32_t* mrow, const Plan& p) {
  const T neg = static_cast<T>(p.neg_inf);
  for (int64_t t = p.full_words * 32; t < p.covered; ++t) {
    if (((mrow[t >> 5] >> (t & 31)) & 1u) == 0) row[t] = neg;
  }
  std::fill(row + p.covered, row + p.vocab, neg);
}

// Runs tile `task` = row * chunks_per_row + chunk.
void RunTile(const Plan& p, int64_t task) {
  const int64_t r = task / p.chunks_per_row;
  const int64_t c = task % p.chunks_per_row;
  const int64_t m = p.row_map == nullptr ? r : p.row_map[r];
  if (m < 0) return;  // no mask for this row: untouched
  const uint32_t* mrow = p.words + m * p.words_per_row;
  const int64_t w0 = std::min(c * p.chunk_words, p.full_words);
  const int64_t w1 = std::min(w0 + p.chunk_words, p.full_words);
  char* row = p.data + static_cast<size_t>(r * p.stride) * p.elem;
  const bool last = c == p.chunks_per_row - 1;
  if (p.elem == 4) {
    uint32_t* row32 = reinterpret_cast<uint32_t*>(row);
    internal::ApplyWords32(row32 + w0 * 32, mrow + w0, w1 - w0, p.neg_inf);
    if (last) TailAndPadding(row32, mrow, p);
  } else {
    uint16_t* row16 = reinterpret_cast<uint16_t*>(row);
    internal::ApplyWords16(row16 + w0 * 32, mrow + w0, w1 - w0,
                           static_cast<uint16_t>(p.neg_inf));
    if (last) TailAndPadding(row16, mrow, p);
  }
}

}  // namespace

size_t LogitsDtypeSize(LogitsDtype dtype) {
  switch (dtype) {
    case LogitsDtype::kFloat32:
      return 4;
    case LogitsDtype::kFloat16:
    case LogitsDtype::kBFloat16:
      return 2;
  }
  return 0;
}

const char* LogitsDtypeName(LogitsDtype dtype) {
  switch (dtype) {
    case LogitsDtype::kFloat32:
      return "fp32";
    case LogitsDtype::kFloat16:
      return "fp16";
    case LogitsDtype::kBFloat16:
      return "bf16";
  }
  return "unknown";
}

absl::Status ValidateApplyArgs(const LogitsBatch& logits, const MaskBatch& mask,
                               int64_t row_map_size, const int32_t* row_map) {
  if (LogitsDtypeSize(logits.dtype) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("logits dtype ", static_cast<int>(logits.dtype),
                     " is not fp32, fp16 or bf16"));
  }
  if (logits.num_rows < 0) {
    return absl::InvalidArgumentError("logits num_rows is negative");
  }
  if (logits.vocab <= 0) {
    return absl::InvalidArgumentError("logits vocab must be >= 1");
  }
  if (logits.row_stride != 0 && logits.row_stride < logits.vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("logits row_stride ", logits.row_stride,
                     " is smaller than vocab ", logits.vocab));
  }
  if (logits.num_rows > 0 && logits.data == nullptr) {
    return absl::InvalidArgumentError("logits data is null");
  }
  const int64_t stride = logits.row_stride == 0 ? logits.vocab : logits.row_stride;
  if (logits.num_rows > 0 &&
      stride > (INT64_MAX / 4) / std::max<int64_t>(logits.num_rows, 1)) {
    return absl::InvalidArgumentError("logits batch size overflows");
  }
  if (mask.num_rows < 0) {
    return absl::InvalidArgumentError("mask num_rows is negative");
  }
  if (mask.words_per_row <= 0) {
    return absl::InvalidArgumentError("mask words_per_row must be >= 1");
  }
  if (mask.words_per_row > INT64_MAX / 32) {
    return absl::InvalidArgumentError("mask words_per_row overflows");
  }
  if (mask.mask_vocab < 0) {
    return absl::InvalidArgumentError("mask mask_vocab is negative");
  }
  if (mask.mask_vocab > mask.words_per_row * 32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mask mask_vocab ", mask.mask_vocab, " needs ",
        CeilDiv(mask.mask_vocab, 32), " words per row but words_per_row is ",
        mask.words_per_row));
  }
  if (mask.num_rows > 0 && mask.words == nullptr) {
    return absl::InvalidArgumentError("mask words is null");
  }
  if (row_map_size < 0) {
    if (mask.num_rows < logits.num_rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no row map and mask has ", mask.num_rows,
          " rows, fewer than the logits' ", logits.num_rows));
    }
    return absl::OkStatus();
  }
  if (row_map_size != logits.num_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("row map has ", row_map_size,
                     " entries but logits have ", logits.num_rows, " rows"));
  }
  if (row_map != nullptr) {
    for (int64_t i = 0; i < row_map_size; ++i) {
      if (row_map[i] < -1 || row_map[i] >= mask.num_rows) {
        return absl::InvalidArgumentError(absl::StrCat(
            "row map entry ", i, " is ", row_map[i],
            ": must be -1 (no mask) or a mask row in [0, ", mask.num_rows,
            ")"));
      }
    }
  }
  return absl::OkStatus();
}

static int64_t RowMapSize(absl::Span<const int32_t> row_map) {
  return row_map.empty() ? -1 : static_cast<int64_t>(row_map.size());
}

void ApplyTokenBitmaskInplaceUnchecked(const LogitsBatch& logits,
                                       const MaskBatch& mask,
                                       absl::Span<const int32_t> row_map) {
  const Plan p = MakePlan(logits, mask, row_map);
  for (int64_t r = 0; r < p.rows; ++r) RunTile(p, r);
}

absl::Status ApplyTokenBitmaskInplace(const LogitsBatch& logits,
                                      const MaskBatch& mask,
                                      absl::Span<const int32_t> row_map) {
  absl::Status s =
      ValidateApplyArgs(logits, mask, RowMapSize(row_map), row_map.data());
  if (!s.ok()) return s;
  ApplyTokenBitmaskInplaceUnchecked(logits, mask, row_map);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// CpuApplier: workers wait on mu_ for a new generation; a call publishes a Plan,
// bumps the generation, and every participant (workers and the caller) pulls
// tile indices from one atomic counter until none are left.
class CpuApplier::Impl {
 public:
  explicit Impl(const Options& o) : options_(o) {
    int n = o.num_threads;
    if (n <= 0) {
      n = static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
    }
    num_threads_ = n;
    workers_.reserve(n - 1);
    for (int i = 0; i + 1 < n; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  }

  ~Impl() {
    {
      absl::MutexLock l(&mu_);
      stop_ = true;
    }
    for (auto& t : workers_) t.join();
  }

  void Apply(const LogitsBatch& logits, const MaskBatch& mask,
             absl::Span<const int32_t> row_map) {
    Plan p = MakePlan(logits, mask, row_map);
    const int64_t bytes = p.rows * p.vocab * static_cast<int64_t>(p.elem);
    if (workers_.empty() || bytes < options_.min_parallel_bytes) {
      for (int64_t r = 0; r < p.rows; ++r) RunTile(p, r);
      return;
    }
    Tile(p, options_.task_bytes);
    absl::MutexLock call(&call_mu_);  // one call at a time
    const int64_t tasks = p.rows * p.chunks_per_row;
    {
      absl::MutexLock l(&mu_);
      plan_ = p;
      num_tasks_ = tasks;
      next_.store(0, std::memory_order_relaxed);
      busy_ = static_cast<int>(workers_.size());
      ++generation_;
    }
    Work();
    absl::MutexLock l(&mu_);
    mu_.Await(absl::Condition(+[](int* busy) { return *busy == 0; }, &busy_));
  }

  int num_threads() const { return num_threads_; }

 private:
  void Work() {
    for (;;) {
      const int64_t t = next_.fetch_add(1, std::memory_order_relaxed);
      if (t >= num_tasks_) break;
      RunTile(plan_, t);
    }
  }

  void WorkerLoop() {
    uint64_t seen = 0;
    for (;;) {
      {
        absl::MutexLock l(&mu_);
        auto woken = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stop_ || generation_ != seen;
        };
        mu_.Await(absl::Condition(&woken));
        if (stop_) return;
        seen = generation_;
      }
      Work();
      absl::MutexLock l(&mu_);
      --busy_;
    }
  }

  const Options options_;
  int num_threads_ = 1;
  std::vector<std::thread> workers_;
  absl::Mutex call_mu_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  // Published under mu_ before generation_ changes; read-only while busy.
  Plan plan_{};
  int64_t num_tasks_ = 0;
  std::atomic<int64_t> next_{0};
};

CpuApplier::CpuApplier() : CpuApplier(Options()) {}
CpuApplier::CpuApplier(const Options& options)
    : impl_(std::make_unique<Impl>(options)) {}
CpuApplier::~CpuApplier() = default;

absl::Status CpuApplier::Apply(const LogitsBatch& logits, const MaskBatch& mask,
                               absl::Span<const int32_t> row_map) {
  absl::Status s =
      ValidateApplyArgs(logits, mask, RowMapSize(row_map), row_map.data());
  if (!s.ok()) return s;
  impl_->Apply(logits, mask, row_map);
  return absl::OkStatus();
}

void CpuApplier::ApplyUnchecked(const LogitsBatch& logits,
                                const MaskBatch& mask,
                                absl::Span<const int32_t> row_map) {
  impl_->Apply(logits, mask, row_map);
}

int CpuApplier::num_threads() const { return impl_->num_threads(); }

}  // namespace maskd
