// ByteLru: the least recently used entry goes first, the byte bound holds,
// errors and oversized values are not kept.
#include "grammar/byte_lru.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace maskd {
namespace {

using Cache = ByteLru<std::string>;

// Each entry of a one-byte key and one-byte value is charged 98 bytes.
constexpr size_t kEntry = 1 + 1 + Cache::kEntryBytes;

size_t Size(const std::string& s) { return s.size(); }

// Looks `key` up, making its value (the key itself) on a miss; counts makes.
void Get(Cache* cache, const std::string& key, int* made) {
  auto v = cache->GetOrMake(
      key,
      [&]() -> absl::StatusOr<std::shared_ptr<const std::string>> {
        ++*made;
        return std::make_shared<const std::string>(key);
      },
      Size);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(**v, key);
}

TEST(ByteLru, DropsTheLeastRecentlyUsedFirst) {
  Cache cache(3 * kEntry);
  int made = 0;
  Get(&cache, "a", &made);
  Get(&cache, "b", &made);
  Get(&cache, "c", &made);
  Get(&cache, "a", &made);  // a is now the most recent; b the least
  EXPECT_EQ(made, 3);
  Get(&cache, "d", &made);  // evicts b
  EXPECT_EQ(cache.stats().evicted, 1u);
  EXPECT_EQ(cache.stats().bytes, 3 * kEntry);
  Get(&cache, "a", &made);
  Get(&cache, "c", &made);
  Get(&cache, "d", &made);
  EXPECT_EQ(made, 4);  // a, c, d were kept
  Get(&cache, "b", &made);
  EXPECT_EQ(made, 5);  // b was not
  EXPECT_EQ(cache.stats().hits, 4u);
  EXPECT_EQ(cache.stats().misses, 5u);
  EXPECT_EQ(cache.stats().entries, 3u);
}

TEST(ByteLru, KeepsNeitherErrorsNorValuesLargerThanTheBound) {
  Cache cache(kEntry);
  int made = 0;
  auto error = cache.GetOrMake(
      "e", [&]() -> absl::StatusOr<std::shared_ptr<const std::string>> {
        ++made;
        return absl::InternalError("no");
      },
      Size);
  EXPECT_EQ(error.status().code(), absl::StatusCode::kInternal);
  auto big = cache.GetOrMake(
      "f", [&]() -> absl::StatusOr<std::shared_ptr<const std::string>> {
        ++made;
        return std::make_shared<const std::string>("too long to fit");
      },
      Size);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(**big, "too long to fit");  // returned all the same
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().bytes, 0u);
  EXPECT_EQ(made, 2);
}

}  // namespace
}  // namespace maskd
