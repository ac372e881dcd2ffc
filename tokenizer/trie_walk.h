// WalkTrie: the tokens of a TokenTrie that an automaton accepts as a prefix.
//
// For LoopMasks and TokenIndex. An Automaton is any type with
//   uint32_t Next(uint32_t state, uint8_t byte) const
// where state 0 is dead and absorbing (Dfa qualifies). The walk visits each
// trie node whose prefix stays live and skips a whole subtree at the first
// byte that reaches state 0, so its cost is the live prefixes, not the
// vocabulary size.
#ifndef MASKD_TOKENIZER_TRIE_WALK_H_
#define MASKD_TOKENIZER_TRIE_WALK_H_

#include <cstdint>
#include <vector>

#include "tokenizer/token_trie.h"

namespace maskd {

// For every trie node whose prefix walks from `start` to a live state `t` and
// is the whole of some tokens, calls on_tokens(t, ids, ids_end) with those
// tokens' ids. `stack` is scratch space (resized here). Nothing is called when
// `start` is 0. With `first_node` set, only the subtree of that root child
// (TokenTrie::root_child) is walked.
template <typename Automaton, typename OnTokens>
void WalkTrie(const TokenTrie& trie, const Automaton& automaton, uint32_t start,
              std::vector<uint32_t>& stack, OnTokens&& on_tokens, uint32_t first_node = 0) {
  if (start == 0) return;
  stack.resize(trie.max_depth() + 1);
  uint32_t* states = stack.data();
  const TokenTrie::Node* nodes = trie.nodes();
  const uint32_t* token_begin = trie.token_begin();
  const uint32_t* token_ids = trie.token_ids();
  uint32_t n = static_cast<uint32_t>(trie.num_nodes());
  uint32_t i = 1;
  if (first_node != 0) {
    i = first_node;
    n = nodes[first_node].next;
  }
  states[0] = start;
  while (i < n) {
    const TokenTrie::Node node = nodes[i];
    const uint32_t t = automaton.Next(states[node.depth - 1], node.byte);
    if (t == 0) {
      i = node.next;  // no token below this prefix is allowed
      continue;
    }
    states[node.depth] = t;
    const uint32_t b = token_begin[i];
    const uint32_t e = token_begin[i + 1];
    if (b != e) on_tokens(t, token_ids + b, token_ids + e);
    ++i;
  }
}

}  // namespace maskd

#endif  // MASKD_TOKENIZER_TRIE_WALK_H_
