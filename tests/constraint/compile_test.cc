// ConstraintCompiler: the same index as the stages it replaces
// (JsonSchemaToRegex then CompileRegex with the schema route's regex limit),
// its budget (deadline and cancel before each stage and inside the schema
// conversion), its limits (state caps reaching the converter's own DFAs, size
// limits) and its refusal of a constraint without a tokenizer.
#include "constraint/constraint_compiler.h"

#include <time.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "index/token_index.h"
#include "schema/json_schema.h"
#include "tests/index/test_util.h"

namespace maskd {
namespace {

using ::maskd::testing::BundledTokenizer;
using ::testing::HasSubstr;

// CPU time of the calling thread, which runs the compilation: a bound on the
// work done, unlike wall time, does not depend on what else the machine runs.
absl::Duration ThreadCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

// Masks of the first `max_states` live states agree (both indexes come from
// one regex, and DFA construction numbers states deterministically).
void ExpectSameMasks(const TokenIndex& a, const TokenIndex& b, uint32_t max_states = 48) {
  ASSERT_EQ(a.dfa().num_states(), b.dfa().num_states());
  ASSERT_EQ(a.start(), b.start());
  ASSERT_EQ(a.num_words(), b.num_words());
  std::vector<uint32_t> ma(a.num_words()), mb(b.num_words());
  for (Dfa::State s = 1; s < a.dfa().num_states() && s <= max_states; ++s) {
    EXPECT_TRUE(a.WriteMask(s, ma.data()).ok());
    EXPECT_TRUE(b.WriteMask(s, mb.data()).ok());
    ASSERT_EQ(ma, mb) << "state " << s;
    ASSERT_EQ(a.dfa().IsAccepting(s), b.dfa().IsAccepting(s)) << "state " << s;
  }
}

TEST(ConstraintCompiler, RegexGivesCompileRegexsIndex) {
  auto context = BundledTokenizer();
  for (const std::string regex : {"[0-9]+", "(cat|dog)s?", R"([a-z]{2,5}@[a-z]+\.(com|org))",
                                  R"re(\{"a": "[^"\\]{0,12}"\})re"}) {
    SCOPED_TRACE(regex);
    // By default whole when it fits eager_dfa_states (these do), else
    // lazily (its states numbered as walks reach them); lazily with
    // eager_dfa_states 0; whole with eager_dfa, state for state
    // CompileRegex's default.
    Constraint c = Constraint::Regex(regex, context);
    auto fits = ConstraintCompiler().Compile(c);
    ASSERT_TRUE(fits.ok()) << fits.status();
    EXPECT_FALSE(fits->index->token_index()->dfa().lazy());
    CompileLimits always_lazy;
    always_lazy.eager_dfa_states = 0;
    auto lazy = ConstraintCompiler(always_lazy).Compile(c);
    ASSERT_TRUE(lazy.ok()) << lazy.status();
    EXPECT_TRUE(lazy->index->token_index()->dfa().lazy());
    c.options.eager_dfa = true;
    auto compiled = ConstraintCompiler().Compile(c);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    EXPECT_TRUE(compiled->warnings.empty());
    auto old = CompileRegex(regex, context);
    ASSERT_TRUE(old.ok()) << old.status();
    ExpectSameMasks(*compiled->index->token_index(), **old);
    ExpectSameMasks(*fits->index->token_index(), **old);
  }
}

TEST(ConstraintCompiler, SchemaGivesTheConvertedRegexsIndexAndWarnings) {
  auto context = BundledTokenizer();
  const std::string schemas[] = {
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},
          "age":{"type":"integer","minimum":0,"maximum":150},
          "tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3}},
          "required":["name","age"]})",
      R"({"type":"string","pattern":"^[A-Z][a-z]+$"})",
      R"({"anyOf":[{"type":"boolean"},{"type":"null"},{"const":"x"}]})",
      R"({"type":"array","items":{"type":"number"},"uniqueItems":true})",
  };
  JsonSchemaOptions compact;
  compact.whitespace = JsonWhitespace::kCompact;
  for (const JsonSchemaOptions& options : {JsonSchemaOptions(), compact}) {
    for (const std::string& schema : schemas) {
      SCOPED_TRACE(schema);
      auto compiled = ConstraintCompiler().Compile(Constraint::JsonSchema(schema, context, options));
      ASSERT_TRUE(compiled.ok()) << compiled.status();
      // The stages by hand, as the service, maskctl and maskbench ran them.
      auto converted = JsonSchemaToRegex(schema, options);
      ASSERT_TRUE(converted.ok()) << converted.status();
      CompileOptions regex_options;
      regex_options.regex.max_pattern_bytes = options.max_regex_bytes;
      auto old = CompileRegex(converted->regex, context, regex_options);
      ASSERT_TRUE(old.ok()) << old.status();
      ExpectSameMasks(*compiled->index->token_index(), **old);
      EXPECT_EQ(compiled->warnings, converted->warnings);
    }
  }
  auto unique = ConstraintCompiler().Compile(Constraint::JsonSchema(schemas[3], context));
  ASSERT_TRUE(unique.ok());
  ASSERT_EQ(unique->warnings.size(), 1u);
  EXPECT_THAT(unique->warnings[0], HasSubstr("uniqueItems"));
}

// Masks agree on every state pair (a's, b's) that one token sequence
// reaches, breadth-first over the allowed tokens, up to `max_pairs` of a's
// states: a lazy DFA (unminimized) numbers its states otherwise.
void ExpectSameMasksAlongWalks(const TokenIndex& a, const TokenIndex& b, size_t max_pairs = 400) {
  ASSERT_EQ(a.num_words(), b.num_words());
  std::vector<std::pair<Dfa::State, Dfa::State>> queue = {{a.start(), b.start()}};
  absl::flat_hash_set<Dfa::State> seen = {a.start()};
  std::vector<uint32_t> ma(a.num_words()), mb(b.num_words());
  for (size_t i = 0; i < queue.size() && i < max_pairs; ++i) {
    const auto [sa, sb] = queue[i];
    ASSERT_TRUE(a.WriteMask(sa, ma.data()).ok());
    ASSERT_TRUE(b.WriteMask(sb, mb.data()).ok());
    ASSERT_EQ(ma, mb) << "pair " << i;
    ASSERT_EQ(a.dfa().IsAccepting(sa), b.dfa().IsAccepting(sb)) << "pair " << i;
    for (uint32_t t = 0; t < a.vocabulary().size(); ++t) {
      if (!((ma[t >> 5] >> (t & 31)) & 1) || a.vocabulary().is_eos(t)) continue;
      const Dfa::State ta = a.NextState(sa, t);
      if (seen.insert(ta).second) queue.push_back({ta, b.NextState(sb, t)});
    }
  }
}

// A schema's DFA is lazy on the regex and automatic routes (the automatic
// one builds it out to test that it fits) once it does not fit
// eager_dfa_states (0 here, so even a small one is lazy), whole with
// eager_dfa; the masks are the same along every walk.
TEST(ConstraintCompiler, SchemaDfaLazyUnlessEagerWithTheSameMasks) {
  auto context = BundledTokenizer();
  const std::string schemas[] = {
      R"({"type":"object","properties":{"id":{"type":"integer"},
          "name":{"type":"string","maxLength":6},"kind":{"enum":["a","bc","def"]},
          "tags":{"type":"array","items":{"type":"string","pattern":"^[a-z]+$"},"maxItems":2},
          "extra":{}},"required":["id"]})",
      R"({"anyOf":[{"type":"number","minimum":-5,"maximum":1e3},{"type":"null"},
          {"type":"object","additionalProperties":{"type":"boolean"}}]})",
  };
  for (const std::string& schema : schemas) {
    SCOPED_TRACE(schema);
    Constraint c = Constraint::JsonSchema(schema, context);
    c.options.eager_dfa = true;
    auto whole = ConstraintCompiler().Compile(c);
    ASSERT_TRUE(whole.ok()) << whole.status();
    ASSERT_FALSE(whole->index->token_index()->dfa().lazy());
    c.options.eager_dfa = false;
    CompileLimits always_lazy;
    always_lazy.eager_dfa_states = 0;
    for (SchemaRoute route : {SchemaRoute::kAuto, SchemaRoute::kRegex}) {
      c.options.schema_route = route;
      // By default whole if it fits eager_dfa_states, else lazy: the same masks.
      auto by_default = ConstraintCompiler().Compile(c);
      ASSERT_TRUE(by_default.ok()) << by_default.status();
      ExpectSameMasksAlongWalks(*by_default->index->token_index(), *whole->index->token_index());
      auto lazy = ConstraintCompiler(always_lazy).Compile(c);
      ASSERT_TRUE(lazy.ok()) << lazy.status();
      const TokenIndex& ix = *lazy->index->token_index();
      ASSERT_TRUE(ix.dfa().lazy());
      // kAuto built every state while compiling; kRegex only the start.
      const uint32_t built = ix.dfa().num_states();
      if (route == SchemaRoute::kAuto) {
        EXPECT_GE(built, whole->index->token_index()->dfa().num_states());
      } else {
        EXPECT_EQ(built, 2u);  // the dead state and the start
      }
      ExpectSameMasksAlongWalks(ix, *whole->index->token_index());
      if (route == SchemaRoute::kAuto) {
        EXPECT_EQ(ix.dfa().num_states(), built);  // the walks built nothing new
      }
    }
  }
}

TEST(ConstraintCompiler, EagerPrecomputesEveryReachableState) {
  Constraint eager = Constraint::JsonSchema(R"({"enum":["yes","no"]})", BundledTokenizer());
  eager.options.eager = true;
  auto compiled = ConstraintCompiler().Compile(eager);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_GT(compiled->index->token_index()->num_computed_states(), 1u);
}

// A schema whose conversion takes seconds: `n` string properties, each with a
// distinct unanchored pattern whose search automaton passes the converter's
// 4000-state cap (so each costs one capped DFA build, about 5 ms, then is
// matched as anchored).
std::string SlowSchema(int n) {
  std::string props;
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&props, i ? "," : "", "\"p", i, R"(":{"type":"string","pattern":"q)", i,
                    R"(.{12}z"})");
  }
  return absl::StrCat(R"({"type":"object","properties":{)", props, "}}");
}

TEST(ConstraintCompiler, SpentBudgetStopsBeforeAnyStage) {
  auto context = BundledTokenizer();
  std::atomic<bool> cancel{true};
  CompileBudget cancelled;
  cancelled.cancel = &cancel;
  CompileBudget expired;
  expired.deadline = absl::InfinitePast();
  const ConstraintCompiler compiler;
  for (const Constraint& c : {Constraint::Regex("[0-9]+", context),
                              Constraint::JsonSchema(R"({"type":"integer"})", context)}) {
    EXPECT_EQ(compiler.Compile(c, cancelled).status().code(), absl::StatusCode::kCancelled);
    EXPECT_EQ(compiler.Compile(c, expired).status().code(), absl::StatusCode::kDeadlineExceeded);
  }
}

TEST(ConstraintCompiler, DeadlineTripsInsideSchemaConversion) {
  const std::string schema = SlowSchema(2000);  // about 10 s of conversion unbounded
  CompileBudget budget;
  budget.deadline = absl::Now() + absl::Milliseconds(100);
  const absl::Duration start = ThreadCpuTime();
  auto r = ConstraintCompiler().Compile(Constraint::JsonSchema(schema, BundledTokenizer()), budget);
  const absl::Duration took = ThreadCpuTime() - start;  // ~10 s if the deadline did not stop it
  ASSERT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_EQ(FailedStage(r.status()), CompileStage::kConvert);
  EXPECT_THAT(r.status().message(), HasSubstr("JSON Schema conversion exceeded its deadline"));
  EXPECT_LT(took, absl::Seconds(3));
}

TEST(ConstraintCompiler, CancelTripsInsideSchemaConversion) {
  const std::string schema = SlowSchema(2000);
  std::atomic<bool> cancel{false};
  CompileBudget budget;
  budget.cancel = &cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancel.store(true);
  });
  const absl::Duration start = ThreadCpuTime();
  auto r = ConstraintCompiler().Compile(Constraint::JsonSchema(schema, BundledTokenizer()), budget);
  const absl::Duration took = ThreadCpuTime() - start;
  canceller.join();
  ASSERT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_EQ(FailedStage(r.status()), CompileStage::kConvert);
  EXPECT_THAT(r.status().message(), HasSubstr("JSON Schema conversion cancelled"));
  EXPECT_LT(took, absl::Seconds(3));
}

// One enum value tested against its sibling pattern: a single converter DFA
// build of about 500,000 states (about 5 s here) once the caller raises the
// cap, after the schema's first and only clock check between subschemas, so
// only the DFA build itself can see the deadline pass.
TEST(JsonSchemaBudget, DeadlineTripsInsideTheConvertersDfaBuild) {
  const std::string schema =
      R"({"type":"string","enum":["x"],"pattern":"^[a-z]*q[a-z]{18}z$"})";
  JsonSchemaOptions options;
  options.budget.max_states = 1 << 22;
  options.budget.deadline = absl::Now() + absl::Milliseconds(50);
  const absl::Duration start = ThreadCpuTime();
  auto r = JsonSchemaToRegex(schema, options);
  EXPECT_LT(ThreadCpuTime() - start, absl::Seconds(2));  // ~5 s if the deadline did not stop it
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  // Under the default cap the build stops at 50,000 states and the value is
  // kept unchecked.
  auto kept = JsonSchemaToRegex(schema);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->regex, R"("x")");
}

// The converter's own DFAs take the caller's state cap: an enum filtered by a
// sibling pattern keeps the value the filter would drop when the pattern's
// automaton (x{20}: over 20 states) does not fit; the values are then checked
// neither one by one nor by the rest's regex.
TEST(ConstraintCompiler, StateCapReachesTheConvertersDfas) {
  const std::string schema = R"({"type":"string","enum":["ab","abcd"],"pattern":"^(ab|x{20})$"})";
  auto context = BundledTokenizer();
  auto filtered = ConstraintCompiler().Compile(Constraint::JsonSchema(schema, context));
  ASSERT_TRUE(filtered.ok()) << filtered.status();
  EXPECT_TRUE(filtered->index->token_index()->dfa().Matches(R"("ab")"));
  EXPECT_FALSE(filtered->index->token_index()->dfa().Matches(R"("abcd")"));

  CompileLimits capped;
  capped.max_dfa_states = 12;  // the result needs 8 states, the pattern over 20
  auto kept = ConstraintCompiler(capped).Compile(Constraint::JsonSchema(schema, context));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(kept->index->token_index()->dfa().Matches(R"("ab")"));
  EXPECT_TRUE(kept->index->token_index()->dfa().Matches(R"("abcd")"));

  JsonSchemaOptions low;
  low.budget.max_states = 12;
  auto by_options = JsonSchemaToRegex(schema, low);
  ASSERT_TRUE(by_options.ok()) << by_options.status();
  EXPECT_THAT(by_options->regex, HasSubstr("abcd"));
}

TEST(ConstraintCompiler, LimitsAreResourceExhaustedNamingTheLimit) {
  auto context = BundledTokenizer();
  const std::string object_schema =
      R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}})";
  struct Case {
    const char* limit;
    Constraint constraint;
    CompileLimits limits;
  };
  std::vector<Case> cases;
  {
    JsonSchemaOptions o;
    o.max_schema_bytes = 8;
    cases.push_back({"max_schema_bytes", Constraint::JsonSchema(object_schema, context, o), {}});
  }
  {
    JsonSchemaOptions o;
    o.max_regex_bytes = 100;
    cases.push_back({"max_regex_bytes", Constraint::JsonSchema(object_schema, context, o), {}});
  }
  {
    CompileLimits o;
    o.regex.max_pattern_bytes = 4;
    cases.push_back({"max_pattern_bytes", Constraint::Regex("[0-9]+x", context), o});
  }
  {
    CompileLimits o;
    o.max_dfa_states = 4;
    Constraint whole = Constraint::Regex("[a-z]{10}", context);
    whole.options.eager_dfa = true;
    cases.push_back({"max_states", whole, o});
    cases.push_back({"max_states", Constraint::JsonSchema(object_schema, context), o});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.constraint.text);
    auto r = ConstraintCompiler(c.limits).Compile(c.constraint);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.limit));
  }
  // A lazy regex DFA (the default) meets max_states while walking: the
  // first mask that needs a fifth state.
  CompileLimits o;
  o.max_dfa_states = 4;
  auto lazy = ConstraintCompiler(o).Compile(Constraint::Regex("[a-z]{10}", context));
  ASSERT_TRUE(lazy.ok()) << lazy.status();
  const TokenIndex& ix = *lazy->index->token_index();
  std::vector<uint32_t> mask(ix.num_words());
  const absl::Status walked = ix.WriteMask(ix.start(), mask.data());
  EXPECT_EQ(walked.code(), absl::StatusCode::kResourceExhausted) << walked;
  EXPECT_THAT(walked.message(), HasSubstr("max_states"));
  EXPECT_LE(ix.dfa().num_states(), 4u);
}

// A converted regex may be as long as max_regex_bytes allows, past the
// regex parser's max_pattern_bytes for hand-written regexes.
TEST(ConstraintCompiler, SchemaRouteTakesTheConvertersRegexLimit) {
  auto context = BundledTokenizer();
  const std::string schema =
      R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},
          "required":["a","b"],"additionalProperties":false})";
  CompileOptions options;
  options.regex.max_pattern_bytes = 32;
  CompileLimits limits;
  limits.regex = options.regex;
  auto converted = JsonSchemaToRegex(schema);
  ASSERT_TRUE(converted.ok());
  ASSERT_GT(converted->regex.size(), 32u);
  EXPECT_EQ(CompileRegex(converted->regex, context, options).status().code(),
            absl::StatusCode::kResourceExhausted);
  auto r = ConstraintCompiler(limits).Compile(Constraint::JsonSchema(schema, context));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->index->token_index()->dfa().Matches(R"({"a": "x", "b": 1})"));
  // The same text as a regex is held to max_pattern_bytes.
  EXPECT_EQ(
      ConstraintCompiler(limits).Compile(Constraint::Regex(converted->regex, context)).status().code(),
      absl::StatusCode::kResourceExhausted);
}

TEST(ConstraintCompiler, ErrorsNameTheirStage) {
  auto context = BundledTokenizer();
  const ConstraintCompiler compiler;
  auto bad_schema =
      compiler.Compile(Constraint::JsonSchema(R"({"type":"string","pattern":"(a)\\1"})", context));
  ASSERT_EQ(bad_schema.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FailedStage(bad_schema.status()), CompileStage::kConvert);
  auto bad_regex = compiler.Compile(Constraint::Regex("(a", context));
  ASSERT_EQ(bad_regex.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FailedStage(bad_regex.status()), CompileStage::kIndex);
  CompileLimits tiny_limits;
  tiny_limits.max_dfa_states = 4;
  const ConstraintCompiler tiny(tiny_limits);
  // On the regex route the one DFA is over max_states: built whole
  // (eager_dfa) the compilation fails; built lazily (the default) the first
  // mask that needs a fifth state does. The grammar route (auto's fallback)
  // splits the regex into terminals that fit.
  Constraint integer = Constraint::JsonSchema(R"({"type":"integer"})", context);
  integer.options.schema_route = SchemaRoute::kRegex;
  integer.options.eager_dfa = true;
  auto big = tiny.Compile(integer);
  ASSERT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(FailedStage(big.status()), CompileStage::kIndex);
  integer.options.eager_dfa = false;
  auto lazy = tiny.Compile(integer);
  ASSERT_TRUE(lazy.ok()) << lazy.status();
  const TokenIndex& ix = *lazy->index->token_index();
  std::vector<uint32_t> mask(ix.num_words());
  EXPECT_EQ(ix.WriteMask(ix.start(), mask.data()).code(), absl::StatusCode::kResourceExhausted);
  auto split = tiny.Compile(Constraint::JsonSchema(R"({"type":"integer"})", context));
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->index->route(), ConstraintRoute::kGrammar);
}

TEST(ConstraintCompiler, RefusesAConstraintWithoutTokenizer) {
  auto r = ConstraintCompiler().Compile(Constraint::Regex("[0-9]+", nullptr));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("no tokenizer"));
}

}  // namespace
}  // namespace maskd
