#include "tools/maskctl/constraint_flags.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "tools/maskctl/grammar_flag.h"
#include "tools/maskctl/schema_options.h"

namespace maskctl {
namespace {

// The JSON Schema options: --route and --any-property-order for a schema,
// --whitespace for a schema or a structural tag's schemas.
absl::Status ReadSchemaOptions(const Args& args, ConstraintSource* out) {
  const bool schema = out->kind == maskd::ConstraintKind::kJsonSchema;
  const bool tag = out->kind == maskd::ConstraintKind::kStructuralTag;
  for (const char* flag : {"route", "any-property-order"}) {
    if (args.Has(flag) && !schema) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " applies to --json-schema only"));
    }
  }
  if (args.Has("whitespace") && !schema && !tag) {
    return absl::InvalidArgumentError("--whitespace applies to --json-schema and --structural-tag only");
  }
  if (auto route = args.Get("route")) {
    auto r = maskd::SchemaRouteNamed(*route);
    if (!r) {
      return absl::InvalidArgumentError(
          absl::StrCat("--route ", *route, ": expected auto, regex or grammar"));
    }
    out->options.schema_route = *r;
  }
  if (auto ws = args.Get("whitespace")) {
    if (auto s = ParseWhitespace(*ws, &out->options.json_schema.whitespace); !s.ok()) return s;
  }
  out->options.json_schema.any_property_order = args.Has("any-property-order");
  return absl::OkStatus();
}

}  // namespace

const FlagNames& ConstraintValueFlags() {
  static const auto* flags = new FlagNames{"regex",   "json-schema", "route",         "whitespace",
                                           "grammar", "format",      "structural-tag"};
  return *flags;
}

const FlagNames& ConstraintBoolFlags() {
  static const auto* flags = new FlagNames{"any-property-order"};
  return *flags;
}

absl::StatusOr<ConstraintSource> ReadConstraintFlags(const Args& args) {
  const int n = args.Has("regex") + args.Has("json-schema") + args.Has("grammar") +
                args.Has("structural-tag");
  if (n != 1) {
    return absl::InvalidArgumentError(
        "give exactly one of --regex R, --json-schema FILE, --grammar FILE or --structural-tag FILE");
  }
  if (args.Has("format") && !args.Has("grammar")) {
    return absl::InvalidArgumentError("--format applies to --grammar only");
  }
  ConstraintSource out;
  if (auto regex = args.Get("regex")) {
    out.text = *regex;
  } else if (args.Has("grammar")) {
    auto file = ReadGrammarFile(args);
    if (!file.ok()) return file.status();
    out.kind = maskd::ConstraintKind::kGrammar;
    out.text = std::move(file->text);
    out.path = file->path;
    out.options.grammar_format = file->format;
  } else {
    const bool schema = args.Has("json-schema");
    out.kind = schema ? maskd::ConstraintKind::kJsonSchema : maskd::ConstraintKind::kStructuralTag;
    out.path = *args.Get(schema ? "json-schema" : "structural-tag");
    auto text = ReadFileArg(out.path);
    if (!text.ok()) return text.status();
    out.text = *std::move(text);
  }
  if (absl::Status s = ReadSchemaOptions(args, &out); !s.ok()) return s;
  return out;
}

maskd::Constraint ToConstraint(const ConstraintSource& source,
                               std::shared_ptr<const maskd::TokenizerContext> tokenizer) {
  maskd::Constraint c;
  c.kind = source.kind;
  c.text = source.text;
  c.options = source.options;
  c.tokenizer = std::move(tokenizer);
  return c;
}

}  // namespace maskctl
