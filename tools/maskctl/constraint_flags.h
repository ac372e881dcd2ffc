// CONSTRAINT: the one constraint a maskctl command compiles, read the same way
// by the offline forms (a maskd::Constraint) and the online ones (a
// CompileRequest, online_util.h), so that a flag means the same in both:
//   --regex R                 the regex itself, inline (as users write regexes)
//   --json-schema FILE        a JSON Schema document
//     [--route auto|regex|grammar]              the engine (default auto)
//     [--whitespace python|compact|flexible]    the JSON layout (default python)
//     [--any-property-order]                    object members in any order
//   --grammar FILE [--format lark|gbnf|ebnf]    the format defaults to FILE's
//                                               extension (.lark, .gbnf, .ebnf)
//   --structural-tag FILE     a structural tag's JSON document (--whitespace
//                             applies to its schemas)
// FILE: a path, or "-" for standard input.
#ifndef MASKD_TOOLS_MASKCTL_CONSTRAINT_FLAGS_H_
#define MASKD_TOOLS_MASKCTL_CONSTRAINT_FLAGS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "constraint/constraint.h"
#include "tools/maskctl/args.h"
#include "tools/maskctl/command.h"

namespace maskctl {

// CONSTRAINT spelled out: the usage lines say CONSTRAINT, `maskctl help` says
// what it stands for.
inline constexpr char kConstraintUsage[] =
    "(--regex R | --json-schema FILE [--route auto|regex|grammar] "
    "[--whitespace python|compact|flexible] [--any-property-order] | "
    "--grammar FILE [--format lark|gbnf|ebnf] | --structural-tag FILE)";

// The flags ReadConstraintFlags reads: add them to a Form's sets.
const FlagNames& ConstraintValueFlags();
const FlagNames& ConstraintBoolFlags();

// What the constraint flags name, before a tokenizer is attached.
struct ConstraintSource {
  maskd::ConstraintKind kind = maskd::ConstraintKind::kRegex;
  std::string text;  // the regex, or the FILE's content
  std::string path;  // the FILE as given ("-": stdin); empty for a regex
  maskd::ConstraintOptions options;  // grammar_format, schema_route, json_schema's layout
};

// The one constraint flag given, its FILE read. InvalidArgument when none or
// several are given, or an option is given that does not apply to the kind.
absl::StatusOr<ConstraintSource> ReadConstraintFlags(const Args& args);

// `source` over `tokenizer`, its options included.
maskd::Constraint ToConstraint(const ConstraintSource& source,
                               std::shared_ptr<const maskd::TokenizerContext> tokenizer);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_CONSTRAINT_FLAGS_H_
