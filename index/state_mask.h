// StateMask: the allowed tokens of one or more DFA states of a TokenIndex,
// and StateMaskStore, which owns an index's distinct masks and shares
// identical ones. Internal to index/ (token_index.cc, compute_mask.cc).
#ifndef MASKD_INDEX_STATE_MASK_H_
#define MASKD_INDEX_STATE_MASK_H_

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "tokenizer/mask_budget.h"

namespace maskd {

// Copies `n` words with plain vector loads and stores. glibc's memcpy uses
// `rep movsb` for blocks this size, which on AMD Zen runs 15-35x slower when
// (dst - src) mod 4096 is a small positive number (page-offset aliasing); a
// caller's buffer can land there by chance, so the hot path avoids it.
inline void CopyWords(uint32_t* __restrict dst, const uint32_t* __restrict src, size_t n) {
#if defined(__SSE2__)
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 4));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 8));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 12));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 4), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 8), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 12), d);
  }
  if (i < n) std::memcpy(dst + i, src + i, (n - i) * sizeof(uint32_t));
#else
  std::memcpy(dst, src, n * sizeof(uint32_t));
#endif
}

// The allowed tokens of one or more DFA states (identical masks are shared).
// Stored dense (one bit per token id) or, when few tokens are allowed, as the
// sorted list of their ids: the sparse form is never larger than the dense one
// and writing it costs a memset plus one store per id.
class StateMask {
 public:
  StateMask(bool dense, uint32_t count, std::vector<uint32_t> data)
      : dense_(dense), count_(count), data_(std::move(data)) {}

  void Write(uint32_t* words, uint32_t num_words) const {
    if (dense_) {
      CopyWords(words, data_.data(), num_words);
      return;
    }
    std::memset(words, 0, static_cast<size_t>(num_words) * sizeof(uint32_t));
    for (uint32_t id : data_) words[id >> 5] |= 1u << (id & 31);
  }
  bool Has(uint32_t id) const {
    if (dense_) return (data_[id >> 5] >> (id & 31)) & 1;
    return std::binary_search(data_.begin(), data_.end(), id);
  }
  uint32_t count() const { return count_; }
  bool dense() const { return dense_; }
  const std::vector<uint32_t>& data() const { return data_; }
  size_t MemoryBytes() const { return MemoryBytesFor(data_.capacity()); }
  // MemoryBytes of a mask whose data holds `capacity` words.
  static size_t MemoryBytesFor(size_t capacity) {
    return sizeof(StateMask) + capacity * sizeof(uint32_t);
  }

 private:
  bool dense_;
  uint32_t count_;
  std::vector<uint32_t> data_;
};

// Owns the distinct masks of one index and shares identical ones; the bytes
// it keeps are charged to `budget` (when not null) and released with it.
class StateMaskStore {
 public:
  explicit StateMaskStore(std::shared_ptr<MaskBudget> budget) : budget_(std::move(budget)) {}
  ~StateMaskStore();
  StateMaskStore(const StateMaskStore&) = delete;
  StateMaskStore& operator=(const StateMaskStore&) = delete;

  // Returns the stored mask equal to (dense, count, data), adding it if new;
  // null (`data` untouched) when a new one does not fit the budget.
  const StateMask* Intern(bool dense, uint32_t count, std::vector<uint32_t>& data);
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  const std::shared_ptr<MaskBudget> budget_;
  absl::Mutex mu_;
  absl::flat_hash_map<size_t, std::vector<const StateMask*>> by_hash_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<StateMask>> owned_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> bytes_{0};
};

}  // namespace maskd

#endif  // MASKD_INDEX_STATE_MASK_H_
