#include "automaton/internal/regex_parser.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "automaton/internal/regex_tree_parser.h"
#include "automaton/utf8.h"

namespace maskd::automaton_internal {

absl::StatusOr<RegexNodePtr> RegexTreeParser::Parse() {
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

bool RegexTreeParser::EscapedAt(size_t i) const {
  size_t n = 0;
  while (i > n && p_[i - 1 - n] == '\\') ++n;
  return n % 2 == 1;
}

absl::Status RegexTreeParser::Error(size_t offset, absl::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat("regex: ", what, " at byte offset ", offset));
}

absl::StatusOr<uint32_t> RegexTreeParser::NextCodepoint() {
  const uint8_t b0 = static_cast<uint8_t>(p_[pos_]);
  if (b0 < 0x80) {
    ++pos_;
    return b0;
  }
  std::optional<uint32_t> cp = DecodeUtf8(p_.substr(0, end_), &pos_);
  if (!cp.has_value()) return Error(pos_, "invalid UTF-8 in pattern");
  return *cp;
}

absl::StatusOr<RegexNodePtr> RegexTreeParser::ParseAlternation(int depth) {
  if (depth > limits_.max_nesting) {
    return Error(pos_, absl::StrCat("groups nested too deeply (more than ", limits_.max_nesting,
                                    " levels: max_nesting, maskd --max_regex_nesting)"));
  }
  std::vector<RegexNodePtr> branches;
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
  RegexNodePtr alt = MakeRegexNode(RegexNode::Kind::kAlternate);
  alt->children = std::move(branches);
  return alt;
}

absl::StatusOr<RegexNodePtr> RegexTreeParser::ParseConcat(int depth) {
  std::vector<RegexNodePtr> items;
  while (SkipIgnored(), !AtEnd() && Peek() != '|' && Peek() != ')') {
    auto item = ParseRepeat(depth);
    if (!item.ok()) return item.status();
    if (*item) items.push_back(std::move(*item));
  }
  if (items.empty()) return MakeRegexNode(RegexNode::Kind::kEmpty);
  if (items.size() == 1) return std::move(items[0]);
  RegexNodePtr cat = MakeRegexNode(RegexNode::Kind::kConcat);
  cat->children = std::move(items);
  return cat;
}

absl::StatusOr<bool> RegexTreeParser::ParseBraces(uint32_t* min, uint32_t* max) {
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

absl::StatusOr<RegexNodePtr> RegexTreeParser::ParseRepeat(int depth) {
  size_t atom_start = pos_;
  auto atom = ParseAtom(depth);
  if (!atom.ok()) return atom.status();
  RegexNodePtr node = std::move(*atom);
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
    RegexNodePtr rep = MakeRegexNode(RegexNode::Kind::kRepeat);
    rep->min = min;
    rep->max = max;
    rep->children.push_back(std::move(node));
    node = std::move(rep);
  }
  (void)atom_start;
  return node;
}

absl::StatusOr<RegexNodePtr> RegexTreeParser::ParseAtom(int depth) {
  if (Peek() != '(') return ParseLeaf(depth == 0);
  return ParseGroup(depth);
}

void RegexTreeParser::SkipIgnored() {
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


absl::StatusOr<RegexNodePtr> RegexTreeParser::ParseGroup(int depth) {
  size_t start = pos_;
  const RegexFlags outer = flags_;
  auto open = ParseGroupOpen();
  if (!open.ok()) return open.status();
  if (!*open) return RegexNodePtr(nullptr);  // a comment or (?flags)
  auto inner = ParseAlternation(depth + 1);
  if (!inner.ok()) return inner.status();
  if (AtEnd() || Peek() != ')') return Error(start, "missing ')'");
  ++pos_;
  flags_ = outer;  // flags set inside the group end with it
  return inner;
}

absl::StatusOr<bool> RegexTreeParser::ParseFlags(size_t start) {
  RegexFlags f = flags_;
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

absl::StatusOr<bool> RegexTreeParser::ParseGroupOpen() {
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

absl::StatusOr<std::unique_ptr<RegexNode>> ParseRegexTree(std::string_view pattern,
                                                          const RegexLimits& limits) {
  RegexTreeParser parser(pattern, limits);
  return parser.Parse();
}

}  // namespace maskd::automaton_internal
