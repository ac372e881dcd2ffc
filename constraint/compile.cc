#include "constraint/compile.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "constraint/schema_grammar.h"

namespace maskd {
namespace {

// Status payload marking an error of the schema conversion (FailedStage).
constexpr char kStagePayload[] = "maskd/compile_stage";

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

// The schema options of `constraint` under the compilation's budget.
JsonSchemaOptions BudgetedSchemaOptions(const Constraint& constraint, const CompileOptions& options) {
  JsonSchemaOptions schema_options = constraint.json_schema;
  DfaOptions& budget = schema_options.budget;
  budget.deadline = options.dfa.deadline;
  budget.cancel = options.dfa.cancel;
  budget.max_states = std::min(budget.max_states, options.dfa.max_states);
  budget.max_nfa_states = std::min(budget.max_nfa_states, options.dfa.max_nfa_states);
  return schema_options;
}

// `g` compiled against `context`; `max_terminal_bytes` raises the regex limit
// for its terminals (converted schemas are large by construction).
absl::StatusOr<CompiledConstraint> IndexGrammar(const grammar::Grammar& g, const Constraint& constraint,
                                                std::shared_ptr<const TokenizerContext> context,
                                                const CompileOptions& options,
                                                size_t max_terminal_bytes) {
  if (auto st = CheckBudget(options.dfa); !st.ok()) return st;
  grammar::GrammarIndex::Options index_options = constraint.grammar.index;
  index_options.earley.regex_limits = options.regex;
  index_options.earley.regex_limits.max_pattern_bytes =
      std::max(options.regex.max_pattern_bytes, max_terminal_bytes);
  index_options.earley.dfa_options = options.dfa;
  auto index = grammar::GrammarIndex::Create(g, std::move(context), index_options);
  if (!index.ok()) return index.status();
  if (auto st = CheckBudget(options.dfa); !st.ok()) return st;
  CompiledConstraint out;
  out.index = std::make_shared<const ConstraintIndex>(*std::move(index));
  return out;
}

// A grammar or a structural tag (whose grammar is built, not parsed).
absl::StatusOr<CompiledConstraint> CompileGrammar(const Constraint& constraint,
                                                  std::shared_ptr<const TokenizerContext> context,
                                                  const CompileOptions& options) {
  const GrammarCompileOptions& o = constraint.grammar;
  absl::StatusOr<grammar::Grammar> g;
  size_t max_terminal_bytes = 0;
  if (constraint.kind == ConstraintKind::kStructuralTag) {
    StructuralTagOptions tag_options = constraint.structural_tag;
    tag_options.json_schema = BudgetedSchemaOptions(constraint, options);
    tag_options.grammar = o.limits;
    g = StructuralTagGrammar(constraint.text, tag_options);
    max_terminal_bytes = tag_options.json_schema.max_regex_bytes;
  } else {
    g = grammar::ParseGrammarText(constraint.text, o.format, o.limits);
  }
  if (!g.ok()) return ConvertError(g.status());
  return IndexGrammar(*g, constraint, std::move(context), options, max_terminal_bytes);
}

// A JSON Schema on the regex route.
absl::StatusOr<CompiledConstraint> CompileSchemaRegex(const JsonSchemaRegex& converted,
                                                      const JsonSchemaOptions& schema_options,
                                                      std::shared_ptr<const TokenizerContext> context,
                                                      const CompileOptions& options) {
  if (auto st = CheckBudget(options.dfa); !st.ok()) return st;
  // Converted regexes are large by construction (every open object carries an
  // any-value automaton); the converter has already bounded this one.
  CompileOptions regex_options = options;
  regex_options.regex.max_pattern_bytes =
      std::max(options.regex.max_pattern_bytes, schema_options.max_regex_bytes);
  auto index = CompileRegex(converted.regex, std::move(context), regex_options);
  if (!index.ok()) return index.status();
  CompiledConstraint out;
  out.index = std::make_shared<const ConstraintIndex>(*std::move(index));
  out.warnings = converted.warnings;
  return out;
}

// A JSON Schema on the grammar route.
absl::StatusOr<CompiledConstraint> CompileSchemaGrammar(const Constraint& constraint,
                                                        const JsonSchemaOptions& schema_options,
                                                        std::shared_ptr<const TokenizerContext> context,
                                                        const CompileOptions& options) {
  std::vector<std::string> warnings;
  // The limits IndexGrammar compiles each terminal under. Its DFAs are built
  // there; only when that is refused (a terminal's DFA over max_states, say)
  // is the schema lowered again with the lowering's own DFA checks, which
  // split such terminals, so a grammar that fits builds each DFA once.
  grammar::TerminalLimits terminal;
  terminal.regex = options.regex;
  terminal.dfa = options.dfa;
  terminal.check_dfa = false;
  auto g = JsonSchemaGrammar(constraint.text, schema_options, constraint.grammar.limits, terminal,
                             &warnings);
  if (!g.ok()) return ConvertError(g.status());
  auto out = IndexGrammar(*g, constraint, context, options, schema_options.max_regex_bytes);
  if (!out.ok() && out.status().code() == absl::StatusCode::kResourceExhausted) {
    terminal.check_dfa = true;
    auto split = JsonSchemaGrammar(constraint.text, schema_options, constraint.grammar.limits, terminal);
    if (split.ok()) {
      out = IndexGrammar(*split, constraint, std::move(context), options, schema_options.max_regex_bytes);
    }
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

absl::StatusOr<CompiledConstraint> CompileSchema(const Constraint& constraint,
                                                 std::shared_ptr<const TokenizerContext> context,
                                                 const CompileOptions& options) {
  const JsonSchemaOptions schema_options = BudgetedSchemaOptions(constraint, options);
  // Every member order is a grammar's job (the regex route refuses it).
  if (constraint.schema_route == SchemaRoute::kGrammar ||
      (constraint.schema_route == SchemaRoute::kAuto && schema_options.any_property_order)) {
    return CompileSchemaGrammar(constraint, schema_options, std::move(context), options);
  }
  auto converted = JsonSchemaToRegex(constraint.text, schema_options);
  if (constraint.schema_route == SchemaRoute::kRegex) {
    if (!converted.ok()) return ConvertError(converted.status());
    return CompileSchemaRegex(*converted, schema_options, std::move(context), options);
  }
  // kAuto.
  absl::Status regex_error;
  if (converted.ok()) {
    if (!converted->truncated_recursion) {
      auto out = CompileSchemaRegex(*converted, schema_options, context, options);
      if (out.ok() || out.status().code() != absl::StatusCode::kResourceExhausted) return out;
      regex_error = out.status();
    }
  } else {
    regex_error = ConvertError(converted.status());
    if (IsBudgetError(regex_error)) return regex_error;
  }
  auto out = CompileSchemaGrammar(constraint, schema_options, context, options);
  if (out.ok() || IsBudgetError(out.status())) return out;
  if (regex_error.ok()) {
    // Recursion cut short on the regex route: better than nothing.
    return CompileSchemaRegex(*converted, schema_options, std::move(context), options);
  }
  return BothRoutesFailed(regex_error, out.status());
}

}  // namespace

std::string_view SchemaRouteName(SchemaRoute route) {
  switch (route) {
    case SchemaRoute::kAuto: return "auto";
    case SchemaRoute::kRegex: return "regex";
    case SchemaRoute::kGrammar: return "grammar";
  }
  return "unknown";
}

std::string_view ConstraintKindName(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kRegex: return "regex";
    case ConstraintKind::kJsonSchema: return "json_schema";
    case ConstraintKind::kGrammar: return "grammar";
    case ConstraintKind::kStructuralTag: return "structural_tag";
  }
  return "unknown";
}

absl::StatusOr<CompiledConstraint> CompileConstraint(const Constraint& constraint,
                                                     std::shared_ptr<const TokenizerContext> context,
                                                     const CompileOptions& options) {
  if (auto st = CheckBudget(options.dfa); !st.ok()) return st;
  if (constraint.kind == ConstraintKind::kGrammar ||
      constraint.kind == ConstraintKind::kStructuralTag) {
    return CompileGrammar(constraint, std::move(context), options);
  }
  CompiledConstraint out;
  if (constraint.kind == ConstraintKind::kRegex) {
    auto index = CompileRegex(constraint.text, std::move(context), options);
    if (!index.ok()) return index.status();
    out.index = std::make_shared<const ConstraintIndex>(*std::move(index));
    return out;
  }

  return CompileSchema(constraint, std::move(context), options);
}

CompileStage FailedStage(const absl::Status& error) {
  return error.GetPayload(kStagePayload).has_value() ? CompileStage::kConvert
                                                     : CompileStage::kIndex;
}

}  // namespace maskd
