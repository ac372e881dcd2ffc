#include "grammar/regex_rule_parser.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "automaton/regex_scan.h"

namespace maskd::grammar::regex_rule_parser {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class RuleParser {
 public:
  RuleParser(absl::string_view text, const RegexRule& rule, uint32_t num_rules,
             const GrammarLimits& limits, bool split_top)
      : p_(text), rule_(rule), num_rules_(num_rules), limits_(limits), split_top_(split_top) {}

  absl::StatusOr<Node> Parse() {
    auto n = ParseAlternate(0);
    if (!n.ok()) return n;
    if (pos_ < p_.size()) return Error(pos_, "unbalanced ')'");
    return n;
  }

 private:
  absl::Status Error(size_t at, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("regex rule '", rule_.name, "' at byte ", at, ": ", what));
  }

  absl::StatusOr<Node> ParseAlternate(uint32_t depth) {
    Node alt;
    alt.kind = Node::Kind::kAlternate;
    alt.begin = pos_;
    for (;;) {
      auto c = ParseConcat(depth);
      if (!c.ok()) return c;
      alt.has_ref |= c->has_ref;
      alt.kids.push_back(*std::move(c));
      if (pos_ < p_.size() && p_[pos_] == '|') {
        ++pos_;
        continue;
      }
      break;
    }
    alt.end = pos_;
    if (alt.has_ref && alt.kids.size() > 1) {
      // A flag group's scope runs across '|' to the group's end; lowered
      // branches would lose it.
      for (const Node& k : alt.kids) {
        if (k.has_flags) return Error(alt.begin, "an inline flag group beside a rule reference");
      }
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  absl::StatusOr<Node> ParseConcat(uint32_t depth) {
    Node cat;
    cat.kind = Node::Kind::kConcat;
    cat.begin = pos_;
    while (pos_ < p_.size() && p_[pos_] != '|' && p_[pos_] != ')') {
      auto item = ParseQuantified(depth);
      if (!item.ok()) return item;
      cat.has_ref |= item->has_ref;
      cat.has_flags |= item->flags_only;
      cat.kids.push_back(*std::move(item));
    }
    cat.end = pos_;
    if (cat.has_ref) {
      for (const Node& k : cat.kids) {
        if (k.flags_only) return Error(k.begin, "an inline flag group beside a rule reference");
      }
    }
    return cat;
  }

  // A quantifier at pos_: "*", "+", "?", "{m}", "{m,}", "{m,n}" (and a lazy
  // "?" after it, which changes no language). False, pos_ unchanged, if none.
  absl::StatusOr<bool> ParseQuantifier(uint32_t* min, uint32_t* max) {
    if (pos_ >= p_.size()) return false;
    const char c = p_[pos_];
    if (c == '*' || c == '+' || c == '?') {
      *min = c == '+' ? 1 : 0;
      *max = c == '?' ? 1 : kUnbounded;
      ++pos_;
    } else if (c == '{') {
      size_t i = pos_ + 1;
      auto number = [&](uint32_t* out) {
        const size_t start = i;
        uint64_t v = 0;
        while (i < p_.size() && IsDigit(p_[i]) && v <= limits_.max_repeat) v = v * 10 + (p_[i++] - '0');
        *out = static_cast<uint32_t>(std::min<uint64_t>(v, kUnbounded - 1));
        return i > start;
      };
      if (!number(min)) return false;  // a literal '{'
      *max = *min;
      if (i < p_.size() && p_[i] == ',') {
        ++i;
        if (!number(max)) *max = kUnbounded;
      }
      if (i >= p_.size() || p_[i] != '}') return false;
      if (*min > limits_.max_repeat || (*max != kUnbounded && *max > limits_.max_repeat)) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "regex rule '", rule_.name, "' at byte ", pos_, ": repeat bound above ",
            limits_.max_repeat, " (max_repeat)"));
      }
      if (*max < *min) return Error(pos_, "repeat {m,n} with n < m");
      pos_ = i + 1;
    } else {
      return false;
    }
    if (pos_ < p_.size() && p_[pos_] == '?') ++pos_;  // lazy
    return true;
  }

  absl::StatusOr<Node> ParseQuantified(uint32_t depth) {
    auto atom = ParseAtom(depth);
    if (!atom.ok()) return atom;
    Node n = *std::move(atom);
    for (;;) {
      const size_t at = pos_;
      uint32_t min = 0, max = 0;
      auto q = ParseQuantifier(&min, &max);
      if (!q.ok()) return q.status();
      if (!*q) break;
      if (n.flags_only) return Error(at, "a quantifier after an inline flag group");
      if (!n.has_ref && !(split_top_ && depth == 0)) {
        n.end = pos_;  // the quantifier joins the text
        continue;
      }
      Node r;
      r.kind = Node::Kind::kRepeat;
      r.begin = n.begin;
      r.end = pos_;
      r.min = min;
      r.max = max;
      r.has_ref = n.has_ref;
      r.kids.push_back(std::move(n));
      n = std::move(r);
    }
    return n;
  }

  absl::StatusOr<Node> ParseAtom(uint32_t depth) {
    Node n;
    n.begin = pos_;
    const char c = p_[pos_];
    if (c == '(') {
      if (depth >= limits_.max_nesting) {
        return absl::ResourceExhaustedError(absl::StrCat("regex rule '", rule_.name, "' at byte ", pos_,
                                                         ": groups nested more than ",
                                                         limits_.max_nesting, " deep (max_nesting)"));
      }
      if (p_.substr(pos_, 3) == "(?&") {
        size_t i = pos_ + 3;
        uint64_t k = 0;
        const size_t digits = i;
        while (i < p_.size() && IsDigit(p_[i]) && k < num_rules_) k = k * 10 + (p_[i++] - '0');
        if (i == digits || i >= p_.size() || p_[i] != ')') return Error(pos_, "bad rule reference");
        if (k >= num_rules_) {
          return Error(pos_, absl::StrCat("reference to rule ", k, " of ", num_rules_));
        }
        n.kind = Node::Kind::kRef;
        n.ref = static_cast<uint32_t>(k);
        n.has_ref = true;
        pos_ = i + 1;
        n.end = pos_;
        return n;
      }
      // "(", "(?:" or a flag group "(?flags:" / "(?flags)".
      size_t i = pos_ + 1;
      bool plain = true;
      if (i < p_.size() && p_[i] == '?') {
        ++i;
        while (i < p_.size() && p_[i] != ':' && p_[i] != ')' && i - pos_ < 16) ++i;
        if (i >= p_.size() || (p_[i] != ':' && p_[i] != ')')) return Error(pos_, "bad group");
        plain = i == pos_ + 2 && p_[i] == ':';
        if (p_[i] == ')') {
          pos_ = i + 1;
          n.end = pos_;
          n.flags_only = true;
          return n;
        }
        ++i;
      }
      pos_ = i;
      auto inner = ParseAlternate(depth + 1);
      if (!inner.ok()) return inner;
      if (pos_ >= p_.size() || p_[pos_] != ')') return Error(n.begin, "missing ')'");
      ++pos_;
      if (!inner->has_ref && !(split_top_ && depth == 0 && plain)) {
        n.end = pos_;
        return n;
      }
      if (!plain) return Error(n.begin, "an inline flag group around a rule reference");
      Node g = *std::move(inner);
      g.begin = n.begin;
      g.end = pos_;
      return g;
    }
    if (c == '[' || c == '\\') {
      const size_t end = RegexEscapeOrClassEnd(std::string_view(p_.data(), p_.size()), pos_);
      if (end == std::string_view::npos) {
        return Error(pos_, c == '[' ? "missing ']'" : "unterminated escape");
      }
      pos_ = end;
    } else {
      // One character, all of its UTF-8 bytes.
      const uint8_t lead = static_cast<uint8_t>(c);
      const size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
      pos_ = std::min(p_.size(), pos_ + len);
    }
    n.end = pos_;
    return n;
  }

  absl::string_view p_;
  const RegexRule& rule_;
  uint32_t num_rules_;
  const GrammarLimits& limits_;
  const bool split_top_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<Node> ParseRegexRule(absl::string_view text, const RegexRule& rule, uint32_t num_rules,
                                    const GrammarLimits& limits, bool split_top) {
  return RuleParser(text, rule, num_rules, limits, split_top).Parse();
}

}  // namespace maskd::grammar::regex_rule_parser
