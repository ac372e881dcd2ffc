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
// exit byte ("loop tokens"), and per distinct X the trie of the tokens that
// contain an exit byte. A state's mask is then its loop tokens plus the
// exit-byte tokens walked from s in its own DFA: exact for any C, and cheap
// when few tokens contain an exit byte.
//
// A new loop costs no more than its first state's mask computed directly:
// LoopMasks never walks the whole trie itself. The first state of a new shape
// is walked directly by its index (TokenIndex), which hands the allowed tokens
// without an exit byte to Complete (walked from s they stay in C, so they are
// exactly the loop tokens). Exit tries are built from a per-vocabulary index
// of the tokens holding each byte (built with the LoopMasks, that is with the
// vocabulary's TokenizerContext), so their cost is the exit tokens', not the
// vocabulary's.
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
#ifndef MASKD_TOKENIZER_LOOP_MASKS_H_
#define MASKD_TOKENIZER_LOOP_MASKS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "automaton/dfa.h"
#include "tokenizer/token_trie.h"

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
  static bool Has(const ByteSet& set, uint8_t b) { return (set[b >> 6] >> (b & 63)) & 1; }
  static void Add(ByteSet& set, uint8_t b) { set[b >> 6] |= uint64_t{1} << (b & 63); }

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

  // Memo bound in bytes unless set_max_bytes says otherwise.
  static constexpr size_t kDefaultMaxBytes = size_t{64} << 20;

  // Indexes the tokens of `trie` (vocab's text-token trie, TokenTrie::Build)
  // by byte (two passes over their bytes). Both must outlive the LoopMasks.
  LoopMasks(const Vocabulary& vocab, const TokenTrie& trie);
  ~LoopMasks();
  LoopMasks(const LoopMasks&) = delete;
  LoopMasks& operator=(const LoopMasks&) = delete;

  // The loop of live state `s`, or null when it is not worth sharing (s on no
  // cycle, fewer than kMinStayBytes bytes stay in C, or too many tokens hold
  // an exit byte). When non-null, `*states` (if given) receives the DFA state
  // of each canonical state: (*states)[i] is canonical state i (s is 0).
  //
  // A loop not kept yet is not computed here: Find returns null and, when
  // `pending` is given, fills it (pending->exit_trie non-null) so that the
  // caller completes the loop from its own direct walk of s (Complete).
  struct Pending {
    ByteSet x = {};
    std::vector<uint8_t> byte_map;
    std::vector<uint32_t> table;
    uint32_t rows = 0;
    size_t hash = 0;
    const TokenTrie* exit_trie = nullptr;  // null: no pending loop
    std::vector<Dfa::State> canon;         // canonical state -> DFA state
  };
  std::shared_ptr<const Loop> Find(const Dfa& dfa, Dfa::State s,
                                   std::vector<Dfa::State>* states = nullptr,
                                   Pending* pending = nullptr);
  // Keeps (memory allowing) and returns the loop of `pending`, given its
  // first state's allowed trie tokens that hold no exit byte (`words`, packed,
  // `count` bits set) and the DFA states in which those tokens end.
  std::shared_ptr<const Loop> Complete(Pending pending, std::vector<uint32_t> words,
                                       uint32_t count, const std::vector<Dfa::State>& end_states);

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

  // The per-vocabulary byte index the constructor builds (immutable; read
  // without a lock). The ids of the trie's tokens holding byte b, ascending:
  std::pair<const uint32_t*, const uint32_t*> TokensWith(uint8_t b) const {
    return {byte_tokens_.data() + byte_begin_[b], byte_tokens_.data() + byte_begin_[b + 1]};
  }
  uint32_t NumTokensWith(uint8_t b) const { return tokens_with_byte_[b]; }
  // The same as a packed bitmask (ceil(vocab size / 32) words) for the bytes
  // held by at least 1/kDenseByteShare as many tokens as it has words (ORing
  // it is then cheaper than setting its ids one by one); null for the others.
  const uint32_t* ByteWords(uint8_t b) const {
    return byte_words_[b] == UINT32_MAX ? nullptr : dense_words_.data() + byte_words_[b];
  }
  static constexpr uint32_t kDenseByteShare = 2;
  // The trie's tokens longer than kShortTokenBytes, ascending ids, and as a
  // packed bitmask.
  const std::vector<uint32_t>& LongTokens() const { return long_tokens_; }
  const uint32_t* LongWords() const { return long_words_.data(); }
  // Every token of the trie as a packed bitmask.
  const uint32_t* TrieWords() const { return trie_words_.data(); }
  // Writes into words[0, num_words) the trie's tokens holding no byte b with
  // outside[b]: with `utf8`, outside[] is read for ASCII bytes only and the
  // tokens must be well-formed UTF-8 (Utf8Words); without it, for every
  // byte. Built from the byte index (no trie walk).
  void TokensWithin(const bool outside[256], bool utf8, uint32_t num_words,
                    uint32_t* words) const;
  // The trie's tokens holding a byte >= 0x80, as a packed bitmask.
  const uint32_t* NonAsciiWords() const { return non_ascii_words_.data(); }
  // The trie's tokens holding a byte < 0x20, as a packed bitmask.
  const uint32_t* ControlWords() const { return control_words_.data(); }
  // The trie's tokens that are well-formed UTF-8 read from a character
  // boundary (Utf8Next), the last character possibly cut short.
  const uint32_t* Utf8Words() const { return utf8_words_.data(); }
  // Those of them whose last character is cut short.
  const uint32_t* Utf8CutWords() const { return utf8_cut_words_.data(); }
  // Those tokens grouped by the cut-short character ending them (its 1 to 3
  // bytes): group i's tail is CutTail(i), its ids CutTailTokens(i).
  size_t NumCutTails() const { return cut_tails_.size(); }
  // For a token of Utf8Words(): its number of whole characters (at most
  // 255), and the group of its cut-short last character (UINT32_MAX: none).
  uint8_t CharCount(uint32_t id) const { return char_count_[id]; }
  uint32_t CutTailOf(uint32_t id) const { return cut_tail_of_[id]; }
  std::string_view CutTail(size_t i) const { return cut_tails_[i]; }
  std::pair<const uint32_t*, const uint32_t*> CutTailTokens(size_t i) const {
    return {cut_tail_ids_.data() + cut_tail_begin_[i], cut_tail_ids_.data() + cut_tail_begin_[i + 1]};
  }
  // Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF) as
  // a byte automaton: state 0 is dead, kUtf8Boundary is between characters.
  static constexpr uint8_t kUtf8Boundary = 1;
  static uint8_t Utf8Next(uint8_t state, uint8_t byte);
  // Bytes of the index (lists and bitmasks).
  size_t IndexBytes() const;

  // Empties the memo (loops, exit tries, bounded candidates) and zeroes the
  // counters, as in a new process; the byte index stays. For benchmarks
  // (`maskctl maskbench --fresh`): call it only while no mask over this
  // vocabulary is being computed, as loops handed out point into the memo.
  void Clear();

  // Memo size bound in bytes (default kDefaultMaxBytes, 64 MiB).
  void set_max_bytes(size_t bytes) { max_bytes_.store(bytes, std::memory_order_relaxed); }
  size_t max_bytes() const { return max_bytes_.load(std::memory_order_relaxed); }

  struct Stats {
    size_t loops = 0;       // distinct loops kept
    size_t exit_tries = 0;  // distinct exit byte sets kept
    size_t bytes = 0;       // memory kept
    uint64_t hits = 0;      // Find calls answered from the memo
    uint64_t misses = 0;    // Find calls that found a shape not kept
    uint64_t bounded = 0;   // FindBounded calls that matched a kept loop
  };
  Stats stats() const;

 private:
  struct ExitTrie {
    ByteSet bytes;
    uint32_t max_len = 0;  // also tokens longer than this (0: no length bound)
    std::unique_ptr<const TokenTrie> trie;  // null: too many tokens (not worth sharing)
  };
  // The trie of tokens holding a byte of `x` (or, when max_len is
  // kShortTokenBytes, longer than that), built on first use; null when they
  // are more than 1/kMaxExitShare of the tokens.
  const TokenTrie* ExitTrieFor(const ByteSet& x, uint32_t max_len = 0);
  // Find's candidate exits for the tight loop around `anchor`, in the order
  // tried, each with the number of tokens holding one of its bytes: the
  // ASCII classes by which `anchor` leaves alive for another state, all
  // together (when more than one), then the kMaxCutTries rarest alone. A
  // class holding a non-ASCII byte, or held by more than 1/kMaxExitShare of
  // the tokens, is never a candidate.
  std::vector<std::pair<size_t, ByteSet>> CandidateCuts(const Dfa& dfa, Dfa::State anchor) const;
  // The constructor's byte index, in three passes over the trie's tokens:
  // byte_begin_, byte_tokens_, tokens_with_byte_ and long_tokens_;
  void IndexTokensByByte();
  // the per-token bitmasks (trie, non-ASCII, control, UTF-8, cut short,
  // long), char_count_ and the cut-short tails grouped;
  void IndexTokenClasses();
  // byte_words_ and dense_words_ (ByteWords).
  void IndexDenseBytes();

  const Vocabulary& vocab_;
  const TokenTrie& trie_;  // vocab_'s text tokens
  std::atomic<size_t> max_bytes_{kDefaultMaxBytes};
  mutable absl::Mutex mu_;
  absl::flat_hash_map<size_t, std::vector<std::shared_ptr<const Loop>>> loops_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<ExitTrie>> exit_tries_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t num_loops_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<const Loop>> bounded_candidates_ ABSL_GUARDED_BY(mu_);
  // Built by the constructor. The ids of the trie's tokens holding byte b:
  // byte_tokens_[byte_begin_[b] .. byte_begin_[b + 1]), ascending.
  std::vector<uint32_t> byte_begin_;
  std::vector<uint32_t> byte_tokens_;
  std::array<uint32_t, 256> tokens_with_byte_ = {};  // trie tokens holding each byte
  std::vector<uint32_t> long_tokens_;  // trie tokens longer than kShortTokenBytes
  // Per byte: offset of its bitmask in dense_words_, or UINT32_MAX.
  std::array<uint32_t, 256> byte_words_ = {};
  std::vector<uint32_t> dense_words_;
  std::vector<uint32_t> trie_words_;
  std::vector<uint32_t> non_ascii_words_;
  std::vector<uint32_t> control_words_;
  std::vector<uint32_t> utf8_words_;
  std::vector<uint32_t> utf8_cut_words_;
  std::vector<uint32_t> long_words_;
  std::vector<std::string> cut_tails_;
  std::vector<uint32_t> cut_tail_begin_;
  std::vector<uint32_t> cut_tail_ids_;
  std::vector<uint8_t> char_count_;     // per id (vocabulary size)
  std::vector<uint32_t> cut_tail_of_;   // per id (vocabulary size)
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> bounded_{0};
};

}  // namespace maskd

#endif  // MASKD_TOKENIZER_LOOP_MASKS_H_
