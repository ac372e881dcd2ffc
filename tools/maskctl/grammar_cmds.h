// The grammar forms of maskctl's offline compile, walk and sample: a
// --grammar FILE (a context-free grammar, grammar/), or a JSON Schema or a
// structural tag that compiled to a grammar. Output lines follow the regex
// forms' contract, with grammar figures where the regex forms give DFA ones.
#ifndef MASKD_TOOLS_MASKCTL_GRAMMAR_CMDS_H_
#define MASKD_TOOLS_MASKCTL_GRAMMAR_CMDS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/grammar_index.h"
#include "tokenizer/tokenizer_context.h"
#include "tools/maskctl/constraint_flags.h"

namespace maskctl {

// A command's grammar index: --grammar FILE's, or a JSON Schema's that took
// the grammar route. `rules` and `terminals` count the grammar as written
// (the file's), or as compiled (a schema's); `started` is when compiling began.
struct GrammarArg {
  std::shared_ptr<const maskd::grammar::GrammarIndex> index;
  size_t rules = 0, terminals = 0;
  std::chrono::steady_clock::time_point started;
};

// A --grammar FILE's source (constraint_flags.h) compiled against `context`;
// errors name the file.
absl::StatusOr<GrammarArg> CompileGrammarSource(const ConstraintSource& source,
                                                std::shared_ptr<const maskd::TokenizerContext> context);
// A JSON Schema's grammar-route index, compiled from `started` on.
GrammarArg SchemaGrammarArg(std::shared_ptr<const maskd::grammar::GrammarIndex> index,
                            std::chrono::steady_clock::time_point started);

// Each prints its lines and returns the exit status (errors: Fail()).
int RunGrammarCompile(const GrammarArg& g);
int RunGrammarWalk(const GrammarArg& g, const std::vector<uint32_t>& tokens, bool full);
int RunGrammarSample(const GrammarArg& g, uint64_t seed, uint64_t max_tokens);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_GRAMMAR_CMDS_H_
