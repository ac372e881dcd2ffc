#include "automaton/internal/regex_parser.h"

#include <algorithm>
#include <iterator>

#include "absl/base/attributes.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "automaton/unicode_property.h"

namespace maskd::automaton_internal {

namespace {

using Node = std::unique_ptr<RegexNode>;

Node MakeNode(RegexNode::Kind kind) {
  auto n = std::make_unique<RegexNode>();
  n->kind = kind;
  return n;
}

Node MakeSet(CodepointSet set) {
  Node n = MakeNode(RegexNode::Kind::kSet);
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

// The inline flags in force (see docs/regex.md).
struct Flags {
  bool fold_case = false;    // i: simple case folding
  bool dot_newline = false;  // s: '.' matches '\n' too
  bool extended = false;     // x: whitespace and #-comments outside classes ignored
};

class Parser {
 public:
  Parser(std::string_view pattern, const RegexLimits& limits) : p_(pattern), limits_(limits) {}

  absl::StatusOr<Node> Parse() {
    // A leading '^' and a trailing unescaped '$' anchor the whole text, which a
    // constraint always does: accept and drop them.
    size_t end = p_.size();
    if (pos_ < end && p_[pos_] == '^') ++pos_;
    if (end > pos_ && p_[end - 1] == '$' && !EscapedAt(end - 1)) --end;
    end_ = end;
    auto node = ParseAlternation(0);
    if (!node.ok()) return node.status();
    if (pos_ < end_) {
      // Only an unbalanced ')' stops the top-level alternation early.
      return Error(pos_, "unmatched ')'");
    }
    return node;
  }

 private:
  // Whether the byte at `i` is preceded by an odd number of backslashes.
  bool EscapedAt(size_t i) const {
    size_t n = 0;
    while (i > n && p_[i - 1 - n] == '\\') ++n;
    return n % 2 == 1;
  }

  // Out of line, taking a view: a literal message makes no std::string
  // temporary in the recursive parser's frames.
  ABSL_ATTRIBUTE_NOINLINE absl::Status Error(size_t offset, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("regex: ", what, " at byte offset ", offset));
  }

  bool AtEnd() const { return pos_ >= end_; }
  char Peek() const { return p_[pos_]; }

  // Decodes one UTF-8 codepoint at pos_.
  absl::StatusOr<uint32_t> NextCodepoint() {
    size_t start = pos_;
    uint8_t b0 = static_cast<uint8_t>(p_[pos_]);
    if (b0 < 0x80) {
      ++pos_;
      return b0;
    }
    int len = (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || start + len > end_) return Error(start, "invalid UTF-8 in pattern");
    uint32_t cp = b0 & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      uint8_t b = static_cast<uint8_t>(p_[start + i]);
      if ((b & 0xC0) != 0x80) return Error(start, "invalid UTF-8 in pattern");
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return Error(start, "invalid UTF-8 in pattern");
    }
    pos_ += len;
    return cp;
  }

  absl::StatusOr<Node> ParseAlternation(int depth) {
    if (depth > limits_.max_nesting) {
      return Error(pos_, absl::StrCat("groups nested too deeply (more than ", limits_.max_nesting,
                                      " levels: max_nesting, maskd --max_regex_nesting)"));
    }
    std::vector<Node> branches;
    while (true) {
      auto branch = ParseConcat(depth);
      if (!branch.ok()) return branch.status();
      branches.push_back(std::move(*branch));
      if (!AtEnd() && Peek() == '|') {
        ++pos_;
        continue;
      }
      break;
    }
    if (branches.size() == 1) return std::move(branches[0]);
    Node alt = MakeNode(RegexNode::Kind::kAlternate);
    alt->children = std::move(branches);
    return alt;
  }

  absl::StatusOr<Node> ParseConcat(int depth) {
    std::vector<Node> items;
    while (SkipIgnored(), !AtEnd() && Peek() != '|' && Peek() != ')') {
      auto item = ParseRepeat(depth);
      if (!item.ok()) return item.status();
      if (*item) items.push_back(std::move(*item));
    }
    if (items.empty()) return MakeNode(RegexNode::Kind::kEmpty);
    if (items.size() == 1) return std::move(items[0]);
    Node cat = MakeNode(RegexNode::Kind::kConcat);
    cat->children = std::move(items);
    return cat;
  }

  // Parses "{n}", "{n,}", "{n,m}" at pos_. Returns false (pos_ unchanged) when
  // the text is not a quantifier, in which case '{' is a literal (as in Python).
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<bool> ParseBraces(uint32_t* min, uint32_t* max) {
    size_t start = pos_;
    size_t i = pos_ + 1;
    auto number = [&](uint64_t* out) {
      size_t s = i;
      uint64_t v = 0;
      while (i < end_ && p_[i] >= '0' && p_[i] <= '9') {
        v = v * 10 + (p_[i] - '0');
        if (v > 0xFFFFFFFFull) v = 0xFFFFFFFFull;
        ++i;
      }
      *out = v;
      return i > s;
    };
    uint64_t lo = 0, hi = 0;
    bool has_lo = number(&lo);
    bool has_hi = false;
    bool comma = false;
    if (i < end_ && p_[i] == ',') {
      comma = true;
      ++i;
      has_hi = number(&hi);
    }
    if (i >= end_ || p_[i] != '}') return false;
    if (!has_lo && !comma) return false;  // "{}" is a literal
    if (!has_lo) lo = 0;                  // "{,m}" as Python: 0 to m
    ++i;
    if (!comma) hi = lo;
    if (comma && !has_hi) hi = RegexNode::kUnbounded;
    if (lo > limits_.max_repeat || (hi != RegexNode::kUnbounded && hi > limits_.max_repeat)) {
      return absl::ResourceExhaustedError(absl::StrCat("regex: repeat count exceeds the limit of ",
                                                       limits_.max_repeat, " at byte offset ", start));
    }
    if (hi != RegexNode::kUnbounded && hi < lo) return Error(start, "repeat {n,m} with m < n");
    *min = static_cast<uint32_t>(lo);
    *max = static_cast<uint32_t>(hi);
    pos_ = i;
    return true;
  }

  absl::StatusOr<Node> ParseRepeat(int depth) {
    size_t atom_start = pos_;
    auto atom = ParseAtom(depth);
    if (!atom.ok()) return atom.status();
    Node node = std::move(*atom);
    if (node) seen_atom_ = true;
    bool quantified = false;
    while (SkipIgnored(), !AtEnd()) {
      char c = Peek();
      uint32_t min = 0, max = 0;
      size_t q = pos_;
      if (c == '*') {
        min = 0, max = RegexNode::kUnbounded, ++pos_;
      } else if (c == '+') {
        min = 1, max = RegexNode::kUnbounded, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{') {
        auto is_q = ParseBraces(&min, &max);
        if (!is_q.ok()) return is_q.status();
        if (!*is_q) break;
      } else {
        break;
      }
      if (!node) return Error(q, "quantifier with nothing to repeat");
      if (quantified) return Error(q, "multiple repeat (possessive quantifiers are not supported)");
      quantified = true;
      // A lazy quantifier matches the same language.
      if (!AtEnd() && Peek() == '?') ++pos_;
      if (!AtEnd() && Peek() == '+') {
        return Error(pos_, "possessive quantifier is not supported");
      }
      Node rep = MakeNode(RegexNode::Kind::kRepeat);
      rep->min = min;
      rep->max = max;
      rep->children.push_back(std::move(node));
      node = std::move(rep);
    }
    (void)atom_start;
    return node;
  }

  // Returns null for constructs that match the empty string and add nothing
  // (comments).
  absl::StatusOr<Node> ParseAtom(int depth) {
    if (Peek() != '(') return ParseLeaf(depth == 0);
    return ParseGroup(depth);
  }

  // In extended mode (x), skips whitespace and comments from '#' to the end of
  // the line.
  void SkipIgnored() {
    while (flags_.extended && !AtEnd()) {
      char c = Peek();
      if (c == ' ' || (c >= '\t' && c <= '\r')) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  // `s` closed under case-insensitive equality when the i flag is on.
  CodepointSet Folded(CodepointSet s) const {
    if (!flags_.fold_case) return s;
    unicode::CodepointRanges variants;
    unicode::AppendCaseVariants(s.ranges(), &variants);
    if (!variants.empty()) s.AddRanges(variants);
    return s;
  }

  // A kSet node, counting its ranges against max_set_ranges unless another
  // node shares them (sets of a few ranges are bounded by the pattern's length).
  absl::StatusOr<Node> SetNode(size_t start, CodepointSet set) {
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

  // A class item: `positive` (folded under i), complemented when `negated`.
  CodepointSet ItemSet(CodepointSet positive, bool negated) const {
    CodepointSet s = Folded(std::move(positive));
    return negated ? s.Complement() : s;
  }

  // An atom other than a group: the recursion's frames stay small (see
  // kMaxRegexNesting).
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<Node> ParseLeaf(bool top_level) {
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
        return Node(nullptr);
      case '$': {
        // Before trailing whitespace or comments of extended mode: still the end.
        ++pos_;
        SkipIgnored();
        if (!top_level || !AtEnd()) {
          return Error(start, "'$' is only supported at the end of the pattern");
        }
        return Node(nullptr);
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

  absl::StatusOr<Node> ParseGroup(int depth) {
    size_t start = pos_;
    const Flags outer = flags_;
    auto open = ParseGroupOpen();
    if (!open.ok()) return open.status();
    if (!*open) return Node(nullptr);  // a comment or (?flags)
    auto inner = ParseAlternation(depth + 1);
    if (!inner.ok()) return inner.status();
    if (AtEnd() || Peek() != ')') return Error(start, "missing ')'");
    ++pos_;
    flags_ = outer;  // flags set inside the group end with it
    return inner;
  }

  // Parses the flags of "(?flags)" or "(?flags:" with pos_ after "(?",
  // setting flags_; true for the scoped form (pos_ after ':'), false for the
  // bare one (pos_ after ')'), which sets the flags for the rest of the
  // enclosing group.
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<bool> ParseFlags(size_t start) {
    Flags f = flags_;
    bool minus = false, any = false;
    while (true) {
      if (AtEnd()) return Error(start, "missing ')' after inline flags");
      char c = Peek();
      ++pos_;
      if (c == ')' || c == ':') {
        if (minus && !any) return Error(start, "inline flags: '-' with no flag after it");
        if (c == ')' && !any && !minus) return Error(start, "empty inline flags '(?)'");
        flags_ = f;
        return c == ':';
      }
      if (c == '-') {
        if (minus) return Error(start, "inline flags: '-' twice");
        minus = true;
        any = false;
        continue;
      }
      any = true;
      switch (c) {
        case 'i': f.fold_case = !minus; break;
        case 's': f.dot_newline = !minus; break;
        case 'x': f.extended = !minus; break;
        case 'm':  // ^ and $ are only accepted at the ends of a whole-text match
        case 'U':  // greedy and lazy repeats describe the same language
          break;
        case 'u':
          if (minus) return Error(start, "inline flag -u (byte-oriented matching) is not supported");
          break;
        case 'a': return Error(start, "inline flag a (ASCII-only case folding) is not supported");
        case 'L': return Error(start, "inline flag L (locale) is not supported");
        default:
          if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            return Error(start, absl::StrCat("unknown inline flag '", std::string(1, c), "'"));
          }
          return Error(start, absl::StrCat("unsupported group syntax '(?", std::string(1, c), "'"));
      }
    }
  }

  // Consumes '(' and what follows it up to the group's body; false for a
  // whole (?#comment) or (?flags).
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<bool> ParseGroupOpen() {
    size_t start = pos_;
    ++pos_;  // '('
    auto starts = [&](std::string_view s) { return p_.substr(pos_, s.size()) == s; };
    if (starts("?")) {
      if (starts("?:")) {
        pos_ += 2;
      } else if (starts("?P<") || starts("?<") ) {
        if (starts("?<=") || starts("?<!")) return Error(start, "lookbehind is not supported");
        size_t close = p_.find('>', pos_);
        if (close == std::string_view::npos || close >= end_) return Error(start, "unterminated group name");
        pos_ = close + 1;
      } else if (starts("?P=")) {
        return Error(start, "backreference is not supported");
      } else if (starts("?=") || starts("?!")) {
        return Error(start, "lookahead is not supported");
      } else if (starts("?#")) {
        size_t close = p_.find(')', pos_);
        if (close == std::string_view::npos || close >= end_) return Error(start, "unterminated comment");
        pos_ = close + 1;
        return false;
      } else if (starts("?(")) {
        return Error(start, "conditional group is not supported");
      } else {
        ++pos_;  // '?'
        return ParseFlags(start);
      }
    }
    return true;
  }

  // Parses \p{...}, \P{...} (`negate`), \pL or \PL with pos_ after the 'p'
  // or 'P' (at `start`, the backslash): the class folded under i, then
  // complemented for \P or \p{^..}. Sets escape_is_class_.
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<CodepointSet> ParseProperty(size_t start, bool negate) {
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

  // Parses an escape at pos_ ('\\'): the codepoints of the escape or, when
  // `*negated` is set on return (\D \W \S), of its complement; for \p and \P
  // (escape_is_class_ set on return) the class itself, folded and negated as
  // it must be. In a class, \b is a backspace.
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<CodepointSet> ParseEscape(bool in_class, bool* negated) {
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

  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<CodepointSet> ParseClass() {
    size_t start = pos_;
    ++pos_;  // '['
    bool negate = false;
    if (!AtEnd() && Peek() == '^') {
      negate = true;
      ++pos_;
    }
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
      CodepointSet item;
      if (lo < 0xD800) item.AddRange(lo, std::min<uint32_t>(hi, 0xD7FF));
      if (hi > 0xDFFF) item.AddRange(std::max<uint32_t>(lo, 0xE000), hi);
      set.Add(Folded(std::move(item)));
    }
    // Under i the items were folded one by one: [^k] excludes K and U+212A.
    return negate ? set.Complement() : set;
  }

  std::string_view p_;
  const RegexLimits& limits_;
  size_t pos_ = 0;
  size_t end_ = 0;
  Flags flags_;
  bool seen_atom_ = false;  // an atom was parsed (a later '^' is not at the start)
  bool escape_is_class_ = false;  // the last escape parsed was \p or \P
  // Sets by source: "p" or "P", "i" or "-" and a property name; "[", "i" or
  // "-" and a whole class.
  absl::flat_hash_map<std::string, CodepointSet> set_cache_;
  absl::flat_hash_set<const void*> counted_sets_;  // CodepointSet::storage() counted in set_ranges_
  size_t set_ranges_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RegexNode>> ParseRegexTree(std::string_view pattern,
                                                          const RegexLimits& limits) {
  Parser parser(pattern, limits);
  return parser.Parse();
}

}  // namespace maskd::automaton_internal
