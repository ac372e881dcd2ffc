#include "constraint/schema_grammars.h"

#include <openssl/evp.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace maskd {
namespace {

// The schema's SHA-256 digest, then everything the lowering depends on.
std::string Key(std::string_view schema, const JsonSchemaOptions& options,
                const grammar::GrammarLimits& limits) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(schema.data(), schema.size(), digest, &len, EVP_sha256(), nullptr);
  return absl::StrCat(absl::string_view(reinterpret_cast<const char*>(digest), len), schema.size(),
                      ";", JsonSchemaOptionsKey(options), ";g=", limits.max_text_bytes, ",",
                      limits.max_rules, ",", limits.max_terminals, ",", limits.max_symbols, ",",
                      limits.max_nesting, ",", limits.max_repeat);
}

}  // namespace

size_t GrammarBytes(const grammar::Grammar& g) {
  size_t bytes = sizeof(g) + g.terminals.capacity() * sizeof(grammar::Terminal) +
                 g.rules.capacity() * sizeof(grammar::Rule) + g.ignore.capacity() * sizeof(uint32_t);
  for (const grammar::Terminal& t : g.terminals) {
    bytes += t.name.capacity() + t.regex.capacity() + (t.literal ? t.literal->capacity() : 0);
  }
  for (const grammar::Rule& r : g.rules) {
    bytes += r.name.capacity() + r.alternatives.capacity() * sizeof(r.alternatives[0]);
    for (const auto& alternative : r.alternatives) {
      bytes += alternative.capacity() * sizeof(grammar::Symbol);
    }
  }
  return bytes;
}

absl::StatusOr<std::shared_ptr<const grammar::Grammar>> SchemaGrammars::Get(
    std::string_view schema, const JsonSchemaOptions& options, const grammar::GrammarLimits& limits,
    const Lower& lower) {
  return cache_.GetOrMake(
      Key(schema, options, limits),
      [&]() -> absl::StatusOr<std::shared_ptr<const grammar::Grammar>> {
        auto lowered = lower();
        if (!lowered.ok()) return lowered.status();
        return std::make_shared<const grammar::Grammar>(*std::move(lowered));
      },
      GrammarBytes);
}

}  // namespace maskd
