// The tokenizer flags shared by maskctl subcommands that need a vocabulary:
//   --tokenizer PATH   tokenizer.json[.gz] or a folder holding one (required)
//   --vocab-size N     logits width (default: highest token id + 1)
//   --eos ID[,ID...]   EOS ids, replacing tokenizer_config.json's eos_token
#ifndef MASKD_TOOLS_MASKCTL_TOKENIZER_FLAG_H_
#define MASKD_TOOLS_MASKCTL_TOKENIZER_FLAG_H_

#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"
#include "tools/maskctl/args.h"

namespace maskctl {

// The value flags LoadTokenizerFlag reads; add them to Args::Parse's set.
const std::set<std::string>& TokenizerValueFlags();

// Loads the vocabulary the flags name. Errors are the loader's (naming the
// file) or InvalidArgument naming the bad flag.
absl::StatusOr<std::shared_ptr<const maskd::Vocabulary>> LoadTokenizerFlag(const Args& args);
// The same, with its token trie and loop-mask memo (what compiling needs).
absl::StatusOr<std::shared_ptr<const maskd::TokenizerContext>> LoadTokenizerContextFlag(
    const Args& args);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_TOKENIZER_FLAG_H_
