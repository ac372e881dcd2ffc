// Structural tags of many tools (issue #26): 1,000 seeded tools, one tag
// each, compile under the default limits (no count of tags), and the
// compiled constraint accepts exactly the calls whose arguments an
// independent validator (the schemas' subset written directly over
// nlohmann::json) accepts: generated calls are taken, corrupted ones and
// calls under another tool's tag are refused where the validator refuses
// them. The byte and size limits refuse with errors naming them, and two
// compilations sharing a tool share its terminals' DFAs.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "constraint/constraint_compiler.h"
#include "constraint/constraint_guide.h"
#include "constraint/structural_tag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/index/test_util.h"

namespace maskd {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

const char* const kWords[] = {"city", "user", "order", "item", "file", "event", "email",
                              "price", "report", "ticket", "task", "note", "repo", "branch",
                              "flight", "hotel", "route", "image", "song", "device"};
constexpr int kNumWords = sizeof(kWords) / sizeof(kWords[0]);

struct Tool {
  std::string name;
  Json schema;
};

// A scalar schema of kind k: string (maybe bounded), integer, boolean, enum.
Json Scalar(std::mt19937& rng, int k) {
  switch (k) {
    case 0: return rng() % 3 == 0 ? Json{{"type", "string"}, {"maxLength", 12}} : Json{{"type", "string"}};
    case 1: return {{"type", "integer"}};
    case 2: return {{"type", "boolean"}};
    default: {
      Json e = Json::array();
      for (int i = 0, n = 2 + rng() % 3; i < n; ++i) e.push_back(kWords[(k + 3 * i) % kNumWords]);
      return {{"type", "string"}, {"enum", e}};
    }
  }
}

// An object of `n` distinct properties (scalars, string arrays, and at the
// top a nested object), some required, no others allowed.
Json ObjectSchema(std::mt19937& rng, int n, bool nested) {
  Json props = Json::object(), required = Json::array();
  const int first = static_cast<int>(rng() % kNumWords);
  for (int i = 0; i < n; ++i) {
    const std::string key = kWords[(first + 7 * i) % kNumWords];
    const int kind = static_cast<int>(rng() % (nested ? 6 : 4));
    if (kind == 4) {
      props[key] = {{"type", "array"}, {"items", {{"type", "string"}}}, {"maxItems", 3}};
    } else if (kind == 5) {
      props[key] = ObjectSchema(rng, 1 + rng() % 2, false);
    } else {
      props[key] = Scalar(rng, kind);
    }
    if (i == 0 || rng() % 2 == 0) required.push_back(key);
  }
  return {{"type", "object"}, {"properties", props}, {"required", required},
          {"additionalProperties", false}};
}

std::vector<Tool> MakeTools(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Tool> tools;
  for (int i = 0; i < n; ++i) {
    tools.push_back({absl::StrCat("tool_", i, "_", kWords[rng() % kNumWords]),
                     ObjectSchema(rng, 2 + rng() % 7, true)});
  }
  return tools;
}

std::string Document(const std::vector<Tool>& tools) {
  Json doc;
  for (const Tool& t : tools) {
    doc["tags"].push_back({{"begin", absl::StrCat("<function=", t.name, ">")},
                           {"schema", t.schema}, {"end", "</function>"}});
  }
  doc["triggers"] = {"<function="};
  return doc.dump();
}

// A valid instance: every required property, the others half the time.
Json Instance(std::mt19937& rng, const Json& schema) {
  if (schema.contains("enum")) return schema["enum"][rng() % schema["enum"].size()];
  const std::string type = schema["type"];
  if (type == "string") return std::string(kWords[rng() % kNumWords]).substr(0, 12);
  if (type == "integer") return static_cast<int>(rng() % 2000) - 1000;
  if (type == "boolean") return rng() % 2 == 0;
  if (type == "array") {
    Json a = Json::array();
    for (int i = 0, n = rng() % 4; i < n; ++i) a.push_back(kWords[rng() % kNumWords]);
    return a;
  }
  Json out = Json::object();
  for (auto& [key, sub] : schema["properties"].items()) {
    bool required = false;
    for (const Json& r : schema["required"]) required = required || r == key;
    if (required || rng() % 2 == 0) out[key] = Instance(rng, sub);
  }
  return out;
}

// The validator: `v` is an instance of `schema` (the subset MakeTools uses).
bool Valid(const Json& schema, const Json& v) {
  if (schema.contains("enum")) {
    for (const Json& e : schema["enum"]) {
      if (e == v) return true;
    }
    return false;
  }
  const std::string type = schema["type"];
  if (type == "string") {
    return v.is_string() && (!schema.contains("maxLength") ||
                             v.get<std::string>().size() <= schema["maxLength"].get<size_t>());
  }
  if (type == "integer") return v.is_number_integer();
  if (type == "boolean") return v.is_boolean();
  if (type == "array") {
    if (!v.is_array() || v.size() > schema["maxItems"].get<size_t>()) return false;
    for (const Json& x : v) {
      if (!x.is_string()) return false;
    }
    return true;
  }
  if (!v.is_object()) return false;
  for (const Json& r : schema["required"]) {
    if (!v.contains(r.get<std::string>())) return false;
  }
  for (auto& [key, x] : v.items()) {
    if (!schema["properties"].contains(key) || !Valid(schema["properties"][key], x)) return false;
  }
  return true;
}

// The keys of every object of `v` come in the order of its schema's
// properties (the tags' schemas keep that order by default).
bool InSchemaOrder(const Json& schema, const Json& v) {
  if (!v.is_object() || !schema.contains("properties")) return true;
  auto p = schema["properties"].begin();
  for (auto& [key, x] : v.items()) {
    while (p != schema["properties"].end() && p.key() != key) ++p;
    if (p == schema["properties"].end() || !InSchemaOrder(*p, x)) return false;
  }
  return true;
}

// JSON as Python's json.dumps writes it (", " and ": "), the layout of the
// tags' schemas by default; keys in their order.
std::string Dump(const Json& v) {
  if (!v.is_object() && !v.is_array()) return v.dump();
  std::string out = v.is_object() ? "{" : "[";
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!first) out += ", ";
    first = false;
    if (v.is_object()) out += Json(it.key()).dump() + ": ";
    out += Dump(*it);
  }
  return out + (v.is_object() ? "}" : "]");
}

std::string Call(const Tool& t, const std::string& body) {
  return absl::StrCat("Let me check. <function=", t.name, ">", body, "</function>");
}

// Whether the constraint takes `text` whole: spelled with the longest
// allowed token that starts the rest at each step (every token of a text in
// the language is allowed, so this finds it when there is one), then
// accepting.
bool Accepts(const std::shared_ptr<const ConstraintIndex>& index, const Vocabulary& vocab,
             std::string_view text) {
  auto guide = ConstraintGuide::Create(index);
  EXPECT_TRUE(guide.ok()) << guide.status();
  std::vector<uint32_t> mask(index->num_words());
  while (!text.empty()) {
    EXPECT_TRUE(guide->WriteMask(absl::MakeSpan(mask)).ok());
    int64_t best = -1;
    size_t best_len = 0;
    for (uint32_t t = 0; t < vocab.size(); ++t) {
      if (!(mask[t >> 5] >> (t & 31) & 1) || vocab.is_eos(t)) continue;
      const std::string_view b = vocab.bytes(t);
      if (b.size() > best_len && text.substr(0, b.size()) == b) best = t, best_len = b.size();
    }
    if (best < 0) return false;
    EXPECT_TRUE(guide->Advance({static_cast<uint32_t>(best)}).ok());
    text.remove_prefix(best_len);
  }
  return guide->IsAccepting();
}

// Corruption k of a valid instance of `schema` (an object): an unknown
// property, a required one dropped, a value of another type.
Json Corrupt(const Json& schema, Json v, int k) {
  if (k == 0) {
    v["zz_unknown"] = 1;
  } else if (k == 1) {
    v.erase(schema["required"][0].get<std::string>());
  } else {
    const std::string key = v.begin().key();
    v[key] = v[key].is_number() ? Json("7") : Json(7);
  }
  return v;
}

TEST(ManyTools, ThousandToolsCompileAndAgreeWithTheValidator) {
  const std::vector<Tool> tools = MakeTools(1000, 26);
  auto vocab = ::maskd::testing::BundledVocabulary();
  auto compiled = ConstraintCompiler().Compile(
      Constraint::StructuralTag(Document(tools), ::maskd::testing::BundledTokenizer()));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  std::mt19937 rng(7);
  for (int i = 0; i < 8; ++i) {
    const Tool& tool = tools[rng() % tools.size()];
    const Json args = Instance(rng, tool.schema);
    ASSERT_TRUE(Valid(tool.schema, args)) << Dump(args);
    EXPECT_TRUE(Accepts(compiled->index, *vocab, Call(tool, Dump(args)))) << Call(tool, Dump(args));
    const Json bad = Corrupt(tool.schema, args, i % 3);
    EXPECT_FALSE(Valid(tool.schema, bad)) << Dump(bad);
    EXPECT_FALSE(Accepts(compiled->index, *vocab, Call(tool, Dump(bad)))) << Call(tool, Dump(bad));
    const std::string cut = Dump(args).substr(0, Dump(args).size() - 1);  // truncated JSON
    EXPECT_FALSE(Accepts(compiled->index, *vocab, Call(tool, cut))) << Call(tool, cut);
    // The same arguments under another tool's tag: as the validator says.
    const Tool& other = tools[rng() % tools.size()];
    const bool valid_there = Valid(other.schema, args) && InSchemaOrder(other.schema, args);
    EXPECT_EQ(Accepts(compiled->index, *vocab, Call(other, Dump(args))), valid_there)
        << Call(other, Dump(args));
  }
  // Free text alone, and free text that spells a trigger without a tag.
  EXPECT_TRUE(Accepts(compiled->index, *vocab, "No tool is needed here."));
  EXPECT_FALSE(Accepts(compiled->index, *vocab, "<function=no_such_tool>{}</function>"));
}

// Begins are split into the trigger and one terminal per character: a name
// of multi-byte characters, and names sharing prefixes, keep their language.
TEST(ManyTools, BeginsWithSharedPrefixesAndUnicode) {
  const std::string doc = R"({"tags": [
      {"begin": "<f=café>", "regex": "[0-9]+", "end": "</f>"},
      {"begin": "<f=caff>", "regex": "[a-z]+", "end": "</f>"},
      {"begin": "<f=日本>", "regex": "x", "end": "</f>"}], "triggers": ["<f="]})";
  auto compiled = ConstraintCompiler().Compile(
      Constraint::StructuralTag(doc, ::maskd::testing::BundledTokenizer()));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto vocab = ::maskd::testing::BundledVocabulary();
  EXPECT_TRUE(Accepts(compiled->index, *vocab, "a <f=caf\xC3\xA9>12</f> b"));
  EXPECT_TRUE(Accepts(compiled->index, *vocab, "<f=caff>abc</f>"));
  EXPECT_TRUE(Accepts(compiled->index, *vocab, "<f=\xE6\x97\xA5\xE6\x9C\xAC>x</f>"));
  EXPECT_FALSE(Accepts(compiled->index, *vocab, "<f=caf\xC3\xA9>abc</f>"));
  EXPECT_FALSE(Accepts(compiled->index, *vocab, "<f=caff>12</f>"));
  EXPECT_FALSE(Accepts(compiled->index, *vocab, "<f=caf>1</f>"));
  EXPECT_FALSE(Accepts(compiled->index, *vocab, "<f=\xE6\x97\xA5>x</f>"));
}

TEST(ManyTools, LimitsAreBytesAndSizeNotACount) {
  const std::string doc = Document(MakeTools(3, 1));
  StructuralTagOptions options;
  options.max_bytes = doc.size() - 1;
  auto big = StructuralTagGrammar(doc, options);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("max_structural_tag_bytes"));
  EXPECT_THAT(big.status().message(), HasSubstr(absl::StrCat(doc.size(), " bytes")));
  options = {};
  options.max_symbols = 4;  // the first tag alone has more
  auto wide = StructuralTagGrammar(doc, options);
  EXPECT_EQ(wide.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(wide.status().message(), HasSubstr("max_structural_tag_symbols"));
  options.max_symbols = size_t{4} << 20;
  EXPECT_TRUE(StructuralTagGrammar(doc, options).ok());
  // Through the compiler, as a conversion error.
  CompileLimits limits;
  limits.max_structural_tag_bytes = 100;
  auto refused = ConstraintCompiler(limits).Compile(
      Constraint::StructuralTag(doc, ::maskd::testing::BundledTokenizer()));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("max_structural_tag_bytes"));
  EXPECT_EQ(FailedStage(refused.status()), CompileStage::kConvert);
}

// Builds every terminal DFA of `compiled`'s grammar, as walks reaching all
// of it would: a terminal's DFA is built when a walk first reaches it
// (grammar/deferred_dfa.h), through the compiler's cache.
void BuildTerminalDfas(const CompiledConstraint& compiled) {
  const grammar::CompiledGrammar& g = *compiled.index->grammar_index()->grammar();
  for (uint32_t t = 0; t < g.num_terminals(); ++t) g.dfa(t);
}

TEST(ManyTools, CompilationsSharingAToolShareItsDfas) {
  const std::vector<Tool> tools = MakeTools(6, 3);
  const std::string first = Document({tools[0], tools[1], tools[2]});
  const std::string second = Document({tools[0], tools[1], tools[3]});
  auto tokenizer = ::maskd::testing::BundledTokenizer();
  const ConstraintCompiler shared;
  auto once = shared.Compile(Constraint::StructuralTag(first, tokenizer));
  ASSERT_TRUE(once.ok()) << once.status();
  BuildTerminalDfas(*once);
  const grammar::TerminalDfas::Stats after_first = shared.terminal_dfas()->stats();
  auto again = shared.Compile(Constraint::StructuralTag(second, tokenizer));
  ASSERT_TRUE(again.ok()) << again.status();
  BuildTerminalDfas(*again);
  const grammar::TerminalDfas::Stats after_second = shared.terminal_dfas()->stats();
  const ConstraintCompiler fresh;
  auto alone = fresh.Compile(Constraint::StructuralTag(second, tokenizer));
  ASSERT_TRUE(alone.ok()) << alone.status();
  BuildTerminalDfas(*alone);
  const grammar::TerminalDfas::Stats own = fresh.terminal_dfas()->stats();
  // The second compilation built fewer DFAs than it builds alone, and took
  // more from the cache: tools 0 and 1's.
  EXPECT_LT(after_second.misses - after_first.misses, own.misses);
  EXPECT_GT(after_second.hits - after_first.hits, own.hits);
  // And lowered tools 0 and 1 once: each schema's lowering is shared.
  EXPECT_EQ(shared.schema_grammars()->stats().misses, 4u);  // tools 0, 1, 2, 3
  EXPECT_EQ(shared.schema_grammars()->stats().hits, 2u);    // tools 0, 1 again
  EXPECT_EQ(fresh.schema_grammars()->stats().hits, 0u);
  // A compiler without the cache builds every DFA, and the masks agree.
  CompileLimits no_cache;
  no_cache.terminal_dfa_bytes = 0;
  no_cache.schema_grammar_bytes = 0;
  const ConstraintCompiler uncached(no_cache);
  EXPECT_EQ(uncached.terminal_dfas(), nullptr);
  auto built = uncached.Compile(Constraint::StructuralTag(second, tokenizer));
  ASSERT_TRUE(built.ok()) << built.status();
  auto vocab = ::maskd::testing::BundledVocabulary();
  std::mt19937 rng(5);
  for (int i = 0; i < 3; ++i) {
    const Tool& tool = tools[i == 2 ? 3 : i];
    const std::string call = Call(tool, Dump(Instance(rng, tool.schema)));
    EXPECT_TRUE(Accepts(again->index, *vocab, call)) << call;
    EXPECT_TRUE(Accepts(built->index, *vocab, call)) << call;
    auto a = ConstraintGuide::Create(again->index), b = ConstraintGuide::Create(built->index);
    ASSERT_TRUE(a.ok() && b.ok());
    std::vector<uint32_t> ma(again->index->num_words()), mb(built->index->num_words());
    for (size_t pos = 0; pos < 12 && pos < call.size(); ++pos) {
      ASSERT_TRUE(a->WriteMask(absl::MakeSpan(ma)).ok() && b->WriteMask(absl::MakeSpan(mb)).ok());
      EXPECT_EQ(ma, mb) << "at byte " << pos << " of " << call;
      // One byte at a time: the byte's own token.
      uint32_t byte_token = 0;
      for (uint32_t t = 0; t < vocab->size(); ++t) {
        if (vocab->bytes(t) == call.substr(pos, 1) && !vocab->is_eos(t)) byte_token = t;
      }
      ASSERT_TRUE(a->Advance({byte_token}).ok() && b->Advance({byte_token}).ok());
    }
  }
}

}  // namespace
}  // namespace maskd
