// --grammar FILE [--format lark|gbnf|ebnf]: a grammar file ("-": standard
// input) for maskctl's commands (constraint_flags.h). The format defaults to
// the file's extension (.lark, .gbnf, .ebnf); stdin needs --format.
#ifndef MASKD_TOOLS_MASKCTL_GRAMMAR_FLAG_H_
#define MASKD_TOOLS_MASKCTL_GRAMMAR_FLAG_H_

#include <string>

#include "absl/status/statusor.h"
#include "grammar/grammar_text.h"
#include "tools/maskctl/args.h"

namespace maskctl {

struct GrammarFile {
  std::string path;
  std::string text;
  maskd::grammar::GrammarFormat format;
};

// Reads --grammar's file. InvalidArgument for an unknown or missing format,
// NotFound for a file that cannot be read; messages name the file.
absl::StatusOr<GrammarFile> ReadGrammarFile(const Args& args);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_GRAMMAR_FLAG_H_
