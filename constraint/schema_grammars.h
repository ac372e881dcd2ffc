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
// Thread-safe: one mutex guards the table; lowerings run outside it.
#ifndef MASKD_CONSTRAINT_SCHEMA_GRAMMARS_H_
#define MASKD_CONSTRAINT_SCHEMA_GRAMMARS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grammar/grammar.h"
#include "schema/json_schema.h"

namespace maskd {

// Bytes `g` holds: its strings and vectors by capacity, roughly.
size_t GrammarBytes(const grammar::Grammar& g);

class SchemaGrammars {
 public:
  struct Stats {
    uint64_t hits = 0;     // lookups answered from the cache
    uint64_t misses = 0;   // lookups that lowered the schema
    uint64_t evicted = 0;  // entries dropped for room
    size_t entries = 0;
    size_t bytes = 0;
  };
  using Lower = std::function<absl::StatusOr<grammar::Grammar>()>;

  explicit SchemaGrammars(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The grammar of `schema` lowered under `options` and `limits`: from the
  // cache, or `lower()` (which must compute exactly that) kept for later.
  absl::StatusOr<std::shared_ptr<const grammar::Grammar>> Get(std::string_view schema,
                                                              const JsonSchemaOptions& options,
                                                              const grammar::GrammarLimits& limits,
                                                              const Lower& lower);
  Stats stats() const;

 private:
  struct Entry {
    std::shared_ptr<const grammar::Grammar> grammar;
    size_t bytes;
    std::list<const std::string*>::iterator lru;  // into lru_
  };

  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  absl::node_hash_map<std::string, Entry> table_ ABSL_GUARDED_BY(mu_);  // nodes are stable
  std::list<const std::string*> lru_ ABSL_GUARDED_BY(mu_);  // most recent first
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maskd

#endif  // MASKD_CONSTRAINT_SCHEMA_GRAMMARS_H_
