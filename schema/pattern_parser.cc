// The parser of JSON Schema `pattern`s (ECMA-262 syntax, with the u flag's
// \p{...} and \u{...}): a pattern's text to its tree (pattern_tree.h), every
// character set as a CodepointSet. Constructs that no regular language can
// express (backreferences, lookaround, word boundaries) are errors.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "automaton/codepoint_set.h"
#include "automaton/unicode_property.h"
#include "automaton/utf8.h"
#include "schema/internal/json_schema_internal.h"
#include "schema/internal/pattern_tree.h"

namespace maskd::json_schema_internal {
namespace {

// One codepoint as a set.
CodepointSet One(uint32_t cp) { return CodepointSet::Range(cp, cp); }

CodepointSet Of(absl::Span<const std::pair<uint32_t, uint32_t>> ranges) {
  CodepointSet set;
  set.AddRanges(ranges);
  return set;
}

// The ECMA-262 classes \d, \w and \s.
// Whether `set` is one codepoint.
bool IsOne(const CodepointSet& set) {
  return set.ranges().size() == 1 && set.ranges()[0].first == set.ranges()[0].second;
}

CodepointSet DigitRanges() { return CodepointSet::Range('0', '9'); }
CodepointSet WordRanges() { return Of({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}); }
CodepointSet SpaceRanges() {
  return Of({{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
          {0xFEFF, 0xFEFF}});
}

class PatternParser {
 public:
  PatternParser(std::string_view utf8, int max_nesting)
      : max_nesting_(std::clamp(max_nesting, 1, kMaxPatternNesting)) {
    for (size_t i = 0; i < utf8.size();) {
      byte_at_.push_back(i);
      std::optional<uint32_t> cp = DecodeUtf8(utf8, &i);
      cps_.push_back(cp ? *cp : static_cast<unsigned char>(utf8[i++]));
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

  PNode Set(CodepointSet r) {
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
  CodepointSet Property(bool negate) {
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
    CodepointSet set = Of(*ranges);
    return negate != negated ? set.Complement() : set;
  }

  // After a backslash. in_class: inside [...]. Returns the set; *anchor set
  // to kBol/kEol for \A, \Z.
  CodepointSet Escape(bool in_class, PNode::Kind* anchor) {
    if (pos_ >= cps_.size()) {
      Fail("trailing backslash");
      return {};
    }
    uint32_t c = cps_[pos_++];
    property_escape_ = false;
    switch (c) {
      case 'd': return DigitRanges();
      case 'D': return DigitRanges().Complement();
      case 'w': return WordRanges();
      case 'W': return WordRanges().Complement();
      case 's': return SpaceRanges();
      case 'S': return SpaceRanges().Complement();
      case 'n': return One('\n');
      case 'r': return One('\r');
      case 't': return One('\t');
      case 'f': return One('\f');
      case 'v': return One('\v');
      case '0': return One(0);
      case 'b':
        if (in_class) return One('\b');
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
        return One(static_cast<uint32_t>(v));
      }
      case 'u': {
        if (Peek() == '{') {
          ++pos_;
          uint32_t v = 0;
          while (!AtEnd() && Peek() != '}') v = v * 16 + Hex(1);
          ++pos_;
          if (v > kMaxCodepoint) {
            Fail("bad \\u{...} escape");
            return {};
          }
          return One(v);
        }
        uint32_t v = Hex(4);
        // A surrogate pair written as two escapes.
        if (v >= 0xD800 && v <= 0xDBFF && Peek() == '\\' && Peek(1) == 'u') {
          size_t save = pos_;
          pos_ += 2;
          uint32_t lo = Hex(4);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            uint32_t cp = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            return One(cp);
          }
          pos_ = save;
        }
        return One(v);
      }
      case 'c': {
        uint32_t l = Peek();
        ++pos_;
        return One(l % 32);
      }
      case 'p': case 'P': return Property(c == 'P');
      case 'k': Fail("backreference \\k"); return {};
      default:
        if (c >= '1' && c <= '9') {
          Fail("backreference");
          return {};
        }
    }
    return One(c);
  }

  PNode ParseClass() {
    bool negate = false;
    if (Peek() == '^') {
      negate = true;
      ++pos_;
    }
    CodepointSet r;
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
      CodepointSet item;
      bool single = true;
      uint32_t lo = 0;
      ++pos_;
      if (c == '\\') {
        item = Escape(true, nullptr);
        if (!error_.empty()) return {};
        single = !property_escape_ && IsOne(item);
        lo = single ? item.ranges()[0].first : 0;
      } else if (c == '[' && Peek() == ':') {
        Fail("POSIX class [:...:]");
        return {};
      } else {
        lo = c;
        item = One(c);
      }
      if (single && Peek() == '-' && Peek(1) != ']' && pos_ + 1 < cps_.size()) {
        ++pos_;
        uint32_t hc = Peek();
        ++pos_;
        uint32_t hi = hc;
        if (hc == '\\') {
          CodepointSet h = Escape(true, nullptr);
          if (!error_.empty()) return {};
          if (property_escape_ || !IsOne(h)) {
            Fail("bad class range");
            return {};
          }
          hi = h.ranges()[0].first;
        }
        if (hi < lo) {
          Fail("bad class range");
          return {};
        }
        item = CodepointSet::Range(lo, hi);
      }
      r.Add(item);
    }
    ++pos_;  // ']'
    return Set(negate ? r.Complement() : r);
  }

  PNode ParseAtom() {
    uint32_t c = Peek();
    ++pos_;
    switch (c) {
      case '^': { PNode n; n.kind = PNode::kBol; return n; }
      case '$': { PNode n; n.kind = PNode::kEol; return n; }
      case '.': return Set(Of({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}).Complement());
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
        CodepointSet r = Escape(false, &anchor);
        if (anchor != PNode::kEmpty) {
          PNode n;
          n.kind = anchor;
          return n;
        }
        return Set(std::move(r));
      }
      default: return Set(One(c));
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
}  // namespace

absl::StatusOr<PNode> ParsePattern(std::string_view utf8, int max_nesting) {
  PatternParser parser(utf8, max_nesting);
  return parser.Parse();
}

}  // namespace maskd::json_schema_internal
