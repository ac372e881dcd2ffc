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

#include "grammar/grammar_index.h"
#include "index/tokenizer_context.h"
#include "tools/maskctl/args.h"

namespace maskctl {

// A grammar index compiled before the command ran (a JSON Schema that took
// the grammar route), and when its compilation started.
struct PrebuiltGrammar {
  std::shared_ptr<const maskd::grammar::GrammarIndex> index;
  std::chrono::steady_clock::time_point started;
};

// The value flags the grammar forms read: add them to Args::Parse's set.
const std::set<std::string>& GrammarValueFlags();

// Each prints its lines and returns the exit status (errors: Fail()).
int RunGrammarCompile(const Args& args, std::shared_ptr<const maskd::TokenizerContext> context,
                      const PrebuiltGrammar* prebuilt = nullptr);
int RunGrammarWalk(const Args& args, std::shared_ptr<const maskd::TokenizerContext> context,
                   const std::vector<uint32_t>& tokens, bool full,
                   const PrebuiltGrammar* prebuilt = nullptr);
int RunGrammarSample(const Args& args, std::shared_ptr<const maskd::TokenizerContext> context,
                     uint64_t seed, uint64_t max_tokens,
                     const PrebuiltGrammar* prebuilt = nullptr);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_GRAMMAR_CMDS_H_
