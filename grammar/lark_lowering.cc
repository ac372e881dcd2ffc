// The lowering of a Lark syntax tree to the common Grammar form: rules keep
// their definition order, groups, repeats and template instances become
// helper rules, terminals (named or written in rules) are deduplicated.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "automaton/regex.h"
#include "grammar/lark_internal.h"

namespace maskd::grammar::lark_internal {
namespace {

class Lowerer {
 public:
  Lowerer(const Syntax& syntax, const GrammarLimits& limits)
      : syntax_(syntax), limits_(limits), regexes_(syntax, limits) {}

  absl::StatusOr<Grammar> Run(std::string_view start) {
    // Every named terminal compiles (as Lark does), used or not.
    for (const auto& d : syntax_.defs) {
      if (!d.terminal) continue;
      auto r = regexes_.Named(d.name, d.pos, 0);
      if (!r.ok()) return r.status();
    }
    // Rules keep their definition order; templates instantiate on use.
    for (const auto& d : syntax_.defs) {
      if (d.terminal || !d.params.empty()) continue;
      rule_ids_[d.name] = static_cast<uint32_t>(g_.rules.size());
      Rule r;
      r.name = d.name;
      r.where = d.pos;
      g_.rules.push_back(std::move(r));
    }
    auto s = syntax_.by_name.find(std::string(start));
    if (s == syntax_.by_name.end() || syntax_.defs[s->second].terminal ||
        !syntax_.defs[s->second].params.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no start rule '", std::string(start), "' in the grammar"));
    }
    g_.start = rule_ids_[std::string(start)];
    if (absl::Status st = CheckRuleCount(); !st.ok()) return st;
    for (const auto& d : syntax_.defs) {
      if (d.terminal || !d.params.empty()) continue;
      pending_.push_back({rule_ids_[d.name], *d.body, nullptr});
    }
    while (!pending_.empty()) {
      Pending job = pending_.front();
      pending_.pop_front();
      std::vector<std::vector<Symbol>> alts;
      std::string origin = g_.rules[job.rule].name;
      if (absl::Status st = LowerAlts(job.body, job.env, origin, 0, &alts); !st.ok()) return st;
      if (absl::Status st = AddAlternatives(job.rule, std::move(alts)); !st.ok()) return st;
    }
    for (const auto& [node, pos] : syntax_.ignores) {
      auto id = IgnoreTerminal(node, pos);
      if (!id.ok()) return id.status();
      bool seen = false;
      for (uint32_t x : g_.ignore) seen |= x == *id;
      if (!seen) g_.ignore.push_back(*id);
    }
    if (absl::Status st = Normalize(&g_); !st.ok()) return st;
    return std::move(g_);
  }

 private:
  // A template instantiation's parameter bindings: a parameter names an
  // argument node, read in the environment of the use.
  struct Env {
    std::map<std::string, std::pair<uint32_t, const Env*>> bind;
  };
  struct Pending {
    uint32_t rule;
    uint32_t body;
    const Env* env;
  };

  const Node& N(uint32_t i) const { return syntax_.nodes[i]; }

  absl::Status CheckRuleCount() {
    if (g_.rules.size() > limits_.max_rules) {
      return absl::ResourceExhaustedError(absl::StrCat("the grammar lowers to more than ",
                                                       limits_.max_rules, " rules (max_rules)"));
    }
    return absl::OkStatus();
  }

  absl::Status AddAlternatives(uint32_t rule, std::vector<std::vector<Symbol>> alts) {
    for (const auto& a : alts) symbols_ += a.size();
    if (symbols_ > limits_.max_symbols) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the grammar lowers to more than ", limits_.max_symbols, " symbols (max_symbols)"));
    }
    auto& dst = g_.rules[rule].alternatives;
    for (auto& a : alts) dst.push_back(std::move(a));
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> NewRule(const std::string& origin, SourcePos pos) {
    Rule r;
    r.name = absl::StrCat(origin, "__", ++helper_count_[origin]);
    r.where = pos;
    g_.rules.push_back(std::move(r));
    if (absl::Status st = CheckRuleCount(); !st.ok()) return st;
    return static_cast<uint32_t>(g_.rules.size() - 1);
  }

  // ---- terminals

  // Checks a finished terminal regex with maskd's parser: it must parse and
  // must not match the empty string.
  absl::Status CheckTerminal(const Terminal& t) {
    auto re = Regex::Parse(t.regex);
    if (!re.ok()) {
      return absl::Status(re.status().code(), absl::StrCat(At(t.where), "terminal ", t.name, ": ",
                                                           re.status().message()));
    }
    if (Nullable(re->root())) {
      return ErrorAt(t.where,
                     absl::StrCat("terminal ", t.name,
                                  " matches the empty string (Lark's Earley parser refuses "
                                  "zero-width terminals)"));
    }
    return absl::OkStatus();
  }

  static bool Nullable(const RegexNode& n) {
    switch (n.kind) {
      case RegexNode::Kind::kEmpty:
        return true;
      case RegexNode::Kind::kSet:
        return false;
      case RegexNode::Kind::kConcat:
        for (const auto& c : n.children) {
          if (!Nullable(*c)) return false;
        }
        return true;
      case RegexNode::Kind::kAlternate:
        for (const auto& c : n.children) {
          if (Nullable(*c)) return true;
        }
        return false;
      case RegexNode::Kind::kRepeat:
        return n.min == 0 || Nullable(*n.children[0]);
    }
    return false;
  }

  absl::StatusOr<uint32_t> AddTerminal(const std::string& key, Terminal t) {
    if (auto it = term_ids_.find(key); it != term_ids_.end()) return it->second;
    if (absl::Status st = CheckTerminal(t); !st.ok()) return st;
    if (g_.terminals.size() >= limits_.max_terminals) {
      return absl::ResourceExhaustedError(absl::StrCat(At(t.where), "the grammar has more than ",
                                                       limits_.max_terminals,
                                                       " terminals (max_terminals)"));
    }
    g_.terminals.push_back(std::move(t));
    uint32_t id = static_cast<uint32_t>(g_.terminals.size() - 1);
    term_ids_[key] = id;
    return id;
  }

  absl::StatusOr<uint32_t> NamedTerminal(const std::string& name, SourcePos use) {
    auto piece = regexes_.Named(name, use, 0);
    if (!piece.ok()) return piece.status();
    const Definition& def = syntax_.defs[syntax_.by_name.at(name)];
    Terminal t;
    t.name = name;
    t.regex = piece->regex;
    t.literal = piece->literal;
    t.priority = def.priority;
    t.where = def.pos;
    return AddTerminal(absl::StrCat("N", name), std::move(t));
  }

  // A string, regex or range written in a rule or %ignore.
  absl::StatusOr<uint32_t> AnonymousTerminal(uint32_t id) {
    const Node& n = N(id);
    auto piece = regexes_.Build(id, 0);
    if (!piece.ok()) return piece.status();
    Terminal t;
    switch (n.kind) {
      case Node::Kind::kString:
        t.name = absl::StrCat("\"", n.text, "\"", n.flags);
        break;
      case Node::Kind::kRegex:
        t.name = n.raw;
        break;
      default:
        t.name = absl::StrFormat("\"\\x{%X}\"..\"\\x{%X}\"", n.lo, n.hi);
        break;
    }
    t.regex = piece->regex;
    t.literal = piece->literal;
    t.where = n.pos;
    std::string key = absl::StrCat("A", t.name);
    return AddTerminal(key, std::move(t));
  }

  absl::StatusOr<uint32_t> IgnoreTerminal(uint32_t alt, SourcePos pos) {
    // A single name or literal is that terminal; anything else becomes one.
    const Node& a = N(alt);
    if (a.kids.size() == 1 && N(a.kids[0]).kids.size() == 1) {
      const Node& item = N(N(a.kids[0]).kids[0]);
      if (item.kind == Node::Kind::kName) {
        auto d = syntax_.by_name.find(item.text);
        if (d == syntax_.by_name.end() || !syntax_.defs[d->second].terminal) {
          return ErrorAt(item.pos,
                         absl::StrCat("%ignore needs terminals; '", item.text,
                                      d == syntax_.by_name.end() ? "' is not defined" : "' is a rule"));
        }
        return NamedTerminal(item.text, item.pos);
      }
      if (item.kind == Node::Kind::kString || item.kind == Node::Kind::kRegex ||
          item.kind == Node::Kind::kRange) {
        return AnonymousTerminal(N(a.kids[0]).kids[0]);
      }
    }
    auto piece = regexes_.Build(alt, 0);
    if (!piece.ok()) return piece.status();
    Terminal t;
    t.name = absl::StrCat("%ignore@", pos.line);
    t.regex = piece->regex;
    t.literal = piece->literal;
    t.where = pos;
    std::string key = absl::StrCat("I", t.name);
    return AddTerminal(key, std::move(t));
  }

  // ---- rules

  absl::Status LowerAlts(uint32_t alt, const Env* env, const std::string& origin, int depth,
                         std::vector<std::vector<Symbol>>* out) {
    const Node& n = N(alt);
    for (uint32_t seq : n.kids) {
      std::vector<Symbol> s;
      if (absl::Status st = LowerSeq(seq, env, origin, depth + 1, &s); !st.ok()) return st;
      out->push_back(std::move(s));
    }
    return absl::OkStatus();
  }

  absl::Status LowerSeq(uint32_t seq, const Env* env, const std::string& origin, int depth,
                        std::vector<Symbol>* out) {
    for (uint32_t item : N(seq).kids) {
      if (absl::Status st = LowerItem(item, env, origin, depth + 1, out); !st.ok()) return st;
      if (out->size() > limits_.max_symbols) {
        return absl::ResourceExhaustedError(
            absl::StrCat(At(N(seq).pos), "the grammar lowers to more than ", limits_.max_symbols,
                         " symbols (max_symbols)"));
      }
    }
    return absl::OkStatus();
  }

  // One item of a sequence appended to *out as symbols; groups, repeats
  // and template uses become helper rules named after `origin`.
  absl::Status LowerItem(uint32_t id, const Env* env, const std::string& origin, int depth,
                         std::vector<Symbol>* out) {
    const Node& n = N(id);
    if (absl::Status st = CheckLoweringDepth(depth, n.pos, limits_); !st.ok()) return st;
    switch (n.kind) {
      case Node::Kind::kName:
        return LowerName(n, env, origin, depth, out);
      case Node::Kind::kString:
      case Node::Kind::kRegex:
      case Node::Kind::kRange: {
        auto t = AnonymousTerminal(id);
        if (!t.ok()) return t.status();
        out->push_back(Symbol::Terminal(*t));
        return absl::OkStatus();
      }
      case Node::Kind::kSeq:
        return LowerSeq(id, env, origin, depth + 1, out);
      case Node::Kind::kAlt: {
        if (n.kids.size() == 1) return LowerSeq(n.kids[0], env, origin, depth + 1, out);
        auto r = NewRule(origin, n.pos);
        if (!r.ok()) return r.status();
        std::vector<std::vector<Symbol>> alts;
        if (absl::Status st = LowerAlts(id, env, origin, depth + 1, &alts); !st.ok()) return st;
        if (absl::Status st = AddAlternatives(*r, std::move(alts)); !st.ok()) return st;
        out->push_back(Symbol::Rule(*r));
        return absl::OkStatus();
      }
      case Node::Kind::kRepeat:
        return LowerRepeat(n, env, origin, depth, out);
      case Node::Kind::kTemplateUse: {
        auto r = Instantiate(id, env, depth + 1);
        if (!r.ok()) return r.status();
        out->push_back(Symbol::Rule(*r));
        return absl::OkStatus();
      }
    }
    return ErrorAt(n.pos, "internal: unknown node");
  }

  // A name: a template parameter (lowered where it is bound), a terminal or
  // a rule.
  absl::Status LowerName(const Node& n, const Env* env, const std::string& origin, int depth,
                         std::vector<Symbol>* out) {
    if (env != nullptr) {
      if (auto b = env->bind.find(n.text); b != env->bind.end()) {
        return LowerItem(b->second.first, b->second.second, origin, depth + 1, out);
      }
    }
    auto d = syntax_.by_name.find(n.text);
    if (d == syntax_.by_name.end()) {
      bool rule = n.text[0] >= 'a' || (n.text[0] == '_' && n.text.size() > 1 && n.text[1] >= 'a');
      return ErrorAt(n.pos, absl::StrCat(rule ? "rule '" : "terminal '", n.text,
                                         "' is used but not defined"));
    }
    const Definition& def = syntax_.defs[d->second];
    if (def.terminal) {
      auto t = NamedTerminal(n.text, n.pos);
      if (!t.ok()) return t.status();
      out->push_back(Symbol::Terminal(*t));
    } else if (!def.params.empty()) {
      return ErrorAt(n.pos, absl::StrCat("template '", n.text, "' used without arguments"));
    } else {
      out->push_back(Symbol::Rule(rule_ids_.at(n.text)));
    }
    return absl::OkStatus();
  }

  // x{min,max}: min copies of x inline, then one helper rule for x* or a
  // chain of max - min optional copies.
  absl::Status LowerRepeat(const Node& n, const Env* env, const std::string& origin, int depth,
                           std::vector<Symbol>* out) {
    std::vector<Symbol> x;
    if (absl::Status st = LowerItem(n.kids[0], env, origin, depth + 1, &x); !st.ok()) return st;
    for (uint32_t k = 0; k < n.min; ++k) {
      out->insert(out->end(), x.begin(), x.end());
      if (out->size() > limits_.max_symbols) {
        return absl::ResourceExhaustedError(absl::StrCat(At(n.pos),
                                                         "the grammar lowers to more than ",
                                                         limits_.max_symbols,
                                                         " symbols (max_symbols)"));
      }
    }
    if (n.max == n.min) return absl::OkStatus();
    if (n.max == kUnbounded) {
      // R -> ε | R x  (left recursive: what an Earley engine handles best)
      auto r = NewRule(origin, n.pos);
      if (!r.ok()) return r.status();
      std::vector<Symbol> rec = {Symbol::Rule(*r)};
      rec.insert(rec.end(), x.begin(), x.end());
      if (absl::Status st = AddAlternatives(*r, {{}, rec}); !st.ok()) return st;
      out->push_back(Symbol::Rule(*r));
      return absl::OkStatus();
    }
    // Up to max - min more: R_k -> ε | x R_{k-1}, R_1 -> ε | x.
    std::optional<uint32_t> inner;
    for (uint32_t k = 0; k < n.max - n.min; ++k) {
      auto r = NewRule(origin, n.pos);
      if (!r.ok()) return r.status();
      std::vector<Symbol> more = x;
      if (inner) more.push_back(Symbol::Rule(*inner));
      if (absl::Status st = AddAlternatives(*r, {{}, more}); !st.ok()) return st;
      inner = *r;
    }
    out->push_back(Symbol::Rule(*inner));
    return absl::OkStatus();
  }

  // A canonical text for a template argument (its bindings resolved).
  absl::StatusOr<std::string> Canonical(uint32_t id, const Env* env, int depth) {
    const Node& n = N(id);
    if (absl::Status st = CheckLoweringDepth(depth, n.pos, limits_); !st.ok()) return st;
    switch (n.kind) {
      case Node::Kind::kName:
        if (env != nullptr) {
          if (auto b = env->bind.find(n.text); b != env->bind.end()) {
            return Canonical(b->second.first, b->second.second, depth + 1);
          }
        }
        return n.text;
      case Node::Kind::kString:
        return absl::StrCat("\"", n.text, "\"", n.flags);
      case Node::Kind::kRegex:
        return absl::StrCat("/", n.text, "/", n.flags);
      case Node::Kind::kRange:
        return absl::StrFormat("\"\\x{%X}\"..\"\\x{%X}\"", n.lo, n.hi);
      case Node::Kind::kTemplateUse: {
        std::vector<std::string> args;
        for (uint32_t a : n.kids) {
          auto c = Canonical(a, env, depth + 1);
          if (!c.ok()) return c.status();
          args.push_back(*c);
        }
        return absl::StrCat(n.text, "{", absl::StrJoin(args, ","), "}");
      }
      default:
        return ErrorAt(n.pos, "bad template argument");
    }
  }

  absl::StatusOr<uint32_t> Instantiate(uint32_t use, const Env* env, int depth) {
    const Node& n = N(use);
    auto d = syntax_.by_name.find(n.text);
    if (d == syntax_.by_name.end())
      return ErrorAt(n.pos, absl::StrCat("template '", n.text, "' is not defined"));
    const Definition& def = syntax_.defs[d->second];
    if (def.params.empty()) return ErrorAt(n.pos, absl::StrCat("'", n.text, "' is not a template"));
    if (def.params.size() != n.kids.size()) {
      return ErrorAt(n.pos, absl::StrCat("template '", n.text, "' takes ", def.params.size(),
                                         " arguments, got ", n.kids.size()));
    }
    auto key = Canonical(use, env, depth);
    if (!key.ok()) return key.status();
    if (auto it = instances_.find(*key); it != instances_.end()) return it->second;
    envs_.push_back(std::make_unique<Env>());
    Env* e = envs_.back().get();
    for (size_t k = 0; k < def.params.size(); ++k) e->bind[def.params[k]] = {n.kids[k], env};
    Rule r;
    r.name = *key;
    r.where = n.pos;
    g_.rules.push_back(std::move(r));
    if (absl::Status st = CheckRuleCount(); !st.ok()) return st;
    uint32_t id = static_cast<uint32_t>(g_.rules.size() - 1);
    instances_[*key] = id;
    pending_.push_back({id, *def.body, e});
    return id;
  }

  const Syntax& syntax_;
  const GrammarLimits& limits_;
  TerminalRegexes regexes_;
  Grammar g_;
  size_t symbols_ = 0;
  absl::flat_hash_map<std::string, uint32_t> term_ids_;
  absl::flat_hash_map<std::string, uint32_t> rule_ids_;
  absl::flat_hash_map<std::string, uint32_t> helper_count_;
  absl::flat_hash_map<std::string, uint32_t> instances_;
  std::deque<Pending> pending_;
  std::vector<std::unique_ptr<Env>> envs_;
};

}  // namespace

absl::Status CheckLoweringDepth(int depth, SourcePos pos, const GrammarLimits& limits) {
  if (depth > 4 * static_cast<int>(Nesting(limits)) + 64) {
    return absl::ResourceExhaustedError(absl::StrCat(
        At(pos), "definitions nested too deeply (max_nesting ", Nesting(limits), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Grammar> Lower(const Syntax& syntax, const GrammarLimits& limits,
                              std::string_view start) {
  return Lowerer(syntax, limits).Run(start);
}

}  // namespace maskd::grammar::lark_internal
