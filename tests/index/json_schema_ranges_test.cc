// JSON Schema -> regex, numbers: exhaustive integer and decimal range regexes
// against brute force (RE2 as the oracle), Python's float and string formats.
#include "schema/json_schema.h"

#include <re2/re2.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <limits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "automaton/dfa.h"
#include "schema/internal/json_schema_internal.h"
#include "tests/index/json_schema_test_util.h"

namespace maskd {
namespace {

using json_schema_internal::Decimal;
using json_schema_internal::IntegerRangeRegex64;
using json_schema_internal::NumberRangeRegex;
using json_schema_internal::ParseDecimal;
using json_schema_internal::PatternToJsonStringRegex;
using json_schema_internal::PythonFloatRepr;
using json_schema_internal::PythonJsonString;
using ::maskd::json_schema_test::Compile;
using ::maskd::json_schema_test::Full;

// ---------------------------------------------------------------- numbers

TEST(IntegerRange, ExhaustiveSmall) {
  for (int lo = -45; lo <= 45; ++lo) {
    for (int hi = lo; hi <= 45; ++hi) {
      auto r = IntegerRangeRegex64(lo, hi);
      ASSERT_TRUE(r.has_value());
      auto re = Compile(*r);
      ASSERT_TRUE(re->ok()) << *r;
      for (int x = -120; x <= 120; ++x) {
        ASSERT_EQ(Full(*re, std::to_string(x)), x >= lo && x <= hi)
            << "[" << lo << "," << hi << "] x=" << x << " re=" << *r;
      }
      ASSERT_FALSE(Full(*re, "-0"));
      ASSERT_FALSE(Full(*re, "00"));
      ASSERT_FALSE(Full(*re, "01"));
    }
  }
}

TEST(IntegerRange, ExhaustiveThreeDigitBounds) {
  const int bounds[] = {-1000, -999, -901, -900, -899, -101, -100, -99, -10, -9, -1, 0, 1, 9,
                        10, 11, 19, 99, 100, 101, 109, 110, 190, 199, 200, 899, 900, 999, 1000};
  for (int lo : bounds) {
    for (int hi : bounds) {
      if (hi < lo) continue;
      auto r = IntegerRangeRegex64(lo, hi);
      auto re = Compile(*r);
      for (int x = -1100; x <= 1100; ++x) {
        ASSERT_EQ(Full(*re, std::to_string(x)), x >= lo && x <= hi)
            << "[" << lo << "," << hi << "] x=" << x << " re=" << *r;
      }
    }
  }
}

TEST(IntegerRange, HalfOpen) {
  for (int b = -130; b <= 130; ++b) {
    auto ge = Compile(*IntegerRangeRegex64(b, std::nullopt));
    auto le = Compile(*IntegerRangeRegex64(std::nullopt, b));
    for (int x = -1200; x <= 1200; ++x) {
      ASSERT_EQ(Full(*ge, std::to_string(x)), x >= b) << ">= " << b << " x=" << x;
      ASSERT_EQ(Full(*le, std::to_string(x)), x <= b) << "<= " << b << " x=" << x;
    }
    ASSERT_TRUE(Full(*ge, "123456789012345678901234567890"));
    ASSERT_FALSE(Full(*ge, "-123456789012345678901234567890"));
    ASSERT_TRUE(Full(*le, "-123456789012345678901234567890"));
  }
  auto all = Compile(*IntegerRangeRegex64(std::nullopt, std::nullopt));
  EXPECT_TRUE(Full(*all, "-5"));
  EXPECT_FALSE(Full(*all, "05"));
  EXPECT_FALSE(IntegerRangeRegex64(5, 4).has_value());
}

TEST(IntegerRange, Int64Extremes) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  auto re = Compile(*IntegerRangeRegex64(kMin, kMax));
  EXPECT_TRUE(Full(*re, "9223372036854775807"));
  EXPECT_FALSE(Full(*re, "9223372036854775808"));
  EXPECT_TRUE(Full(*re, "-9223372036854775808"));
  EXPECT_FALSE(Full(*re, "-9223372036854775809"));
  EXPECT_TRUE(Full(*re, "0"));
  // Random samples in a large range.
  int64_t lo = -4611686018427387904LL, hi = 3000000000000000123LL;
  auto r2 = Compile(*IntegerRangeRegex64(lo, hi));
  uint64_t seed = 12345;
  for (int i = 0; i < 20000; ++i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    int64_t x = static_cast<int64_t>(seed);
    if (i % 3 == 0) x = (i % 2 ? lo : hi) + static_cast<int64_t>(seed % 2001) - 1000;
    ASSERT_EQ(Full(*r2, std::to_string(x)), x >= lo && x <= hi) << x;
  }
}

// Decimal text "a.bcd" vs a bound in thousandths.
TEST(NumberRange, DecimalBruteForce) {
  // Bounds in thousandths.
  const int bounds[] = {-2500, -1000, -750, -5, 0, 5, 100, 500, 1000, 1250, 1999, 3000, 10500};
  std::vector<std::pair<std::string, int>> values;  // text, value in thousandths
  for (int v = -12000; v <= 12000; v += 1) {
    if (std::abs(v) > 3100 && v % 250 != 0) continue;
    int a = std::abs(v);
    std::string ip = std::to_string(a / 1000);
    int frac = a % 1000;
    std::string s = (v < 0 ? "-" : "") + ip;
    if (frac == 0) {
      values.push_back({s, v});
      values.push_back({s + ".0", v});
      if (v % 3 == 0) values.push_back({s + ".000", v});
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "%03d", frac);
      std::string f = buf;
      std::string t = f;
      while (!t.empty() && t.back() == '0') t.pop_back();
      values.push_back({s + "." + t, v});
      if (t != f) values.push_back({s + "." + f, v});
    }
  }
  auto dec = [](int th) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%s%d.%03d", th < 0 ? "-" : "", std::abs(th) / 1000,
                  std::abs(th) % 1000);
    return *ParseDecimal(buf);
  };
  for (int lo : bounds) {
    for (int hi : bounds) {
      for (int mode = 0; mode < 4; ++mode) {
        bool lo_ex = mode & 1, hi_ex = mode & 2;
        for (int shape = 0; shape < 3; ++shape) {  // both, lo only, hi only
          if (shape != 0 && hi != bounds[0]) continue;
          std::optional<Decimal> l = shape == 2 ? std::nullopt : std::optional(dec(lo));
          std::optional<Decimal> h = shape == 1 ? std::nullopt : std::optional(dec(hi));
          auto r = NumberRangeRegex(l, lo_ex, h, hi_ex);
          bool nonempty = false;
          std::unique_ptr<RE2> re;
          if (r) {
            re = Compile(*r);
            ASSERT_TRUE(re->ok()) << *r;
          }
          for (auto& [text, v] : values) {
            bool in = true;
            if (l) in = in && (lo_ex ? v > lo : v >= lo);
            if (h) in = in && (hi_ex ? v < hi : v <= hi);
            bool got = r && Full(*re, text);
            if (text == "-0" || text == "-0.0" || text == "-0.000") continue;  // -0 is optional
            ASSERT_EQ(got, in) << "lo=" << (l ? lo : -99999) << (lo_ex ? " ex" : "") << " hi="
                               << (h ? hi : 99999) << (hi_ex ? " ex" : "") << " text=" << text
                               << " re=" << (r ? *r : "<empty>");
            nonempty |= in;
          }
          // No regex exactly when the range holds no number (the samples
          // are a grid of thousandths, so an open range between neighbours
          // holds numbers no sample hits).
          const bool empty = l && h && (lo > hi || (lo == hi && (lo_ex || hi_ex)));
          ASSERT_EQ(r.has_value(), !empty)
              << "lo=" << lo << (lo_ex ? " ex" : "") << " hi=" << hi << (hi_ex ? " ex" : "");
          if (nonempty) {
            ASSERT_TRUE(r.has_value());
          }
        }
      }
    }
  }
}

TEST(NumberRange, Exponents) {
  auto nonneg = Compile(*NumberRangeRegex(ParseDecimal("0"), false, std::nullopt, false));
  EXPECT_TRUE(Full(*nonneg, "1e-05"));
  EXPECT_TRUE(Full(*nonneg, "1.5e+16"));
  EXPECT_FALSE(Full(*nonneg, "-1e-05"));
  auto any = Compile(*NumberRangeRegex(std::nullopt, false, std::nullopt, false));
  for (const char* t : {"0", "-0", "1.5", "-1e-05", "10000000000.0", "1E5", "1e+16"})
    EXPECT_TRUE(Full(*any, t)) << t;
  for (const char* t : {"01", "1.", ".5", "+1", "1e", "--1", "NaN"}) EXPECT_FALSE(Full(*any, t)) << t;
}

TEST(PythonFormat, FloatRepr) {
  EXPECT_EQ(PythonFloatRepr(1.5), "1.5");
  EXPECT_EQ(PythonFloatRepr(1e-05), "1e-05");
  EXPECT_EQ(PythonFloatRepr(0.0001), "0.0001");
  EXPECT_EQ(PythonFloatRepr(10000000000.0), "10000000000.0");
  EXPECT_EQ(PythonFloatRepr(1e16), "1e+16");
  EXPECT_EQ(PythonFloatRepr(1.5e16), "1.5e+16");
  EXPECT_EQ(PythonFloatRepr(123456789012345.6), "123456789012345.6");
  EXPECT_EQ(PythonFloatRepr(-0.1), "-0.1");
  EXPECT_EQ(PythonFloatRepr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(PythonFloatRepr(1e300), "1e+300");
  EXPECT_EQ(PythonFloatRepr(-0.0), "-0.0");
}

TEST(PythonFormat, JsonString) {
  EXPECT_EQ(PythonJsonString("a\"b\\c\n\x01", true), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(PythonJsonString("caf\xc3\xa9", true), "\"caf\\u00e9\"");
  EXPECT_EQ(PythonJsonString("caf\xc3\xa9", false), "\"caf\xc3\xa9\"");
  EXPECT_EQ(PythonJsonString("\xf0\x9f\x98\x80", true), "\"\\ud83d\\ude00\"");
  EXPECT_EQ(PythonJsonString("a/b\x7f", true), "\"a/b\x7f\"");
}

}  // namespace
}  // namespace maskd
