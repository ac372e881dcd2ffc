#include "constraint/constraint.h"

#include <openssl/evp.h>

#include <cstdint>
#include <type_traits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace maskd {
namespace {

// JsonSchemaOptionsKey (schema/json_schema.cc) writes JsonSchemaOptions'
// fields by hand; the key covers it as one field. A field added there must be
// written there too, then counted here.
static_assert(FieldCount<JsonSchemaOptions>() == 15,
              "JsonSchemaOptions gained a field: make JsonSchemaOptionsKey write it, then update "
              "this count");
// Of its budget, the key writes max_states and max_nfa_states; the deadline
// and cancel flag are replaced by ConstraintCompiler's; eager_up_to_states
// only chooses how a lazy regex DFA is built (the masks are the same).
static_assert(FieldCount<DfaOptions>() == 5,
              "DfaOptions gained a field: make JsonSchemaOptionsKey write it if it changes a "
              "conversion, then update this count");

// One field's bytes, by type. Every overload is declared before TupleBytes.
// A field of a type with no overload here does not build: add one.
template <typename T>
  requires std::is_arithmetic_v<T> || std::is_enum_v<T>
std::string FieldBytes(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "1" : "0";
  } else if constexpr (std::is_enum_v<T>) {
    return absl::StrCat(static_cast<int64_t>(v));
  } else {
    return absl::StrCat(v);
  }
}
std::string FieldBytes(const std::string& s) { return s; }
std::string FieldBytes(const JsonSchemaOptions& o) { return JsonSchemaOptionsKey(o); }
std::string FieldBytes(const std::shared_ptr<const TokenizerContext>& t) {
  return t == nullptr ? std::string() : t->vocabulary().content_hash();
}
std::string FieldBytes(const ConstraintOptions& o);

// The fields of `fields`, each as an 8-byte length then its bytes.
template <typename Tuple>
std::string TupleBytes(const Tuple& fields) {
  std::string out;
  std::apply(
      [&out](const auto&... field) {
        auto append = [&out](const std::string& bytes) {
          const uint64_t n = bytes.size();
          out.append(reinterpret_cast<const char*>(&n), sizeof n);
          out.append(bytes);
        };
        (append(FieldBytes(field)), ...);
      },
      fields);
  return out;
}

std::string FieldBytes(const ConstraintOptions& o) { return TupleBytes(o.Fields()); }

}  // namespace

std::string_view ConstraintKindName(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kRegex: return "regex";
    case ConstraintKind::kJsonSchema: return "json_schema";
    case ConstraintKind::kGrammar: return "grammar";
    case ConstraintKind::kStructuralTag: return "structural_tag";
  }
  return "unknown";
}

std::string_view SchemaRouteName(SchemaRoute route) {
  switch (route) {
    case SchemaRoute::kAuto: return "auto";
    case SchemaRoute::kRegex: return "regex";
    case SchemaRoute::kGrammar: return "grammar";
  }
  return "unknown";
}

std::optional<SchemaRoute> SchemaRouteNamed(std::string_view name) {
  for (SchemaRoute r : {SchemaRoute::kAuto, SchemaRoute::kRegex, SchemaRoute::kGrammar}) {
    if (SchemaRouteName(r) == name) return r;
  }
  return std::nullopt;
}

std::string Constraint::KeyBytes() const { return TupleBytes(Fields()); }

std::string Constraint::CacheKey() const {
  const std::string bytes = KeyBytes();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), 16));
}

Constraint Constraint::Regex(std::string pattern, std::shared_ptr<const TokenizerContext> tokenizer) {
  Constraint c;
  c.text = std::move(pattern);
  c.tokenizer = std::move(tokenizer);
  return c;
}

Constraint Constraint::JsonSchema(std::string schema,
                                  std::shared_ptr<const TokenizerContext> tokenizer,
                                  JsonSchemaOptions options) {
  Constraint c;
  c.kind = ConstraintKind::kJsonSchema;
  c.text = std::move(schema);
  c.options.json_schema = std::move(options);
  c.tokenizer = std::move(tokenizer);
  return c;
}

Constraint Constraint::Grammar(std::string text, GrammarFormat format,
                               std::shared_ptr<const TokenizerContext> tokenizer) {
  Constraint c;
  c.kind = ConstraintKind::kGrammar;
  c.text = std::move(text);
  c.options.grammar_format = format;
  c.tokenizer = std::move(tokenizer);
  return c;
}

Constraint Constraint::StructuralTag(std::string json,
                                     std::shared_ptr<const TokenizerContext> tokenizer) {
  Constraint c;
  c.kind = ConstraintKind::kStructuralTag;
  c.text = std::move(json);
  c.tokenizer = std::move(tokenizer);
  return c;
}

}  // namespace maskd
