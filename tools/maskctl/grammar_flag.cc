#include "tools/maskctl/grammar_flag.h"

#include <fstream>
#include <sstream>

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
      return absl::InvalidArgumentError(absl::StrCat(*path, ": give --format lark|gbnf|ebnf"));
    }
  }
  auto format = maskd::grammar::GrammarFormatNamed(name);
  if (!format) {
    return absl::InvalidArgumentError(absl::StrCat("--format ", name, ": expected lark, gbnf or ebnf"));
  }
  std::ifstream in(*path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(*path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  return GrammarFile{*path, text.str(), *format};
}

}  // namespace maskctl
