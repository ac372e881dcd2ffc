// GrammarIndex::ComputeSelfLoop: the memo entry of a terminal state that
// loops on most bytes (a string's content, a comment's text) without
// walking the vocabulary's trie.
//
// Let S be the bytes that keep state s in s and, when the DFA is UTF-8
// closed at s (Utf8Closed), every well-formed UTF-8 character.
// A token is then decided at its first byte outside S: it stays live up to
// there, dies there when s kills that byte, and otherwise goes on as a walk
// from s would. So
//   inside = (the trie's tokens within S, UTF-8 checked)
//          + (the tokens holding a byte that s lets through to another
//            state, each walked from s on its own bytes),
// both from the tokenizer's byte index (LoopMasks: built once per tokenizer
// and shared by every grammar and regex over it). With s not accepting, nor
// any state inside a UTF-8 character from s, the terminal can end only past
// such a byte: every end (a trie node where the DFA accepts and a token
// goes on) lies on a walked token (found from the token's node by the trie's
// parent links), and the crossings built from those ends are the ones a walk
// of the whole trie finds. The cost is bitmask work
// over the vocabulary's words plus the walked tokens' bytes.
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/grammar_index.h"
#include "tokenizer/loop_masks.h"
#include "tokenizer/token_trie.h"
#include "tokenizer/utf8_closed.h"
#include "tokenizer/vocabulary.h"

namespace maskd::grammar {

bool GrammarIndex::ComputeSelfLoop(uint32_t terminal, uint32_t state,
                                   TerminalStateTokens* out) const {
  const Dfa& dfa = grammar_->dfa(terminal);
  const Dfa::State s = state;
  if (s == Dfa::kDead || dfa.IsAccepting(s)) return false;
  const LoopMasks& index = context_->loop_masks();
  const TokenTrie& trie = context_->trie();
  // kind[b]: 0 dead, 1 stays in s, 2 live elsewhere (its tokens walked).
  uint8_t kind[256];
  uint32_t stay = 0;
  size_t walked = 0;
  for (int b = 0; b < 256; ++b) {
    const Dfa::State t = dfa.Next(s, static_cast<uint8_t>(b));
    kind[b] = t == Dfa::kDead ? 0 : t == s ? 1 : 2;
    stay += kind[b] == 1;
    if (kind[b] == 2 && b < 0x80) walked += index.NumTokensWith(static_cast<uint8_t>(b));
  }
  thread_local std::vector<std::pair<uint8_t, Dfa::State>> pairs;
  const bool utf8 = Utf8Closed(dfa, s, s, &pairs);
  if (utf8) {
    // The states inside a character must not accept (ends only past exits).
    for (const auto& [u, q] : pairs) {
      if (dfa.IsAccepting(q)) return false;
    }
    stay += 0x80;
  } else {
    for (int b = 0x80; b < 256; ++b) {
      if (kind[b] == 2) walked += index.NumTokensWith(static_cast<uint8_t>(b));
    }
  }
  if (stay < LoopMasks::kMinStayBytes ||
      walked * kMaxSelfLoopWalkShare > trie.num_tokens()) {
    return false;
  }
  const int last = utf8 ? 0x80 : 256;  // bytes past it are S (UTF-8 checked)
  std::vector<uint32_t> words(num_words_, 0);
  bool outside[256];  // a byte that leaves the loop (kind 0: dead, 2: elsewhere)
  for (int b = 0; b < 256; ++b) outside[b] = kind[b] != 1;
  index.TokensWithin(outside, utf8, num_words_, words.data());
  // Then the tokens holding a byte that s lets through elsewhere, once each.
  const Vocabulary& vocab = *vocab_;
  std::vector<uint32_t> seen(num_words_, 0), ends;
  std::vector<uint32_t> at;  // prefix lengths of one token where t may end
  for (int b = 0; b < last; ++b) {
    if (kind[b] != 2) continue;
    auto [id, end] = index.TokensWith(static_cast<uint8_t>(b));
    for (; id != end; ++id) {
      const uint32_t bit = 1u << (*id & 31);
      if (seen[*id >> 5] & bit) continue;
      seen[*id >> 5] |= bit;
      const std::string_view bytes = vocab.bytes(*id);
      Dfa::State q = s;
      size_t i = 0;
      at.clear();
      for (; i < bytes.size(); ++i) {
        if (i > 0 && dfa.IsAccepting(q)) at.push_back(static_cast<uint32_t>(i));
        q = dfa.Next(q, static_cast<uint8_t>(bytes[i]));
        if (q == Dfa::kDead) break;
      }
      if (i == bytes.size()) words[*id >> 5] |= bit;
      if (at.empty()) continue;
      // The ends on this token's path: its node's ancestors at those depths.
      uint32_t node = trie.node_of(*id);
      uint32_t depth = static_cast<uint32_t>(bytes.size());
      for (size_t k = at.size(); k-- > 0;) {
        for (; depth > at[k]; --depth) node = trie.parent(node);
        ends.push_back(node);
      }
    }
  }
  out->crossings.Build(trie, std::move(ends), words.data(), never_.data());
  out->inside = TokenSet::FromWords(std::move(words));
  return true;
}

}  // namespace maskd::grammar
