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
// goes on) lies on a walked token, and the crossings built from those ends
// are the ones a walk of the whole trie finds. The cost is bitmask work
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
namespace {

// dst[i] |= src[i] for i < n.
void OrWords(uint32_t* dst, const uint32_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] |= src[i];
}

// The trie node of `prefix`, a proper prefix of some token of the trie.
// The first token slot at or after `prefix` in byte order is the first of
// the prefix node's subtree; the node owning that slot hangs below the
// prefix node by a chain of first children, one node per byte.
uint32_t PrefixNode(const TokenTrie& trie, const Vocabulary& vocab, std::string_view prefix) {
  const uint32_t* ids = trie.token_ids();
  const uint32_t* slot = std::lower_bound(
      ids, ids + trie.num_tokens(), prefix,
      [&](uint32_t id, std::string_view p) { return vocab.bytes(id).compare(p) < 0; });
  const uint32_t k = static_cast<uint32_t>(slot - ids);
  const uint32_t* begin = trie.token_begin();
  const uint32_t owner =
      static_cast<uint32_t>(std::upper_bound(begin, begin + trie.num_nodes(), k) - begin) - 1;
  return owner - (trie.nodes()[owner].depth - static_cast<uint32_t>(prefix.size()));
}

}  // namespace

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
  // First the tokens holding a byte outside S.
  std::vector<uint32_t> words(num_words_, 0);
  bool all_control = true;
  for (int b = 0; b < 0x20; ++b) all_control &= kind[b] != 1;
  if (all_control) OrWords(words.data(), index.ControlWords(), num_words_);
  for (int b = all_control ? 0x20 : 0; b < last; ++b) {
    if (kind[b] == 1) continue;
    if (const uint32_t* bw = index.ByteWords(static_cast<uint8_t>(b)); bw != nullptr) {
      OrWords(words.data(), bw, num_words_);
    } else {
      auto [id, end] = index.TokensWith(static_cast<uint8_t>(b));
      for (; id != end; ++id) words[*id >> 5] |= 1u << (*id & 31);
    }
  }
  const uint32_t* trie_words = index.TrieWords();
  const uint32_t* utf8_words = index.Utf8Words();
  for (uint32_t w = 0; w < num_words_; ++w) {
    words[w] = trie_words[w] & ~words[w] & (utf8 ? utf8_words[w] : ~0u);
  }
  // Then the tokens holding a byte that s lets through elsewhere, once each.
  const Vocabulary& vocab = *vocab_;
  std::vector<uint32_t> seen(num_words_, 0), ends;
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
      for (; i < bytes.size(); ++i) {
        if (i > 0 && dfa.IsAccepting(q)) ends.push_back(PrefixNode(trie, vocab, bytes.substr(0, i)));
        q = dfa.Next(q, static_cast<uint8_t>(bytes[i]));
        if (q == Dfa::kDead) break;
      }
      if (i == bytes.size()) words[*id >> 5] |= bit;
    }
  }
  out->crossings.Build(trie, std::move(ends), words.data(), never_.data());
  out->inside = TokenSet::FromWords(std::move(words));
  return true;
}

}  // namespace maskd::grammar
