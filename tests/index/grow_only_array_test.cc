// GrowOnlyArray: rows are distinct, keep their address and value across
// chunk boundaries, start value-initialized, and are created once under
// concurrent first use.
#include "automaton/grow_only_array.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace maskd {
namespace {

TEST(GrowOnlyArray, RowsAreDistinctStableAndZeroed) {
  GrowOnlyArray<uint32_t> a(3);
  EXPECT_EQ(a.Find(0), nullptr);
  EXPECT_EQ(a.MemoryBytes(), 0u);
  // Rows around the chunk boundaries 16, 48, 112, ... and far out.
  std::vector<uint32_t> rows = {0, 15, 16, 47, 48, 111, 112, 1000, 65535, 1u << 20};
  std::set<uint32_t*> seen;
  for (uint32_t i : rows) {
    uint32_t* r = a.At(i);
    EXPECT_EQ(r[0] | r[1] | r[2], 0u) << i;
    r[0] = i;
    r[2] = i + 1;
    EXPECT_TRUE(seen.insert(r).second) << i;
    EXPECT_EQ(a.Find(i), r);
  }
  for (uint32_t i : rows) {
    EXPECT_EQ(a.At(i)[0], i);
    EXPECT_EQ(a.At(i)[2], i + 1);
  }
  // Neighbouring rows are stride elements apart, within a chunk and across.
  EXPECT_EQ(a.At(17) - a.At(16), 3);
  EXPECT_EQ(a.At(47) - a.At(16), 31 * 3);
  EXPECT_GT(a.MemoryBytes(), 0u);
}

TEST(GrowOnlyArray, ConcurrentFirstUseCreatesOneChunk) {
  GrowOnlyArray<std::atomic<uint32_t>> a;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a] {
      for (uint32_t i = 0; i < 5000; ++i) a.At(i)->fetch_add(1, std::memory_order_relaxed);
    });
  }
  for (auto& th : threads) th.join();
  for (uint32_t i = 0; i < 5000; ++i) ASSERT_EQ(a.At(i)->load(), 4u) << i;
}

}  // namespace
}  // namespace maskd
