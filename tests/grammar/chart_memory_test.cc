// What a grammar sequence is charged (EarleyParser::allocated_bytes,
// GrammarGuide::chart_bytes: the charge of --max-grammar-chart-bytes) against
// what it holds: the parser's arrays counted by their allocator
// (chart_allocator.h), and the process's resident memory under the pattern
// of issue #24 (many sequences grown to the budget on an ambiguous grammar,
// then rolled back and kept open).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "grammar/bnf_parser.h"
#include "grammar/chart_allocator.h"
#include "grammar/compiled_grammar.h"
#include "grammar/earley_parser.h"
#include "grammar/grammar_guide.h"
#include "grammar/grammar_index.h"
#include "tests/index/test_util.h"

namespace maskd::grammar {
namespace {

// Not regular (a^n b^m, m <= n), so it stays a grammar; a run of n "a"s
// leaves s completed from every origin in every set: O(n^2) items in O(n^2)
// steps, the memory profile of an ambiguous grammar at a fraction of its
// cost.
constexpr char kQuadratic[] = R"gbnf(
root ::= s
s ::= "a" s "b" | "a" s | "a"
)gbnf";

std::shared_ptr<const CompiledGrammar> MustCompile(const char* text) {
  auto g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return nullptr;
  auto compiled = CompiledGrammar::Create(*g);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return compiled.ok() ? *compiled : nullptr;
}

void PushA(EarleyParser& p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    auto pushed = p.Push('a');
    ASSERT_TRUE(pushed.ok() && *pushed) << i;
  }
}

// Every array of the parser is a ChartVector, so the process-wide count of
// chart blocks moves exactly as allocated_bytes() does.
TEST(ChartMemory, ParserChargesEveryByteItsArraysHold) {
  auto compiled = MustCompile(kQuadratic);
  ASSERT_NE(compiled, nullptr);
  const size_t base = ChartHeldBytes();
  {
    auto parser = EarleyParser::Create(compiled);
    ASSERT_TRUE(parser.ok()) << parser.status();
    EarleyParser& p = *parser;
    EXPECT_EQ(ChartHeldBytes() - base, p.allocated_bytes());
    size_t peak = 0;
    for (int cycle = 0; cycle < 3; ++cycle) {
      PushA(p, 600);
      EXPECT_LT(p.MinBytesToFinish(), CompiledGrammar::kNoLength);  // fills the memo
      const size_t grown = p.allocated_bytes();
      EXPECT_EQ(ChartHeldBytes() - base, grown);
      // Capacity, not size: at least the items (12 bytes each).
      EXPECT_GE(grown, p.num_items() * sizeof(EarleyItem));
      peak = std::max(peak, grown);
      if (cycle == 0) {
        std::printf("%zu items: %zu bytes at 12 per item, %zu held\n", p.num_items(),
                    p.num_items() * sizeof(EarleyItem), grown);
      }
      // A walk's pops keep the capacity (no allocation while walking)...
      p.PopTo(2);
      EXPECT_EQ(p.allocated_bytes(), grown);
      // ...and a rollback's release gives it back, and the count with it.
      p.ReleaseSpare();
      EXPECT_EQ(ChartHeldBytes() - base, p.allocated_bytes());
      EXPECT_LT(p.allocated_bytes(), grown / 8) << "cycle " << cycle;
      // A partial rollback: counted alike.
      PushA(p, 400);
      p.PopTo(p.num_sets() - 50);
      p.ReleaseSpare();
      EXPECT_EQ(ChartHeldBytes() - base, p.allocated_bytes());
      EXPECT_LE(p.allocated_bytes(), grown);
      p.PopTo(1);
      p.ReleaseSpare();
    }
    // The same work again allocates no more than the first time.
    PushA(p, 600);
    EXPECT_LE(p.allocated_bytes(), peak);
    EXPECT_EQ(ChartHeldBytes() - base, p.allocated_bytes());
    EarleyParser copy = p;  // a fork holds its own arrays, counted too
    EXPECT_EQ(ChartHeldBytes() - base, p.allocated_bytes() + copy.allocated_bytes());
  }
  EXPECT_EQ(ChartHeldBytes(), base);  // all freed with the parsers
}

std::shared_ptr<const GrammarIndex> MustIndex(const char* text) {
  auto g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return nullptr;
  auto index = GrammarIndex::Create(*g, testing::BundledTokenizer());
  EXPECT_TRUE(index.ok()) << index.status();
  return index.ok() ? *index : nullptr;
}

uint32_t TokenOf(const Vocabulary& vocab, std::string_view bytes) {
  for (uint32_t t = 0; t < vocab.size(); ++t) {
    if (vocab.has_token(t) && !vocab.is_special(t) && vocab.bytes(t) == bytes) return t;
  }
  ADD_FAILURE() << "no token " << bytes;
  return 0;
}

// A guide's charge bounds what its chart arrays hold from above (it adds the
// mask scratch and the object), follows them through steps with masks, and
// goes down with them on a rollback.
TEST(ChartMemory, GuideChargeCoversWhatItHoldsAndFallsOnRollback) {
  auto index = MustIndex(kQuadratic);
  ASSERT_NE(index, nullptr);
  const uint32_t a = TokenOf(index->vocab(), "a");
  const size_t base = ChartHeldBytes();
  auto guide = GrammarGuide::Create(index);
  ASSERT_TRUE(guide.ok()) << guide.status();
  std::vector<uint32_t> mask(index->num_words());
  auto check = [&](const char* where) {
    const size_t held = ChartHeldBytes() - base;
    EXPECT_LE(held + sizeof(GrammarGuide), guide->chart_bytes()) << where;
  };
  check("start");
  for (int cycle = 0; cycle < 2; ++cycle) {
    for (int i = 0; i < 500; ++i) {
      ASSERT_TRUE(guide->Advance(a).ok()) << i;
      if (i % 50 == 0) {
        ASSERT_TRUE(guide->WriteMask(absl::MakeSpan(mask)).ok());
        check("step");
      }
    }
    check("grown");
    const size_t grown = guide->chart_bytes();
    const size_t grown_held = ChartHeldBytes() - base;
    ASSERT_TRUE(guide->Rollback(20).ok());  // a little: nothing to give back
    check("short rollback");
    ASSERT_TRUE(guide->Rollback(400).ok());
    check("long rollback");
    EXPECT_LT(guide->chart_bytes(), grown / 4);
    EXPECT_LT(ChartHeldBytes() - base, grown_held / 4);
    // A step that rolls back and advances gives back too.
    for (int i = 0; i < 400; ++i) ASSERT_TRUE(guide->Advance(a).ok());
    const size_t regrown = guide->chart_bytes();
    ASSERT_TRUE(guide->RollbackAndAdvance(450, std::vector<uint32_t>{a}).ok());
    check("rollback and advance");
    EXPECT_LT(guide->chart_bytes(), regrown / 4);
    ASSERT_TRUE(guide->Rollback(guide->num_tokens()).ok());
  }
}

// Resident bytes of this process.
size_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// Issue #24: sequences that each grow to a shared budget (charged as
// chart_bytes, as ConstraintGuide charges --max-grammar-chart-bytes), then
// roll back to the start and stay open, one after another. Resident memory
// must follow the charge: never more than the budget plus as much again,
// and back near the start once all are rolled back. (When the charge counted
// live items only, each sequence kept 2-3 times the budget after its
// rollback: 8 of them, 20 times the budget.)
TEST(ChartMemory, ResidentMemoryFollowsTheChargeAcrossRolledBackSequences) {
  auto index = MustIndex(kQuadratic);
  ASSERT_NE(index, nullptr);
  const uint32_t a = TokenOf(index->vocab(), "a");
  constexpr size_t kBudget = size_t{8} << 20;
  constexpr int kSequences = 8;
  std::vector<GrammarGuide> open;
  open.reserve(kSequences);
  const size_t rss_before = ResidentBytes();
  ASSERT_GT(rss_before, 0u) << "/proc/self/statm";
  size_t peak_growth = 0;
  for (int s = 0; s < kSequences; ++s) {
    auto guide = GrammarGuide::Create(index);
    ASSERT_TRUE(guide.ok()) << guide.status();
    open.push_back(*std::move(guide));
    GrammarGuide& g = open.back();
    size_t others = 0;
    for (int o = 0; o + 1 < static_cast<int>(open.size()); ++o) others += open[o].chart_bytes();
    size_t steps = 0;
    while (others + g.chart_bytes() <= kBudget) {
      ASSERT_TRUE(g.Advance(a).ok());
      ++steps;
    }
    ASSERT_TRUE(g.Rollback(1).ok());  // the step past the budget is refused
    ASSERT_LE(others + g.chart_bytes(), kBudget);
    EXPECT_GT(steps, 300u);
    const size_t rss = ResidentBytes();
    peak_growth = std::max(peak_growth, rss > rss_before ? rss - rss_before : 0);
    ASSERT_TRUE(g.Rollback(g.num_tokens()).ok());
  }
  const size_t rss_after = ResidentBytes();
  const size_t end_growth = rss_after > rss_before ? rss_after - rss_before : 0;
  std::printf("budget %zu MiB, RSS growth at peaks %zu MiB, after rollbacks %zu MiB\n",
              kBudget >> 20, peak_growth >> 20, end_growth >> 20);
#if !defined(__SANITIZE_ADDRESS__)  // its quarantine keeps freed blocks resident
  EXPECT_LE(peak_growth, 2 * kBudget);
  EXPECT_LE(end_growth, kBudget / 2);
#endif
}

}  // namespace
}  // namespace maskd::grammar
