// GrowOnlyArray<T>: rows of `stride` elements addressed by index, created on
// first use and never moved or freed before the array, so a reader needs no
// lock. Rows live in chunks of doubling size (chunk c holds 16 << c rows), so
// memory is at most twice the rows of the highest chunk touched, and a small
// array costs a few hundred bytes.
//
// Thread-safety: At() may be called from any thread; creating a missing
// chunk takes a mutex, reading an existing one an acquire load. Elements are
// value-initialized (zero, or null for pointers and atomics) and the caller
// publishes what it writes into them (T is typically an atomic).
#ifndef MASKD_AUTOMATON_GROW_ONLY_ARRAY_H_
#define MASKD_AUTOMATON_GROW_ONLY_ARRAY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/synchronization/mutex.h"

namespace maskd {

template <typename T>
class GrowOnlyArray {
 public:
  explicit GrowOnlyArray(uint32_t stride = 1) : stride_(stride) {}
  ~GrowOnlyArray() {
    for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
  }
  GrowOnlyArray(const GrowOnlyArray&) = delete;
  GrowOnlyArray& operator=(const GrowOnlyArray&) = delete;

  // Row i (stride() elements), its chunk created when missing.
  T* At(uint32_t i) const {
    const Place p = PlaceOf(i);
    T* chunk = chunks_[p.chunk].load(std::memory_order_acquire);
    if (chunk == nullptr) chunk = CreateChunk(p.chunk);
    return chunk + static_cast<size_t>(p.offset) * stride_;
  }
  // Row i, or null when its chunk was never created.
  T* Find(uint32_t i) const {
    const Place p = PlaceOf(i);
    T* chunk = chunks_[p.chunk].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr : chunk + static_cast<size_t>(p.offset) * stride_;
  }
  uint32_t stride() const { return stride_; }
  // Bytes of the chunks created so far.
  size_t MemoryBytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint32_t kFirstRows = 16;
  static constexpr int kChunks = 29;  // 16 * (2^29 - 1) rows: every uint32 index
  struct Place {
    uint32_t chunk, offset;
  };
  static uint32_t RowsOf(uint32_t chunk) { return kFirstRows << chunk; }
  // Chunk c starts at row 16 * (2^c - 1): c = floor(log2(i / 16 + 1)).
  static Place PlaceOf(uint32_t i) {
    const uint32_t q = i / kFirstRows + 1;  // at most 2^28: no overflow
    const uint32_t c = 31 - static_cast<uint32_t>(__builtin_clz(q));
    return {c, i + kFirstRows - (kFirstRows << c)};
  }
  T* CreateChunk(uint32_t c) const {
    absl::MutexLock lock(&mu_);
    T* chunk = chunks_[c].load(std::memory_order_acquire);
    if (chunk != nullptr) return chunk;
    const size_t n = static_cast<size_t>(RowsOf(c)) * stride_;
    chunk = new T[n]();
    bytes_.fetch_add(n * sizeof(T), std::memory_order_relaxed);
    chunks_[c].store(chunk, std::memory_order_release);
    return chunk;
  }

  const uint32_t stride_;
  mutable absl::Mutex mu_;  // held only while creating a chunk
  mutable std::atomic<T*> chunks_[kChunks] = {};
  mutable std::atomic<size_t> bytes_{0};
};

}  // namespace maskd

#endif  // MASKD_AUTOMATON_GROW_ONLY_ARRAY_H_
