// JSON Schema `pattern` (ECMA-262 syntax, search semantics) translated to a
// regex over the JSON-encoded content of a string: a character of the decoded
// string may appear raw, or escaped (\" \\ \/ \n ..., \uXXXX), so every
// character set of the pattern is rewritten as the alternation of its encoded
// forms. Unanchored ends get any-character runs.
#include <algorithm>
#include <map>
#include <set>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "automaton/unicode_property.h"
#include "schema/internal/json_schema_internal.h"

namespace maskd::json_schema_internal {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
constexpr uint32_t kMaxCp = 0x10FFFF;

Ranges Normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

Ranges Complement(const Ranges& in) {
  Ranges r = Normalize(in), out;
  uint32_t next = 0;
  for (auto& [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCp) out.emplace_back(next, kMaxCp);
  return out;
}

Ranges Intersect(const Ranges& a, uint32_t lo, uint32_t hi) {
  Ranges out;
  for (auto& [l, h] : a) {
    uint32_t L = std::max(l, lo), H = std::min(h, hi);
    if (L <= H) out.emplace_back(L, H);
  }
  return out;
}

Ranges Minus(const Ranges& a, uint32_t lo, uint32_t hi) {
  Ranges out;
  for (auto& [l, h] : a) {
    if (h < lo || l > hi) {
      out.emplace_back(l, h);
      continue;
    }
    if (l < lo) out.emplace_back(l, lo - 1);
    if (h > hi) out.emplace_back(hi + 1, h);
  }
  return out;
}

bool Contains(const Ranges& a, uint32_t c) {
  for (auto& [l, h] : a)
    if (c >= l && c <= h) return true;
  return false;
}

std::string Utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// One codepoint inside a [...] class.
std::string ClassChar(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F) {
    char b[8];
    std::snprintf(b, sizeof(b), "\\x%02x", cp);
    return b;
  }
  if (cp == '\\' || cp == ']' || cp == '[' || cp == '^' || cp == '-') {
    return std::string("\\") + static_cast<char>(cp);
  }
  return Utf8(cp);
}

// A class over codepoint ranges (no surrogates inside).
std::string ClassOf(const Ranges& r) {
  if (r.size() == 1 && r[0].first == r[0].second) {
    return RegexEscape(Utf8(r[0].first));
  }
  std::string s = "[";
  for (auto& [lo, hi] : r) {
    s += ClassChar(lo);
    if (hi != lo) {
      if (hi > lo + 1) s += "-";
      s += ClassChar(hi);
    }
  }
  return s + "]";
}

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

std::string HexRange(uint32_t lo, uint32_t hi) {
  std::vector<int> a(4), b(4);
  for (int i = 0; i < 4; ++i) {
    a[i] = (lo >> (12 - 4 * i)) & 15;
    b[i] = (hi >> (12 - 4 * i)) & 15;
  }
  return HexSameLen(a, b, 0);
}

// The encoded forms of one character of `set` inside a JSON string.
std::string EncodeSet(const Ranges& in) {
  Ranges set = Normalize(in);
  std::vector<std::string> alts;
  Ranges raw = Intersect(set, 0x20, kMaxCp);
  raw = Minus(raw, '"', '"');
  raw = Minus(raw, '\\', '\\');
  raw = Minus(raw, 0xD800, 0xDFFF);
  if (!raw.empty()) alts.push_back(ClassOf(raw));
  std::string short_esc;
  if (Contains(set, '"')) short_esc += "\"";
  if (Contains(set, '\\')) short_esc += "\\\\";
  if (Contains(set, '/')) short_esc += "/";
  if (Contains(set, '\b')) short_esc += "b";
  if (Contains(set, '\f')) short_esc += "f";
  if (Contains(set, '\n')) short_esc += "n";
  if (Contains(set, '\r')) short_esc += "r";
  if (Contains(set, '\t')) short_esc += "t";
  if (short_esc.size() == 1) {
    alts.push_back("\\\\" + RegexEscape(short_esc));
  } else if (!short_esc.empty()) {
    alts.push_back("\\\\[" + short_esc + "]");
  }
  // \uXXXX forms: control characters and non-ASCII BMP characters (what
  // json.dumps(ensure_ascii=True) writes), never surrogates alone.
  Ranges u = Intersect(set, 0, 0x1F);
  for (auto& r : Minus(Intersect(set, 0x7F, 0xFFFF), 0xD800, 0xDFFF)) u.push_back(r);
  if (!u.empty()) {
    std::vector<std::string> hex;
    for (auto& [lo, hi] : Normalize(u)) hex.push_back(HexRange(lo, hi));
    alts.push_back("\\\\u" + (hex.size() == 1 ? hex[0] : "(?:" + absl::StrJoin(hex, "|") + ")"));
  }
  // Surrogate pairs when the set holds every astral character.
  Ranges astral = Intersect(set, 0x10000, kMaxCp);
  if (astral.size() == 1 && astral[0].first == 0x10000 && astral[0].second == kMaxCp) {
    alts.push_back("\\\\u[dD][89abAB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2}");
  }
  if (alts.empty()) return "";  // empty set: caller treats as no match
  if (alts.size() == 1) return alts[0];
  return "(?:" + absl::StrJoin(alts, "|") + ")";
}

struct PNode {
  enum Kind { kSet, kCat, kAlt, kRep, kEmpty, kBol, kEol } kind = kEmpty;
  Ranges set;
  std::vector<PNode> kids;
  int min = 0, max = -1;  // -1: unbounded
};

Ranges DigitRanges() { return {{'0', '9'}}; }
Ranges WordRanges() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
Ranges SpaceRanges() {
  return {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
          {0xFEFF, 0xFEFF}};
}

class PatternParser {
 public:
  PatternParser(std::string_view utf8, int max_nesting)
      : max_nesting_(std::clamp(max_nesting, 1, kMaxPatternNesting)) {
    for (size_t i = 0; i < utf8.size();) {
      unsigned char c = static_cast<unsigned char>(utf8[i]);
      int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (i + len > utf8.size()) len = 1;
      uint32_t cp = len == 1 ? c : (c & (0x7F >> len));
      for (int k = 1; k < len; ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3F);
      cps_.push_back(cp);
      byte_at_.push_back(i);
      i += len;
    }
    byte_at_.push_back(utf8.size());
  }

  absl::StatusOr<PNode> Parse() {
    PNode n = ParseAlt();
    if (!error_.empty()) return absl::InvalidArgumentError(error_);
    if (pos_ < cps_.size()) return absl::InvalidArgumentError(Where("unbalanced ')'"));
    return n;
  }

 private:
  std::string Where(std::string_view what) {
    return absl::StrCat(std::string(what), " at byte offset ",
                        byte_at_[std::min(pos_, cps_.size())], " of the pattern");
  }
  void Fail(std::string_view what) {
    if (error_.empty()) error_ = Where(what);
  }
  bool AtEnd() const { return pos_ >= cps_.size() || !error_.empty(); }
  uint32_t Peek(size_t k = 0) const { return pos_ + k < cps_.size() ? cps_[pos_ + k] : 0; }

  PNode ParseAlt() {
    PNode alt;
    alt.kind = PNode::kAlt;
    alt.kids.push_back(ParseCat());
    while (!AtEnd() && Peek() == '|') {
      ++pos_;
      alt.kids.push_back(ParseCat());
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  PNode ParseCat() {
    PNode cat;
    cat.kind = PNode::kCat;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      PNode atom = ParseAtom();
      if (!error_.empty()) break;
      ParseQuantifiers(atom);
      cat.kids.push_back(std::move(atom));
    }
    if (cat.kids.size() == 1) return std::move(cat.kids[0]);
    if (cat.kids.empty()) return PNode{};
    return cat;
  }

  bool ParseInt(int* out) {
    size_t start = pos_;
    long v = 0;
    while (pos_ < cps_.size() && Peek() >= '0' && Peek() <= '9') {
      v = std::min<long>(v * 10 + (Peek() - '0'), 1000000);
      ++pos_;
    }
    *out = static_cast<int>(v);
    return pos_ > start;
  }

  // One quantifier (and its lazy '?') at most: "a**", "a{2}{3}" and "a???"
  // are syntax errors in ECMA-262, and stacked quantifiers would nest the
  // tree without bound.
  void ParseQuantifiers(PNode& atom) {
    bool quantified = false;
    while (!AtEnd()) {
      uint32_t c = Peek();
      const size_t at = pos_;
      int mn, mx;
      if (c == '*') {
        mn = 0, mx = -1, ++pos_;
      } else if (c == '+') {
        mn = 1, mx = -1, ++pos_;
      } else if (c == '?') {
        mn = 0, mx = 1, ++pos_;
      } else if (c == '{') {
        size_t save = pos_;
        ++pos_;
        if (!ParseInt(&mn)) {
          pos_ = save;
          return;
        }
        mx = mn;
        if (Peek() == ',') {
          ++pos_;
          if (!ParseInt(&mx)) mx = -1;
        }
        if (Peek() != '}') {
          pos_ = save;
          return;
        }
        ++pos_;
        if (mx >= 0 && mx < mn) return Fail("bad repeat {n,m} with m < n");
      } else {
        return;
      }
      if (quantified) {
        pos_ = at;
        return Fail("nothing to repeat (a quantifier after a quantifier)");
      }
      quantified = true;
      if (atom.kind == PNode::kBol || atom.kind == PNode::kEol) return Fail("quantified anchor");
      if (Peek() == '?') ++pos_;  // lazy: same language
      else if (Peek() == '+') return Fail("possessive quantifier");
      PNode rep;
      rep.kind = PNode::kRep;
      rep.min = mn;
      rep.max = mx;
      rep.kids.push_back(std::move(atom));
      atom = std::move(rep);
    }
  }

  PNode Set(Ranges r) {
    PNode n;
    n.kind = PNode::kSet;
    n.set = std::move(r);
    return n;
  }

  int Hex(int digits) {
    int v = 0;
    for (int i = 0; i < digits; ++i) {
      uint32_t c = Peek();
      int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) {
        Fail("bad hex escape");
        return 0;
      }
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  // \p{...} or \P{...} (ECMA-262 with the u flag: General_Category and
  // Script values, gc=/sc= forms; automaton/unicode_property.h, whose loose
  // matching accepts more spellings than ECMA's exact names), pos_ after the
  // 'p' or 'P'.
  Ranges Property(bool negate) {
    property_escape_ = true;
    if (Peek() != '{') {
      Fail("\\p needs {Name}");
      return {};
    }
    std::string expr;
    size_t i = pos_ + 1;
    for (; i < cps_.size() && cps_[i] != '}'; ++i) {
      if (cps_[i] >= 0x80) break;
      expr.push_back(static_cast<char>(cps_[i]));
    }
    if (i >= cps_.size() || cps_[i] != '}') {
      Fail("bad \\p{...} escape");
      return {};
    }
    bool negated = false;
    auto ranges = unicode::PropertyRanges(expr, &negated);
    if (!ranges.ok()) {
      Fail(std::string(ranges.status().message()));
      return {};
    }
    pos_ = i + 1;
    return negate != negated ? Complement(*ranges) : *ranges;
  }

  // After a backslash. in_class: inside [...]. Returns the set; *anchor set
  // to kBol/kEol for \A, \Z.
  Ranges Escape(bool in_class, PNode::Kind* anchor) {
    if (pos_ >= cps_.size()) {
      Fail("trailing backslash");
      return {};
    }
    uint32_t c = cps_[pos_++];
    property_escape_ = false;
    switch (c) {
      case 'd': return DigitRanges();
      case 'D': return Complement(DigitRanges());
      case 'w': return WordRanges();
      case 'W': return Complement(WordRanges());
      case 's': return SpaceRanges();
      case 'S': return Complement(SpaceRanges());
      case 'n': return {{'\n', '\n'}};
      case 'r': return {{'\r', '\r'}};
      case 't': return {{'\t', '\t'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        Fail("word boundary \\b");
        return {};
      case 'B': Fail("word boundary \\B"); return {};
      case 'A':
        if (!in_class && anchor) {
          *anchor = PNode::kBol;
          return {};
        }
        break;
      case 'Z': case 'z':
        if (!in_class && anchor) {
          *anchor = PNode::kEol;
          return {};
        }
        break;
      case 'x': {
        int v = Hex(2);
        return {{static_cast<uint32_t>(v), static_cast<uint32_t>(v)}};
      }
      case 'u': {
        if (Peek() == '{') {
          ++pos_;
          uint32_t v = 0;
          while (!AtEnd() && Peek() != '}') v = v * 16 + Hex(1);
          ++pos_;
          if (v > kMaxCp) Fail("bad \\u{...} escape");
          return {{v, v}};
        }
        uint32_t v = Hex(4);
        // A surrogate pair written as two escapes.
        if (v >= 0xD800 && v <= 0xDBFF && Peek() == '\\' && Peek(1) == 'u') {
          size_t save = pos_;
          pos_ += 2;
          uint32_t lo = Hex(4);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            uint32_t cp = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            return {{cp, cp}};
          }
          pos_ = save;
        }
        return {{v, v}};
      }
      case 'c': {
        uint32_t l = Peek();
        ++pos_;
        return {{l % 32, l % 32}};
      }
      case 'p': case 'P': return Property(c == 'P');
      case 'k': Fail("backreference \\k"); return {};
      default:
        if (c >= '1' && c <= '9') {
          Fail("backreference");
          return {};
        }
    }
    return {{c, c}};
  }

  PNode ParseClass() {
    bool negate = false;
    if (Peek() == '^') {
      negate = true;
      ++pos_;
    }
    Ranges r;
    bool first = true;
    while (true) {
      if (pos_ >= cps_.size()) {
        Fail("missing ]");
        return {};
      }
      uint32_t c = Peek();
      if (c == ']' && !first) break;
      if (c == ']' && first) {
        // "[]" (ECMA: empty) or "[]...]" (Python: literal); take Python's view
        // only when another ']' follows.
        bool more = false;
        for (size_t k = pos_ + 1; k < cps_.size(); ++k)
          if (cps_[k] == ']') more = true;
        if (!more) break;
      }
      first = false;
      Ranges item;
      bool single = true;
      uint32_t lo = 0;
      ++pos_;
      if (c == '\\') {
        item = Escape(true, nullptr);
        if (!error_.empty()) return {};
        single = !property_escape_ && item.size() == 1 && item[0].first == item[0].second;
        lo = single ? item[0].first : 0;
      } else if (c == '[' && Peek() == ':') {
        Fail("POSIX class [:...:]");
        return {};
      } else {
        lo = c;
        item = {{c, c}};
      }
      if (single && Peek() == '-' && Peek(1) != ']' && pos_ + 1 < cps_.size()) {
        ++pos_;
        uint32_t hc = Peek();
        ++pos_;
        uint32_t hi = hc;
        if (hc == '\\') {
          Ranges h = Escape(true, nullptr);
          if (!error_.empty()) return {};
          if (property_escape_ || h.size() != 1 || h[0].first != h[0].second) {
            Fail("bad class range");
            return {};
          }
          hi = h[0].first;
        }
        if (hi < lo) {
          Fail("bad class range");
          return {};
        }
        item = {{lo, hi}};
      }
      for (auto& x : item) r.push_back(x);
    }
    ++pos_;  // ']'
    r = Normalize(r);
    return Set(negate ? Complement(r) : r);
  }

  PNode ParseAtom() {
    uint32_t c = Peek();
    ++pos_;
    switch (c) {
      case '^': { PNode n; n.kind = PNode::kBol; return n; }
      case '$': { PNode n; n.kind = PNode::kEol; return n; }
      case '.': return Set(Complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
      case '[': return ParseClass();
      case '(': {
        const size_t group_start = pos_ - 1;
        if (Peek() == '?') {
          uint32_t k = Peek(1);
          if (k == ':') {
            pos_ += 2;
          } else if (k == 'P' && Peek(2) == '<') {
            pos_ += 3;
            while (!AtEnd() && Peek() != '>') ++pos_;
            ++pos_;
          } else if (k == '<' && Peek(2) != '=' && Peek(2) != '!') {
            pos_ += 2;
            while (!AtEnd() && Peek() != '>') ++pos_;
            ++pos_;
          } else if (k == '=' || k == '!' || k == '<') {
            Fail("lookaround assertion");
            return {};
          } else {
            Fail("inline flags or unsupported group (?");
            return {};
          }
        }
        // Every walk over the tree (Emit, StripStart, copies) recurses once
        // per level: bound the depth, as the regex parser does.
        if (++depth_ > max_nesting_) {
          pos_ = group_start;
          Fail(absl::StrCat("groups nested too deeply (more than ", max_nesting_,
                            " levels: max_pattern_nesting, maskd --max_pattern_nesting)"));
          return {};
        }
        PNode inner = ParseAlt();
        --depth_;
        if (!error_.empty()) return {};
        if (Peek() != ')' || pos_ >= cps_.size()) {
          Fail("missing )");
          return {};
        }
        ++pos_;
        return inner;
      }
      case ')': Fail("unbalanced )"); return {};
      case '*': case '+': case '?': Fail("nothing to repeat"); return {};
      case '\\': {
        PNode::Kind anchor = PNode::kEmpty;
        Ranges r = Escape(false, &anchor);
        if (anchor != PNode::kEmpty) {
          PNode n;
          n.kind = anchor;
          return n;
        }
        return Set(std::move(r));
      }
      default: return Set({{c, c}});
    }
  }

  const int max_nesting_;
  std::vector<uint32_t> cps_;
  std::vector<size_t> byte_at_;  // byte offset of each codepoint, then the size
  size_t pos_ = 0;
  bool property_escape_ = false;  // the last escape parsed was \p or \P
  int depth_ = 0;
  std::string error_;
};

bool StripStart(PNode& n) {
  switch (n.kind) {
    case PNode::kBol: n = PNode{}; return true;
    case PNode::kCat: return !n.kids.empty() && StripStart(n.kids[0]);
    case PNode::kAlt: {
      for (auto& k : n.kids) {
        PNode copy = k;
        if (!StripStart(copy)) return false;
      }
      for (auto& k : n.kids) StripStart(k);
      return true;
    }
    default: return false;
  }
}

bool StripEnd(PNode& n) {
  switch (n.kind) {
    case PNode::kEol: n = PNode{}; return true;
    case PNode::kCat: return !n.kids.empty() && StripEnd(n.kids.back());
    case PNode::kAlt: {
      for (auto& k : n.kids) {
        PNode copy = k;
        if (!StripEnd(copy)) return false;
      }
      for (auto& k : n.kids) StripEnd(k);
      return true;
    }
    default: return false;
  }
}

// Emits the node; nullopt when its language is empty.
absl::StatusOr<std::optional<std::string>> Emit(const PNode& n) {
  switch (n.kind) {
    case PNode::kEmpty: return std::string();
    case PNode::kBol: case PNode::kEol:
      return absl::InvalidArgumentError("anchor ^ or $ inside the pattern");
    case PNode::kSet: {
      std::string s = EncodeSet(n.set);
      if (s.empty()) return std::optional<std::string>();
      return s;
    }
    case PNode::kCat: {
      std::string out;
      for (auto& k : n.kids) {
        auto r = Emit(k);
        if (!r.ok()) return r.status();
        if (!*r) return std::optional<std::string>();
        const std::string& s = **r;
        if (k.kind == PNode::kAlt && s.size() > 0) out += "(?:" + s + ")";
        else out += s;
      }
      return out;
    }
    case PNode::kAlt: {
      std::vector<std::string> parts;
      for (auto& k : n.kids) {
        auto r = Emit(k);
        if (!r.ok()) return r.status();
        if (*r) parts.push_back(**r);
      }
      if (parts.empty()) return std::optional<std::string>();
      return absl::StrJoin(parts, "|");
    }
    case PNode::kRep: {
      auto r = Emit(n.kids[0]);
      if (!r.ok()) return r.status();
      if (!*r) {
        if (n.min == 0) return std::string();
        return std::optional<std::string>();
      }
      if ((*r)->empty()) return std::string();
      if (n.min > 1000) return absl::InvalidArgumentError("repeat count above 1000");
      std::string q;
      int mx = n.max > 1000 ? -1 : n.max;
      if (n.min == 0 && mx == -1) q = "*";
      else if (n.min == 1 && mx == -1) q = "+";
      else if (n.min == 0 && mx == 1) q = "?";
      else if (mx == -1) q = absl::StrCat("{", n.min, ",}");
      else if (mx == n.min) q = absl::StrCat("{", n.min, "}");
      else q = absl::StrCat("{", n.min, ",", mx, "}");
      if (n.min == 1 && mx == 1) q = "";
      return absl::StrCat("(?:", **r, ")", q);
    }
  }
  return std::string();
}

}  // namespace

const std::string& JsonCharRegex() {
  static const std::string* s = new std::string(
      "(?:[^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})");
  return *s;
}

namespace {

// Decodes UTF-8 (assumed valid, as nlohmann::json produces it).
std::vector<uint32_t> DecodeUtf8(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

// A trie over decoded characters (codepoints).
struct CpTrie {
  std::map<uint32_t, CpTrie> kids;
  bool terminal = false;
};

char ShortEscape(uint32_t cp) {
  switch (cp) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 0x08: return 'b';
    case 0x0C: return 'f';
    case '\n': return 'n';
    case '\r': return 'r';
    case '\t': return 't';
    default: return 0;
  }
}

// Regex for one \uXXXX code `v` (both letter cases), digits only.
std::string HexCode(uint32_t v) { return HexRange(v, v); }

// Regex for 4-hex-digit codes not in `codes` (both letter cases); "" when
// every code is in the set (impossible for the small sets used here).
std::string HexComplement(const std::set<uint32_t>& codes) {
  Ranges used;
  for (uint32_t c : codes) used.emplace_back(c, c);
  std::vector<std::string> alts;
  for (auto& [lo, hi] : Complement(Normalize(used))) {
    if (lo > 0xFFFF) break;
    alts.push_back(HexRange(lo, std::min<uint32_t>(hi, 0xFFFF)));
  }
  if (alts.size() == 1) return alts[0];
  return "(?:" + absl::StrJoin(alts, "|") + ")";
}

// Strings (as sequences of JSON units: a raw character, a short escape or a
// \uXXXX escape) that, from trie node `n`, do not spell one of its words.
// Every spelling of a character leads to the same child, so a string is
// rejected exactly when it decodes to an excluded word.
std::string CompNode(const CpTrie& n) {
  const std::string any = JsonCharRegex() + "*";
  std::vector<std::string> alts;
  // First units that start no spelling of a child: any continuation.
  Ranges raw = {{0x20, kMaxCp}};
  raw = Minus(raw, '"', '"');
  raw = Minus(raw, '\\', '\\');
  raw = Minus(raw, 0xD800, 0xDFFF);
  std::string short_free = "\"\\/bfnrt";
  std::set<uint32_t> u_used;
  std::map<uint32_t, std::vector<std::pair<uint32_t, const CpTrie*>>> astral;  // high -> (low, kid)
  for (auto& [cp, kid] : n.kids) {
    if (cp >= 0x20 && cp != '"' && cp != '\\') raw = Minus(raw, cp, cp);
    if (char e = ShortEscape(cp)) short_free.erase(short_free.find(e), 1);
    if (cp < 0x10000) {
      u_used.insert(cp);
    } else {
      uint32_t v = cp - 0x10000;
      uint32_t hi = 0xD800 + (v >> 10), lo = 0xDC00 + (v & 0x3FF);
      u_used.insert(hi);
      astral[hi].emplace_back(lo, &kid);
    }
  }
  if (!raw.empty()) alts.push_back(ClassOf(raw) + any);
  if (!short_free.empty()) {
    std::string cls;
    for (char c : short_free) cls += c == '\\' ? std::string("\\\\") : std::string(1, c);
    alts.push_back("\\\\[" + cls + "]" + any);
  }
  alts.push_back("\\\\u" + HexComplement(u_used) + any);
  // Each child: every spelling, then the rest of the word's complement.
  for (auto& [cp, kid] : n.kids) {
    std::vector<std::string> sp;
    if (cp >= 0x20 && cp != '"' && cp != '\\') sp.push_back(RegexEscape(Utf8(cp)));
    if (char e = ShortEscape(cp)) sp.push_back("\\\\" + RegexEscape(std::string(1, e)));
    if (cp < 0x10000) sp.push_back("\\\\u" + HexCode(cp));
    std::string spell = sp.size() == 1 ? sp[0] : "(?:" + absl::StrJoin(sp, "|") + ")";
    alts.push_back(spell + CompNode(kid));
  }
  // Astral children written as surrogate pairs share their high half.
  for (auto& [hi, lows] : astral) {
    std::set<uint32_t> low_codes;
    std::vector<std::string> after;
    for (auto& [lo, kid] : lows) {
      low_codes.insert(lo);
      after.push_back("\\\\u" + HexCode(lo) + CompNode(*kid));
    }
    after.push_back("\\\\u" + HexComplement(low_codes) + any);
    after.push_back("(?:[^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt])" + any);
    alts.push_back("\\\\u" + HexCode(hi) + "(?:" + absl::StrJoin(after, "|") + ")?");
  }
  std::string r = "(?:" + absl::StrJoin(alts, "|") + ")";
  if (!n.terminal) r += "?";
  return r;
}

}  // namespace

std::string ExcludedStringsRegex(const std::vector<std::string>& words) {
  CpTrie root;
  for (auto& w : words) {
    CpTrie* n = &root;
    for (uint32_t cp : DecodeUtf8(w)) n = &n->kids[cp];
    n->terminal = true;
  }
  return CompNode(root);
}

// Folds length bounds into a pattern body made of sets and one repeated set.
bool ApplyLength(PNode& body, int64_t min_len, int64_t max_len) {
  std::vector<PNode*> items;
  if (body.kind == PNode::kCat) {
    for (auto& k : body.kids) items.push_back(&k);
  } else {
    items.push_back(&body);
  }
  int64_t fixed = 0;
  PNode* var = nullptr;
  for (PNode* k : items) {
    if (k->kind == PNode::kSet) {
      ++fixed;
    } else if (k->kind == PNode::kEmpty) {
    } else if (k->kind == PNode::kRep && k->kids[0].kind == PNode::kSet) {
      if (k->min == k->max) {
        fixed += k->min;
      } else {
        if (var) return false;
        var = k;
      }
    } else {
      return false;
    }
  }
  int64_t lo = std::max<int64_t>(0, min_len - fixed);
  int64_t hi = max_len < 0 ? -1 : max_len - fixed;
  if (!var) return fixed >= min_len && (max_len < 0 || fixed <= max_len);
  int64_t vmin = std::max<int64_t>(var->min, lo);
  int64_t vmax = var->max < 0 ? hi : (hi < 0 ? var->max : std::min<int64_t>(var->max, hi));
  if (vmax >= 0 && vmax < vmin) return false;
  if (vmin > 1000 || vmax > 1000) return false;
  var->min = static_cast<int>(vmin);
  var->max = static_cast<int>(vmax);
  return true;
}

absl::StatusOr<std::string> PatternToJsonStringRegex(std::string_view pattern, bool anchored,
                                                     bool* was_anchored,
                                                     std::pair<int64_t, int64_t> length,
                                                     bool* length_applied, int max_nesting) {
  if (length_applied) *length_applied = false;
  PatternParser parser(pattern, max_nesting);
  auto parsed = parser.Parse();
  if (!parsed.ok()) return parsed.status();
  PNode root = std::move(*parsed);
  std::vector<PNode> branches;
  if (root.kind == PNode::kAlt) {
    // Per-branch anchors only when the branches differ.
    PNode copy = root;
    bool s = StripStart(copy), e = StripEnd(copy);
    if (s || e) {
      branches.push_back(root);
    } else {
      branches = root.kids;
    }
  } else {
    branches.push_back(root);
  }
  const std::string any = JsonCharRegex() + "*";
  std::vector<std::string> parts;
  if (was_anchored) *was_anchored = true;
  for (auto& b : branches) {
    bool anchored_start = StripStart(b);
    bool anchored_end = StripEnd(b);
    if (was_anchored && !(anchored_start && anchored_end)) *was_anchored = false;
    if (anchored) anchored_start = anchored_end = true;
    if (length_applied && branches.size() == 1 && anchored_start && anchored_end) {
      *length_applied = ApplyLength(b, length.first, length.second);
    }
    auto r = Emit(b);
    if (!r.ok()) return r.status();
    if (!*r) continue;
    std::string body = **r;
    if (b.kind == PNode::kAlt) body = "(?:" + body + ")";
    parts.push_back(absl::StrCat(anchored_start ? "" : any, body, anchored_end ? "" : any));
  }
  if (parts.empty()) return absl::InvalidArgumentError("pattern matches no string");
  if (parts.size() == 1) return parts[0];
  return "(?:" + absl::StrJoin(parts, "|") + ")";
}

}  // namespace maskd::json_schema_internal
