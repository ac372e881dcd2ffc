#include "grammar/regex_rules.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include "absl/strings/string_view.h"
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "automaton/regex_scan.h"
#include "grammar/regex_language.h"

namespace maskd::grammar {
namespace {

constexpr uint32_t kUnbounded = ~uint32_t{0};

// A regex rule's syntax tree, as far as references matter. A node without a
// reference is kept as its source text (`begin`, `end`), quantifiers included.
// When a reference-free text is parsed to be split (RuleParser's split_top),
// its top level is kept as structure too: quantifiers as kRepeat, a plain
// group as its contents (begin and end still on its parentheses).
struct Node {
  enum class Kind : uint8_t { kText, kRef, kConcat, kAlternate, kRepeat };
  Kind kind = Kind::kText;
  size_t begin = 0, end = 0;  // source bytes [begin, end)
  uint32_t ref = 0;           // kRef: the rule
  uint32_t min = 0, max = 0;  // kRepeat
  bool has_ref = false;
  bool flags_only = false;    // kText: a standalone "(?i)"-style flag group
  bool has_flags = false;     // kConcat: holds a flags_only item
  std::vector<Node> kids;
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class RuleParser {
 public:
  // split_top: keep the top level's structure (see Node).
  RuleParser(absl::string_view text, const RegexRule& rule, uint32_t num_rules,
             const GrammarLimits& limits, bool split_top = false)
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

// The literal a terminal's regex spells, if it is one: plain characters and
// escaped punctuation only.
std::optional<std::string> LiteralOf(absl::string_view regex) {
  std::string out;
  for (size_t i = 0; i < regex.size(); ++i) {
    const char c = regex[i];
    if (c == '\\') {
      if (i + 1 >= regex.size()) return std::nullopt;
      const char e = regex[++i];
      const bool punct = (e >= '!' && e <= '/') || (e >= ':' && e <= '@') || (e >= '[' && e <= '`') ||
                         (e >= '{' && e <= '~');
      if (!punct) return std::nullopt;
      out.push_back(e);
    } else if (absl::string_view("[](){}|*+?.^$").find(c) != absl::string_view::npos) {
      return std::nullopt;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

class Lowering {
 public:
  Lowering(const std::vector<RegexRule>& rules, const GrammarLimits& limits,
           const TerminalLimits& terminal)
      : rules_(rules), limits_(limits), terminal_(terminal) {}

  absl::StatusOr<Grammar> Run(uint32_t start) {
    size_t bytes = 0;
    for (const RegexRule& r : rules_) bytes += r.regex.size();
    if (bytes > limits_.max_text_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("regex rules are ", bytes,
                                                       " bytes, more than ", limits_.max_text_bytes,
                                                       " (max_text_bytes)"));
    }
    if (rules_.size() > limits_.max_rules) return TooManyRules();
    g_.rules.resize(rules_.size());
    for (size_t i = 0; i < rules_.size(); ++i) g_.rules[i].name = rules_[i].name;
    g_.start = start;
    for (size_t i = 0; i < rules_.size(); ++i) {
      current_ = static_cast<uint32_t>(i);
      RuleParser parser(rules_[i].regex, rules_[i], static_cast<uint32_t>(rules_.size()), limits_);
      auto tree = parser.Parse();
      if (!tree.ok()) return tree.status();
      auto alts = LowerAlternatives(*tree);
      if (!alts.ok()) return alts.status();
      for (const Sequence& seq : *alts) symbols_ += seq.size();
      g_.rules[i].alternatives = *std::move(alts);
    }
    if (symbols_ > limits_.max_symbols) {
      return absl::ResourceExhaustedError(absl::StrCat("grammar has ", symbols_,
                                                       " symbols, more than ", limits_.max_symbols,
                                                       " (max_symbols)"));
    }
    if (auto s = Normalize(&g_); !s.ok()) return s;
    return std::move(g_);
  }

 private:
  using Sequence = std::vector<Symbol>;

  absl::Status TooManyRules() const {
    return absl::ResourceExhaustedError(
        absl::StrCat("grammar needs more than ", limits_.max_rules, " rules (max_rules)"));
  }
  absl::string_view Text(const Node& n) const {
    return absl::string_view(rules_[current_].regex).substr(n.begin, n.end - n.begin);
  }

  absl::StatusOr<uint32_t> NewRule(std::vector<Sequence> alternatives) {
    if (g_.rules.size() >= limits_.max_rules) return TooManyRules();
    for (const Sequence& s : alternatives) symbols_ += s.size();
    Rule r;
    r.name = absl::StrCat(rules_[current_].name, "__", ++helpers_);
    r.alternatives = std::move(alternatives);
    g_.rules.push_back(std::move(r));
    return static_cast<uint32_t>(g_.rules.size() - 1);
  }

  // The terminal for `text` (a reference-free regex), made on first use:
  // its id, kNothing or kEmptyOnly; kOversized, the reason in *why, when it
  // is over terminal_.
  absl::StatusOr<int32_t> TerminalOf(absl::string_view text, absl::Status* why) {
    if (auto it = terminal_of_.find(text); it != terminal_of_.end()) return it->second;
    RegexLimits regex_limits = terminal_.regex;
    regex_limits.max_pattern_bytes = std::max<size_t>(regex_limits.max_pattern_bytes, text.size());
    auto re = Regex::Parse(std::string_view(text.data(), text.size()), regex_limits);
    if (!re.ok()) {
      absl::Status s(re.status().code(),
                     absl::StrCat("regex rule '", rules_[current_].name, "': ", re.status().message()));
      if (s.code() != absl::StatusCode::kResourceExhausted) return s;
      *why = std::move(s);
      return kOversized;
    }
    const RegexLanguage lang = AnalyzeRegex(re->root());
    int32_t id;
    if (!lang.any) {
      id = kNothing;
    } else if (!lang.non_empty) {
      id = kEmptyOnly;
    } else {
      // The DFA CompiledGrammar will build, built once here to learn that it
      // fits.
      auto dfa = Dfa::Compile(*re, terminal_.dfa);
      if (!dfa.ok()) {
        absl::Status s(dfa.status().code(), absl::StrCat("regex rule '", rules_[current_].name,
                                                         "': ", dfa.status().message()));
        if (s.code() != absl::StatusCode::kResourceExhausted) return s;
        *why = std::move(s);
        return kOversized;
      }
      if (g_.terminals.size() >= limits_.max_terminals) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "grammar needs more than ", limits_.max_terminals, " terminals (max_terminals)"));
      }
      Terminal t;
      t.regex = std::string(text);
      t.literal = LiteralOf(text);
      t.name = t.literal ? absl::StrCat("\"", *t.literal, "\"")
                         : absl::StrCat(rules_[current_].name, "#", g_.terminals.size());
      id = static_cast<int32_t>(g_.terminals.size());
      g_.terminals.push_back(std::move(t));
    }
    terminal_of_.emplace(std::string(text), id);
    return id;
  }

  // Appends symbols deriving exactly `text`'s language (a reference-free
  // regex) to `seq`: its terminal, nothing when it matches only the empty
  // string, a rule deriving nothing when it matches no string, rules over
  // smaller pieces when it is over terminal_.
  absl::Status AppendText(absl::string_view text, Sequence* seq) {
    if (auto it = split_of_.find(text); it != split_of_.end()) {
      seq->insert(seq->end(), it->second.begin(), it->second.end());
      return absl::OkStatus();
    }
    absl::Status why;
    auto id = TerminalOf(text, &why);
    if (!id.ok()) return id.status();
    if (*id == kOversized) {
      Sequence pieces;
      if (auto s = AppendSplit(text, why, &pieces); !s.ok()) return s;
      seq->insert(seq->end(), pieces.begin(), pieces.end());
      split_of_.emplace(std::string(text), std::move(pieces));
      return absl::OkStatus();
    }
    if (*id == kEmptyOnly) return absl::OkStatus();
    if (*id == kNothing) {
      if (nothing_rule_ == kNoRule) {
        auto r = NewRule({});
        if (!r.ok()) return r.status();
        nothing_rule_ = *r;
      }
      seq->push_back(Symbol::Rule(nothing_rule_));
      return absl::OkStatus();
    }
    seq->push_back(Symbol::Terminal(static_cast<uint32_t>(*id)));
    return absl::OkStatus();
  }

  // `text`, a reference-free regex over terminal_ for `why`, split at its top
  // level into rules over pieces that AppendText lowers in turn. Each piece is
  // a strict substring, so the recursion ends. `why` when there is no
  // operator to split at, or an inline flag group whose scope would be cut.
  absl::Status AppendSplit(absl::string_view text, const absl::Status& why, Sequence* seq) {
    RuleParser parser(text, rules_[current_], static_cast<uint32_t>(rules_.size()), limits_,
                      /*split_top=*/true);
    auto tree = parser.Parse();
    if (!tree.ok()) return why;
    return AppendSplitNode(text, *tree, why, seq);
  }

  absl::Status AppendSplitNode(absl::string_view text, const Node& n, const absl::Status& why,
                               Sequence* seq) {
    auto piece = [text](size_t begin, size_t end) { return text.substr(begin, end - begin); };
    switch (n.kind) {
      case Node::Kind::kAlternate: {
        for (const Node& k : n.kids) {
          if (k.has_flags) return why;
        }
        std::vector<Sequence> alts(n.kids.size());
        for (size_t i = 0; i < n.kids.size(); ++i) {
          if (auto s = AppendText(piece(n.kids[i].begin, n.kids[i].end), &alts[i]); !s.ok()) return s;
        }
        auto r = NewRule(std::move(alts));
        if (!r.ok()) return r.status();
        seq->push_back(Symbol::Rule(*r));
        return absl::OkStatus();
      }
      case Node::Kind::kConcat: {
        if (n.has_flags) return why;
        if (n.kids.empty()) return absl::OkStatus();
        if (n.kids.size() == 1) return AppendSplitNode(text, n.kids[0], why, seq);
        // Halves: a half that fits is one terminal, so a long run of small
        // items costs no symbol per item.
        const size_t mid = n.kids.size() / 2;
        if (auto s = AppendText(piece(n.kids[0].begin, n.kids[mid - 1].end), seq); !s.ok()) return s;
        return AppendText(piece(n.kids[mid].begin, n.kids.back().end), seq);
      }
      case Node::Kind::kRepeat: {
        Sequence x;
        if (auto s = AppendText(piece(n.kids[0].begin, n.kids[0].end), &x); !s.ok()) return s;
        return AppendCountedRepeat(std::move(x), n.min, n.max, seq);
      }
      case Node::Kind::kText:
        // A group's contents, parsed as nested: split again at their top.
        if (n.end - n.begin < text.size()) return AppendText(piece(n.begin, n.end), seq);
        break;
      case Node::Kind::kRef:
        break;
    }
    return why;
  }

  absl::StatusOr<std::vector<Sequence>> LowerAlternatives(const Node& n) {
    std::vector<Sequence> out;
    if (n.kind == Node::Kind::kAlternate && n.has_ref) {
      for (const Node& k : n.kids) {
        Sequence s;
        if (auto st = AppendSequence(k, &s); !st.ok()) return st;
        out.push_back(std::move(s));
      }
      return out;
    }
    Sequence s;
    if (auto st = AppendSequence(n, &s); !st.ok()) return st;
    out.push_back(std::move(s));
    return out;
  }

  // Appends symbols deriving exactly n's language to `seq`.
  absl::Status AppendSequence(const Node& n, Sequence* seq) {
    if (!n.has_ref) return AppendText(Text(n), seq);
    switch (n.kind) {
      case Node::Kind::kText:
        return AppendText(Text(n), seq);
      case Node::Kind::kRef:
        seq->push_back(Symbol::Rule(n.ref));
        return absl::OkStatus();
      case Node::Kind::kConcat:
        // Runs of reference-free items become one terminal (their texts
        // side by side are the regex of their concatenation).
        for (size_t i = 0; i < n.kids.size();) {
          if (n.kids[i].has_ref) {
            if (auto s = AppendSequence(n.kids[i++], seq); !s.ok()) return s;
            continue;
          }
          const size_t begin = n.kids[i].begin;
          size_t end = begin;
          while (i < n.kids.size() && !n.kids[i].has_ref) end = n.kids[i++].end;
          Node run;
          run.begin = begin;
          run.end = end;
          if (auto s = AppendText(Text(run), seq); !s.ok()) return s;
        }
        return absl::OkStatus();
      case Node::Kind::kAlternate: {
        auto alts = LowerAlternatives(n);
        if (!alts.ok()) return alts.status();
        auto r = NewRule(*std::move(alts));
        if (!r.ok()) return r.status();
        seq->push_back(Symbol::Rule(*r));
        return absl::OkStatus();
      }
      case Node::Kind::kRepeat:
        return AppendRepeat(n, seq);
    }
    return absl::OkStatus();
  }

  absl::Status AppendRepeat(const Node& n, Sequence* seq) {
    Sequence x;
    if (auto s = AppendSequence(n.kids[0], &x); !s.ok()) return s;
    return AppendCountedRepeat(std::move(x), n.min, n.max, seq);
  }

  // Appends X{min,max} (max kUnbounded for X{min,}), X being the sequence
  // `x`. With P_0 = X and P_{k+1} := P_k P_k (exactly 2^k copies):
  //  - X^min is the P_k of min's set bits side by side;
  //  - X{min,} is X^min H, H := ε | H X (left recursion: Earley completes it
  //    in constant work per copy);
  //  - X{0,r} with 2^k <= r < 2^(k+1) is R(r) := U_k | P_k R(r - 2^k),
  //    R(0) = ε, where U_0 = ε and U_{k+1} := U_k | P_k U_k (0 to 2^(k+1)-1
  //    copies).
  // Each count has one derivation, and a repeat costs O(log max) rules; a
  // chain of max-min nested optional copies would cost one rule per copy
  // (an array of up to 1000 objects: 1000 rules, of max_rules' 10000).
  absl::Status AppendCountedRepeat(Sequence x, uint32_t min, uint32_t max, Sequence* seq) {
    if (x.size() != 1) {
      auto r = NewRule({x});
      if (!r.ok()) return r.status();
      x = {Symbol::Rule(*r)};
    }
    std::vector<Symbol> power = {x[0]};  // power[k]: P_k
    auto power_of = [&](int k) -> absl::StatusOr<Symbol> {
      while (static_cast<int>(power.size()) <= k) {
        auto r = NewRule({{power.back(), power.back()}});
        if (!r.ok()) return r.status();
        power.push_back(Symbol::Rule(*r));
      }
      return power[k];
    };
    for (int k = 31; k >= 0; --k) {
      if (((min >> k) & 1) == 0) continue;
      auto p = power_of(k);
      if (!p.ok()) return p.status();
      seq->push_back(*p);
    }
    if (max == kUnbounded) {
      auto h = NewRule({});
      if (!h.ok()) return h.status();
      g_.rules[*h].alternatives = {{}, {Symbol::Rule(*h), x[0]}};
      symbols_ += 2;
      seq->push_back(Symbol::Rule(*h));
      return absl::OkStatus();
    }
    const uint32_t r = max - min;
    Sequence up_to;  // U_k, k the bit below: empty for U_0 = ε
    Sequence rest;   // R(r's bits below k)
    for (int k = 0; k < 32 && (r >> k) != 0; ++k) {
      auto p = power_of(k);
      if (!p.ok()) return p.status();
      if ((r >> k) & 1) {
        Sequence more = {*p};
        more.insert(more.end(), rest.begin(), rest.end());
        auto rule = NewRule({up_to, std::move(more)});
        if (!rule.ok()) return rule.status();
        rest = {Symbol::Rule(*rule)};
      }
      if ((r >> (k + 1)) != 0) {
        Sequence more = {*p};
        more.insert(more.end(), up_to.begin(), up_to.end());
        auto u = NewRule({up_to, std::move(more)});
        if (!u.ok()) return u.status();
        up_to = {Symbol::Rule(*u)};
      }
    }
    seq->insert(seq->end(), rest.begin(), rest.end());
    return absl::OkStatus();
  }

  static constexpr int32_t kNothing = -1;
  static constexpr int32_t kEmptyOnly = -2;
  static constexpr int32_t kOversized = -3;
  static constexpr uint32_t kNoRule = ~uint32_t{0};

  const std::vector<RegexRule>& rules_;
  const GrammarLimits& limits_;
  const TerminalLimits& terminal_;
  Grammar g_;
  uint32_t current_ = 0;
  uint32_t helpers_ = 0;
  uint64_t symbols_ = 0;
  uint32_t nothing_rule_ = kNoRule;
  absl::flat_hash_map<std::string, int32_t> terminal_of_;
  // An oversized text's pieces (AppendSplit), so that a repeated part is
  // split once.
  absl::flat_hash_map<std::string, Sequence> split_of_;
};

}  // namespace

absl::StatusOr<Grammar> GrammarFromRegexRules(const std::vector<RegexRule>& rules, uint32_t start,
                                              const GrammarLimits& limits,
                                              const TerminalLimits& terminal) {
  if (start >= rules.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("regex rules: start rule ", start, " of ", rules.size()));
  }
  return Lowering(rules, limits, terminal).Run(start);
}

}  // namespace maskd::grammar
