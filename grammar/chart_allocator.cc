#include "grammar/chart_allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <new>

namespace maskd::grammar {
namespace {

std::atomic<size_t> held_bytes{0};

size_t PageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

namespace chart_memory {

size_t MappedBytes(size_t bytes) {
  const size_t page = PageBytes();
  return (bytes + page - 1) / page * page;
}

void* Allocate(size_t bytes) {
  void* p;
  if (bytes < kMapBytes) {
    p = ::operator new(bytes);
  } else {
    p = mmap(nullptr, BlockBytes(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
             0);
    if (p == MAP_FAILED) throw std::bad_alloc();
  }
  held_bytes.fetch_add(BlockBytes(bytes), std::memory_order_relaxed);
  return p;
}

void Deallocate(void* p, size_t bytes) {
  held_bytes.fetch_sub(BlockBytes(bytes), std::memory_order_relaxed);
  if (bytes < kMapBytes) {
    ::operator delete(p);
  } else {
    munmap(p, BlockBytes(bytes));
  }
}

}  // namespace chart_memory

size_t ChartHeldBytes() { return held_bytes.load(std::memory_order_relaxed); }

}  // namespace maskd::grammar
