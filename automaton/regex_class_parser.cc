// RegexTreeParser's leaves (internal/regex_tree_parser.h): literals, escapes,
// \p properties, bracket classes, and the sets they make under the i flag.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "automaton/internal/regex_tree_parser.h"
#include "automaton/unicode_property.h"

namespace maskd::automaton_internal {

namespace {

RegexNodePtr MakeSet(CodepointSet set) {
  RegexNodePtr n = MakeRegexNode(RegexNode::Kind::kSet);
  n->set = std::move(set);
  return n;
}

CodepointSet Single(uint32_t cp) {
  CodepointSet s;
  s.AddRange(cp, cp);
  return s;
}

// ASCII semantics for the shorthand classes, as RE2 and JavaScript (see docs/regex.md).
CodepointSet DigitSet() {
  CodepointSet s;
  s.AddRange('0', '9');
  return s;
}
CodepointSet WordSet() {
  CodepointSet s;
  s.AddRange('0', '9');
  s.AddRange('A', 'Z');
  s.AddRange('a', 'z');
  s.AddRange('_', '_');
  return s;
}
CodepointSet SpaceSet() {
  CodepointSet s;
  s.AddRange('\t', '\r');  // \t \n \v \f \r
  s.AddRange(' ', ' ');
  return s;
}
CodepointSet AnyButNewline() {
  return Single('\n').Complement();
}

}  // namespace

absl::StatusOr<RegexNodePtr> RegexTreeParser::ParseLeaf(bool top_level) {
  size_t start = pos_;
  char c = Peek();
  switch (c) {
    case '[': {
      auto set = ParseClass();
      if (!set.ok()) return set.status();
      // Repeats of one big class (under one i flag) share its ranges.
      if (set->ranges().size() <= 8) return SetNode(start, std::move(*set));
      std::string key = absl::StrCat(flags_.fold_case ? "[i" : "[-",
                                     absl::string_view(p_.data() + start, pos_ - start));
      auto it = set_cache_.try_emplace(std::move(key), std::move(*set)).first;
      return SetNode(start, it->second);
    }
    case '.':
      ++pos_;
      return SetNode(start, flags_.dot_newline ? CodepointSet().Complement() : AnyButNewline());
    case '^':
      // After leading flag groups or comments: still the start.
      if (!top_level || seen_atom_) {
        return Error(start, "'^' is only supported at the start of the pattern");
      }
      ++pos_;
      return RegexNodePtr(nullptr);
    case '$': {
      // Before trailing whitespace or comments of extended mode: still the end.
      ++pos_;
      SkipIgnored();
      if (!top_level || !AtEnd()) {
        return Error(start, "'$' is only supported at the end of the pattern");
      }
      return RegexNodePtr(nullptr);
    }
    case '*':
    case '+':
    case '?':
      return Error(start, "quantifier with nothing to repeat");
    case '\\': {
      bool negated = false;
      auto set = ParseEscape(/*in_class=*/false, &negated);
      if (!set.ok()) return set.status();
      if (escape_is_class_) return SetNode(start, std::move(*set));  // final already
      return SetNode(start, ItemSet(std::move(*set), negated));
    }
    default: {
      auto cp = NextCodepoint();
      if (!cp.ok()) return cp.status();
      return SetNode(start, Folded(Single(*cp)));
    }
  }
}

CodepointSet RegexTreeParser::Folded(CodepointSet s) const {
  if (!flags_.fold_case) return s;
  unicode::CodepointRanges variants;
  unicode::AppendCaseVariants(s.ranges(), &variants);
  if (!variants.empty()) s.AddRanges(variants);
  return s;
}

absl::StatusOr<RegexNodePtr> RegexTreeParser::SetNode(size_t start, CodepointSet set) {
  if (set.ranges().size() > 8 && counted_sets_.insert(set.storage()).second) {
    set_ranges_ += set.ranges().size();
    if (set_ranges_ > limits_.max_set_ranges) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "regex: character classes hold more than ", limits_.max_set_ranges,
          " codepoint ranges (max_set_ranges) at byte offset ", start));
    }
  }
  return MakeSet(std::move(set));
}

CodepointSet RegexTreeParser::ItemSet(CodepointSet positive, bool negated) const {
  CodepointSet s = Folded(std::move(positive));
  return negated ? s.Complement() : s;
}

absl::StatusOr<CodepointSet> RegexTreeParser::ParseProperty(size_t start, bool negate) {
  std::string_view expr;
  if (AtEnd()) return Error(start, "\\p needs a property name");
  if (Peek() == '{') {
    size_t close = p_.find('}', pos_);
    if (close == std::string_view::npos || close >= end_) {
      return Error(start, "missing '}' after \\p{");
    }
    expr = p_.substr(pos_ + 1, close - pos_ - 1);
    pos_ = close + 1;
  } else if ((Peek() >= 'A' && Peek() <= 'Z') || (Peek() >= 'a' && Peek() <= 'z')) {
    expr = p_.substr(pos_, 1);
    ++pos_;
  } else {
    return Error(start, "\\p needs a property name: \\p{Name} or a one-letter \\pL");
  }
  escape_is_class_ = true;
  // Repeats of one class share its ranges and cost one lookup.
  std::string key = absl::StrCat(negate ? "P" : "p", flags_.fold_case ? "i" : "-",
                                 absl::string_view(expr.data(), expr.size()));
  if (auto it = set_cache_.find(key); it != set_cache_.end()) return it->second;
  bool inner_negated = false;
  auto ranges = unicode::PropertyRanges(expr, &inner_negated);
  if (!ranges.ok()) return Error(start, ranges.status().message());
  CodepointSet set;
  set.AddRanges(*ranges);
  set = ItemSet(std::move(set), negate != inner_negated);
  set_cache_.emplace(std::move(key), set);
  return set;
}

absl::StatusOr<CodepointSet> RegexTreeParser::ParseEscape(bool in_class, bool* negated) {
  *negated = false;
  escape_is_class_ = false;
  size_t start = pos_;
  ++pos_;
  if (AtEnd()) return Error(start, "trailing backslash");
  char c = Peek();
  auto hex = [&](int digits) -> absl::StatusOr<uint32_t> {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= end_) return Error(start, "incomplete hex escape");
      char h = p_[pos_];
      int d = (h >= '0' && h <= '9') ? h - '0'
              : (h >= 'a' && h <= 'f') ? h - 'a' + 10
              : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                       : -1;
      if (d < 0) return Error(start, "invalid hex escape");
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  };
  auto codepoint = [&](absl::StatusOr<uint32_t> v) -> absl::StatusOr<CodepointSet> {
    if (!v.ok()) return v.status();
    if (*v > kMaxCodepoint) return Error(start, "escape beyond U+10FFFF");
    if (*v >= 0xD800 && *v <= 0xDFFF) return Error(start, "escape of a surrogate codepoint");
    return Single(*v);
  };
  ++pos_;
  switch (c) {
    case 'd': return DigitSet();
    case 'D': *negated = true; return DigitSet();
    case 'w': return WordSet();
    case 'W': *negated = true; return WordSet();
    case 's': return SpaceSet();
    case 'S': *negated = true; return SpaceSet();
    case 'n': return Single('\n');
    case 't': return Single('\t');
    case 'r': return Single('\r');
    case 'f': return Single('\f');
    case 'v': return Single('\v');
    case 'a': return Single('\a');
    case '0': {
      // Python: \0 plus up to two more octal digits is an octal escape.
      uint32_t v = 0;
      for (int i = 0; i < 2 && !AtEnd() && Peek() >= '0' && Peek() <= '7'; ++i) {
        v = v * 8 + (Peek() - '0');
        ++pos_;
      }
      return Single(v);
    }
    case 'x':
      if (!AtEnd() && Peek() == '{') {
        size_t close = p_.find('}', pos_);
        if (close == std::string_view::npos || close >= end_ || close == pos_ + 1 || close - pos_ > 9) {
          return Error(start, "invalid \\x{...} escape");
        }
        ++pos_;
        auto v = hex(static_cast<int>(close - pos_));
        ++pos_;
        return codepoint(v);
      }
      return codepoint(hex(2));
    case 'u': return codepoint(hex(4));
    case 'U': return codepoint(hex(8));
    case 'b':
      if (in_class) return Single('\b');
      return Error(start, "word boundary \\b is not supported");
    case 'B': return Error(start, "\\B is not supported");
    case 'A': case 'Z': case 'z': case 'G':
      return Error(start, absl::StrCat("anchor \\", std::string(1, c), " is not supported"));
    case 'p': case 'P': return ParseProperty(start, c == 'P');
    case 'N': return Error(start, "named characters \\N{...} are not supported");
    default: break;
  }
  if (c >= '1' && c <= '7' && pos_ + 1 < end_ && p_[pos_] >= '0' && p_[pos_] <= '7' &&
      p_[pos_ + 1] >= '0' && p_[pos_ + 1] <= '7') {
    // Python: three octal digits are an octal escape (at most \377).
    uint32_t v = (c - '0') * 64 + (p_[pos_] - '0') * 8 + (p_[pos_ + 1] - '0');
    if (v > 0377) return Error(start, "octal escape beyond \\377");
    pos_ += 2;
    return Single(v);
  }
  if (c >= '1' && c <= '9') return Error(start, "backreference is not supported");
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
    return Error(start, absl::StrCat("unknown escape \\", std::string(1, c)));
  }
  // Any other escaped character stands for itself.
  pos_ = start + 1;
  auto cp = NextCodepoint();
  if (!cp.ok()) return cp.status();
  return Single(*cp);
}

absl::StatusOr<CodepointSet> RegexTreeParser::ParseClass() {
  size_t start = pos_;
  ++pos_;  // '['
  bool negate = false;
  if (!AtEnd() && Peek() == '^') {
    negate = true;
    ++pos_;
  }
  // Single codepoints and ranges, gathered unsorted and folded together at
  // the end (folding distributes over union); whole classes (\d, \p{..})
  // merged as they come.
  absl::InlinedVector<std::pair<uint32_t, uint32_t>, 8> items;
  CodepointSet set;
  bool first = true;
  while (true) {
    if (AtEnd()) return Error(start, "missing ']'");
    char c = Peek();
    if (c == ']' && !first) {
      ++pos_;
      break;
    }
    if (c == '[' && pos_ + 1 < end_ && (p_[pos_ + 1] == ':' || p_[pos_ + 1] == '=' || p_[pos_ + 1] == '.')) {
      return Error(pos_, "POSIX character classes are not supported");
    }
    first = false;
    // One item: a codepoint, or an escape that may be a whole class.
    size_t item_start = pos_;
    uint32_t lo;
    if (c == '\\') {
      bool negated = false;
      auto esc = ParseEscape(/*in_class=*/true, &negated);
      if (!esc.ok()) return esc.status();
      const auto& r = esc->ranges();
      if (negated || escape_is_class_ || r.size() != 1 || r[0].first != r[0].second) {
        // \d, \w, \p{..} ... cannot start a range; \p{..} comes folded.
        set.Add(escape_is_class_ ? std::move(*esc) : ItemSet(std::move(*esc), negated));
        if (!AtEnd() && Peek() == '-' && pos_ + 1 < end_ && p_[pos_ + 1] != ']') {
          return Error(item_start, "bad character range");
        }
        continue;
      }
      lo = r[0].first;
    } else {
      auto cp = NextCodepoint();
      if (!cp.ok()) return cp.status();
      lo = *cp;
    }
    uint32_t hi = lo;
    if (!AtEnd() && Peek() == '-' && pos_ + 1 < end_ && p_[pos_ + 1] != ']') {
      ++pos_;
      if (Peek() == '\\') {
        bool negated = false;
        auto esc = ParseEscape(/*in_class=*/true, &negated);
        if (!esc.ok()) return esc.status();
        const auto& r = esc->ranges();
        if (negated || escape_is_class_ || r.size() != 1 || r[0].first != r[0].second) {
          return Error(item_start, "bad character range");
        }
        hi = r[0].first;
      } else {
        auto cp = NextCodepoint();
        if (!cp.ok()) return cp.status();
        hi = *cp;
      }
      if (hi < lo) return Error(item_start, "bad character range (end before start)");
    }
    // Ranges may span the surrogates; they cannot appear in UTF-8 text.
    if (lo < 0xD800) items.emplace_back(lo, std::min<uint32_t>(hi, 0xD7FF));
    if (hi > 0xDFFF) items.emplace_back(std::max<uint32_t>(lo, 0xE000), hi);
  }
  CodepointSet singles;
  singles.AddRanges(items);
  set.Add(Folded(std::move(singles)));
  // Under i the items were folded before the complement: [^k] excludes K and U+212A.
  return negate ? set.Complement() : set;
}

}  // namespace maskd::automaton_internal
