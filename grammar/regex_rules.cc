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
#include "grammar/regex_language.h"
#include "grammar/regex_rule_parser.h"
#include "grammar/terminal_dfas.h"

namespace maskd::grammar {
namespace {

using regex_rule_parser::kUnbounded;
using regex_rule_parser::Node;
using regex_rule_parser::ParseRegexRule;

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
      auto tree = ParseRegexRule(rules_[i].regex, rules_[i], static_cast<uint32_t>(rules_.size()),
                                 limits_, /*split_top=*/false);
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
  // is over terminal_. With `may_presume`, a regex of at least half the
  // nodes of the smallest whose DFA failed (dfa_failed_nodes_) is presumed
  // over the DFA limit without building its DFA (*presumed set): a failed
  // DFA costs max_states states' work, and the parts around one large piece
  // (a long string, in each of several objects) would each pay it. Only a
  // grammar with a part over the DFA limit presumes, and such a grammar
  // compiled to no index before parts were split. Also with `may_presume`,
  // with or without the DFA check, a regex PresumedOverStateLimit
  // (grammar/terminal_dfas.h) is presumed over it from its size alone.
  absl::StatusOr<int32_t> TerminalOf(absl::string_view text, bool may_presume, absl::Status* why,
                                     bool* presumed) {
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
      if (may_presume && PresumedOverStateLimit(re->expanded_size(), terminal_.dfa)) {
        *why = absl::ResourceExhaustedError(absl::StrCat(
            "regex rule '", rules_[current_].name, "': ", re->expanded_size(),
            " regex nodes, presumed over ", terminal_.dfa.max_states, " DFA states"));
        *presumed = true;
        return kOversized;
      }
      if (terminal_.check_dfa) {
        if (may_presume && re->expanded_size() >= dfa_failed_nodes_ / 2) {
          *why = dfa_failed_;
          *presumed = true;
          return kOversized;
        }
        // The DFA CompiledGrammar will build, built once here to learn that
        // it fits.
        auto dfa = Dfa::Compile(*re, terminal_.dfa);
        if (!dfa.ok()) {
          absl::Status s(dfa.status().code(), absl::StrCat("regex rule '", rules_[current_].name,
                                                           "': ", dfa.status().message()));
          if (s.code() != absl::StatusCode::kResourceExhausted) return s;
          if (re->expanded_size() < dfa_failed_nodes_) {
            dfa_failed_nodes_ = re->expanded_size();
            dfa_failed_ = s;
          }
          *why = std::move(s);
          return kOversized;
        }
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
    bool presumed = false;
    auto id = TerminalOf(text, /*may_presume=*/true, &why, &presumed);
    if (!id.ok()) return id.status();
    if (*id == kOversized) {
      Sequence pieces;
      auto split = AppendSplit(text, &pieces);
      if (!split.ok()) return split.status();
      if (*split) {
        seq->insert(seq->end(), pieces.begin(), pieces.end());
        split_of_.emplace(std::string(text), std::move(pieces));
        return absl::OkStatus();
      }
      if (!presumed) return why;
      id = TerminalOf(text, /*may_presume=*/false, &why, &presumed);
      if (!id.ok()) return id.status();
      if (*id == kOversized) return why;
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

  // `text`, a reference-free regex over terminal_, split at its top level
  // into rules over pieces that AppendText lowers in turn. Each piece is a
  // strict substring, so the recursion ends. False, `seq` unchanged, when
  // there is no operator to split at, or an inline flag group whose scope
  // would be cut.
  absl::StatusOr<bool> AppendSplit(absl::string_view text, Sequence* seq) {
    auto tree = ParseRegexRule(text, rules_[current_], static_cast<uint32_t>(rules_.size()), limits_,
                               /*split_top=*/true);
    if (!tree.ok()) return false;
    return AppendSplitNode(text, *tree, seq);
  }

  absl::StatusOr<bool> AppendSplitNode(absl::string_view text, const Node& n, Sequence* seq) {
    auto piece = [text](size_t begin, size_t end) { return text.substr(begin, end - begin); };
    switch (n.kind) {
      case Node::Kind::kAlternate: {
        for (const Node& k : n.kids) {
          if (k.has_flags) return false;
        }
        std::vector<Sequence> alts(n.kids.size());
        for (size_t i = 0; i < n.kids.size(); ++i) {
          if (auto s = AppendText(piece(n.kids[i].begin, n.kids[i].end), &alts[i]); !s.ok()) return s;
        }
        auto r = NewRule(std::move(alts));
        if (!r.ok()) return r.status();
        seq->push_back(Symbol::Rule(*r));
        return true;
      }
      case Node::Kind::kConcat: {
        if (n.has_flags) return false;
        if (n.kids.empty()) return true;
        if (n.kids.size() == 1) return AppendSplitNode(text, n.kids[0], seq);
        // Halves: a half that fits is one terminal, so a long run of small
        // items costs no symbol per item.
        const size_t mid = n.kids.size() / 2;
        if (auto s = AppendText(piece(n.kids[0].begin, n.kids[mid - 1].end), seq); !s.ok()) return s;
        if (auto s = AppendText(piece(n.kids[mid].begin, n.kids.back().end), seq); !s.ok()) return s;
        return true;
      }
      case Node::Kind::kRepeat: {
        Sequence x;
        if (auto s = AppendText(piece(n.kids[0].begin, n.kids[0].end), &x); !s.ok()) return s;
        if (auto s = AppendCountedRepeat(std::move(x), n.min, n.max, seq); !s.ok()) return s;
        return true;
      }
      case Node::Kind::kText:
        // A group's contents, parsed as nested: split again at their top.
        if (n.end - n.begin < text.size()) {
          if (auto s = AppendText(piece(n.begin, n.end), seq); !s.ok()) return s;
          return true;
        }
        break;
      case Node::Kind::kRef:
        break;
    }
    return false;
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
  // The fewest expanded nodes of a regex whose DFA was over terminal_.dfa,
  // and its error (TerminalOf).
  size_t dfa_failed_nodes_ = SIZE_MAX;
  absl::Status dfa_failed_;
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
