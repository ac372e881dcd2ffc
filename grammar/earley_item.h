// EarleyItem: the Earley item of both grammar engines, the reference
// recognizer (earley.h) and the incremental parser the sessions use
// (earley_parser.h). One concept, one type: both run the same algorithm over
// the same CompiledGrammar; they differ only in how they store and index
// their sets.
//
// 12 bytes, no padding: the parser keeps every item of a sequence's chart in
// one flat array and bounds it by count (EarleyOptions::max_chart_items), so
// the size is part of its memory budget.
#ifndef MASKD_GRAMMAR_EARLEY_ITEM_H_
#define MASKD_GRAMMAR_EARLEY_ITEM_H_

#include <cstdint>
#include <utility>

#include "grammar/grammar.h"

namespace maskd::grammar {

// kRule: production `id` with the dot before rhs[pos]. kScan: terminal `id`
// scanned up to DFA state `pos`. kIgnore: the same for an ignored terminal
// between symbols; ending it makes what could follow at the origin set
// follow it (the recognizer: every rule item of that set; the parser: the
// terminals predicted there). `origin`: the index of the set where the item
// began (the parser: where the text before the ignored run ended). Ids are
// below 2^30 (CompiledGrammar::Create refuses more).
struct EarleyItem {
  enum Kind : uint32_t { kRule = 0, kScan = 1, kIgnore = 2 };
  uint32_t kind_id;  // kind << 30 | id
  uint32_t pos;
  uint32_t origin;

  static EarleyItem Make(Kind k, uint32_t id, uint32_t pos, uint32_t origin) {
    return {static_cast<uint32_t>(k) << 30 | id, pos, origin};
  }
  Kind kind() const { return static_cast<Kind>(kind_id >> 30); }
  uint32_t id() const { return kind_id & ((1u << 30) - 1); }
  // A kRule item with its dot moved over the next symbol.
  EarleyItem Advanced() const { return Make(kRule, id(), pos + 1, origin); }

  friend bool operator==(const EarleyItem& a, const EarleyItem& b) {
    return a.kind_id == b.kind_id && a.pos == b.pos && a.origin == b.origin;
  }
  template <typename H>
  friend H AbslHashValue(H h, const EarleyItem& it) {
    return H::combine(std::move(h), it.kind_id, it.pos, it.origin);
  }
};
static_assert(sizeof(EarleyItem) == 12, "three words, no padding");

// The key a rule item waits under for the symbol after its dot: the symbol's
// id, with kEarleyTerminalKey set for terminals (so terminals sort after
// rules).
inline constexpr uint32_t kEarleyTerminalKey = 1u << 31;
inline uint32_t EarleyWaitKey(const Symbol& s) {
  return (s.is_terminal() ? kEarleyTerminalKey : 0) | s.id;
}

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_EARLEY_ITEM_H_
