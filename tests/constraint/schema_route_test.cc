// JSON Schema routes: the grammar route (JsonSchemaToRules + GrammarFromRegexRules)
// against the regex route on the bundled MaskBench slice, and ConstraintCompiler's
// automatic choice between them.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "constraint/constraint_compiler.h"
#include "constraint/constraint_guide.h"
#include "constraint/schema_grammar.h"
#include "gmock/gmock.h"
#include "grammar/earley.h"
#include "gtest/gtest.h"
#include "re2/re2.h"
#include "schema/json_schema.h"
#include "tests/index/test_util.h"

namespace maskd {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<grammar::Grammar> SchemaGrammar(const std::string& schema, const JsonSchemaOptions& o) {
  return JsonSchemaGrammar(schema, o, grammar::GrammarLimits{}, grammar::TerminalLimits{});
}

// Every test text of every slice schema gets the same verdict from both
// routes where both compile, except where the regex route's any-value depth
// cap (2 by default) refuses a deeper value: there the regex route with the
// cap raised to the text's nesting depth, matched by RE2, must agree.
TEST(SchemaRoutes, GrammarRouteAgreesWithRegexRouteOnTheMaskBenchSlice) {
  std::ifstream in(std::string(MASKD_SOURCE_DIR) + "/tests/data/maskbench_slice.jsonl");
  ASSERT_TRUE(in) << "tests/data/maskbench_slice.jsonl";
  JsonSchemaOptions o;
  std::string line;
  int deeper = 0, unverified = 0, schemas = 0, both = 0, grammar_only = 0, regex_only = 0, texts = 0, valid_ok = 0, valid = 0;
  while (std::getline(in, line)) {
    const auto row = nlohmann::ordered_json::parse(line);  // keeps property order
    const std::string schema = row["schema"].dump();
    ++schemas;
    auto regex = JsonSchemaToRegex(schema, o);
    std::shared_ptr<const Dfa> dfa;
    if (regex.ok() && !regex->truncated_recursion) {
      RegexLimits rl;
      rl.max_pattern_bytes = o.max_regex_bytes;
      auto d = Dfa::FromPattern(regex->regex, rl);
      if (d.ok()) dfa = *d;
    }
    auto g = SchemaGrammar(schema, o);
    std::optional<grammar::EarleyRecognizer> recognizer;
    if (g.ok()) {
      auto r = grammar::EarleyRecognizer::Create(*g);
      ASSERT_TRUE(r.ok()) << row["file"] << ": " << r.status();
      recognizer = *std::move(r);
    } else {
      // The routes share the converter: a schema it refuses fails both.
      EXPECT_TRUE(dfa == nullptr) << row["file"] << ": " << g.status();
    }
    if (!dfa && !recognizer) continue;
    if (!dfa) {
      ++grammar_only;
    } else if (!recognizer) {
      ++regex_only;
    } else {
      ++both;
    }
    for (const auto& test : row["tests"]) {
      const std::string text = test["text"].get<std::string>();
      if (recognizer) {
        auto accepts = recognizer->Accepts(text);
        ASSERT_TRUE(accepts.ok()) << accepts.status();
        if (dfa) {
          bool want = dfa->Matches(text);
          if (want != *accepts) {
            ++deeper;
            // The text's own nesting depth bounds what any value in it needs;
            // RE2 (independent of maskd's automata) matches the larger regex.
            int depth = 0, max_depth = 0;
            for (char c : text) {
              if (c == '{' || c == '[') max_depth = std::max(max_depth, ++depth);
              if (c == '}' || c == ']') --depth;
            }
            JsonSchemaOptions deep = o;
            deep.any_value_depth = std::min(8, max_depth);
            deep.max_regex_bytes = 64 << 20;
            auto deep_regex = JsonSchemaToRegex(schema, deep);
            ASSERT_TRUE(deep_regex.ok()) << deep_regex.status();
            RegexLimits rl;
            rl.max_pattern_bytes = deep.max_regex_bytes;
            // Past 1 MiB neither automaton fits in a test's time.
            const bool small = deep_regex->regex.size() <= (1 << 20);
            absl::StatusOr<std::shared_ptr<const Dfa>> deep_dfa =
                small ? Dfa::FromPattern(deep_regex->regex, rl)
                      : absl::ResourceExhaustedError("regex over 1 MiB");
            RE2::Options re2_options;
            re2_options.set_max_mem(int64_t{1} << 30);
            re2_options.set_log_errors(false);
            RE2 re(deep_dfa.ok() || !small ? "[^\\x00-\\x{10FFFF}]" : deep_regex->regex, re2_options);
            if (deep_dfa.ok()) {
              want = (*deep_dfa)->Matches(text);
            } else if (small && re.ok()) {
              want = RE2::FullMatch(text, re);
            } else {
              // Too large for either automaton: the direction at least must
              // be the one a deeper cap explains.
              ++unverified;
              EXPECT_TRUE(*accepts && max_depth > o.any_value_depth) << row["file"] << " text " << text;
              want = *accepts;
            }
          }
          EXPECT_EQ(*accepts, want) << row["file"] << " text " << text;
          ++texts;
        }
        if (test["valid"].get<bool>()) {
          ++valid;
          valid_ok += *accepts;
        }
      }
    }
  }
  std::printf("%d schemas: both routes %d, grammar only %d, regex only %d; %d texts compared "
              "(%d nest deeper than the regex route's any-value cap, %d of them too deep to check); "
              "grammar route accepts %d of %d valid texts\n",
              schemas, both, grammar_only, regex_only, texts, deeper, unverified, valid_ok, valid);
  EXPECT_EQ(regex_only, 0);
  EXPECT_GT(both, schemas * 3 / 4);
  EXPECT_GT(texts, 800);
  EXPECT_LT(deeper, texts / 10);
  EXPECT_LE(unverified, 6);  // measured: 5
}

constexpr char kTree[] = R"({"type":"object","properties":{"name":{"type":"string"},
  "children":{"type":"array","items":{"$ref":"#"}}},"required":["name","children"],
  "additionalProperties":false})";

// A tree `depth` levels deep, as json.dumps writes it.
std::string TreeText(int depth) {
  if (depth == 0) return R"({"name": "leaf", "children": []})";
  return absl::StrCat(R"({"name": "n)", depth, R"(", "children": [)", TreeText(depth - 1), ", ",
                      TreeText(0), "]}");
}

// Advances `guide` through `text` one single-byte token at a time (the
// bundled tokenizer has one per byte); false at the first refused byte.
bool Spell(ConstraintGuide& guide, const Vocabulary& vocab, const std::string& text) {
  std::vector<uint32_t> byte_token(256, UINT32_MAX);
  for (uint32_t t = 0; t < vocab.num_tokens(); ++t) {
    if (vocab.bytes(t).size() == 1) byte_token[static_cast<uint8_t>(vocab.bytes(t)[0])] = t;
  }
  for (unsigned char c : text) {
    if (byte_token[c] == UINT32_MAX) return false;
    const uint32_t t = byte_token[c];
    if (!guide.Advance({&t, 1}).ok()) return false;
  }
  return true;
}

// The automatic route parses a schema once and converts the document for
// both routes: each conversion of a JsonSchemaDocument is the conversion of
// its text, twice over (a conversion leaves the document as it was).
TEST(SchemaRoutes, OneParsedDocumentConvertsAsItsText) {
  std::ifstream in(std::string(MASKD_SOURCE_DIR) + "/tests/data/maskbench_slice.jsonl");
  ASSERT_TRUE(in) << "tests/data/maskbench_slice.jsonl";
  const JsonSchemaOptions o;
  std::string line;
  int schemas = 0, converted = 0;
  while (std::getline(in, line)) {
    const std::string schema = nlohmann::ordered_json::parse(line)["schema"].dump();
    ++schemas;
    auto document = JsonSchemaDocument::Parse(schema, o);
    ASSERT_TRUE(document.ok()) << document.status();
    auto regex = JsonSchemaToRegex(schema, o);
    auto rules = JsonSchemaToRules(schema, o);
    for (int twice = 0; twice < 2; ++twice) {
      auto regex_of_document = JsonSchemaToRegex(*document, o);
      ASSERT_EQ(regex.status(), regex_of_document.status());
      if (regex.ok()) {
        EXPECT_EQ(regex->regex, regex_of_document->regex);
        EXPECT_EQ(regex->warnings, regex_of_document->warnings);
        EXPECT_EQ(regex->truncated_recursion, regex_of_document->truncated_recursion);
      }
      auto rules_of_document = JsonSchemaToRules(*document, o);
      ASSERT_EQ(rules.status(), rules_of_document.status());
      if (!rules.ok()) continue;
      ++converted;
      ASSERT_EQ(rules->rules.size(), rules_of_document->rules.size());
      for (size_t k = 0; k < rules->rules.size(); ++k) {
        EXPECT_EQ(rules->rules[k].regex, rules_of_document->rules[k].regex);
      }
    }
  }
  EXPECT_GT(schemas, 20);
  EXPECT_GT(converted, 2 * schemas * 9 / 10);
  // The document's own errors come from Parse; the options' from each
  // conversion too.
  auto bad = JsonSchemaDocument::Parse("{\"type\": }", o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("byte offset"));
  auto document = JsonSchemaDocument::Parse("{\"type\": \"string\"}", o);
  ASSERT_TRUE(document.ok());
  JsonSchemaOptions any_order;
  any_order.any_property_order = true;
  EXPECT_EQ(JsonSchemaToRegex(*document, any_order).status().code(), absl::StatusCode::kInvalidArgument);
  JsonSchemaOptions bad_repeat;
  bad_repeat.max_counted_repeat = 0;
  EXPECT_THAT(JsonSchemaToRules(*document, bad_repeat).status().message(), HasSubstr("max_counted_repeat"));
}

TEST(SchemaRoutes, AutoTakesTheRegexRouteWhereTheSchemaFits) {
  auto tokenizer = testing::BundledTokenizer();
  auto vocab = tokenizer->shared_vocabulary();
  auto c = ConstraintCompiler().Compile(
      Constraint::JsonSchema(R"({"type":"object","properties":{"a":{"type":"integer"}}})", tokenizer));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->index->route(), ConstraintRoute::kRegex);
}

// Three open objects: a regex of about 25 KB (each carries the any-value
// automaton) whose DFA fits the default state limit.
constexpr char kThreeOpenObjects[] =
    R"({"type":"object","properties":{"a":{"type":"object"},"b":{"type":"object"},)"
    R"("c":{"type":"object","properties":{"d":{"type":"integer"}}}}})";
constexpr char kThreeOpenObjectsText[] = R"({"a": {"x": [1, "y"]}, "c": {"d": 5, "e": null}})";

// Over auto_route_max_regex_bytes the automatic route takes the grammar
// route without building the regex route's DFA; with no cap, the regex route.
TEST(SchemaRoutes, AutoSendsARegexOverItsCapToTheGrammarRoute) {
  auto tokenizer = testing::BundledTokenizer();
  auto vocab = tokenizer->shared_vocabulary();
  auto regex = JsonSchemaToRegex(kThreeOpenObjects);
  ASSERT_TRUE(regex.ok()) << regex.status();
  ASSERT_GT(regex->regex.size(), 16u << 10);
  for (size_t cap : {size_t{16} << 10, size_t{0}}) {
    CompileLimits limits;
    limits.auto_route_max_regex_bytes = cap;
    auto c = ConstraintCompiler(limits).Compile(Constraint::JsonSchema(kThreeOpenObjects, tokenizer));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->index->route(), cap ? ConstraintRoute::kGrammar : ConstraintRoute::kRegex) << cap;
    auto guide = ConstraintGuide::Create(c->index);
    ASSERT_TRUE(guide.ok());
    ASSERT_TRUE(Spell(*guide, *vocab, kThreeOpenObjectsText)) << cap;
    EXPECT_TRUE(guide->IsAccepting()) << cap;
  }
}

// The cap bounds work, not the language: when the grammar route then fails
// (here: over its rule limit), the regex route is tried at its own limit.
TEST(SchemaRoutes, AutoOverItsCapFallsBackToTheRegexRouteWhenTheGrammarRouteFails) {
  auto tokenizer = testing::BundledTokenizer();
  auto vocab = tokenizer->shared_vocabulary();
  CompileLimits limits;
  limits.auto_route_max_regex_bytes = 16 << 10;
  limits.grammar.max_rules = 4;
  Constraint schema = Constraint::JsonSchema(kThreeOpenObjects, tokenizer);
  auto c = ConstraintCompiler(limits).Compile(schema);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->index->route(), ConstraintRoute::kRegex);
  auto guide = ConstraintGuide::Create(c->index);
  ASSERT_TRUE(guide.ok());
  ASSERT_TRUE(Spell(*guide, *vocab, kThreeOpenObjectsText));
  EXPECT_TRUE(guide->IsAccepting());
  schema.options.schema_route = SchemaRoute::kGrammar;  // the failure the regex route replaced
  auto grammar = ConstraintCompiler(limits).Compile(schema);
  ASSERT_FALSE(grammar.ok());
  EXPECT_THAT(std::string(grammar.status().message()), HasSubstr("max_rules"));
}

// A short regex that expands far (an array of objects with counted strings):
// over auto_route_max_regex_nodes the automatic route takes the grammar route
// without building the regex route's automaton; with no cap, the regex route
// (its DFA fits). Both spell the same text; when the grammar route then
// fails (over its rule limit), the regex route is tried past the cap.
constexpr char kCountedArray[] =
    R"({"type":"array","maxItems":12,"items":{"type":"object","properties":)"
    R"({"k":{"type":"string","pattern":"^[a-z]{1,40}$"},"v":{"type":"string","maxLength":40}},)"
    R"("required":["k"],"additionalProperties":false}})";
constexpr char kCountedArrayText[] = R"([{"k": "abc", "v": "x y"}, {"k": "zz"}])";

TEST(SchemaRoutes, AutoSendsARegexOverItsNodeCapToTheGrammarRoute) {
  auto tokenizer = testing::BundledTokenizer();
  auto vocab = tokenizer->shared_vocabulary();
  auto regex = JsonSchemaToRegex(kCountedArray);
  ASSERT_TRUE(regex.ok()) << regex.status();
  auto parsed = Regex::Parse(regex->regex);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_LT(regex->regex.size(), 1000u);
  const size_t nodes = parsed->expanded_size();
  ASSERT_GT(nodes, 4000u);
  for (size_t cap : {size_t{4000}, nodes, size_t{0}}) {
    CompileLimits limits;
    limits.auto_route_max_regex_nodes = cap;
    auto c = ConstraintCompiler(limits).Compile(Constraint::JsonSchema(kCountedArray, tokenizer));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->index->route(), cap == 4000 ? ConstraintRoute::kGrammar : ConstraintRoute::kRegex) << cap;
    auto guide = ConstraintGuide::Create(c->index);
    ASSERT_TRUE(guide.ok());
    ASSERT_TRUE(Spell(*guide, *vocab, kCountedArrayText)) << cap;
    EXPECT_TRUE(guide->IsAccepting()) << cap;
  }
  CompileLimits limits;
  limits.auto_route_max_regex_nodes = 4000;
  limits.grammar.max_rules = 0;
  Constraint schema = Constraint::JsonSchema(kCountedArray, tokenizer);
  auto c = ConstraintCompiler(limits).Compile(schema);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->index->route(), ConstraintRoute::kRegex);
  schema.options.schema_route = SchemaRoute::kGrammar;  // the failure the regex route replaced
  auto grammar = ConstraintCompiler(limits).Compile(schema);
  ASSERT_FALSE(grammar.ok());
  EXPECT_THAT(std::string(grammar.status().message()), HasSubstr("max_rules"));
}

TEST(SchemaRoutes, RecursionTakesTheGrammarRouteAndIsExact) {
  auto tokenizer = testing::BundledTokenizer();
  auto vocab = tokenizer->shared_vocabulary();
  auto c = ConstraintCompiler().Compile(Constraint::JsonSchema(kTree, tokenizer));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->index->route(), ConstraintRoute::kGrammar);
  EXPECT_TRUE(c->warnings.empty());
  // Deeper than the regex route's recursion depth (3).
  for (int depth : {0, 2, 6}) {
    auto guide = ConstraintGuide::Create(c->index);
    ASSERT_TRUE(guide.ok());
    ASSERT_TRUE(Spell(*guide, *vocab, TreeText(depth))) << depth;
    EXPECT_TRUE(guide->IsAccepting()) << depth;
  }
  auto guide = ConstraintGuide::Create(c->index);
  ASSERT_TRUE(guide.ok());
  EXPECT_FALSE(Spell(*guide, *vocab, R"({"name": "x", "children": [{"name": 1)"));

  // Forced onto the regex route: recursion cut, with a warning; the deep tree
  // is refused there.
  Constraint regex_route = Constraint::JsonSchema(kTree, tokenizer);
  regex_route.options.schema_route = SchemaRoute::kRegex;
  auto r = ConstraintCompiler().Compile(regex_route);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->index->route(), ConstraintRoute::kRegex);
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_THAT(r->warnings[0], HasSubstr("cut at depth 3"));
  auto rg = ConstraintGuide::Create(r->index);
  ASSERT_TRUE(rg.ok());
  EXPECT_FALSE(Spell(*rg, *vocab, TreeText(6)));
}

// Recursion through a merge: a $ref inlined by allOf (or with sibling
// keywords, or under an anyOf branch beside other keywords) leads back to
// the merge itself. On the grammar route each such merge is a rule, so the
// recursion is exact at any depth (before, the merge was inlined again at
// every level until max_schema_depth refused the schema).
TEST(SchemaRoutes, RecursionThroughAllOfAndSiblingKeywordsIsExact) {
  auto tokenizer = testing::BundledTokenizer();
  auto vocab = tokenizer->shared_vocabulary();
  for (const char* children_items : {
           R"({"allOf": [{"$ref": "#/definitions/node"}]})",
           R"({"$ref": "#/definitions/node", "description": "a child", "type": "object"})",
           R"({"allOf": [{"$ref": "#/definitions/node"}, {"$ref": "#/definitions/named"}]})",
           R"({"type": "object", "anyOf": [{"$ref": "#/definitions/node"}]})"}) {
    const std::string schema = absl::StrCat(
        R"({"definitions": {"named": {"type": "object", "required": ["name"]},
            "node": {"type": "object", "properties": {"name": {"type": "string"},
              "children": {"type": "array", "items": )", children_items, R"(}},
              "required": ["name", "children"], "additionalProperties": false}},
            "$ref": "#/definitions/node"})");
    auto c = ConstraintCompiler().Compile(Constraint::JsonSchema(schema, tokenizer));
    ASSERT_TRUE(c.ok()) << c.status() << "\n" << children_items;
    EXPECT_EQ(c->index->route(), ConstraintRoute::kGrammar);
    for (int depth : {0, 3, 8}) {
      auto guide = ConstraintGuide::Create(c->index);
      ASSERT_TRUE(guide.ok());
      ASSERT_TRUE(Spell(*guide, *vocab, TreeText(depth))) << depth << " " << children_items;
      EXPECT_TRUE(guide->IsAccepting()) << depth;
    }
    auto guide = ConstraintGuide::Create(c->index);
    ASSERT_TRUE(guide.ok());
    EXPECT_FALSE(Spell(*guide, *vocab, R"({"name": "x", "children": [{"children": [], "name")"))
        << children_items;
  }
  // Every instance would be infinitely deep (each node requires a child
  // node): no valid instance, an error rather than a depth limit.
  auto none = ConstraintCompiler().Compile(Constraint::JsonSchema(
      R"({"definitions": {"n": {"type": "object", "required": ["c"], "properties":
          {"c": {"allOf": [{"$ref": "#/definitions/n"}, {"type": "object"}]}}}},
         "$ref": "#/definitions/n"})", tokenizer));
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()),
              HasSubstr("schema has no valid instance: every instance of the subschema at "
                        "/ would be infinitely deep"));
}

// An object of 300 optional members (as ESLint's `rules`) is one rule
// whose optional members nest one group each, past a grammar text's
// max_nesting (256); the grammar route allows a schema's own depth
// (kMaxSchemaRuleNesting).
TEST(SchemaRoutes, ManyOptionalMembersCompileOnTheGrammarRoute) {
  auto tokenizer = testing::BundledTokenizer();
  auto vocab = tokenizer->shared_vocabulary();
  std::string props;
  for (int i = 0; i < 300; ++i) {
    absl::StrAppend(&props, i ? ", " : "", "\"p", i, "\": {\"type\": \"integer\"}");
  }
  Constraint c = Constraint::JsonSchema(absl::StrCat(
      R"({"type": "object", "additionalProperties": false, "properties": {)", props, "}}"), tokenizer);
  c.options.schema_route = SchemaRoute::kGrammar;
  auto compiled = ConstraintCompiler().Compile(c);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  for (const char* text : {R"({"p0": 1, "p299": 2})", R"({"p150": 3})", "{}"}) {
    auto guide = ConstraintGuide::Create(compiled->index);
    ASSERT_TRUE(guide.ok());
    ASSERT_TRUE(Spell(*guide, *vocab, text)) << text;
    EXPECT_TRUE(guide->IsAccepting()) << text;
  }
  auto guide = ConstraintGuide::Create(compiled->index);
  ASSERT_TRUE(guide.ok());
  EXPECT_FALSE(Spell(*guide, *vocab, R"({"p299": 2, "p0")"));  // members in schema order
}

TEST(SchemaRoutes, AnyValueNestsWithoutABoundOnTheGrammarRoute) {
  auto tokenizer = testing::BundledTokenizer();
  auto vocab = tokenizer->shared_vocabulary();
  Constraint grammar_route = Constraint::JsonSchema(R"({"type":"object"})", tokenizer);
  grammar_route.options.schema_route = SchemaRoute::kGrammar;
  auto c = ConstraintCompiler().Compile(grammar_route);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->index->route(), ConstraintRoute::kGrammar);
  std::string deep = "1";
  for (int i = 0; i < 12; ++i) deep = absl::StrCat(i % 2 ? "[" : "{\"k\": ", deep, i % 2 ? "]" : "}");
  deep = absl::StrCat("{\"x\": ", deep, "}");
  auto guide = ConstraintGuide::Create(c->index);
  ASSERT_TRUE(guide.ok());
  ASSERT_TRUE(Spell(*guide, *vocab, deep)) << deep;
  EXPECT_TRUE(guide->IsAccepting());
  // The regex route (the automatic choice here) nests any value 2 deep.
  auto auto_route = ConstraintCompiler().Compile(Constraint::JsonSchema(R"({"type":"object"})", tokenizer));
  ASSERT_TRUE(auto_route.ok());
  EXPECT_EQ(auto_route->index->route(), ConstraintRoute::kRegex);
  auto rg = ConstraintGuide::Create(auto_route->index);
  ASSERT_TRUE(rg.ok());
  EXPECT_FALSE(Spell(*rg, *vocab, deep));
}

TEST(SchemaRoutes, OverTheRegexLimitTakesTheGrammarRoute) {
  // 40 open objects: each carries the any-value automaton on the regex
  // route; on the grammar route they share one rule.
  std::string props;
  for (int i = 0; i < 40; ++i) {
    absl::StrAppend(&props, i ? "," : "", "\"p", i, "\":{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\"}}}");
  }
  const std::string schema = absl::StrCat(R"({"type":"object","properties":{)", props, "}}");
  JsonSchemaOptions o;
  o.max_regex_bytes = 32 << 10;
  auto regex = JsonSchemaToRegex(schema, o);
  ASSERT_FALSE(regex.ok());
  EXPECT_EQ(regex.status().code(), absl::StatusCode::kResourceExhausted);
  auto tokenizer = testing::BundledTokenizer();
  auto vocab = tokenizer->shared_vocabulary();
  auto c = ConstraintCompiler().Compile(Constraint::JsonSchema(schema, tokenizer, o));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->index->route(), ConstraintRoute::kGrammar);
  auto guide = ConstraintGuide::Create(c->index);
  ASSERT_TRUE(guide.ok());
  ASSERT_TRUE(Spell(*guide, *vocab, R"({"p0": {"q": "x", "extra": [1, {"y": null}]}, "p7": {}})"));
  EXPECT_TRUE(guide->IsAccepting());
}

// An array of up to 1000 objects: its regex expands past the regex limits,
// so the counted repeat becomes grammar rules over one object terminal, on
// the automatic route and the grammar route alike, exact at the bounds.
TEST(SchemaRoutes, LongArrayOfObjectsCompilesOnTheGrammarRoute) {
  const std::string schema =
      R"({"type":"array","items":{"type":"object","properties":{"name":{"type":"string","maxLength":100},)"
      R"("kind":{"enum":["a","b","c"]},"size":{"type":"integer"},)"
      R"("tags":{"type":"array","items":{"type":"string","maxLength":20},"maxItems":5}},)"
      R"("required":["name","kind"],"additionalProperties":false},"minItems":2,"maxItems":1000})";
  auto regex = JsonSchemaToRegex(schema, JsonSchemaOptions{});
  ASSERT_TRUE(regex.ok()) << regex.status();
  RegexLimits rl;
  rl.max_pattern_bytes = JsonSchemaOptions{}.max_regex_bytes;
  EXPECT_EQ(Regex::Parse(regex->regex, rl).status().code(), absl::StatusCode::kResourceExhausted);
  auto array = [](int n) {
    std::string out = "[";
    for (int i = 0; i < n; ++i) {
      absl::StrAppend(&out, i ? ", " : "", R"({"name": "n)", i, R"(", "kind": ")", std::string(1, 'a' + i % 3),
                      i % 2 ? R"(", "tags": ["x"]})" : R"("})");
    }
    return out + "]";
  };
  auto tokenizer = testing::BundledTokenizer();
  auto vocab = tokenizer->shared_vocabulary();
  for (SchemaRoute route : {SchemaRoute::kAuto, SchemaRoute::kGrammar}) {
    Constraint c = Constraint::JsonSchema(schema, tokenizer);
    c.options.schema_route = route;
    auto compiled = ConstraintCompiler().Compile(c);
    ASSERT_TRUE(compiled.ok()) << SchemaRouteName(route) << ": " << compiled.status();
    EXPECT_EQ(compiled->index->route(), ConstraintRoute::kGrammar);
    for (int n : {2, 3, 999, 1000}) {
      auto guide = ConstraintGuide::Create(compiled->index);
      ASSERT_TRUE(guide.ok());
      ASSERT_TRUE(Spell(*guide, *vocab, array(n))) << n;
      EXPECT_TRUE(guide->IsAccepting()) << n;
    }
    for (int n : {0, 1, 1001}) {  // refused at the ']' or the 1001st item's ','
      auto guide = ConstraintGuide::Create(compiled->index);
      ASSERT_TRUE(guide.ok());
      EXPECT_FALSE(Spell(*guide, *vocab, array(n))) << n;
    }
    auto bad = ConstraintGuide::Create(compiled->index);
    ASSERT_TRUE(bad.ok());
    EXPECT_FALSE(Spell(*bad, *vocab, R"([{"name": "x", "kind": "a"}, {"name": "y", "kind": "d"}])"));
  }
}

// Members in any order: every subset of {a, b, c} in every order, with or
// without an undeclared member "d", against the rule written out (a present,
// no declared member twice, d only where additional members are allowed).
TEST(SchemaRoutes, AnyPropertyOrderAcceptsEveryOrderAndNothingElse) {
  for (bool open : {false, true}) {
    const std::string schema = absl::StrCat(
        R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},)",
        R"("c":{"type":"boolean"}},"required":["a"],"additionalProperties":)", open ? "true" : "false", "}");
    JsonSchemaOptions o;
    o.any_property_order = true;
    auto g = SchemaGrammar(schema, o);
    ASSERT_TRUE(g.ok()) << g.status();
    auto r = grammar::EarleyRecognizer::Create(*g);
    ASSERT_TRUE(r.ok()) << r.status();
    const std::map<char, std::string> value = {{'a', "1"}, {'b', "\"x\""}, {'c', "true"}, {'d', "null"}};
    int accepted = 0, checked = 0;
    // Every sequence of up to 4 member names over {a, b, c, d}, repeats included.
    std::vector<std::string> seqs = {""};
    for (int len = 0; len < 4; ++len) {
      const size_t n = seqs.size();
      for (size_t i = 0; i < n; ++i) {
        if (seqs[i].size() != static_cast<size_t>(len)) continue;
        for (char k : {'a', 'b', 'c', 'd'}) seqs.push_back(seqs[i] + k);
      }
    }
    for (const std::string& keys : seqs) {
      std::string text = "{";
      for (size_t i = 0; i < keys.size(); ++i) {
        absl::StrAppend(&text, i ? ", " : "", "\"", std::string(1, keys[i]), "\": ", value.at(keys[i]));
      }
      text += "}";
      // Declared members at most once; undeclared ones are not told apart
      // (as on the regex route: a repeated other key is not caught).
      std::string declared;
      for (char k : keys) if (k != 'd') declared += k;
      const std::set<char> seen(declared.begin(), declared.end());
      const bool want = seen.size() == declared.size() && seen.count('a') &&
                        (open || keys.find('d') == std::string::npos);
      auto got = r->Accepts(text);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, want) << (open ? "open: " : "closed: ") << text;
      accepted += want;
      ++checked;
    }
    EXPECT_GT(accepted, 10);
    EXPECT_GT(checked, 300);
  }
  // Through ConstraintCompiler: the automatic route takes the grammar route;
  // the regex route refuses the option; past 8 properties, schema order.
  auto tokenizer = testing::BundledTokenizer();
  JsonSchemaOptions o;
  o.any_property_order = true;
  const char* kSchema = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]})";
  auto c = ConstraintCompiler().Compile(Constraint::JsonSchema(kSchema, tokenizer, o));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->index->route(), ConstraintRoute::kGrammar);
  auto guide = ConstraintGuide::Create(c->index);
  ASSERT_TRUE(guide.ok());
  ASSERT_TRUE(Spell(*guide, *tokenizer->shared_vocabulary(), R"({"b": 2, "a": 1})"));
  EXPECT_TRUE(guide->IsAccepting());
  Constraint regex_route = Constraint::JsonSchema(kSchema, tokenizer, o);
  regex_route.options.schema_route = SchemaRoute::kRegex;
  auto refused = ConstraintCompiler().Compile(regex_route);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("any_property_order"));
  std::string nine;
  for (int i = 0; i < 9; ++i) absl::StrAppend(&nine, i ? "," : "", "\"p", i, "\":{\"type\":\"integer\"}");
  auto wide = JsonSchemaToRules(absl::StrCat(R"({"type":"object","properties":{)", nine, "}}"), o);
  ASSERT_TRUE(wide.ok()) << wide.status();
  ASSERT_FALSE(wide->warnings.empty());
  EXPECT_THAT(wide->warnings[0], HasSubstr("members in schema order"));
}

TEST(SchemaRoutes, ErrorsOfBothRoutes) {
  auto tokenizer = testing::BundledTokenizer();
  auto vocab = tokenizer->shared_vocabulary();
  // Both routes over a limit, each its own: the grammar route's error, then
  // the regex route's.
  std::string props;
  for (int i = 0; i < 40; ++i) {
    absl::StrAppend(&props, i ? "," : "", "\"p", i, "\":{\"type\":\"object\"}");
  }
  JsonSchemaOptions small;
  small.max_regex_bytes = 32 << 10;
  Constraint both = Constraint::JsonSchema(absl::StrCat(R"({"type":"object","properties":{)", props, "}}"), tokenizer, small);
  CompileLimits few_rules;
  few_rules.grammar.max_rules = 4;
  auto failed = ConstraintCompiler(few_rules).Compile(both);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted) << failed.status();
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("max_rules"));
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("(on the regex route: "));
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("max_regex_bytes"));
  EXPECT_EQ(FailedStage(failed.status()), CompileStage::kConvert);
  // Refused by the converter on both routes alike: the message once.
  auto unsupported = ConstraintCompiler().Compile(Constraint::JsonSchema(R"({"$dynamicRef":"#x"})", tokenizer));
  ASSERT_FALSE(unsupported.ok());
  EXPECT_EQ(unsupported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FailedStage(unsupported.status()), CompileStage::kConvert);
  EXPECT_THAT(std::string(unsupported.status().message()), ::testing::Not(HasSubstr("on the regex route")));
  // A recursion without a base case has no instance on either route.
  auto endless = ConstraintCompiler().Compile(
      Constraint::JsonSchema(R"({"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]})", tokenizer));
  ASSERT_FALSE(endless.ok());
  EXPECT_EQ(endless.status().code(), absl::StatusCode::kInvalidArgument);
  // A deadline that has passed ends the compilation, on whichever route.
  for (SchemaRoute route : {SchemaRoute::kAuto, SchemaRoute::kRegex, SchemaRoute::kGrammar}) {
    Constraint c = Constraint::JsonSchema(kTree, tokenizer);
    c.options.schema_route = route;
    CompileBudget late;
    late.deadline = absl::Now() - absl::Seconds(1);
    auto r = ConstraintCompiler().Compile(c, late);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << SchemaRouteName(route);
  }
}

}  // namespace
}  // namespace maskd
