// Regex text for one character of a JSON string's content: a decoded
// character may appear raw, or escaped (\" \\ \/ \n ..., \uXXXX), so a set
// of characters becomes the alternation of its encoded forms.
#include "schema/internal/json_string_class.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "automaton/regex_text.h"
#include "schema/internal/json_schema_internal.h"

namespace maskd::json_schema_internal {
namespace {

// Hex digit class for values [lo, hi], both letter cases.
std::string HexClass(int lo, int hi) {
  if (lo == 0 && hi == 15) return "[0-9a-fA-F]";
  std::string s;
  int count = 0;
  auto add = [&](char a, char b) {
    s += a;
    if (b != a) {
      if (b > a + 1) s += '-';
      s += b;
    }
  };
  if (lo <= 9) {
    add(static_cast<char>('0' + lo), static_cast<char>('0' + std::min(hi, 9)));
    count += std::min(hi, 9) - lo + 1;
  }
  if (hi >= 10) {
    int a = std::max(lo, 10);
    add(static_cast<char>('a' + a - 10), static_cast<char>('a' + hi - 10));
    add(static_cast<char>('A' + a - 10), static_cast<char>('A' + hi - 10));
    count += 2;
  }
  if (count == 1 && s.size() == 1) return s;
  return "[" + s + "]";
}

std::string HexDigitsAny(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9a-fA-F]";
  return absl::StrCat("[0-9a-fA-F]{", n, "}");
}

// 4-hex-digit strings x with a <= x <= b (digit values).
std::string HexSameLen(const std::vector<int>& a, const std::vector<int>& b, size_t pos) {
  size_t n = a.size() - pos;
  if (n == 0) return "";
  if (a[pos] == b[pos]) return HexClass(a[pos], a[pos]) + HexSameLen(a, b, pos + 1);
  bool a_zero = true, b_max = true;
  for (size_t i = pos + 1; i < a.size(); ++i) {
    if (a[i] != 0) a_zero = false;
    if (b[i] != 15) b_max = false;
  }
  std::vector<std::string> parts;
  int lo = a[pos], hi = b[pos];
  if (!a_zero) {
    std::vector<int> top(a);
    for (size_t i = pos + 1; i < a.size(); ++i) top[i] = 15;
    parts.push_back(HexClass(a[pos], a[pos]) + HexSameLen(a, top, pos + 1));
    ++lo;
  }
  std::string high;
  if (!b_max) {
    std::vector<int> bottom(b);
    for (size_t i = pos + 1; i < b.size(); ++i) bottom[i] = 0;
    high = HexClass(b[pos], b[pos]) + HexSameLen(bottom, b, pos + 1);
    --hi;
  }
  if (lo <= hi) parts.push_back(HexClass(lo, hi) + HexDigitsAny(n - 1));
  if (!high.empty()) parts.push_back(high);
  if (parts.size() == 1) return parts[0];
  return "(?:" + absl::StrJoin(parts, "|") + ")";
}

}  // namespace

std::string ClassOf(const CodepointSet& set) {
  std::string s;
  AppendCodepointSet(&s, set, CodepointSpelling::kLiteral, CodepointSpelling::kClassMember);
  return s;
}

std::string HexRange(uint32_t lo, uint32_t hi) {
  std::vector<int> a(4), b(4);
  for (int i = 0; i < 4; ++i) {
    a[i] = (lo >> (12 - 4 * i)) & 15;
    b[i] = (hi >> (12 - 4 * i)) & 15;
  }
  return HexSameLen(a, b, 0);
}

std::string EncodeSet(const CodepointSet& set) {
  static const CodepointSet* const kSurrogates = new CodepointSet(CodepointSet::Range(0xD800, 0xDFFF));
  std::vector<std::string> alts;
  // Raw: printable characters but the two that JSON must escape.
  CodepointSet raw = set.IntersectRange(0x20, kMaxCodepoint);
  raw.Subtract(CodepointSet::Range('"', '"'));
  raw.Subtract(CodepointSet::Range('\\', '\\'));
  raw.Subtract(*kSurrogates);
  if (!raw.empty()) alts.push_back(ClassOf(raw));
  std::string short_esc;
  if (set.Contains('"')) short_esc += "\"";
  if (set.Contains('\\')) short_esc += "\\\\";
  if (set.Contains('/')) short_esc += "/";
  if (set.Contains('\b')) short_esc += "b";
  if (set.Contains('\f')) short_esc += "f";
  if (set.Contains('\n')) short_esc += "n";
  if (set.Contains('\r')) short_esc += "r";
  if (set.Contains('\t')) short_esc += "t";
  if (short_esc.size() == 1) {
    alts.push_back("\\\\" + RegexEscape(short_esc));
  } else if (!short_esc.empty()) {
    alts.push_back("\\\\[" + short_esc + "]");
  }
  // \uXXXX forms: control characters and non-ASCII BMP characters (what
  // json.dumps(ensure_ascii=True) writes), never surrogates alone.
  CodepointSet u = set.IntersectRange(0x7F, 0xFFFF);
  u.Subtract(*kSurrogates);
  u.Add(set.IntersectRange(0, 0x1F));
  if (!u.empty()) {
    std::vector<std::string> hex;
    for (auto& [lo, hi] : u.ranges()) hex.push_back(HexRange(lo, hi));
    alts.push_back("\\\\u" + (hex.size() == 1 ? hex[0] : "(?:" + absl::StrJoin(hex, "|") + ")"));
  }
  // Surrogate pairs when the set holds every astral character.
  const CodepointSet astral = set.IntersectRange(0x10000, kMaxCodepoint);
  if (astral.ranges().size() == 1 && astral.ranges()[0].first == 0x10000 &&
      astral.ranges()[0].second == kMaxCodepoint) {
    alts.push_back("\\\\u[dD][89abAB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2}");
  }
  if (alts.empty()) return "";  // empty set: caller treats as no match
  if (alts.size() == 1) return alts[0];
  return "(?:" + absl::StrJoin(alts, "|") + ")";
}

const std::string& JsonCharRegex() {
  static const std::string* s = new std::string(
      "(?:[^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})");
  return *s;
}

const std::string& JsonEscapeRegex() {
  static const std::string* s = new std::string("\\\\(?:[\"\\\\/bfnrt]|u[0-9a-fA-F]{4})");
  return *s;
}

}  // namespace maskd::json_schema_internal
