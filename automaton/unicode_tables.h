// Unicode Character Database data behind \p{...} and (?i), generated into
// unicode_tables.cc by automaton/gen_unicode_tables.py (the .cc header and
// kUcdVersion name the UCD version). Readers use automaton/unicode_property.h.
#ifndef MASKD_AUTOMATON_UNICODE_TABLES_H_
#define MASKD_AUTOMATON_UNICODE_TABLES_H_

#include <cstddef>
#include <cstdint>

namespace maskd::unicode {

struct Range {
  uint32_t lo, hi;  // closed
};

// One name of a property value and its codepoints: kRanges[begin, begin +
// size), sorted, disjoint, non-adjacent, never a surrogate.
struct PropertyValue {
  const char* key;   // the name loosely matched: lowercase, no ' ', '_' or '-'
  const char* name;  // the value's canonical name (short for General_Category)
  uint32_t begin, size;
};

extern const char kUcdVersion[];
extern const Range kRanges[];
extern const size_t kRangesSize;

// Every alias of every value, sorted by key. General_Category includes the
// groups (L, LC and L&, M, N, P, S, Z, C), Cn (unassigned, noncharacters
// included) and Cs (empty: surrogates are not UTF-8). Script includes Unknown
// (Zzzz: what Scripts.txt lists under no script).
extern const PropertyValue kGeneralCategory[];
extern const size_t kGeneralCategorySize;
extern const PropertyValue kScript[];
extern const size_t kScriptSize;

// Simple case folding (CaseFolding.txt statuses C and S) as orbits: every
// codepoint that folds or is folded to, sorted by `cp`, with the next member
// of its equivalence class in `next` (the links of a class form a cycle).
struct OrbitLink {
  uint32_t cp, next;
};
extern const OrbitLink kCaseOrbit[];
extern const size_t kCaseOrbitSize;

}  // namespace maskd::unicode

#endif  // MASKD_AUTOMATON_UNICODE_TABLES_H_
