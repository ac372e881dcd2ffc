#include "service/constraint_request.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace maskd {
namespace {

// The kind and text of `req`'s constraint, and a grammar's format.
absl::Status ReadKindAndText(const v1::CompileRequest& req, Constraint* c) {
  switch (req.constraint_case()) {
    case v1::CompileRequest::kRegex:
      c->kind = ConstraintKind::kRegex;
      c->text = req.regex();
      return absl::OkStatus();
    case v1::CompileRequest::kJsonSchema:
      c->kind = ConstraintKind::kJsonSchema;
      c->text = req.json_schema();
      return absl::OkStatus();
    case v1::CompileRequest::kStructuralTag:
      c->kind = ConstraintKind::kStructuralTag;
      c->text = req.structural_tag();
      return absl::OkStatus();
    case v1::CompileRequest::kGrammar:
      c->kind = ConstraintKind::kGrammar;
      c->text = req.grammar().text();
      switch (req.grammar().format()) {
        case v1::Grammar::FORMAT_LARK: c->options.grammar_format = GrammarFormat::kLark; break;
        case v1::Grammar::FORMAT_GBNF: c->options.grammar_format = GrammarFormat::kGbnf; break;
        case v1::Grammar::FORMAT_EBNF: c->options.grammar_format = GrammarFormat::kEbnf; break;
        default:
          return absl::InvalidArgumentError(
              absl::StrCat("grammar.format ", req.grammar().format(),
                           ": expected FORMAT_LARK, FORMAT_GBNF or FORMAT_EBNF"));
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          "no constraint: set regex, json_schema, grammar or structural_tag");
  }
}

absl::Status CheckTextSize(const Constraint& c, const RequestTextLimits& limits) {
  if (c.kind == ConstraintKind::kGrammar) {
    if (c.text.size() <= limits.max_grammar_bytes) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat("grammar of ", c.text.size(),
                                                     " bytes exceeds ", limits.max_grammar_bytes,
                                                     " (--max-grammar-bytes)"));
  }
  if (c.kind == ConstraintKind::kStructuralTag) {
    if (c.text.size() <= limits.max_structural_tag_bytes) return absl::OkStatus();
    return absl::ResourceExhaustedError(
        absl::StrCat("structural tag of ", c.text.size(), " bytes exceeds ",
                     limits.max_structural_tag_bytes, " (--max-structural-tag-bytes)"));
  }
  if (c.text.size() <= limits.max_constraint_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat("constraint of ", c.text.size(),
                                                   " bytes exceeds ", limits.max_constraint_bytes,
                                                   " (--max-regex-bytes)"));
}

absl::StatusOr<JsonWhitespace> ReadWhitespace(const v1::CompileOptions& o) {
  switch (o.json_whitespace()) {
    case v1::JSON_WHITESPACE_PYTHON: return JsonWhitespace::kPython;
    case v1::JSON_WHITESPACE_COMPACT: return JsonWhitespace::kCompact;
    case v1::JSON_WHITESPACE_FLEXIBLE: return JsonWhitespace::kFlexible;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "options.json_whitespace ", o.json_whitespace(),
          ": expected JSON_WHITESPACE_PYTHON, JSON_WHITESPACE_COMPACT or JSON_WHITESPACE_FLEXIBLE"));
  }
}

// CompileOptions, as far as they apply to c->kind.
absl::Status ReadOptions(const v1::CompileOptions& o, Constraint* c) {
  SchemaRoute route = SchemaRoute::kAuto;
  switch (o.schema_route()) {
    case v1::SCHEMA_ROUTE_AUTO: route = SchemaRoute::kAuto; break;
    case v1::SCHEMA_ROUTE_REGEX: route = SchemaRoute::kRegex; break;
    case v1::SCHEMA_ROUTE_GRAMMAR: route = SchemaRoute::kGrammar; break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("options.schema_route ", o.schema_route(),
                       ": expected SCHEMA_ROUTE_AUTO, SCHEMA_ROUTE_REGEX or SCHEMA_ROUTE_GRAMMAR"));
  }
  auto whitespace = ReadWhitespace(o);
  if (!whitespace.ok()) return whitespace.status();
  c->options.eager = o.eager();
  c->options.eager_dfa = o.eager_dfa();
  if (c->kind == ConstraintKind::kJsonSchema) c->options.schema_route = route;
  // A structural tag's schemas take the same layout as a JSON Schema's.
  if (c->kind == ConstraintKind::kJsonSchema || c->kind == ConstraintKind::kStructuralTag) {
    c->options.json_schema.any_property_order = o.any_property_order();
    c->options.json_schema.whitespace = *whitespace;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Constraint> ConstraintFromRequest(const v1::CompileRequest& req,
                                                 const TokenizerRegistry& tokenizers,
                                                 const RequestTextLimits& limits) {
  Constraint c;
  if (auto st = ReadKindAndText(req, &c); !st.ok()) return st;
  if (auto st = CheckTextSize(c, limits); !st.ok()) return st;
  auto tokenizer = tokenizers.Get(req.tokenizer());
  if (!tokenizer.ok()) return tokenizer.status();
  c.tokenizer = tokenizer->context;
  if (auto st = ReadOptions(req.options(), &c); !st.ok()) return st;
  return c;
}

}  // namespace maskd
