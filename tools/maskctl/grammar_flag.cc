#include "tools/maskctl/grammar_flag.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace maskctl {

absl::StatusOr<GrammarFile> ReadGrammarFile(const Args& args) {
  auto path = args.Require("grammar");
  if (!path.ok()) return path.status();
  std::string name = args.Get("format").value_or("");
  if (name.empty()) {
    for (const char* ext : {"lark", "gbnf", "ebnf"}) {
      if (absl::EndsWith(*path, absl::StrCat(".", ext))) name = ext;
    }
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(*path, ": give --format lark|gbnf|ebnf (the name has no known extension)"));
    }
  }
  auto format = maskd::grammar::GrammarFormatNamed(name);
  if (!format) {
    return absl::InvalidArgumentError(absl::StrCat("--format ", name, ": expected lark, gbnf or ebnf"));
  }
  auto text = ReadFileArg(*path);
  if (!text.ok()) return text.status();
  return GrammarFile{*path, *std::move(text), *format};
}

}  // namespace maskctl
