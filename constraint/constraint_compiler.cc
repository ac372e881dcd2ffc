#include "constraint/constraint_compiler.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "constraint/schema_grammar.h"
#include "constraint/structural_tag.h"
#include "index/token_index.h"

namespace maskd {
namespace {

// Status payload marking an error of the schema conversion (FailedStage).
constexpr char kStagePayload[] = "maskd/compile_stage";

// One compilation: the constraint, the compiler's limits, and the index
// options (limits and budget) every regex and DFA build takes.
struct Job {
  const Constraint& constraint;
  const CompileLimits& limits;
  CompileOptions index;
};

CompileOptions IndexOptions(const Constraint& c, const CompileLimits& limits,
                            const CompileBudget& budget) {
  CompileOptions o;
  o.regex = limits.regex;
  o.dfa.max_states = limits.max_dfa_states;
  o.dfa.max_nfa_states = limits.max_nfa_states;
  o.dfa.eager_up_to_states = limits.eager_dfa_states;
  o.dfa.deadline = budget.deadline;
  o.dfa.cancel = budget.cancel;
  o.eager = c.options.eager;
  o.lazy_dfa = !c.options.eager_dfa;  // CompileRegex builds eagerly when `eager`
  o.threads = limits.precompute_threads;
  o.index.share_loops = limits.share_loops;
  o.index.budget = limits.mask_budget;
  return o;
}

// Cancelled or DeadlineExceeded when the budget has run out, else OK.
absl::Status CheckBudget(const DfaOptions& budget) {
  if (budget.cancel != nullptr && budget.cancel->load(std::memory_order_relaxed)) {
    return absl::CancelledError("compilation cancelled");
  }
  if (absl::Now() > budget.deadline) {
    return absl::DeadlineExceededError("compilation exceeded its deadline");
  }
  return absl::OkStatus();
}

// Marks `error` as a conversion (front end) error.
absl::Status ConvertError(absl::Status error) {
  error.SetPayload(kStagePayload, absl::Cord("convert"));
  return error;
}

// The constraint's schema options under the job's budget and limits.
JsonSchemaOptions BudgetedSchemaOptions(const Job& job) {
  JsonSchemaOptions o = job.constraint.options.json_schema;
  const DfaOptions& dfa = job.index.dfa;
  o.budget.deadline = dfa.deadline;
  o.budget.cancel = dfa.cancel;
  o.budget.max_states = std::min(o.budget.max_states, dfa.max_states);
  o.budget.max_nfa_states = std::min(o.budget.max_nfa_states, dfa.max_nfa_states);
  o.max_schema_nesting = std::min(o.max_schema_nesting, job.limits.max_schema_nesting);
  o.max_schema_depth = std::min(o.max_schema_depth, job.limits.max_schema_depth);
  o.max_pattern_nesting = std::min(o.max_pattern_nesting, job.limits.max_pattern_nesting);
  return o;
}

// `g` compiled against the job's tokenizer; `max_terminal_bytes` raises the
// regex limit for its terminals (converted schemas are large by construction).
absl::StatusOr<CompiledConstraint> IndexGrammar(const grammar::Grammar& g, const Job& job,
                                                size_t max_terminal_bytes) {
  if (auto st = CheckBudget(job.index.dfa); !st.ok()) return st;
  grammar::GrammarIndex::Options options = job.limits.grammar_index;
  options.earley.regex_limits = job.index.regex;
  options.earley.regex_limits.max_pattern_bytes =
      std::max(job.index.regex.max_pattern_bytes, max_terminal_bytes);
  options.earley.dfa_options = job.index.dfa;
  options.earley.dfa_options.eager_up_to_states = job.limits.eager_terminal_dfa_states;
  options.earley.terminal_mode =
      job.index.lazy_dfa && !job.index.eager ? grammar::TerminalMode::kLazy : grammar::TerminalMode::kWhole;
  options.budget = job.limits.mask_budget;
  options.terminal_dfas = job.limits.terminal_dfas;
  auto index = grammar::GrammarIndex::Create(g, job.constraint.tokenizer, options);
  if (!index.ok()) return index.status();
  if (auto st = CheckBudget(job.index.dfa); !st.ok()) return st;
  CompiledConstraint out;
  out.index = std::make_shared<const ConstraintIndex>(*std::move(index));
  return out;
}

// A grammar or a structural tag (whose grammar is built, not parsed).
absl::StatusOr<CompiledConstraint> CompileGrammar(const Job& job) {
  const Constraint& c = job.constraint;
  absl::StatusOr<grammar::Grammar> g;
  size_t max_terminal_bytes = 0;
  if (c.kind == ConstraintKind::kStructuralTag) {
    StructuralTagOptions tag_options;
    tag_options.max_bytes = job.limits.max_structural_tag_bytes;
    tag_options.max_symbols = job.limits.max_structural_tag_symbols;
    tag_options.json_schema = BudgetedSchemaOptions(job);
    tag_options.triggers = job.limits.triggers;
    tag_options.grammar = job.limits.grammar;
    tag_options.schema_grammars = job.limits.schema_grammars.get();
    g = StructuralTagGrammar(c.text, tag_options);
    max_terminal_bytes = tag_options.json_schema.max_regex_bytes;
  } else {
    g = grammar::ParseGrammarText(c.text, c.options.grammar_format, job.limits.grammar);
  }
  if (!g.ok()) return ConvertError(g.status());
  return IndexGrammar(*g, job, max_terminal_bytes);
}

// A converted schema's regex parsed for the regex route: converted regexes
// are large by construction (every open object carries an any-value
// automaton), and the converter has already bounded this one's bytes.
absl::StatusOr<Regex> ParseSchemaRegex(const JsonSchemaRegex& converted,
                                       const JsonSchemaOptions& schema_options, const Job& job) {
  if (auto st = CheckBudget(job.index.dfa); !st.ok()) return st;
  RegexLimits limits = job.index.regex;
  limits.max_pattern_bytes = std::max(limits.max_pattern_bytes, schema_options.max_regex_bytes);
  return Regex::Parse(converted.regex, limits);
}

// A JSON Schema on the regex route, `regex` its parsed regex. Its DFA is
// lazy unless the constraint asks for it whole (eager, eager_dfa); with
// `whole` a lazy DFA is built out while compiling (Dfa::BuildAll), so a DFA
// over max_dfa_states fails here rather than while walking (the automatic
// route's test of fit).
absl::StatusOr<CompiledConstraint> CompileSchemaRegex(const JsonSchemaRegex& converted,
                                                      const Regex& regex, const Job& job,
                                                      bool whole) {
  auto index = CompileRegex(regex, job.constraint.tokenizer, job.index);
  if (!index.ok()) return index.status();
  const Dfa& dfa = (*index)->dfa();
  if (whole) {
    if (auto st = dfa.BuildAll(job.index.dfa); !st.ok()) return st;
  }
  CompiledConstraint out;
  out.index = std::make_shared<const ConstraintIndex>(*std::move(index));
  out.warnings = converted.warnings;
  return out;
}

// Parse + CompileSchemaRegex.
absl::StatusOr<CompiledConstraint> CompileSchemaRegex(const JsonSchemaRegex& converted,
                                                      const JsonSchemaOptions& schema_options,
                                                      const Job& job, bool whole) {
  auto regex = ParseSchemaRegex(converted, schema_options, job);
  if (!regex.ok()) return regex.status();
  return CompileSchemaRegex(converted, *regex, job, whole);
}

// A JSON Schema (its document, parsed) on the grammar route.
absl::StatusOr<CompiledConstraint> CompileSchemaGrammar(const JsonSchemaDocument& schema,
                                                        const JsonSchemaOptions& schema_options,
                                                        const Job& job) {
  std::vector<std::string> warnings;
  // The limits IndexGrammar compiles each terminal under. Its DFAs are built
  // there; only when that is refused (a terminal's DFA over max_states, say)
  // is the schema lowered again with the lowering's own DFA checks, which
  // split such terminals, so a grammar that fits builds each DFA once.
  grammar::TerminalLimits terminal;
  terminal.regex = job.index.regex;
  terminal.dfa = job.index.dfa;
  terminal.check_dfa = false;
  auto g = JsonSchemaGrammar(schema, schema_options, job.limits.grammar, terminal, &warnings);
  if (!g.ok()) return ConvertError(g.status());
  auto out = IndexGrammar(*g, job, schema_options.max_regex_bytes);
  if (!out.ok() && out.status().code() == absl::StatusCode::kResourceExhausted) {
    terminal.check_dfa = true;
    auto split = JsonSchemaGrammar(schema, schema_options, job.limits.grammar, terminal);
    if (split.ok()) out = IndexGrammar(*split, job, schema_options.max_regex_bytes);
  }
  if (out.ok()) out->warnings = std::move(warnings);
  return out;
}

bool IsBudgetError(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDeadlineExceeded || s.code() == absl::StatusCode::kCancelled;
}

// `grammar_error`, naming the regex route's error too when it differs.
absl::Status BothRoutesFailed(const absl::Status& regex_error, absl::Status grammar_error) {
  if (regex_error.message() == grammar_error.message()) return grammar_error;
  absl::Status s(grammar_error.code(),
                 absl::StrCat(grammar_error.message(), " (on the regex route: ", regex_error.message(), ")"));
  if (auto stage = grammar_error.GetPayload(kStagePayload)) s.SetPayload(kStagePayload, *stage);
  return s;
}

// SchemaRoute::kAuto: the regex route when its DFA fits max_dfa_states
// (built out to know), else the grammar route. A schema whose regex would be
// over auto_route_max_regex_bytes (the conversion stops at that size) or
// auto_route_max_regex_nodes goes to the grammar route untried; only if the
// grammar route then fails is the regex route tried at its own limits. A
// regex cut short at the recursion depth is the fallback of a grammar route
// that fails.
absl::StatusOr<CompiledConstraint> CompileSchemaAuto(const JsonSchemaOptions& schema_options,
                                                     const Job& job) {
  JsonSchemaOptions trial = schema_options;
  const size_t cap = job.limits.auto_route_max_regex_bytes;
  if (cap != 0) trial.max_regex_bytes = std::min(trial.max_regex_bytes, cap);
  // One parse for both routes' conversions.
  auto document = JsonSchemaDocument::Parse(job.constraint.text, schema_options);
  if (!document.ok()) return ConvertError(document.status());
  auto converted = JsonSchemaToRegex(*document, trial);
  if (!converted.ok() && IsBudgetError(converted.status())) return ConvertError(converted.status());
  if (converted.ok() && !converted->truncated_recursion) {
    auto regex = ParseSchemaRegex(*converted, schema_options, job);
    if (!regex.ok() && regex.status().code() != absl::StatusCode::kResourceExhausted) {
      return regex.status();
    }
    const size_t max_nodes = job.limits.auto_route_max_regex_nodes;
    const bool over_nodes = regex.ok() && max_nodes != 0 && regex->expanded_size() > max_nodes;
    if (regex.ok() && !over_nodes) {
      auto out = CompileSchemaRegex(*converted, *regex, job, /*whole=*/true);
      if (out.ok() || out.status().code() != absl::StatusCode::kResourceExhausted) return out;
      auto grammar = CompileSchemaGrammar(*document, schema_options, job);
      if (grammar.ok() || IsBudgetError(grammar.status())) return grammar;
      return BothRoutesFailed(out.status(), grammar.status());
    }
    auto grammar = CompileSchemaGrammar(*document, schema_options, job);
    if (grammar.ok() || IsBudgetError(grammar.status())) return grammar;
    if (!regex.ok()) return BothRoutesFailed(regex.status(), grammar.status());
    auto out = CompileSchemaRegex(*converted, *regex, job, /*whole=*/true);  // past the node cap
    if (out.ok() || IsBudgetError(out.status())) return out;
    return BothRoutesFailed(out.status(), grammar.status());
  }
  // The regex route not tried: its conversion failed (or stopped at the
  // cap), or cut recursion short.
  auto grammar = CompileSchemaGrammar(*document, schema_options, job);
  if (grammar.ok() || IsBudgetError(grammar.status())) return grammar;
  if (!converted.ok() && converted.status().code() == absl::StatusCode::kResourceExhausted &&
      trial.max_regex_bytes < schema_options.max_regex_bytes) {
    converted = JsonSchemaToRegex(*document, schema_options);  // past the cap
  }
  if (!converted.ok()) return BothRoutesFailed(ConvertError(converted.status()), grammar.status());
  auto regex = CompileSchemaRegex(*converted, schema_options, job, /*whole=*/true);
  if (regex.ok() || IsBudgetError(regex.status())) return regex;
  return BothRoutesFailed(regex.status(), grammar.status());
}

absl::StatusOr<CompiledConstraint> CompileSchema(const Job& job) {
  const JsonSchemaOptions schema_options = BudgetedSchemaOptions(job);
  const SchemaRoute route = job.constraint.options.schema_route;
  // Every member order is a grammar's job (the regex route refuses it).
  if (route == SchemaRoute::kGrammar ||
      (route == SchemaRoute::kAuto && schema_options.any_property_order)) {
    auto document = JsonSchemaDocument::Parse(job.constraint.text, schema_options);
    if (!document.ok()) return ConvertError(document.status());
    return CompileSchemaGrammar(*document, schema_options, job);
  }
  if (route == SchemaRoute::kAuto) return CompileSchemaAuto(schema_options, job);
  auto converted = JsonSchemaToRegex(job.constraint.text, schema_options);
  if (!converted.ok()) return ConvertError(converted.status());
  return CompileSchemaRegex(*converted, schema_options, job, /*whole=*/false);
}

}  // namespace

ConstraintCompiler::ConstraintCompiler(CompileLimits limits) : limits_(std::move(limits)) {
  if (limits_.terminal_dfas == nullptr && limits_.terminal_dfa_bytes > 0) {
    limits_.terminal_dfas = std::make_shared<grammar::TerminalDfas>(limits_.terminal_dfa_bytes);
  }
  if (limits_.schema_grammars == nullptr && limits_.schema_grammar_bytes > 0) {
    limits_.schema_grammars = std::make_shared<SchemaGrammars>(limits_.schema_grammar_bytes);
  }
}

absl::StatusOr<CompiledConstraint> ConstraintCompiler::Compile(const Constraint& constraint,
                                                               const CompileBudget& budget) const {
  if (constraint.tokenizer == nullptr) {
    return absl::InvalidArgumentError("constraint has no tokenizer");
  }
  const Job job{constraint, limits_, IndexOptions(constraint, limits_, budget)};
  if (auto st = CheckBudget(job.index.dfa); !st.ok()) return st;
  switch (constraint.kind) {
    case ConstraintKind::kRegex: {
      auto index = CompileRegex(constraint.text, constraint.tokenizer, job.index);
      if (!index.ok()) return index.status();
      CompiledConstraint out;
      out.index = std::make_shared<const ConstraintIndex>(*std::move(index));
      return out;
    }
    case ConstraintKind::kJsonSchema: return CompileSchema(job);
    case ConstraintKind::kGrammar:
    case ConstraintKind::kStructuralTag: return CompileGrammar(job);
  }
  return absl::InvalidArgumentError("unknown constraint kind");
}

CompileStage FailedStage(const absl::Status& error) {
  return error.GetPayload(kStagePayload).has_value() ? CompileStage::kConvert
                                                     : CompileStage::kIndex;
}

}  // namespace maskd
