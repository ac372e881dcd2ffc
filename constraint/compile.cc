#include "constraint/compile.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

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

// A grammar or a structural tag (whose grammar is built, not parsed).
absl::StatusOr<CompiledConstraint> CompileGrammar(const Constraint& constraint,
                                                  std::shared_ptr<const TokenizerContext> context,
                                                  const CompileOptions& options) {
  const GrammarCompileOptions& o = constraint.grammar;
  CompileOptions terminal_options = options;
  absl::StatusOr<grammar::Grammar> g;
  if (constraint.kind == ConstraintKind::kStructuralTag) {
    StructuralTagOptions tag_options = constraint.structural_tag;
    tag_options.json_schema = BudgetedSchemaOptions(constraint, options);
    tag_options.grammar = o.limits;
    g = StructuralTagGrammar(constraint.text, tag_options);
    // Converted schemas are large by construction (see below).
    terminal_options.regex.max_pattern_bytes =
        std::max(options.regex.max_pattern_bytes, tag_options.json_schema.max_regex_bytes);
  } else {
    g = grammar::ParseGrammarText(constraint.text, o.format, o.limits);
  }
  if (!g.ok()) return ConvertError(g.status());
  if (auto st = CheckBudget(options.dfa); !st.ok()) return st;
  grammar::GrammarIndex::Options index_options = o.index;
  index_options.earley.regex_limits = terminal_options.regex;
  index_options.earley.dfa_options = options.dfa;
  auto index = grammar::GrammarIndex::Create(*g, std::move(context), index_options);
  if (!index.ok()) return index.status();
  if (auto st = CheckBudget(options.dfa); !st.ok()) return st;
  CompiledConstraint out;
  out.index = std::make_shared<const ConstraintIndex>(*std::move(index));
  return out;
}

}  // namespace

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

  const JsonSchemaOptions schema_options = BudgetedSchemaOptions(constraint, options);
  auto converted = JsonSchemaToRegex(constraint.text, schema_options);
  if (!converted.ok()) return ConvertError(converted.status());
  if (auto st = CheckBudget(options.dfa); !st.ok()) return st;
  // Converted regexes are large by construction (every open object carries an
  // any-value automaton); the converter has already bounded this one.
  CompileOptions regex_options = options;
  regex_options.regex.max_pattern_bytes =
      std::max(options.regex.max_pattern_bytes, schema_options.max_regex_bytes);
  auto index = CompileRegex(converted->regex, std::move(context), regex_options);
  if (!index.ok()) return index.status();
  out.index = std::make_shared<const ConstraintIndex>(*std::move(index));
  out.warnings = std::move(converted->warnings);
  return out;
}

CompileStage FailedStage(const absl::Status& error) {
  return error.GetPayload(kStagePayload).has_value() ? CompileStage::kConvert
                                                     : CompileStage::kIndex;
}

}  // namespace maskd
