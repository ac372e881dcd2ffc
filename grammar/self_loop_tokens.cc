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
// of the whole trie finds. With s accepting (free text that may stop at any
// byte: a structural tag's text before its trigger, a comment), every node
// of a path within S is an end, but a crossing (an end's child) is kept only
// when it leads to a token that is neither inside nor never allowed
// (Crossings::Build), and such a token's path holds every end it hangs
// from: so every such token is walked too, and they must be few. The cost
// is bitmask work over the vocabulary's words plus the walked tokens' bytes.
//
// GrammarIndex::ComputeNearLoop: the entry of a state next to such a loop
// (most of its bytes lead into the loop state and stay), read from the
// loop's entry for those first bytes' subtrees (grammar_index.h).
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/grammar_index.h"
#include "tokenizer/loop_masks.h"
#include "tokenizer/mask_bits.h"
#include "tokenizer/token_trie.h"
#include "tokenizer/utf8_closed.h"
#include "tokenizer/vocabulary.h"

namespace maskd::grammar {

void GrammarIndex::WalkToken(const Dfa& dfa, Dfa::State s, uint32_t token, uint32_t* words,
                             std::vector<uint32_t>* ends) const {
  const std::string_view bytes = vocab_->bytes(token);
  thread_local std::vector<uint32_t> at;  // prefix lengths where the terminal may end
  at.clear();
  Dfa::State q = s;
  size_t i = 0;
  for (; i < bytes.size(); ++i) {
    if (i > 0 && dfa.IsAccepting(q)) at.push_back(static_cast<uint32_t>(i));
    q = dfa.Next(q, static_cast<uint8_t>(bytes[i]));
    if (q == Dfa::kDead) break;
  }
  if (i == bytes.size()) words[token >> 5] |= 1u << (token & 31);
  // The ends on this token's path: its node's ancestors at those depths.
  const TokenTrie& trie = context_->trie();
  uint32_t node = trie.node_of(token);
  uint32_t depth = static_cast<uint32_t>(bytes.size());
  for (size_t k = at.size(); k-- > 0;) {
    for (; depth > at[k]; --depth) node = trie.parent(node);
    ends->push_back(node);
  }
}

bool GrammarIndex::ComputeSelfLoop(uint32_t terminal, uint32_t state,
                                   TerminalStateTokens* out) const {
  const Dfa& dfa = grammar_->dfa(terminal);
  const Dfa::State s = state;
  if (s == Dfa::kDead) return false;
  const bool accepting = dfa.IsAccepting(s);
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
    // From a state that does not accept, the states inside a character must
    // not either (ends only past exits). From one that accepts, every token
    // an end leads to is walked below.
    for (const auto& [u, q] : pairs) {
      if (!accepting && dfa.IsAccepting(q)) return false;
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
  std::vector<uint32_t> seen(num_words_, 0), ends;
  for (int b = 0; b < last; ++b) {
    if (kind[b] != 2) continue;
    auto [id, end] = index.TokensWith(static_cast<uint8_t>(b));
    for (; id != end; ++id) {
      const uint32_t bit = 1u << (*id & 31);
      if (seen[*id >> 5] & bit) continue;
      seen[*id >> 5] |= bit;
      WalkToken(dfa, s, *id, words.data(), &ends);
    }
  }
  // From an accepting s, also every other token neither inside nor never
  // allowed (a dead byte, malformed UTF-8 after a prefix within S): the ends
  // on its path lead to it.
  if (accepting) {
    // `seen` becomes the open ids (WalkToken sets only the bit of the id it
    // walks). At least their count less the ids that are not text tokens:
    // too many is known before any walk.
    for (uint32_t w = 0; w < num_words_; ++w) seen[w] = ~(words[w] | seen[w] | never_[w]);
    const size_t open_ids = CountMaskBits(seen.data(), num_words_);
    const size_t not_text = size_t{num_words_} * 32 - trie.num_tokens();
    if (open_ids > not_text && (open_ids - not_text) * kMaxSelfLoopWalkShare > trie.num_tokens()) {
      return false;
    }
    size_t rest = 0;
    for (uint32_t w = 0; w < num_words_; ++w) {
      for (uint32_t bits = seen[w]; bits != 0; bits &= bits - 1) {
        const uint32_t id = w * 32 + static_cast<uint32_t>(__builtin_ctz(bits));
        if (trie.node_of(id) == 0) continue;  // not a text token
        if (++rest * kMaxSelfLoopWalkShare > trie.num_tokens()) return false;
        WalkToken(dfa, s, id, words.data(), &ends);
      }
    }
  }
  out->crossings.Build(trie, std::move(ends), words.data(), never_.data());
  out->inside = TokenSet::FromWords(std::move(words));
  return true;
}

bool GrammarIndex::ComputeNearLoop(uint32_t terminal, uint32_t state, MaskScratch& scratch,
                                   TerminalStateTokens* out) const {
  const Dfa& dfa = grammar_->dfa(terminal);
  const Dfa::State s = state;
  if (s == Dfa::kDead || scratch.in_near_loop) return false;
  uint32_t widest = 0;
  const Dfa::State loop = dfa.WidestSuccessor(s, &widest);
  if (loop == Dfa::kDead || widest < LoopMasks::kMinStayBytes) return false;
  bool same[256];  // first bytes whose subtrees walk from s as from `loop`
  uint32_t num_same = 0;
  for (int b = 0; b < 256; ++b) {
    const uint8_t x = static_cast<uint8_t>(b);
    same[b] = dfa.Next(s, x) == loop && dfa.Next(loop, x) == loop;
    num_same += same[b];
  }
  if (num_same < LoopMasks::kMinStayBytes) return false;
  scratch.in_near_loop = true;
  const TerminalStateTokens& from = Tokens(terminal, loop, scratch);
  scratch.in_near_loop = false;
  const TokenTrie& trie = context_->trie();
  const TokenTrie::Node* nodes = trie.nodes();
  const uint32_t* begin = trie.token_begin();
  const uint32_t* ids = trie.token_ids();
  std::vector<uint32_t> loop_words(num_words_, 0), words(num_words_, 0), ends;
  from.inside.MarkInto(loop_words.data(), num_words_);
  for (int b = 0; b < 256; ++b) {
    const uint32_t child = trie.root_child(static_cast<uint8_t>(b));
    if (child == 0) continue;
    if (!same[b]) {
      WalkDfa(terminal, s, child, nodes[child].next, SIZE_MAX, /*skip_marked=*/false, scratch,
              words.data(), &ends);
      continue;
    }
    for (uint32_t k = begin[child]; k < begin[nodes[child].next]; ++k) {
      const uint32_t t = ids[k];
      words[t >> 5] |= loop_words[t >> 5] & (1u << (t & 31));
    }
  }
  // The ends the loop's crossings hang from, in the subtrees read again
  // (the other ends there lead to no crossing).
  for (uint32_t c : from.crossings.crossings) {
    uint32_t top = c;
    while (nodes[top].depth > 1) top = trie.parent(top);
    if (same[nodes[top].byte]) ends.push_back(trie.parent(c));
  }
  out->crossings.Build(trie, std::move(ends), words.data(), never_.data());
  out->inside = TokenSet::FromWords(std::move(words));
  return true;
}

}  // namespace maskd::grammar
