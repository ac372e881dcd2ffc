#include "tokenizer/token_trie.h"

#include <algorithm>
#include <numeric>
#include <string_view>

#include "tokenizer/vocabulary.h"

namespace maskd {

std::unique_ptr<const TokenTrie> TokenTrie::Build(const Vocabulary& vocab) {
  return Build(vocab, [](uint32_t) { return true; });
}

std::unique_ptr<const TokenTrie> TokenTrie::Build(const Vocabulary& vocab,
                                                  absl::FunctionRef<bool(uint32_t id)> keep) {
  std::vector<uint32_t> ids;
  ids.reserve(vocab.num_tokens());
  for (uint32_t id = 0; id < vocab.size(); ++id) {
    // Node depths are 16-bit; no real tokenizer has a token anywhere near 64 KiB.
    size_t n = vocab.bytes(id).size();
    if (vocab.has_token(id) && !vocab.is_special(id) && n > 0 && n <= 0xFFFF && keep(id)) {
      ids.push_back(id);
    }
  }
  return BuildFromIds(vocab, std::move(ids));
}

std::unique_ptr<const TokenTrie> TokenTrie::BuildFromIds(const Vocabulary& vocab,
                                                         std::vector<uint32_t> ids) {
  // Sort by bytes (unsigned), then id: a sorted list visits prefixes in DFS
  // order. Each entry carries its first 8 bytes as a big-endian integer, so
  // most comparisons are one integer compare without touching the strings.
  struct Entry {
    uint64_t key;
    uint32_t id;
  };
  std::vector<Entry> entries;
  entries.reserve(ids.size());
  for (uint32_t id : ids) {
    std::string_view b = vocab.bytes(id);
    uint64_t key = 0;
    for (size_t i = 0; i < 8; ++i) {
      key = (key << 8) | (i < b.size() ? static_cast<uint8_t>(b[i]) : 0);
    }
    entries.push_back(Entry{key, id});
  }
  std::sort(entries.begin(), entries.end(), [&](const Entry& a, const Entry& b) {
    if (a.key != b.key) return a.key < b.key;
    std::string_view x = vocab.bytes(a.id), y = vocab.bytes(b.id);
    int c = x.compare(y);  // char_traits<char>::compare compares as unsigned char
    return c != 0 ? c < 0 : a.id < b.id;
  });
  for (size_t i = 0; i < entries.size(); ++i) ids[i] = entries[i].id;

  auto trie = std::unique_ptr<TokenTrie>(new TokenTrie());
  std::vector<Node>& nodes = trie->nodes_;
  nodes.push_back(Node{0, 0, 0, 0});
  trie->parents_.push_back(0);
  trie->token_begin_.push_back(0);
  uint32_t max_id = 0;
  for (uint32_t id : ids) max_id = std::max(max_id, id);
  trie->token_nodes_.assign(ids.empty() ? 0 : size_t{max_id} + 1, 0);
  // path[d] = node index of the current prefix of length d.
  std::vector<uint32_t> path = {0};
  std::string_view prev;
  for (uint32_t id : ids) {
    std::string_view b = vocab.bytes(id);
    size_t common = 0;
    while (common < prev.size() && common < b.size() && prev[common] == b[common]) ++common;
    // Close the nodes below the common prefix.
    path.resize(common + 1);
    for (size_t d = common; d < b.size(); ++d) {
      uint32_t n = static_cast<uint32_t>(nodes.size());
      uint16_t depth = static_cast<uint16_t>(d + 1);
      nodes.push_back(Node{static_cast<uint8_t>(b[d]), 0, depth, 0});
      trie->parents_.push_back(path.back());
      trie->token_begin_.push_back(static_cast<uint32_t>(trie->token_ids_.size()));
      path.push_back(n);
    }
    trie->token_ids_.push_back(id);
    trie->token_nodes_[id] = path.back();
    trie->max_depth_ = std::max<uint32_t>(trie->max_depth_, static_cast<uint32_t>(b.size()));
    prev = b;
  }
  // token_begin_[i] is where node i's tokens start: the token pushed for node i
  // was appended after node i was created and before any later node, so the
  // begin offsets recorded at creation are correct; close with the end.
  trie->token_begin_.push_back(static_cast<uint32_t>(trie->token_ids_.size()));
  // next[i]: first node after i's subtree = first later node with depth <= depth[i].
  std::vector<uint32_t> stack;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    while (!stack.empty() && nodes[stack.back()].depth >= nodes[i].depth) {
      nodes[stack.back()].next = i;
      stack.pop_back();
    }
    stack.push_back(i);
  }
  for (uint32_t i : stack) nodes[i].next = static_cast<uint32_t>(nodes.size());
  for (uint32_t i = 1; i < nodes.size(); ++i) {
    if (nodes[i].depth == 1) trie->root_child_[nodes[i].byte] = i;
  }
  return trie;
}

size_t TokenTrie::MemoryBytes() const {
  return nodes_.capacity() * sizeof(Node) +
         (token_begin_.capacity() + token_ids_.capacity() + parents_.capacity() +
          token_nodes_.capacity()) *
             sizeof(uint32_t);
}

}  // namespace maskd
