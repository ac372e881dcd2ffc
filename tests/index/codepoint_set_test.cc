// CodepointSet's algebra (automaton/codepoint_set.h) and the UTF-8 helpers
// (automaton/utf8.h): exact results on small cases, and the set operations
// against a bitmap on random sets.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "automaton/codepoint_set.h"
#include "automaton/utf8.h"

namespace maskd {
namespace {

using Ranges = CodepointSet::Ranges;

CodepointSet Of(const Ranges& ranges) {
  CodepointSet set;
  set.AddRanges(ranges);
  return set;
}

TEST(CodepointSet, RangeAndIntersectRange) {
  EXPECT_EQ(CodepointSet::Range('a', 'z').ranges(), (Ranges{{'a', 'z'}}));
  const CodepointSet s = Of({{0, 10}, {20, 30}, {40, 50}});
  EXPECT_EQ(s.IntersectRange(5, 25).ranges(), (Ranges{{5, 10}, {20, 25}}));
  EXPECT_EQ(s.IntersectRange(11, 19).ranges(), Ranges{});
  EXPECT_EQ(s.IntersectRange(0, kMaxCodepoint).ranges(), s.ranges());
  EXPECT_TRUE(CodepointSet().IntersectRange(0, 5).empty());
}

TEST(CodepointSet, Subtract) {
  CodepointSet s = Of({{0, 10}, {20, 30}, {40, 50}});
  s.Subtract(Of({{5, 5}, {8, 22}, {30, 45}}));
  EXPECT_EQ(s.ranges(), (Ranges{{0, 4}, {6, 7}, {23, 29}, {46, 50}}));
  s.Subtract(CodepointSet());
  EXPECT_EQ(s.ranges(), (Ranges{{0, 4}, {6, 7}, {23, 29}, {46, 50}}));
  CodepointSet copy = s;
  s.Subtract(copy);  // shares its ranges with `s`
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(copy.ranges().size(), 4u);  // copies are not changed
  CodepointSet all = CodepointSet::Range(0, kMaxCodepoint);
  all.Subtract(CodepointSet::Range(0, kMaxCodepoint));
  EXPECT_TRUE(all.empty());
}

// Random sets over [0, 200): Subtract and IntersectRange agree with a bitmap.
TEST(CodepointSet, AgreesWithBitmap) {
  std::mt19937 rng(7);
  auto random_set = [&](std::vector<bool>* bits) {
    Ranges r;
    for (int k = rng() % 6; k > 0; --k) {
      uint32_t lo = rng() % 200, hi = lo + rng() % 30;
      if (hi >= 200) hi = 199;
      r.emplace_back(lo, hi);
      for (uint32_t c = lo; c <= hi; ++c) (*bits)[c] = true;
    }
    return Of(r);
  };
  for (int round = 0; round < 500; ++round) {
    std::vector<bool> a(200), b(200);
    CodepointSet sa = random_set(&a), sb = random_set(&b);
    const uint32_t lo = rng() % 200, hi = lo + rng() % 100;
    CodepointSet in = sa.IntersectRange(lo, hi);
    sa.Subtract(sb);
    for (uint32_t c = 0; c < 210; ++c) {
      const bool ac = c < 200 && a[c], bc = c < 200 && b[c];
      ASSERT_EQ(sa.Contains(c), ac && !bc) << round << " " << c;
      ASSERT_EQ(in.Contains(c), ac && c >= lo && c <= hi) << round << " " << c;
    }
    for (size_t i = 1; i < sa.ranges().size(); ++i) {
      ASSERT_GT(sa.ranges()[i].first, sa.ranges()[i - 1].second + 1);  // disjoint, not adjacent
    }
  }
}

TEST(Utf8, AppendThenDecode) {
  for (uint32_t cp : {0u, 0x41u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFFu,
                      0x10000u, 0x10FFFFu}) {
    std::string s = "x";
    AppendUtf8(&s, cp);
    size_t pos = 1;
    EXPECT_EQ(DecodeUtf8(s, &pos), std::optional<uint32_t>(cp)) << cp;
    EXPECT_EQ(pos, s.size()) << cp;
  }
  std::string e;
  AppendUtf8(&e, 0xE9);
  EXPECT_EQ(e, "\xC3\xA9");
}

TEST(Utf8, DecodeRejectsMalformed) {
  for (std::string bad : {"\x80", "\xC3", "\xC3\x41", "\xC0\x80", "\xE0\x80\x80", "\xED\xA0\x80",
                          "\xF4\x90\x80\x80", "\xF8\x80\x80\x80\x80", "\xFF"}) {
    size_t pos = 0;
    EXPECT_EQ(DecodeUtf8(bad, &pos), std::nullopt) << bad;
    EXPECT_EQ(pos, 0u);
  }
}

}  // namespace
}  // namespace maskd
