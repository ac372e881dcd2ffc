// Structural tags: the grammar's language against a direct oracle (trigger
// search plus RE2 for each tag's content) on random texts; sampled outputs of
// the compiled constraint checked by the same oracle; errors.
#include "constraint/structural_tag.h"

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "constraint/constraint_compiler.h"
#include "constraint/constraint_guide.h"
#include "gmock/gmock.h"
#include "grammar/earley.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "re2/re2.h"
#include "tests/index/test_util.h"

namespace maskd {
namespace {

using ::testing::HasSubstr;

struct Tag {
  std::string begin, regex, end;
};

// The language of docs/grammars.md written directly: free text holds no
// trigger; where a trigger occurs, a tag whose begin is there follows, its
// content matching its regex in full (RE2) up to its end.
bool OracleAccepts(const std::string& text, const std::vector<Tag>& tags,
                   const std::vector<std::string>& triggers, bool at_least_one,
                   bool stop_after_first, size_t pos = 0, int count = 0) {
  // The first trigger at or after `pos`.
  size_t next = std::string::npos;
  for (const std::string& t : triggers) next = std::min(next, text.find(t, pos));
  if (next == std::string::npos) return !at_least_one || count > 0;
  if (stop_after_first && count > 0) return false;
  for (const Tag& tag : tags) {
    if (text.compare(next, tag.begin.size(), tag.begin) != 0) continue;
    const size_t from = next + tag.begin.size();
    // Every split of content and end.
    for (size_t to = from; to <= text.size(); ++to) {
      if (text.compare(to, tag.end.size(), tag.end) != 0) continue;
      if (!RE2::FullMatch(text.substr(from, to - from), tag.regex)) continue;
      const size_t after = to + tag.end.size();
      if (stop_after_first) {
        if (after == text.size()) return true;
        continue;
      }
      if (OracleAccepts(text, tags, triggers, at_least_one, stop_after_first, after, count + 1)) {
        return true;
      }
    }
  }
  return false;
}

std::string Document(const std::vector<Tag>& tags, const std::vector<std::string>& triggers,
                     bool at_least_one, bool stop_after_first) {
  nlohmann::json doc;
  for (const Tag& t : tags) doc["tags"].push_back({{"begin", t.begin}, {"regex", t.regex}, {"end", t.end}});
  doc["triggers"] = triggers;
  doc["at_least_one"] = at_least_one;
  doc["stop_after_first"] = stop_after_first;
  return doc.dump();
}

TEST(StructuralTag, LanguageMatchesTheOracle) {
  const std::vector<Tag> tags = {{"<f=a>", "[0-9]{1,3}", "</f>"}, {"<f=b>", "x*", "</f>"},
                                 {"<g>", "(y|z)+", ""}};
  const std::vector<std::string> triggers = {"<f=", "<g>"};
  const std::vector<std::string> pieces = {"a", "<", "f", "=", "b", ">", "</f>", "1", "x",
                                           "y", "<f=a>", "<f=b>", "<g>", "\xC3\xA9", " ",
                                           "<f=a>7</f>", "<f=b></f>", "<g>zy"};
  std::mt19937 rng(3);
  for (int flags = 0; flags < 4; ++flags) {
    const bool at_least_one = flags & 1, stop_after_first = flags & 2;
    auto g = StructuralTagGrammar(Document(tags, triggers, at_least_one, stop_after_first));
    ASSERT_TRUE(g.ok()) << g.status();
    auto recognizer = grammar::EarleyRecognizer::Create(*g);
    ASSERT_TRUE(recognizer.ok()) << recognizer.status();
    int accepted = 0;
    for (int n = 0; n < 1500; ++n) {
      std::string text;
      const int len = static_cast<int>(rng() % 12);
      for (int i = 0; i < len; ++i) text += pieces[rng() % pieces.size()];
      auto got = recognizer->Accepts(text);
      ASSERT_TRUE(got.ok());
      const bool want = OracleAccepts(text, tags, triggers, at_least_one, stop_after_first);
      ASSERT_EQ(*got, want) << "flags " << flags << " text '" << text << "'";
      accepted += want;
    }
    EXPECT_GT(accepted, 10) << "flags " << flags;
  }
}

// A tool-call tag with a JSON Schema, compiled against the bundled tokenizer:
// sampled outputs are free text around well-formed calls.
TEST(StructuralTag, SampledOutputsHoldValidCalls) {
  const std::string doc = R"({"tags": [{"begin": "<tool_call>", "end": "</tool_call>",
      "schema": {"type": "object", "properties": {"name": {"enum": ["get_weather"]},
                 "arguments": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
                               "required": ["city"], "additionalProperties": false}},
                 "required": ["name", "arguments"], "additionalProperties": false}}],
      "at_least_one": true, "stop_after_first": true})";
  auto vocab = ::maskd::testing::BundledVocabulary();
  auto compiled = ConstraintCompiler().Compile(
      Constraint::StructuralTag(doc, ::maskd::testing::BundledTokenizer()));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(compiled->index->route(), ConstraintRoute::kGrammar);
  const RE2 call(R"(([^<]|<[^t]|<t[^o])*<tool_call>\{"name": "get_weather", "arguments": \{"city": "[^"\\]{0,8}"\}\}</tool_call>)");
  ASSERT_TRUE(call.ok());
  std::mt19937 rng(9);
  std::vector<uint32_t> row(compiled->index->num_words());
  int finished = 0;
  for (int walk = 0; walk < 6; ++walk) {
    auto guide = ConstraintGuide::Create(compiled->index);
    ASSERT_TRUE(guide.ok());
    std::string text;
    // Random free text for a few tokens, then the trigger spelled with the
    // longest allowed tokens, then anything allowed (EOS when allowed).
    std::string trigger = "<tool_call>";
    for (int step = 0; step < 120 && !guide->IsFinished(); ++step) {
      ASSERT_TRUE(guide->WriteMask(absl::MakeSpan(row)).ok());
      std::vector<uint32_t> allowed;
      for (uint32_t t = 0; t < vocab->size(); ++t) {
        if (row[t >> 5] >> (t & 31) & 1) allowed.push_back(t);
      }
      ASSERT_FALSE(allowed.empty());
      uint32_t t = allowed[rng() % allowed.size()];
      if (step < 3) {
        while (vocab->is_eos(t) || vocab->bytes(t).find('<') != std::string_view::npos) {
          t = allowed[rng() % allowed.size()];
        }
      } else if (!trigger.empty()) {
        size_t best = 0;
        for (uint32_t a : allowed) {
          std::string_view b = vocab->bytes(a);
          if (!vocab->is_eos(a) && b.size() > best && trigger.compare(0, b.size(), b) == 0) {
            best = b.size();
            t = a;
          }
        }
        ASSERT_GT(best, 0u) << "no allowed token continues the trigger after '" << text << "'";
        trigger.erase(0, best);
      } else if (guide->IsAccepting()) {
        t = vocab->eos_ids()[0];
      }
      ASSERT_TRUE(guide->Advance({t}).ok());
      if (!vocab->is_eos(t)) text += vocab->bytes(t);
    }
    if (!guide->IsFinished()) continue;
    ++finished;
    EXPECT_TRUE(RE2::FullMatch(text, call)) << text;
  }
  EXPECT_GE(finished, 1);
}

// A tag whose content is a context-free grammar (balanced parentheses around
// y), checked against a direct recursive oracle on random texts.
bool Balanced(const std::string& s) {  // "(" * n + "y" + ")" * n
  const size_t y = s.find('y');
  if (y == std::string::npos || s.size() != 2 * y + 1) return false;
  return s.find_first_not_of('(') == y && s.find_first_not_of(')', y + 1) == std::string::npos;
}

bool BalancedTagsAccept(const std::string& text, size_t pos = 0) {
  const size_t at = text.find("<p>", pos);
  if (at == std::string::npos) return true;
  for (size_t end = text.find("</p>", at + 3); end != std::string::npos;
       end = text.find("</p>", end + 1)) {
    if (Balanced(text.substr(at + 3, end - at - 3)) && BalancedTagsAccept(text, end + 4)) return true;
  }
  return false;
}

TEST(StructuralTag, GrammarContentMatchesTheOracle) {
  const std::string doc = R"({"tags": [{"begin": "<p>", "end": "</p>",
      "grammar": {"format": "gbnf", "text": "root ::= \"(\" root \")\" | \"y\"\n"}}]})";
  auto g = StructuralTagGrammar(doc);
  ASSERT_TRUE(g.ok()) << g.status();
  auto recognizer = grammar::EarleyRecognizer::Create(*g);
  ASSERT_TRUE(recognizer.ok()) << recognizer.status();
  const std::vector<std::string> pieces = {"a", "<", "p", ">", "<p>", "</p>", "(", ")", "y", "((y))"};
  std::mt19937 rng(17);
  int tagged = 0;
  for (int n = 0; n < 3000; ++n) {
    std::string text;
    const int len = static_cast<int>(rng() % 10);
    for (int i = 0; i < len; ++i) text += pieces[rng() % pieces.size()];
    auto got = recognizer->Accepts(text);
    ASSERT_TRUE(got.ok());
    const bool want = BalancedTagsAccept(text);
    ASSERT_EQ(*got, want) << "text '" << text << "'";
    tagged += want && text.find("<p>") != std::string::npos;
  }
  EXPECT_GT(tagged, 5);
  // Its own errors and %ignore are refused with the tag's place.
  auto bad = StructuralTagGrammar(
      R"({"tags": [{"begin": "<p>", "grammar": {"format": "gbnf", "text": "root ::= [z-a]"}}]})");
  EXPECT_THAT(bad.status().message(), HasSubstr("tags[0].grammar: line 1"));
  auto ignore = StructuralTagGrammar(
      R"({"tags": [{"begin": "<p>", "grammar": {"format": "lark", "text": "start: \"a\"\n%ignore \" \"\n"}}]})");
  EXPECT_THAT(ignore.status().message(), HasSubstr("%ignore is not supported"));
  auto format = StructuralTagGrammar(
      R"({"tags": [{"begin": "<p>", "grammar": {"format": "yaml", "text": "x"}}]})");
  EXPECT_THAT(format.status().message(), HasSubstr("tags[0].grammar.format"));
}

// A tag whose schema recurses ($ref to itself) is exact at any depth (the
// grammar route), beyond the regex route's max_recursion_depth (3). Oracle:
// the content parses as JSON, has the tree's shape, and is written as maskd
// writes JSON (", " and ": ").
std::optional<std::string> CanonicalTree(const nlohmann::json& j) {
  if (!j.is_object() || j.size() != 1 || !j.contains("c") || !j["c"].is_array()) return std::nullopt;
  std::string out = "{\"c\": [";
  for (size_t i = 0; i < j["c"].size(); ++i) {
    auto child = CanonicalTree(j["c"][i]);
    if (!child) return std::nullopt;
    out += (i > 0 ? ", " : "") + *child;
  }
  return out + "]}";
}

std::string RandomTree(std::mt19937& rng, int depth) {
  std::string out = "{\"c\": [";
  const int n = depth >= 8 ? 0 : static_cast<int>(rng() % 3);
  for (int i = 0; i < n; ++i) out += (i > 0 ? ", " : "") + RandomTree(rng, depth + 1);
  return out + "]}";
}

TEST(StructuralTag, RecursiveSchemaContentIsExactAtAnyDepth) {
  const std::string doc = R"({"tags": [{"begin": "<t>", "end": "</t>", "schema": {
      "$defs": {"node": {"type": "object", "properties": {"c": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                         "required": ["c"], "additionalProperties": false}},
      "$ref": "#/$defs/node"}}], "at_least_one": true, "stop_after_first": true})";
  auto g = StructuralTagGrammar(doc);
  ASSERT_TRUE(g.ok()) << g.status();
  auto recognizer = grammar::EarleyRecognizer::Create(*g);
  ASSERT_TRUE(recognizer.ok()) << recognizer.status();
  std::string deep = "{\"c\": []}";
  for (int d = 0; d < 9; ++d) deep = "{\"c\": [" + deep + "]}";
  auto got = recognizer->Accepts("<t>" + deep + "</t>");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got) << "ten levels deep";
  std::mt19937 rng(23);
  const std::string alphabet = "{}[]\",: c";
  int accepted = 0, rejected = 0;
  for (int n = 0; n < 600; ++n) {
    std::string content = RandomTree(rng, 0);
    if (n % 3 != 0) {  // a mutation: one byte deleted, inserted or replaced
      const size_t at = rng() % content.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: content.erase(at, 1); break;
        case 1: content.insert(at, 1, c); break;
        default: content[at] = c; break;
      }
    }
    const nlohmann::json parsed = nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/false);
    const auto canonical = parsed.is_discarded() ? std::nullopt : CanonicalTree(parsed);
    const bool want = canonical.has_value() && *canonical == content;
    auto accepts = recognizer->Accepts("<t>" + content + "</t>");
    ASSERT_TRUE(accepts.ok());
    ASSERT_EQ(*accepts, want) << content;
    (want ? accepted : rejected)++;
  }
  EXPECT_GT(accepted, 150);
  EXPECT_GT(rejected, 150);
}

TEST(StructuralTag, ErrorsNameTheirPlace) {
  struct Case {
    std::string doc, message;
  } cases[] = {
      {"not json", "not valid JSON"},
      {R"({"tags": []})", "tags: expected a non-empty array"},
      {R"({"tags": [{"begin": "<a>", "regex": "x"}], "colour": 1})", "colour: unknown field"},
      {R"({"tags": [{"begin": "<a>"}]})", "tags[0]: give exactly one of schema, regex or grammar"},
      {R"({"tags": [{"begin": "<a>", "regex": "x", "schema": {}}]})", "exactly one"},
      {R"({"tags": [{"begin": "", "regex": "x"}]})", "tags[0].begin: must not be empty"},
      {R"({"tags": [{"begin": "<a>", "regex": "x"}], "triggers": ["<b"]})",
       "tags[0].begin: starts with no trigger"},
      {R"({"tags": [{"begin": "<a>", "schema": {"type": "nonsense"}}]})", "tags[0].schema"},
      {R"({"tags": [{"begin": "<a>", "regex": "x", "end": 3}]})", "tags[0].end: expected a string"},
      {R"({"tags": [{"begin": "<a>", "regex": "x"}], "at_least_one": "yes"})", "at_least_one"},
  };
  for (const Case& c : cases) {
    auto g = StructuralTagGrammar(c.doc);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << c.doc;
    EXPECT_THAT(g.status().message(), HasSubstr(c.message)) << c.doc;
  }
  StructuralTagOptions small;
  small.max_bytes = 40;
  auto many = StructuralTagGrammar(
      R"({"tags": [{"begin": "<a>", "regex": "x"}, {"begin": "<b>", "regex": "y"}]})", small);
  EXPECT_EQ(many.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(many.status().message(), HasSubstr("(max_structural_tag_bytes)"));
  // Through ConstraintCompiler an error of the document is a conversion error.
  auto bad = ConstraintCompiler().Compile(
      Constraint::StructuralTag("{}", ::maskd::testing::BundledTokenizer()));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FailedStage(bad.status()), CompileStage::kConvert);
}

}  // namespace
}  // namespace maskd
