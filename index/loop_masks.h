// LoopMasks: the part of a state's mask that it shares with every state, in
// every index over one vocabulary, sitting in the same kind of loop.
//
// Take a live state s of a Dfa and a set C of live states holding s. The exit
// bytes X of C are the bytes b for which some q in C has Next(q, b) live and
// outside C. A token with no byte in X, walked from s, stays inside C until it
// is rejected, so whether it is allowed depends only on C's transitions over
// the bytes outside X. Numbering those transitions canonically (breadth-first
// from s, bytes in ascending order) gives a table that is equal for any two
// states whose loops are isomorphic, in one DFA or in different ones.
//
// LoopMasks memoizes, per distinct (X, table), the allowed tokens without an
// exit byte ("loop tokens", found once by walking the whole trie), and per
// distinct X the trie of the tokens that contain an exit byte. A state's mask
// is then its loop tokens plus the exit-byte tokens walked from s in its own
// DFA: exact for any C, and cheap when few tokens contain an exit byte.
//
// Any C gives exact masks; the search picks one that is small, whose exits
// few tokens hold, and that recurs. From s it explores at most kMaxLoopStates
// live states; C is the set of explored states that reach the loop's anchor
// (s when s is on a cycle; else the successor most bytes lead to, as a
// string's opening quote leads into its content), plus s. The search first
// cuts candidate exits, not following them: the ASCII byte classes by which
// the anchor leaves for another state, all together, then the rarest few
// alone; then it tries with nothing cut. So the content of a JSON string is
// the loop of its characters, UTF-8 sequences and escapes, with the quote
// (and backslash) as exits, wherever the string sits: every free-text string
// of every schema over a tokenizer then costs one walk of the whole trie, not
// one per state. A loop is shared only when at least kMinStayBytes bytes keep
// s in C and at most 1/kMaxExitShare of the tokens hold an exit byte.
//
// Thread-safe. The memo is bounded by max_bytes(); past it, loops are still
// computed (and returned) but not kept.
#ifndef MASKD_INDEX_LOOP_MASKS_H_
#define MASKD_INDEX_LOOP_MASKS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/base/call_once.h"
#include "absl/synchronization/mutex.h"
#include "index/dfa.h"
#include "index/token_trie.h"

namespace maskd {

class Vocabulary;

class LoopMasks {
 public:
  // Bound on |C| (and on the canonical table's rows).
  static constexpr uint32_t kMaxLoopStates = 256;
  // A loop is shared only when at least this many bytes keep s inside C
  // (narrower states are cheap to walk directly)...
  static constexpr uint32_t kMinStayBytes = 16;
  // ... and when at most this fraction (1/kMaxExitShare) of the trie's tokens
  // contain an exit byte.
  static constexpr uint32_t kMaxExitShare = 4;
  // Single candidate exit classes tried before a search with nothing cut.
  static constexpr uint32_t kMaxCutTries = 3;

  // A 256-bit set of bytes.
  using ByteSet = std::array<uint64_t, 4>;

  // One distinct loop (canonical table) and its loop tokens.
  struct Loop {
    ByteSet exit_bytes;
    // The loop's transitions over its own byte classes: byte b is in class
    // byte_map[b]; table[(r * num_classes) + class] is the next row. Row 0
    // is dead, row i + 1 is canonical state i; exit bytes lead to row 0.
    std::vector<uint8_t> byte_map;  // 256 entries
    std::vector<uint32_t> table;    // (rows + 1) x num_classes
    uint32_t num_classes = 0;
    // Loop tokens as a packed bitmask (ceil(vocab size / 32) words).
    std::vector<uint32_t> words;
    uint32_t count = 0;  // bits set in `words`
    // Canonical states (0-based) in which some loop token ends.
    std::vector<uint32_t> end_states;
    // Tokens containing an exit byte (owned by LoopMasks; lives as long as it).
    const TokenTrie* exit_trie = nullptr;
    // The loop tokens of at most kShortTokenBytes bytes, and their number.
    std::vector<uint32_t> short_words;
    uint32_t short_count = 0;
    size_t MemoryBytes() const;
  };

  explicit LoopMasks(const Vocabulary& vocab);
  ~LoopMasks();
  LoopMasks(const LoopMasks&) = delete;
  LoopMasks& operator=(const LoopMasks&) = delete;

  // The loop of live state `s`, or null when it is not worth sharing (s on no
  // cycle, fewer than kMinStayBytes bytes stay in C, or too many tokens hold
  // an exit byte). When non-null, `*states` (if given) receives the DFA state
  // of each canonical state: (*states)[i] is canonical state i (s is 0).
  std::shared_ptr<const Loop> Find(const Dfa& dfa, Dfa::State s,
                                   std::vector<Dfa::State>* states = nullptr);

  // A state on no loop but behaving like a kept loop for every string of up
  // to kShortTokenBytes bytes without an exit byte (a position in a string
  // with a maxLength, far enough from the end) shares that loop's short
  // tokens; the rest (tokens holding an exit byte or longer) is walked from
  // the state in `rest_trie`.
  struct Bounded {
    std::shared_ptr<const Loop> loop;  // null: no match
    const TokenTrie* rest_trie = nullptr;
  };
  static constexpr uint32_t kShortTokenBytes = 16;
  // Kept loops tried by FindBounded (the first ones kept whose entry state
  // loops on itself).
  static constexpr size_t kMaxBoundedCandidates = 4;
  Bounded FindBounded(const Dfa& dfa, Dfa::State s);

  // Memo size bound in bytes (default 64 MiB).
  void set_max_bytes(size_t bytes) { max_bytes_.store(bytes, std::memory_order_relaxed); }
  size_t max_bytes() const { return max_bytes_.load(std::memory_order_relaxed); }

  struct Stats {
    size_t loops = 0;       // distinct loops kept
    size_t exit_tries = 0;  // distinct exit byte sets kept
    size_t bytes = 0;       // memory kept
    uint64_t hits = 0;      // Find calls answered from the memo
    uint64_t misses = 0;    // Find calls that walked the whole trie
    uint64_t bounded = 0;   // FindBounded calls that matched a kept loop
  };
  Stats stats() const;

 private:
  struct ExitTrie {
    ByteSet bytes;
    uint32_t max_len = 0;  // also tokens longer than this (0: no length bound)
    std::unique_ptr<const TokenTrie> trie;  // null: too many tokens (not worth sharing)
  };
  // The trie of tokens holding a byte of `x` (or, when max_len > 0, longer
  // than max_len bytes), built on first use; null when they are more than
  // 1/kMaxExitShare of the tokens.
  const TokenTrie* ExitTrieFor(const ByteSet& x, uint32_t max_len = 0);
  // Fills tokens_with_byte_ once.
  void CountTokensWithByte();
  std::shared_ptr<const Loop> Compute(ByteSet x, std::vector<uint8_t> byte_map,
                                      std::vector<uint32_t> table, uint32_t rows,
                                      const TokenTrie* exit_trie) const;

  const Vocabulary& vocab_;
  std::atomic<size_t> max_bytes_{size_t{64} << 20};
  mutable absl::Mutex mu_;
  absl::flat_hash_map<size_t, std::vector<std::shared_ptr<const Loop>>> loops_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<ExitTrie>> exit_tries_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t num_loops_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<const Loop>> bounded_candidates_ ABSL_GUARDED_BY(mu_);
  absl::once_flag byte_counts_once_;
  std::array<uint32_t, 256> tokens_with_byte_ = {};  // trie tokens holding each byte
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> bounded_{0};
};

}  // namespace maskd

#endif  // MASKD_INDEX_LOOP_MASKS_H_
