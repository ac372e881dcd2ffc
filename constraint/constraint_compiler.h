// ConstraintCompiler: the one way a Constraint (constraint.h) becomes a
// ConstraintIndex, under the CompileLimits it owns.
//
// Regexes and schemas on the regex route end in the same Regex::Parse ->
// Dfa::Compile (CompileLazy unless eager_dfa) -> TokenIndex::Create
// (+ Precompute when eager) as CompileRegex, so a schema and the regex it
// converts to give the same masks (route kRegex); SchemaRoute::kAuto then
// builds the lazy DFA's every state to test that it fits max_dfa_states. A grammar is parsed by its front end, a structural tag's
// grammar built (structural_tag.h), a schema on the grammar route lowered to
// one (schema_grammar.h); each is compiled into a GrammarIndex (route
// kGrammar).
//
// The Constraint chooses the language; the limits only bound the work and
// refuse what is over them, and are one per compiler (in maskd, one per
// server), so they are not part of Constraint::CacheKey(). One exception:
// max_dfa_states and max_nfa_states also cap the JSON Schema converter's own
// DFAs, whose fallbacks (docs/json-schema.md) change the converted regex.
//
// Budget: CompileBudget bounds the time of every stage, the conversion
// included: its deadline and cancel flag are checked before each stage,
// inside the schema conversion (at each subschema and inside its own DFA
// builds), inside every DFA build (a grammar's terminals included) and inside
// the eager precompute; past the deadline the result is DeadlineExceeded,
// with the flag set Cancelled.
// Size, in the order applied: a schema's bytes (json_schema.max_schema_bytes),
// the converted regex's bytes (json_schema.max_regex_bytes); a regex's bytes
// (limits.regex.max_pattern_bytes, which a converted regex may exceed up to
// max_regex_bytes), its nodes and repeats (RegexLimits), the DFA's and NFA's
// states (max_dfa_states, max_nfa_states); a grammar's text, rules,
// terminals, symbols, nesting and repeats (GrammarLimits), each terminal's
// regex and DFA as above. Each is ResourceExhausted naming the limit.
// Other errors are InvalidArgument naming the problem (bad regex syntax, a
// schema keyword that cannot be enforced, a grammar error with its line and
// column, a constraint matching no text, no tokenizer).
// Thread-safe: concurrent compilations share only the tokenizer context
// (whose loop-mask memo is thread-safe) and the mask budget.
#ifndef MASKD_CONSTRAINT_CONSTRAINT_COMPILER_H_
#define MASKD_CONSTRAINT_CONSTRAINT_COMPILER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "automaton/regex.h"
#include "constraint/constraint.h"
#include "constraint/constraint_index.h"
#include "constraint/schema_grammars.h"
#include "grammar/avoid_strings.h"
#include "grammar/grammar.h"
#include "grammar/grammar_index.h"
#include "grammar/terminal_dfas.h"
#include "schema/json_schema.h"
#include "tokenizer/mask_budget.h"

namespace maskd {

// How much work a compilation may do. maskd sets each from its flag (named
// after each field; docs/service.md).
struct CompileLimits {
  // Every regex: a regex constraint, a grammar's terminals, a converted
  // schema (which may reach its json_schema.max_regex_bytes).
  // --max-regex-bytes, --max-regex-repeat, --max-regex-nesting.
  RegexLimits regex;
  // Every DFA and NFA built, the JSON Schema converter's own included
  // (they lower its json_schema.budget caps). --max-dfa-states,
  // --max-nfa-states.
  uint32_t max_dfa_states = 100000;
  uint32_t max_nfa_states = 2000000;
  // A regex constraint's DFA (unless eager_dfa): built whole and minimized
  // when its subset construction fits this many states, else lazily
  // (DfaOptions::eager_up_to_states; 0: always lazy). --eager-dfa-states.
  uint32_t eager_dfa_states = kDefaultEagerDfaStates;
  static constexpr uint32_t kDefaultEagerDfaStates = 1024;
  // The same for each terminal of a grammar (grammar::TerminalMode).
  // Lower than a regex's: a grammar has many terminals, and a whole build
  // (subset construction + minimization) costs each one its states while
  // its walks read few of them (400 tools, 838 terminal DFAs: compile 354 ms
  // at 1024, 135 at 64, per-token time within 2%; docs/grammars.md).
  // --eager-terminal-dfa-states.
  uint32_t eager_terminal_dfa_states = kDefaultEagerTerminalDfaStates;
  static constexpr uint32_t kDefaultEagerTerminalDfaStates = 64;
  // SchemaRoute::kAuto: a schema whose regex would be over this many bytes
  // takes the grammar route without trying the regex route, whose DFA and
  // index cost grow with the regex (a trade measured in docs/json-schema.md:
  // faster median compiles and more valid output accepted, a slower 1% tail
  // and dearer masks); 0: no cap but json_schema.max_regex_bytes. A limit on
  // work, not on the language: a grammar route that fails still falls back
  // to the regex route. --auto-route-max-regex-bytes.
  size_t auto_route_max_regex_bytes = kDefaultAutoRouteMaxRegexBytes;
  static constexpr size_t kDefaultAutoRouteMaxRegexBytes = size_t{256} << 10;
  // SchemaRoute::kAuto: a schema whose regex has more syntax nodes than
  // this, counted repeats expanded (Regex::expanded_size: what the NFA and
  // DFA builds grow with), takes the grammar route without building the
  // regex route's automaton: a short regex can expand to millions of NFA
  // states (an array of maxItems 100 of objects with maxLength 255 strings),
  // whose build costs more than the grammar route's whole compile. 0: no cap
  // but regex.max_nodes. A limit on work, as the byte cap.
  // --auto-route-max-regex-nodes.
  size_t auto_route_max_regex_nodes = kDefaultAutoRouteMaxRegexNodes;
  static constexpr size_t kDefaultAutoRouteMaxRegexNodes = 200000;
  // The JSON Schema parser's nesting: each lowers the constraint's
  // json_schema field of the same name. --max-schema-nesting,
  // --max-schema-depth, --max-pattern-nesting.
  int max_schema_nesting = kMaxSchemaNesting;
  int max_schema_depth = kMaxSchemaDepth;
  int max_pattern_nesting = kMaxPatternNesting;
  // Every grammar: a kGrammar's, a structural tag's and its tags' grammars,
  // a schema's on the grammar route. --max-grammar-bytes, --max-grammar-rules,
  // --max-grammar-terminals, --max-grammar-symbols, --max-grammar-nesting,
  // --max-grammar-repeat.
  grammar::GrammarLimits grammar;
  // A grammar index's parser and mask limits: --max-grammar-chart-items,
  // --max-grammar-set-items, --max-grammar-mask-work,
  // --max-grammar-parser-steps, --max-grammar-memo-bytes. Its
  // earley.regex_limits, earley.dfa_options and budget are replaced by the
  // fields above and mask_budget.
  grammar::GrammarIndex::Options grammar_index;
  // Structural tags: the document's bytes and its tags' grammars' size
  // together (StructuralTagOptions::max_bytes, max_symbols; no count of
  // tags); the triggers' size and the free text's regex.
  // --max-structural-tag-bytes, --max-structural-tag-symbols.
  size_t max_structural_tag_bytes = size_t{16} << 20;
  size_t max_structural_tag_symbols = size_t{4} << 20;
  grammar::AvoidLimits triggers;
  // Every grammar's terminals' DFAs are looked up in, and added to, this
  // cache (grammar/terminal_dfas.h), shared by every compilation of the
  // compiler: a tool's schema sent again builds none of its DFAs. Null: the
  // compiler makes one of terminal_dfa_bytes (0: none, each grammar builds
  // its own). --terminal-dfa-cache-bytes.
  std::shared_ptr<grammar::TerminalDfas> terminal_dfas;
  size_t terminal_dfa_bytes = size_t{256} << 20;
  // The same for structural tags' schemas lowered to grammars
  // (schema_grammars.h): a tool sent again is not lowered again.
  // --schema-grammar-cache-bytes.
  std::shared_ptr<SchemaGrammars> schema_grammars;
  size_t schema_grammar_bytes = size_t{64} << 20;
  // Regex route: take loop masks from the tokenizer context
  // (tokenizer/loop_masks.h); off only to compare.
  bool share_loops = true;
  // Regex route, eager: threads precomputing the masks.
  int precompute_threads = 1;
  // Bounds the masks (TokenIndex) and memo entries (GrammarIndex) kept by
  // every index compiled, together (tokenizer/mask_budget.h). Null: no bound.
  std::shared_ptr<MaskBudget> mask_budget;
};

// When a compilation must stop: past `deadline` it fails DeadlineExceeded;
// once *cancel is true, Cancelled.
struct CompileBudget {
  absl::Time deadline = absl::InfiniteFuture();
  const std::atomic<bool>* cancel = nullptr;  // null: never
};

struct CompiledConstraint {
  std::shared_ptr<const ConstraintIndex> index;  // never null
  // The schema keywords not enforced (JsonSchemaRegex::warnings); empty for
  // a regex or a grammar.
  std::vector<std::string> warnings;
};

class ConstraintCompiler {
 public:
  explicit ConstraintCompiler(CompileLimits limits = {});

  const CompileLimits& limits() const { return limits_; }
  // The terminal DFA cache (its stats() count what was shared); null when
  // terminal_dfa_bytes is 0.
  const grammar::TerminalDfas* terminal_dfas() const { return limits_.terminal_dfas.get(); }
  // The schema lowering cache; null when schema_grammar_bytes is 0.
  const SchemaGrammars* schema_grammars() const { return limits_.schema_grammars.get(); }

  absl::StatusOr<CompiledConstraint> Compile(const Constraint& constraint,
                                             const CompileBudget& budget = {}) const;

 private:
  CompileLimits limits_;
};

// Where a Compile error arose: kConvert for the JSON Schema conversion (the
// schema is not expressible, or over a converter limit, or its budget ran out
// while converting) and for a grammar's front end (syntax errors,
// GrammarLimits), kIndex for every other stage.
enum class CompileStage { kConvert, kIndex };
CompileStage FailedStage(const absl::Status& error);

}  // namespace maskd

#endif  // MASKD_CONSTRAINT_CONSTRAINT_COMPILER_H_
