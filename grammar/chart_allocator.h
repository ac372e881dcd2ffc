// ChartAllocator: the allocator of a grammar sequence's arrays (the Earley
// parser's sets, waiting lists, hash table and memo; a guide's per-token
// records), so that what they hold is what they are charged, and what they
// give back leaves the process.
//
// A block of kMapBytes or more is mapped from the kernel (mmap) and unmapped
// when freed: an array that a rollback shrinks, or a closed session frees,
// returns its pages at once. Through malloc it would not: glibc raises its
// mmap threshold to the largest chunk freed (up to 32 MiB), after which such
// arrays come from arenas (one per thread) whose freed chunks stay resident.
// Smaller blocks come from operator new.
//
// Units: bytes. BlockBytes(n) is what a block of n bytes holds (rounded up to
// whole pages when mapped); HeldBytes(v) that of a ChartVector's block;
// ChartHeldBytes() the sum over every live block of the process. Blocks are
// allocated when arrays grow (geometrically) or shrink (ReleaseSpare), never
// on a parser step that reuses capacity. Thread-safe.
#ifndef MASKD_GRAMMAR_CHART_ALLOCATOR_H_
#define MASKD_GRAMMAR_CHART_ALLOCATOR_H_

#include <cstddef>
#include <vector>

namespace maskd::grammar {

namespace chart_memory {
// Blocks of this many bytes or more are mapped. Large enough that the
// mappings stay far below the kernel's vm.max_map_count (65530 by default):
// a 2 GiB chart budget makes at most 8192.
inline constexpr size_t kMapBytes = size_t{256} << 10;
// ReleaseSpare leaves arrays whose blocks hold at most this many bytes.
inline constexpr size_t kSlackBytes = size_t{16} << 10;

// Throws std::bad_alloc when the memory is not there, as operator new.
void* Allocate(size_t bytes);
void Deallocate(void* p, size_t bytes);
// `bytes` (at least kMapBytes) rounded up to whole pages.
size_t MappedBytes(size_t bytes);
inline size_t BlockBytes(size_t bytes) { return bytes < kMapBytes ? bytes : MappedBytes(bytes); }
}  // namespace chart_memory

// Bytes held by every ChartAllocator block of the process.
size_t ChartHeldBytes();

template <typename T>
struct ChartAllocator {
  using value_type = T;
  ChartAllocator() = default;
  template <typename U>
  ChartAllocator(const ChartAllocator<U>&) {}  // NOLINT: rebinding is implicit
  T* allocate(size_t n) { return static_cast<T*>(chart_memory::Allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { chart_memory::Deallocate(p, n * sizeof(T)); }
  friend bool operator==(const ChartAllocator&, const ChartAllocator&) { return true; }
  friend bool operator!=(const ChartAllocator&, const ChartAllocator&) { return false; }
};

template <typename T>
using ChartVector = std::vector<T, ChartAllocator<T>>;

template <typename T>
size_t HeldBytes(const ChartVector<T>& v) {
  return v.capacity() == 0 ? 0 : chart_memory::BlockBytes(v.capacity() * sizeof(T));
}

// After `v` shrank: when its block holds more than kSlackBytes and more than
// twice what its elements need, moves them to a block of 1.5 times their
// size. Growth doubles, so a resize is followed by a number of pushes or pops
// proportional to the size before the next: amortized O(1) per element.
template <typename T>
void ReleaseSpare(ChartVector<T>& v) {
  // A block this small is not mapped: it holds its capacity.
  if (v.capacity() * sizeof(T) <= chart_memory::kSlackBytes) return;
  const size_t held = HeldBytes(v);
  if (held <= 2 * v.size() * sizeof(T)) return;
  ChartVector<T> fresh;
  fresh.reserve(v.size() + v.size() / 2);
  fresh.assign(v.begin(), v.end());
  v.swap(fresh);
}

// Frees `v`'s block when it holds more than kSlackBytes (for scratch arrays
// whose contents are not kept between calls).
template <typename T>
void ReleaseScratch(ChartVector<T>& v) {
  if (v.capacity() * sizeof(T) > chart_memory::kSlackBytes) ChartVector<T>().swap(v);
}

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_CHART_ALLOCATOR_H_
