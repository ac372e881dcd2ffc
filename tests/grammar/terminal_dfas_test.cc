// TerminalDfas: a lookup gives the DFA Dfa::FromPattern builds, from the cache
// when the same pattern was built under the same limits; errors are not
// kept; memory stays within max_bytes, the least recently used dropped.
#include "grammar/terminal_dfas.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "automaton/dfa.h"
#include "gtest/gtest.h"

namespace maskd::grammar {
namespace {

// Whether `a` and `b` take the same strings of `probes`.
bool SameLanguage(const Dfa& a, const Dfa& b, const std::vector<std::string>& probes) {
  for (const std::string& p : probes) {
    const Dfa::State x = a.Walk(a.start(), p), y = b.Walk(b.start(), p);
    if ((x == Dfa::kDead) != (y == Dfa::kDead)) return false;
    if (x != Dfa::kDead && a.IsAccepting(x) != b.IsAccepting(y)) return false;
  }
  return true;
}

TEST(TerminalDfas, SecondLookupIsSharedAndEqualToABuild) {
  TerminalDfas cache(size_t{1} << 20);
  auto first = cache.Get("\"[a-z]{1,8}\"", {}, {}, TerminalMode::kWhole);
  auto second = cache.Get("\"[a-z]{1,8}\"", {}, {}, TerminalMode::kWhole);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().entries, 1u);
  auto built = Dfa::FromPattern("\"[a-z]{1,8}\"");
  ASSERT_TRUE(built.ok());
  EXPECT_TRUE(SameLanguage(**second, **built, {"\"\"", "\"ab\"", "\"abcdefgh\"", "\"abcdefghi\"", "\"A\"", "\"a"}));
  EXPECT_GE(cache.stats().bytes, (*built)->MemoryBytes());
}

TEST(TerminalDfas, LimitsArePartOfTheKey) {
  TerminalDfas cache(size_t{1} << 20);
  DfaOptions small;
  small.max_states = 3;
  ASSERT_TRUE(cache.Get("[a-z]{1,20}", {}, {}, TerminalMode::kWhole).ok());
  // Built under larger limits, it must not answer a lookup under smaller
  // ones: that one fails as a build would.
  auto refused = cache.Get("[a-z]{1,20}", {}, small, TerminalMode::kWhole);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_EQ(cache.stats().hits, 0u);
  EXPECT_EQ(cache.stats().entries, 1u);  // the error is not kept
  EXPECT_FALSE(cache.Get("(", {}, {}, TerminalMode::kWhole).ok());
  EXPECT_FALSE(cache.Get("(", {}, {}, TerminalMode::kWhole).ok());
  EXPECT_EQ(cache.stats().misses, 4u);
}

TEST(TerminalDfas, ModeIsPartOfTheKey) {
  TerminalDfas cache(size_t{1} << 20);
  DfaOptions options;
  options.eager_up_to_states = 0;  // lazy: always
  auto whole = cache.Get("[a-z]{1,20}!", {}, options, TerminalMode::kWhole);
  auto lazy = cache.Get("[a-z]{1,20}!", {}, options, TerminalMode::kLazy);
  ASSERT_TRUE(whole.ok() && lazy.ok());
  EXPECT_FALSE((*whole)->lazy());
  EXPECT_TRUE((*lazy)->lazy());
  EXPECT_EQ(cache.stats().misses, 2u);
  EXPECT_EQ(cache.stats().entries, 2u);
  EXPECT_TRUE(SameLanguage(**lazy, **whole, {"a!", "abcdefghijklmnopqrst!", "abcdefghijklmnopqrstu!", "!", "A!"}));
  auto again = cache.Get("[a-z]{1,20}!", {}, options, TerminalMode::kLazy);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), lazy->get());
  // A lazy DFA whose whole build fits eager_up_to_states is whole.
  options.eager_up_to_states = 1000;
  auto hybrid = cache.Get("[a-z]{1,20}!", {}, options, TerminalMode::kLazy);
  ASSERT_TRUE(hybrid.ok());
  EXPECT_FALSE((*hybrid)->lazy());
  EXPECT_EQ(cache.stats().entries, 3u);
}

TEST(TerminalDfas, StaysWithinMaxBytes) {
  auto one = Dfa::FromPattern("k0[0-9]{1,6}");
  ASSERT_TRUE(one.ok());
  const size_t max_bytes = 4 * ((*one)->MemoryBytes() + 64 + TerminalDfas::kEntryBytes);
  TerminalDfas cache(max_bytes);
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(cache.Get(absl::StrCat("k", i % 10, "[0-9]{1,6}"), {}, {}, TerminalMode::kWhole).ok());
    EXPECT_LE(cache.stats().bytes, max_bytes);
  }
  EXPECT_GT(cache.stats().evicted, 0u);
  EXPECT_GE(cache.stats().entries, 2u);
  // The most recent pattern is still there; one larger than the whole cache
  // is returned but not kept.
  const uint64_t hits = cache.stats().hits;
  ASSERT_TRUE(cache.Get("k9[0-9]{1,6}", {}, {}, TerminalMode::kWhole).ok());
  EXPECT_EQ(cache.stats().hits, hits + 1);
  TerminalDfas tiny(16);
  ASSERT_TRUE(tiny.Get("abc", {}, {}, TerminalMode::kWhole).ok());
  EXPECT_EQ(tiny.stats().entries, 0u);
  EXPECT_EQ(tiny.stats().bytes, 0u);
}

}  // namespace
}  // namespace maskd::grammar
