// The --grammar FILE [--format lark|gbnf|ebnf] forms of maskctl's offline
// compile, walk and sample: a context-free grammar (grammar/) instead of a
// regex or a JSON Schema. The format defaults to the file's extension
// (.lark, .gbnf, .ebnf). Output lines follow the regex forms' contract, with
// grammar figures where the regex forms give DFA ones.
#ifndef MASKD_TOOLS_MASKCTL_GRAMMAR_CMDS_H_
#define MASKD_TOOLS_MASKCTL_GRAMMAR_CMDS_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "index/tokenizer_context.h"
#include "tools/maskctl/args.h"

namespace maskctl {

// The value flags the grammar forms read: add them to Args::Parse's set.
const std::set<std::string>& GrammarValueFlags();

// Each prints its lines and returns the exit status (errors: Fail()).
int RunGrammarCompile(const Args& args, std::shared_ptr<const maskd::TokenizerContext> context);
int RunGrammarWalk(const Args& args, std::shared_ptr<const maskd::TokenizerContext> context,
                   const std::vector<uint32_t>& tokens, bool full);
int RunGrammarSample(const Args& args, std::shared_ptr<const maskd::TokenizerContext> context,
                     uint64_t seed, uint64_t max_tokens);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_GRAMMAR_CMDS_H_
