// Utf8Closed: whether a DFA state treats non-ASCII bytes as strict UTF-8
// characters that all lead to one state. For the mask shortcuts that decide
// a token by its ASCII bytes (index/ self-loops and chains, grammar/ self-loop
// memo entries).
#ifndef MASKD_TOKENIZER_UTF8_CLOSED_H_
#define MASKD_TOKENIZER_UTF8_CLOSED_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "automaton/dfa.h"

namespace maskd {

// Whether every well-formed UTF-8 character leads `dfa` from s to `target`,
// and every other non-ASCII byte sequence from s dies exactly where strict
// UTF-8 does (DFA states in lockstep with LoopMasks::Utf8Next). Then a
// token's non-ASCII bytes lead s to `target` when well-formed and kill it
// otherwise; one cut short ends in a live state inside a character.
// `pairs` receives the (Utf8Next state, DFA state) pairs met, the first
// (LoopMasks::kUtf8Boundary, s); false past 64 of them.
bool Utf8Closed(const Dfa& dfa, Dfa::State s, Dfa::State target,
                std::vector<std::pair<uint8_t, Dfa::State>>* pairs);

}  // namespace maskd

#endif  // MASKD_TOKENIZER_UTF8_CLOSED_H_
