// The --grammar FILE [--format lark|gbnf|ebnf] forms of maskctl's offline
// compile, walk and sample: a context-free grammar (grammar/) instead of a
// regex or a JSON Schema. The format defaults to the file's extension
// (.lark, .gbnf, .ebnf). Output lines follow the regex forms' contract, with
// grammar figures where the regex forms give DFA ones.
#ifndef MASKD_TOOLS_MASKCTL_GRAMMAR_CMDS_H_
#define MASKD_TOOLS_MASKCTL_GRAMMAR_CMDS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/grammar_index.h"
#include "tokenizer/tokenizer_context.h"
#include "tools/maskctl/args.h"

namespace maskctl {

// A command's grammar index: --grammar FILE's, or a JSON Schema's that took
// the grammar route. `rules` and `terminals` count the grammar as written
// (the file's), or as compiled (a schema's); `started` is when compiling began.
struct GrammarArg {
  std::shared_ptr<const maskd::grammar::GrammarIndex> index;
  size_t rules = 0, terminals = 0;
  std::chrono::steady_clock::time_point started;
};

// The value flags the grammar forms read: add them to Args::Parse's set.
const std::set<std::string>& GrammarValueFlags();

// --grammar FILE [--format F] compiled against `context`; errors name the file.
absl::StatusOr<GrammarArg> CompileGrammarFlag(const Args& args,
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
