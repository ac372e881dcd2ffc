// TokenTrie: the vocabulary's text tokens as a flat byte trie in DFS order.
//
// Built once per tokenizer (tokenizer/tokenizer_context.h) and shared by every
// index over it. Walking the trie against a DFA visits each distinct token
// prefix once and skips a whole subtree at the first byte the DFA rejects.
#ifndef MASKD_TOKENIZER_TOKEN_TRIE_H_
#define MASKD_TOKENIZER_TOKEN_TRIE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"

namespace maskd {

class Vocabulary;

class TokenTrie {
 public:
  // One node per distinct non-empty token prefix. Node 0 is the root (the
  // empty prefix); nodes 1.. are in depth-first order, children sorted by byte.
  struct Node {
    uint8_t byte;     // the last byte of this node's prefix (0 for the root)
    uint8_t unused;
    uint16_t depth;   // prefix length in bytes; the root has depth 0
    uint32_t next;    // index of the first node after this node's subtree
  };
  static_assert(sizeof(Node) == 8);

  // Every token that is not special and has 1 to 65535 bytes.
  static std::unique_ptr<const TokenTrie> Build(const Vocabulary& vocab);
  // The same, restricted to the tokens for which keep(id) is true.
  static std::unique_ptr<const TokenTrie> Build(const Vocabulary& vocab,
                                                absl::FunctionRef<bool(uint32_t id)> keep);
  // The trie of exactly `ids` (text tokens of `vocab` that Build would keep,
  // each once, any order): its cost is theirs, not the vocabulary's.
  static std::unique_ptr<const TokenTrie> BuildFromIds(const Vocabulary& vocab,
                                                       std::vector<uint32_t> ids);

  size_t num_nodes() const { return nodes_.size(); }
  const Node* nodes() const { return nodes_.data(); }
  // Token ids whose bytes equal node i's prefix:
  // token_ids()[token_begin()[i] .. token_begin()[i + 1]).
  const uint32_t* token_begin() const { return token_begin_.data(); }
  const uint32_t* token_ids() const { return token_ids_.data(); }
  uint32_t max_depth() const { return max_depth_; }
  // The node of the one-byte prefix `b` (the root's child), or 0 when no
  // token starts with b. Its subtree is nodes [i, nodes()[i].next) and its
  // tokens token_ids()[token_begin()[i] .. token_begin()[nodes()[i].next]).
  uint32_t root_child(uint8_t b) const { return root_child_[b]; }
  // Number of token ids in the trie.
  size_t num_tokens() const { return token_ids_.size(); }
  // The parent of node i > 0 (the root for a one-byte prefix).
  uint32_t parent(uint32_t i) const { return parents_[i]; }
  // The node whose prefix is token `id`'s bytes, or 0 when `id` is not in
  // the trie.
  uint32_t node_of(uint32_t id) const { return id < token_nodes_.size() ? token_nodes_[id] : 0; }
  size_t MemoryBytes() const;

 private:
  std::vector<Node> nodes_;
  std::vector<uint32_t> token_begin_;  // num_nodes() + 1 entries
  std::vector<uint32_t> token_ids_;
  std::vector<uint32_t> parents_;      // num_nodes() entries (the root's: 0)
  std::vector<uint32_t> token_nodes_;  // by id, up to the largest id held
  uint32_t max_depth_ = 0;
  uint32_t root_child_[256] = {};
};

}  // namespace maskd

#endif  // MASKD_TOKENIZER_TOKEN_TRIE_H_
