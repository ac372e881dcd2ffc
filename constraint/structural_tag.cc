#include "constraint/structural_tag.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "automaton/utf8.h"
#include "constraint/schema_grammar.h"
#include "grammar/regex_rules.h"
#include "grammar/python_regex.h"

namespace maskd {
namespace {

using grammar::Grammar;
using grammar::Symbol;
using Json = nlohmann::ordered_json;  // keeps a schema's key order

absl::Status Invalid(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("structural tag: ", where, ": ", what));
}

// A terminal of `g`; returns its symbol.
Symbol AddTerminal(Grammar* g, std::string name, std::string regex,
                   std::optional<std::string> literal = std::nullopt) {
  grammar::Terminal t;
  t.name = std::move(name);
  t.regex = std::move(regex);
  t.literal = std::move(literal);
  g->terminals.push_back(std::move(t));
  return Symbol::Terminal(static_cast<uint32_t>(g->terminals.size() - 1));
}

Symbol AddRule(Grammar* g, std::string name, std::vector<std::vector<Symbol>> alternatives) {
  grammar::Rule r;
  r.name = std::move(name);
  r.alternatives = std::move(alternatives);
  g->rules.push_back(std::move(r));
  return Symbol::Rule(static_cast<uint32_t>(g->rules.size() - 1));
}

// A string field of `obj`, or an error naming `where`.
absl::StatusOr<std::string> StringField(const Json& obj, const char* key, absl::string_view where,
                                        bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return Invalid(where, absl::StrCat("missing \"", key, "\""));
    return std::string();
  }
  if (!it->is_string()) return Invalid(absl::StrCat(where, ".", key), "expected a string");
  return it->get<std::string>();
}

absl::StatusOr<bool> BoolField(const Json& doc, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end()) return false;
  if (!it->is_boolean()) return Invalid(key, "expected true or false");
  return it->get<bool>();
}

// Appends the terminals and rules of `sub` to `g`, their names prefixed
// `prefix`; returns its start rule.
Symbol AppendGrammar(Grammar sub, const std::string& prefix, Grammar* g) {
  const auto terminal_base = static_cast<uint32_t>(g->terminals.size());
  const auto rule_base = static_cast<uint32_t>(g->rules.size());
  for (grammar::Terminal& t : sub.terminals) {
    t.name = prefix + t.name;
    g->terminals.push_back(std::move(t));
  }
  for (grammar::Rule& r : sub.rules) {
    r.name = prefix + r.name;
    for (auto& alternative : r.alternatives) {
      for (Symbol& s : alternative) s.id += s.is_terminal() ? terminal_base : rule_base;
    }
    g->rules.push_back(std::move(r));
  }
  return Symbol::Rule(rule_base + sub.start);
}

// Parses the tag's grammar {"format", "text"} and appends its terminals and
// rules to `g` (names prefixed "TAG<i>."); returns its start rule.
absl::StatusOr<Symbol> MergeGrammar(const Json& spec, const std::string& where, size_t i,
                                    const StructuralTagOptions& options, Grammar* g) {
  if (!spec.is_object()) return Invalid(where, "expected {\"format\": ..., \"text\": ...}");
  auto format_name = StringField(spec, "format", where, true);
  if (!format_name.ok()) return format_name.status();
  auto text = StringField(spec, "text", where, true);
  if (!text.ok()) return text.status();
  auto format = grammar::GrammarFormatNamed(*format_name);
  if (!format) return Invalid(absl::StrCat(where, ".format"), "expected lark, gbnf or ebnf");
  auto sub = grammar::ParseGrammarText(*text, *format, options.grammar);
  if (!sub.ok()) {
    return absl::Status(sub.status().code(),
                        absl::StrCat("structural tag: ", where, ": ", sub.status().message()));
  }
  if (!sub->ignore.empty()) {
    return Invalid(where, "%ignore is not supported inside a structural tag");
  }
  return AppendGrammar(*std::move(sub), absl::StrCat("TAG", i, "."), g);
}

// Converts the tag's schema (an object or its text) on the grammar route and
// appends its rules to `g` (names prefixed "TAG<i>."); returns its start rule.
absl::StatusOr<Symbol> MergeSchema(const Json& schema, const std::string& where, size_t i,
                                   const StructuralTagOptions& options, Grammar* g) {
  const std::string text = schema.is_string() ? schema.get<std::string>() : schema.dump();
  // Terminals over the regex limits are split here; a terminal's DFA is
  // checked when the whole grammar is compiled.
  grammar::TerminalLimits terminal;
  terminal.check_dfa = false;
  auto lower = [&] { return JsonSchemaGrammar(text, options.json_schema, options.grammar, terminal); };
  absl::StatusOr<Grammar> sub;
  if (options.schema_grammars != nullptr) {
    auto shared = options.schema_grammars->Get(text, options.json_schema, options.grammar, lower);
    if (shared.ok()) {
      sub = **shared;  // a copy: AppendGrammar renames and renumbers it
    } else {
      sub = shared.status();
    }
  } else {
    sub = lower();
  }
  if (!sub.ok()) {
    return absl::Status(sub.status().code(),
                        absl::StrCat("structural tag: ", where, ": ", sub.status().message()));
  }
  return AppendGrammar(*std::move(sub), absl::StrCat("TAG", i, "."), g);
}

// The document's top level: its fields are known, "tags" is a non-empty
// array; returns "tags".
absl::StatusOr<const Json*> CheckDocument(const Json& doc) {
  if (doc.is_discarded()) return Invalid("document", "not valid JSON");
  if (!doc.is_object()) return Invalid("document", "expected an object");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() != "tags" && it.key() != "triggers" && it.key() != "at_least_one" &&
        it.key() != "stop_after_first") {
      return Invalid(it.key(), "unknown field (expected tags, triggers, at_least_one, stop_after_first)");
    }
  }
  auto tags = doc.find("tags");
  if (tags == doc.end() || !tags->is_array() || tags->empty()) {
    return Invalid("tags", "expected a non-empty array");
  }
  return &*tags;
}

// The terminals of literal texts (begins, ends, triggers), one per text:
// tags with the same end, or whose begins start with the same trigger, share
// it, so the parser and the masks treat it once, not once per tag.
class Literals {
 public:
  explicit Literals(Grammar* g) : g_(g) {}
  // The terminal of `text`, named by it in quotes.
  Symbol Get(const std::string& text) {
    auto [it, added] = by_text_.try_emplace(text, Symbol::Terminal(0));
    if (added) {
      it->second = AddTerminal(g_, absl::StrCat("\"", text, "\""),
                               grammar::LiteralRegex(text, /*ignore_case=*/false), text);
    }
    return it->second;
  }

 private:
  Grammar* g_;
  absl::flat_hash_map<std::string, Symbol> by_text_;
};

// Tag i ({"begin", "end", and one of "schema", "regex", "grammar"}) as the
// sequence content end (its begin is put in front by BeginWithTrigger), its
// content's terminals and rules appended to `g`; sets *begin to its begin
// text.
absl::StatusOr<std::vector<Symbol>> AddTag(const Json& tag, size_t i,
                                           const StructuralTagOptions& options, Grammar* g,
                                           Literals* literals, std::string* begin_text) {
  const std::string where = absl::StrCat("tags[", i, "]");
  if (!tag.is_object()) return Invalid(where, "expected an object");
  for (auto it = tag.begin(); it != tag.end(); ++it) {
    if (it.key() != "begin" && it.key() != "end" && it.key() != "schema" && it.key() != "regex" &&
        it.key() != "grammar") {
      return Invalid(absl::StrCat(where, ".", it.key()),
                     "unknown field (expected begin, schema, regex or grammar, end)");
    }
  }
  auto begin = StringField(tag, "begin", where, true);
  if (!begin.ok()) return begin.status();
  if (begin->empty()) return Invalid(absl::StrCat(where, ".begin"), "must not be empty");
  auto end = StringField(tag, "end", where, false);
  if (!end.ok()) return end.status();
  std::string content;
  std::optional<Symbol> content_rule;
  const bool has_schema = tag.contains("schema"), has_regex = tag.contains("regex"),
             has_grammar = tag.contains("grammar");
  if (has_schema + has_regex + has_grammar != 1) {
    return Invalid(where, "give exactly one of schema, regex or grammar");
  }
  if (has_grammar) {
    auto rule = MergeGrammar(tag["grammar"], absl::StrCat(where, ".grammar"), i, options, g);
    if (!rule.ok()) return rule.status();
    content_rule = *rule;
  } else if (has_regex) {
    auto regex = StringField(tag, "regex", where, true);
    if (!regex.ok()) return regex.status();
    content = *std::move(regex);
  } else {
    auto rule = MergeSchema(tag["schema"], absl::StrCat(where, ".schema"), i, options, g);
    if (!rule.ok()) return rule.status();
    content_rule = *rule;
  }
  std::vector<Symbol> seq;
  if (content_rule) {
    seq.push_back(*content_rule);
  } else if (!content.empty()) {
    seq.push_back(AddTerminal(g, absl::StrCat("TAG", i, "_CONTENT"), content));
  }
  if (!end->empty()) seq.push_back(literals->Get(*end));
  *begin_text = *std::move(begin);
  return seq;
}

// The document's "triggers" (default: the tags' begin texts); every begin
// text must start with one.
absl::StatusOr<std::vector<std::string>> Triggers(const Json& doc,
                                                  const std::vector<std::string>& begins) {
  std::vector<std::string> triggers;
  if (auto it = doc.find("triggers"); it != doc.end()) {
    if (!it->is_array() || it->empty()) return Invalid("triggers", "expected a non-empty array");
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string() || (*it)[i].get<std::string>().empty()) {
        return Invalid(absl::StrCat("triggers[", i, "]"), "expected a non-empty string");
      }
      triggers.push_back((*it)[i].get<std::string>());
    }
  } else {
    triggers = begins;
  }
  for (size_t i = 0; i < begins.size(); ++i) {
    bool found = false;
    for (const std::string& t : triggers) found = found || absl::StartsWith(begins[i], t);
    if (!found) return Invalid(absl::StrCat("tags[", i, "].begin"), "starts with no trigger");
  }
  return triggers;
}

// `seq` (a tag's content and end) with its begin in front, as the longest
// trigger that starts it, then the rest one character at a time. The text
// is the same; the terminals are few and shared by every tag (the triggers,
// the characters of the names), so a mask computes what crosses into each
// of them once, not once per tag: free text's masks look past the triggers
// only, and a trigger's past the first characters of the names, whatever
// the number of tags.
std::vector<Symbol> BeginWithTrigger(const std::string& begin,
                                     const std::vector<std::string>& triggers,
                                     std::vector<Symbol> seq, Literals* literals) {
  size_t trigger = 0;  // bytes; Triggers() checked that one starts `begin`
  for (const std::string& t : triggers) {
    if (t.size() > trigger && absl::StartsWith(begin, t)) trigger = t.size();
  }
  std::vector<Symbol> out = {literals->Get(begin.substr(0, trigger))};
  for (size_t i = trigger; i < begin.size();) {
    size_t next = i;  // past one character; one byte where none starts
    if (!DecodeUtf8(begin, &next)) next = i + 1;
    out.push_back(literals->Get(begin.substr(i, next - i)));
    i = next;
  }
  out.insert(out.end(), seq.begin(), seq.end());
  return out;
}

// How the tags may follow each other in the free text (the document's flags).
struct TagRepetition {
  bool at_least_one = false;
  bool stop_after_first = false;
};

// root ::= FREE rest ; TAG ::= begin content end | ... ; the rest as
// `repetition` says. FREE (`free_regex`) matches the empty text too. Sets
// g->start to root.
void AddRootRules(std::string free_regex, std::vector<std::vector<Symbol>> tag_alternatives,
                  TagRepetition repetition, Grammar* g) {
  const Symbol root = AddRule(g, "root", {});
  const Symbol free_text = AddTerminal(g, "FREE_TEXT", std::move(free_regex));
  const Symbol tag = AddRule(g, "tag", std::move(tag_alternatives));
  const Symbol more = AddRule(g, "more", {});  // (TAG FREE)*, left-recursive
  g->rules[more.id].alternatives = {{}, {more, tag, free_text}};
  auto& alts = g->rules[root.id].alternatives;
  if (repetition.stop_after_first) {
    alts.push_back({free_text, tag});
    if (!repetition.at_least_one) alts.push_back({free_text});
  } else if (repetition.at_least_one) {
    alts.push_back({free_text, tag, free_text, more});
  } else {
    alts.push_back({free_text, more});
  }
  g->start = root.id;
}

}  // namespace

absl::StatusOr<Grammar> StructuralTagGrammar(std::string_view json,
                                             const StructuralTagOptions& options) {
  if (json.size() > options.max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("structural tag: document of ", json.size(), " bytes, more than ",
                     options.max_bytes, " (max_structural_tag_bytes)"));
  }
  Json doc = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  auto tags = CheckDocument(doc);
  if (!tags.ok()) return tags.status();
  auto at_least_one = BoolField(doc, "at_least_one");
  if (!at_least_one.ok()) return at_least_one.status();
  auto stop_after_first = BoolField(doc, "stop_after_first");
  if (!stop_after_first.ok()) return stop_after_first.status();

  Grammar g;
  Literals literals(&g);
  std::vector<std::string> begins((*tags)->size());
  std::vector<std::vector<Symbol>> tag_alternatives;
  size_t size = 0;  // rules and alternatives' symbols so far (a begin counted as two)
  for (size_t i = 0; i < (*tags)->size(); ++i) {
    const size_t rules_before = g.rules.size();
    auto seq = AddTag((**tags)[i], i, options, &g, &literals, &begins[i]);
    if (!seq.ok()) return seq.status();
    size += seq->size() + 2 + (g.rules.size() - rules_before);  // + its begin's two
    for (size_t r = rules_before; r < g.rules.size(); ++r) {
      for (const auto& alternative : g.rules[r].alternatives) size += alternative.size();
    }
    tag_alternatives.push_back(*std::move(seq));
    if (size + g.terminals.size() > options.max_symbols) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "structural tag: tags[0..", i, "]'s grammars have more than ", options.max_symbols,
          " rules, terminals and symbols together (max_structural_tag_symbols)"));
    }
  }
  auto triggers = Triggers(doc, begins);
  if (!triggers.ok()) return triggers.status();
  for (size_t i = 0; i < begins.size(); ++i) {
    tag_alternatives[i] =
        BeginWithTrigger(begins[i], *triggers, std::move(tag_alternatives[i]), &literals);
  }
  auto free_regex = grammar::RegexAvoiding(*triggers, options.triggers);
  if (!free_regex.ok()) {
    return absl::Status(free_regex.status().code(),
                        absl::StrCat("structural tag: triggers: ", free_regex.status().message()));
  }
  AddRootRules(*std::move(free_regex), std::move(tag_alternatives),
               {*at_least_one, *stop_after_first}, &g);
  if (absl::Status s = grammar::Normalize(&g); !s.ok()) return s;
  return g;
}

}  // namespace maskd
