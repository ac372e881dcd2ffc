// libFuzzer: bytes -> JsonSchemaToRegex (including `pattern` through the ECMA
// translator) -> Regex::Parse -> Dfa::Compile, and the grammar route:
// JsonSchemaToRules -> GrammarFromRegexRules, with small limits. The first
// byte picks the options (whitespace layout, recursion depth, object
// default); the rest is the schema. Any crash, sanitizer report, hang or
// status other than OK / InvalidArgument / ResourceExhausted is a bug, and so
// is a generated regex our own parser refuses as malformed, or generated
// rules that do not lower into a grammar (other than a start rule deriving
// nothing, or a limit).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "fuzz/expect_status.h"
#include "fuzz/json_schema_knobs.h"
#include "absl/time/clock.h"
#include "automaton/dfa.h"
#include "schema/json_schema.h"
#include "automaton/regex.h"
#include "grammar/regex_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t knobs = data[0];
  std::string_view schema(reinterpret_cast<const char*>(data + 1), size - 1);
  maskd::JsonSchemaOptions o = maskd::fuzz::JsonSchemaKnobs(knobs);
  o.budget.deadline = absl::Now() + absl::Seconds(2);
  auto rules = maskd::JsonSchemaToRules(schema, o);
  maskd::fuzz::ExpectClientStatus(rules.status(), maskd::fuzz::Deadline::kSet);
  if (rules.ok()) {
    std::vector<maskd::grammar::RegexRule> rr;
    for (const auto& rule : rules->rules) rr.push_back({rule.name, rule.regex});
    maskd::grammar::GrammarLimits gl;
    gl.max_text_bytes = o.max_regex_bytes;
    maskd::grammar::TerminalLimits tl;
    tl.dfa.deadline = o.budget.deadline;  // the terminals' DFA checks
    auto g = maskd::grammar::GrammarFromRegexRules(rr, 0, gl, tl);
    const bool malformed =
        !g.ok() && g.status().code() != absl::StatusCode::kResourceExhausted &&
        g.status().code() != absl::StatusCode::kDeadlineExceeded &&
        g.status().message().find("derives no string") == std::string_view::npos;
    if (malformed) {
      fprintf(stderr, "generated rules refused: %s\n", g.status().ToString().c_str());
      abort();
    }
  }
  auto r = maskd::JsonSchemaToRegex(schema, o);
  maskd::fuzz::ExpectClientStatus(r.status(), maskd::fuzz::Deadline::kSet);
  if (!r.ok()) return 0;
  maskd::RegexLimits limits;
  limits.max_pattern_bytes = o.max_regex_bytes;
  limits.max_nodes = 1 << 16;
  auto re = maskd::Regex::Parse(r->regex, limits);
  // The converter's output is always well-formed regex syntax: only a size
  // limit may refuse it.
  if (!re.ok() && re.status().code() != absl::StatusCode::kResourceExhausted) {
    fprintf(stderr, "generated regex refused: %s\n", re.status().ToString().c_str());
    abort();
  }
  if (!re.ok()) return 0;
  maskd::DfaOptions options;
  options.max_states = 2000;
  options.max_nfa_states = 1 << 17;
  options.deadline = absl::Now() + absl::Seconds(2);
  maskd::fuzz::ExpectClientStatus(maskd::Dfa::Compile(*re, options).status(), maskd::fuzz::Deadline::kSet);
  return 0;
}
