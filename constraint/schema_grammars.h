// SchemaGrammars: a bounded, shared cache of JSON Schemas lowered to
// grammars (schema_grammar.h), for the schemas of structural tags: an agent
// sends the same tools in request after request, and each tool's schema is
// lowered once per compiler (in maskd, per server), then copied into every
// tag grammar that holds it. With grammar/terminal_dfas.h (its terminals'
// DFAs) a tool sent again costs neither its lowering nor its DFAs.
//
// Key: the schema's text (a SHA-256 digest of it), its JsonSchemaOptions
// (JsonSchemaOptionsKey) and the GrammarLimits it was lowered under: a
// lowering is a function of these, so a cached one is the one a new
// lowering would give. Only successes are kept (an error, a deadline, is
// returned and forgotten). Memory: at most max_bytes of grammars
// (GrammarBytes) and keys, least recently used dropped first; a grammar
// larger than that is returned but not kept.
//
// Thread-safe (grammar/byte_lru.h): lowerings run outside its lock.
#ifndef MASKD_CONSTRAINT_SCHEMA_GRAMMARS_H_
#define MASKD_CONSTRAINT_SCHEMA_GRAMMARS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/byte_lru.h"
#include "grammar/grammar.h"
#include "schema/json_schema.h"

namespace maskd {

// Bytes `g` holds: its strings and vectors by capacity, roughly.
size_t GrammarBytes(const grammar::Grammar& g);

class SchemaGrammars {
 public:
  using Stats = ByteLruStats;
  using Lower = std::function<absl::StatusOr<grammar::Grammar>()>;

  explicit SchemaGrammars(size_t max_bytes) : cache_(max_bytes) {}

  // The grammar of `schema` lowered under `options` and `limits`: from the
  // cache, or `lower()` (which must compute exactly that) kept for later.
  absl::StatusOr<std::shared_ptr<const grammar::Grammar>> Get(std::string_view schema,
                                                              const JsonSchemaOptions& options,
                                                              const grammar::GrammarLimits& limits,
                                                              const Lower& lower);
  Stats stats() const { return cache_.stats(); }

 private:
  ByteLru<grammar::Grammar> cache_;
};

}  // namespace maskd

#endif  // MASKD_CONSTRAINT_SCHEMA_GRAMMARS_H_
