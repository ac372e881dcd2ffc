// GrammarIndex: a context-free grammar compiled against one vocabulary: the
// token masks of grammar sequences.
//
// The mask of a parser state (the last Earley set of an EarleyParser) is every
// text token whose bytes the parser can take, plus EOS where the text so far
// is accepted. Computing it splits the work the way lexer-aware engines do:
//
//   - Context-independent: each scan item (terminal t in DFA state q) of the
//     last set allows every token whose bytes keep t's DFA live from q (the
//     token ends inside t; t can always be finished, and finishing it is what
//     the item's presence proves possible). Those tokens, and the trie nodes
//     that go on past a point where t may end ("crossings", grouped by their
//     byte), depend only on (t, q): they are computed by one trie walk on t's
//     DFA and kept in a memo shared by every sequence, filled lazily and read
//     without a lock.
//   - Context-dependent: a token that runs past the end of t continues in
//     whatever the parse allows after t. For each scan item with crossings,
//     the parser pushes the set its completion yields
//     (EarleyParser::PushCompletion); only the crossings whose byte that set
//     can take are explored, the same way (DFA walks split at terminal ends)
//     for Options::dfa_levels levels, then byte by byte with the parser.
//
// Every allowed token is found this way: its bytes either stay inside one
// scan item's terminal, or leave it at a first crossing and go on from that
// item's completion. The mask only grows, and a walk from a trie node only
// marks tokens of that node's subtree, so the walks past terminal ends skip
// every subtree whose tokens are all marked already (the inside tokens are
// marked first) or hold a byte no terminal takes: inside a terminal that may
// end at every byte (a comment), they follow only the paths to tokens not
// decided yet. The work per mask is the memo lookups, one OR of mask words
// per distinct (t, q), and the walks of tokens that cross a terminal's end
// with a byte the grammar allows there, bounded by max_mask_work.
//
// Thread-safe: const methods may be called from any thread; a parser and its
// MaskScratch belong to one caller.
#ifndef MASKD_GRAMMAR_GRAMMAR_INDEX_H_
#define MASKD_GRAMMAR_GRAMMAR_INDEX_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "automaton/grow_only_array.h"
#include "grammar/compiled_grammar.h"
#include "grammar/earley.h"
#include "grammar/earley_parser.h"
#include "grammar/grammar.h"
#include "grammar/regular_rules.h"
#include "grammar/terminal_dfas.h"
#include "tokenizer/mask_budget.h"
#include "tokenizer/token_trie.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace maskd::grammar {

// The children of `ends` (trie nodes; one listed twice counts once) that
// lead to a token in neither `covered` nor `never`, each once, grouped by
// byte: crossings[crossing_begin[x] .. crossing_begin[x + 1]) end in byte x.
// Both are left empty when there is none. `covered` and `never` (mask words)
// hold tokens that every mask walking from these crossings has marked before
// or never marks: a walk from a child whose subtree they cover adds nothing.
struct Crossings {
  std::vector<uint32_t> crossings;
  std::vector<uint32_t> crossing_begin;  // 257 entries, or none
  void Build(const TokenTrie& trie, std::vector<uint32_t> ends, const uint32_t* covered,
             const uint32_t* never);
  // Past this many ends, Build reads every token slot once instead of each
  // child's subtree.
  static constexpr size_t kManyEnds = 256;
  bool empty() const { return crossings.empty(); }
  size_t MemoryBytes() const {
    return (crossings.capacity() + crossing_begin.capacity()) * sizeof(uint32_t);
  }
};

// A set of token ids: a sorted list, or mask words when that is smaller
// (exactly one of the two is non-empty, or neither for the empty set).
struct TokenSet {
  std::vector<uint32_t> ids;
  std::vector<uint32_t> words;
  // From mask words (num_words of them), which it may take.
  static TokenSet FromWords(std::vector<uint32_t> words);
  // ORs the set into `out` (num_words words).
  void MarkInto(uint32_t* out, uint32_t num_words) const;
  size_t MemoryBytes() const { return (ids.capacity() + words.capacity()) * sizeof(uint32_t); }
};

// The tokens that go on past a terminal's end into terminal u from DFA state
// r: those whose bytes after the end keep u live, and the crossings where u
// may end in turn.
struct CrossingTokens {
  TokenSet tokens;
  Crossings next;
  size_t MemoryBytes() const { return tokens.MemoryBytes() + next.MemoryBytes(); }
};

// The context-independent tokens of one (terminal, DFA state).
struct TerminalStateTokens {
  TokenSet inside;  // the tokens whose bytes keep the DFA live
  // The trie nodes whose parent's prefix ends the terminal (the DFA accepts
  // there) and which go on past it.
  Crossings crossings;
  // By (u, r) = (terminal << 32 | state): the tokens that cross into u.
  mutable absl::Mutex mu;
  mutable absl::flat_hash_map<uint64_t, std::unique_ptr<const CrossingTokens>> into
      ABSL_GUARDED_BY(mu);
  size_t MemoryBytes() const { return inside.MemoryBytes() + crossings.MemoryBytes(); }
};

// Per-caller scratch space for FillMask (reused across calls).
struct MaskScratch {
  MaskScratch() = default;
  // Scratch space holds nothing worth copying: a copy starts empty.
  MaskScratch(const MaskScratch&) {}
  MaskScratch& operator=(const MaskScratch&) { return *this; }
  MaskScratch(MaskScratch&&) = default;
  MaskScratch& operator=(MaskScratch&&) = default;

  struct Level {
    std::vector<EarleyItem> items;  // the scan items of the set at this level
    std::vector<uint32_t> ends;     // trie nodes where an item's terminal may end
    std::vector<uint32_t> roots;    // subtrees to explore at the next level
  };
  std::vector<Level> levels;
  std::vector<uint32_t> dfa_states;
  size_t work = 0;  // of the mask being computed (max_mask_work)
  // Memo entries computed past max_memo_bytes (not kept).
  std::unique_ptr<TerminalStateTokens> unkept;
  std::unique_ptr<CrossingTokens> unkept_into;
  // Set while ComputeNearLoop asks for its loop state's entry, which then
  // takes no near-loop shortcut itself (two states each other's widest
  // successor).
  bool in_near_loop = false;

  // Bytes held: the arrays by capacity, the unkept entries, not the object.
  size_t MemoryBytes() const;
};

class GrammarIndex {
 public:
  struct Options {
    EarleyOptions earley;
    // Bytes the (terminal, DFA state) memo may hold; past it an entry is
    // computed at each use (same mask, more time).
    size_t max_memo_bytes = size_t{256} << 20;
    // Shared with other indexes (in maskd: every index of one IndexCache):
    // memo entries are kept only while it has room, as for TokenIndex's
    // masks (tokenizer/mask_budget.h). Null: only max_memo_bytes bounds them.
    std::shared_ptr<MaskBudget> budget;
    // Shared with other indexes (in maskd: every index of one compiler): the
    // terminals' DFAs (terminal_dfas.h). Null: each index builds its own.
    std::shared_ptr<TerminalDfas> terminal_dfas;
    // Lex regular rules whole (regular_rules.h): same masks, fewer parser
    // steps. Off only to compare.
    bool inline_regular_rules = true;
    // Look-ahead levels split by DFA walks before walking with the parser
    // (MarkLevel); at least 1.
    size_t dfa_levels = 3;
    // Fill the memo entry of a state that loops on most bytes (a string's
    // content) from the tokenizer's byte index instead of a walk of the
    // whole trie (ComputeSelfLoop): same entry. Off only to compare.
    bool self_loop_entries = true;
    // Work one mask may take: trie nodes visited plus Earley sets built.
    // Past it FillMask fails with ResourceExhausted naming this limit.
    size_t max_mask_work = size_t{1} << 26;
    // Parser steps (EarleyParser::SetWorkLimit: Earley items added or
    // found) one call of a GrammarGuide may take: one mask, one advance, one
    // budget walk. max_mask_work counts Earley sets, and one set of an
    // ambiguous grammar may cost millions of steps: this bounds the CPU time
    // of a call. Past it the call fails with ResourceExhausted naming
    // max_parser_steps.
    // The masks of the example grammars (tests/data/grammars) take at most
    // 30,000; a step is about 20 ns.
    size_t max_parser_steps = size_t{1} << 26;
  };

  static absl::StatusOr<std::shared_ptr<const GrammarIndex>> Create(
      const Grammar& g, std::shared_ptr<const TokenizerContext> context, const Options& options);
  static absl::StatusOr<std::shared_ptr<const GrammarIndex>> Create(
      const Grammar& g, std::shared_ptr<const TokenizerContext> context) {
    return Create(g, std::move(context), Options());
  }
  ~GrammarIndex();

  const Vocabulary& vocab() const { return *vocab_; }
  const TokenizerContext& context() const { return *context_; }
  const std::shared_ptr<const CompiledGrammar>& grammar() const { return grammar_; }
  const Options& options() const { return options_; }
  // Mask width in 32-bit words: ceil(vocab().size() / 32).
  uint32_t num_words() const { return num_words_; }

  // A parser at the grammar's start.
  absl::StatusOr<EarleyParser> NewParser() const {
    return EarleyParser::Create(grammar_, options_.earley);
  }

  // Writes into words[0, num_words()) the mask of `parser`'s last set. The
  // parser ends as it began (the walk pushes and pops sets). Fails with
  // ResourceExhausted past an Earley limit (the parser's work limit
  // included: the caller sets it), or with the status of the parser's
  // Interrupt, leaving `words` undefined.
  absl::Status FillMask(EarleyParser& parser, MaskScratch& scratch, uint32_t* words) const;

  // The memo entry of (terminal, DFA state), computing it when absent.
  const TerminalStateTokens& Tokens(uint32_t terminal, uint32_t state, MaskScratch& scratch) const;
  // The tokens of `from`'s crossings that go on in terminal u from DFA state
  // r, computing them when absent.
  const CrossingTokens& Into(const TerminalStateTokens& from, uint32_t u, uint32_t r,
                             MaskScratch& scratch) const;
  // Bytes the memo holds now.
  size_t memo_bytes() const { return memo_bytes_.load(std::memory_order_relaxed); }
  // Bytes held now: the terminals' DFAs (a lazy one's as built so far) and
  // tables plus the memo. Takes no lock: a relaxed load per terminal.
  size_t MemoryBytes() const;
  // DFA states of all terminals together (a lazy one's built so far).
  uint32_t num_dfa_states() const;
  // Whether some terminal's DFA is lazy (EarleyOptions::terminal_mode) or
  // deferred (its build may fail while walking, deferred_dfa.h):
  // then work that reads the DFAs watches for the state limit's refusals
  // (RefusalWatch) and fails with StateLimitError when one came.
  bool has_lazy_terminals() const { return !lazy_dfas_.empty() || !deferred_.empty(); }
  // ResourceExhausted: a lazy terminal DFA needs more than max_states
  // states, reached while walking, or a deferred one failed to build.
  absl::Status StateLimitError() const;

  // The memo entry of (terminal, state) without a walk of the whole trie,
  // for a state s that at least LoopMasks::kMinStayBytes bytes keep in s and
  // whose other live bytes at most 1/kMaxSelfLoopWalkShare of the tokens
  // hold (when s accepts, with the tokens that die in s: at most that share
  // too): bitmask work from the tokenizer's byte index plus a walk of those
  // tokens alone (self_loop_tokens.cc). The entry equals Compute's walk.
  // False (nothing written) for other states. Used by Tokens
  // (Options::self_loop_entries); public for tests.
  bool ComputeSelfLoop(uint32_t terminal, uint32_t state, TerminalStateTokens* out) const;
  static constexpr size_t kMaxSelfLoopWalkShare = 8;
  // The memo entry of (terminal, state) from that of a loop state L, for a
  // state s whose bytes mostly lead to L where L stays (after a '<' in free
  // text that avoids "<function=", after a '*' in a C comment): at least
  // LoopMasks::kMinStayBytes bytes b with Next(s, b) = Next(L, b) = L. A
  // token starting with such a b walks from s as it does from L, so those
  // first bytes' subtrees are L's entry read again (its inside tokens, and
  // the ends its crossings hang from), and only the other first bytes'
  // subtrees are walked (self_loop_tokens.cc). The entry equals Compute's
  // walk. False (nothing written) for other states, and while computing
  // L's own entry (scratch.in_near_loop). Used by Tokens
  // (Options::self_loop_entries); public for tests.
  bool ComputeNearLoop(uint32_t terminal, uint32_t state, MaskScratch& scratch,
                       TerminalStateTokens* out) const;

 private:
  GrammarIndex() = default;
  // Fills never_.
  void FindNeverAllowed();
  // ComputeSelfLoop's walk of one token from s on terminal DFA `dfa`: marks
  // it in `words` when it stays live, and appends to `ends` the trie nodes
  // on its path where the DFA accepts (not the root, not the token's own).
  void WalkToken(const Dfa& dfa, Dfa::State s, uint32_t token, uint32_t* words,
                 std::vector<uint32_t>* ends) const;
  absl::Status OverBudget() const;
  // The scan and ignore items of the parser's last set, sorted by
  // (terminal, state).
  static void CollectScanItems(const EarleyParser& parser, std::vector<EarleyItem>* items);
  void Compute(uint32_t terminal, uint32_t state, MaskScratch& scratch,
               TerminalStateTokens* out) const;
  // Marks the tokens of the subtree of trie node `node` (its own included)
  // that `parser` takes, one Earley step per node, skipping the subtrees
  // whose tokens `words` already holds or never_ excludes.
  absl::Status WalkSubtree(EarleyParser& parser, uint32_t node, MaskScratch& scratch,
                           uint32_t* words) const;
  // Walks trie nodes [begin, end) (whole subtrees whose roots share a
  // parent) on the DFA of `terminal` from `state`: marks the tokens whose
  // bytes past the parent keep it live, and appends to `ends` the live
  // nodes where it accepts and a child exists. With `skip_marked`, skips
  // the subtrees whose tokens `words` already holds or never_ excludes
  // (their ends too: only for `words` that is the mask itself, not a memo
  // entry's crossings).
  // False when scratch.work went past `budget`.
  bool WalkDfa(uint32_t terminal, uint32_t state, uint32_t begin, uint32_t end, size_t budget,
               bool skip_marked, MaskScratch& scratch, uint32_t* words,
               std::vector<uint32_t>* ends) const;
  // Marks the tokens in the subtrees of `roots` that the parser's last set
  // takes from the roots' first byte on. At levels below dfa_levels each
  // scan item's tokens are split into those inside its terminal (a DFA walk)
  // and those that go on past its end (the next level, from the set its
  // completion yields, `completed`); the last level walks with the parser.
  // Items that only re-split a run of one terminal are skipped (Redundant).
  absl::Status MarkLevel(EarleyParser& parser, MaskScratch& scratch, size_t level,
                         const EarleyItem& completed, const std::vector<uint32_t>& roots,
                         uint32_t* words) const;
  // Level 1 from the memo: the tokens of `from`'s crossings that go on in
  // each scan item of the parser's last set (the set `completed`'s
  // completion yields), then MarkLevel from level 2.
  absl::Status MarkCrossings(EarleyParser& parser, MaskScratch& scratch,
                             const TerminalStateTokens& from, const EarleyItem& completed,
                             uint32_t* words) const;
  // The crossings whose byte is in `first`, into `roots`.
  static const std::vector<uint32_t>& Filter(const Crossings& crossings,
                                             const std::bitset<256>& first,
                                             std::vector<uint32_t>* roots);
  // Counts `bytes` against max_memo_bytes and Options::budget; false (and
  // nothing counted) past either.
  bool Reserve(size_t bytes) const;
  // Returns bytes counted by Reserve.
  void Unreserve(size_t bytes) const;
  // Whether scan item `it`, at the level below `completed`'s completion,
  // adds no token that the level above does not already find.
  bool Redundant(const EarleyItem& it, const EarleyItem& completed) const;

  using MemoSlots = GrowOnlyArray<std::atomic<const TerminalStateTokens*>>;

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::shared_ptr<const TokenizerContext> context_;
  const Vocabulary* vocab_ = nullptr;  // &context_->vocabulary()
  Options options_;
  uint32_t num_words_ = 0;
  size_t base_bytes_ = 0;          // whole DFAs and never_
  uint32_t whole_dfa_states_ = 0;  // of the whole DFAs
  // The distinct lazy DFAs, whose states and bytes grow.
  std::vector<const Dfa*> lazy_dfas_;
  // The terminals whose DFAs are built when first reached
  // (CompiledGrammar::deferred): counted once built.
  std::vector<uint32_t> deferred_;
  // memo_[t]->At(q): null until computed; entries are never replaced or
  // freed before the index. Slots grow with a lazy DFA's states.
  std::vector<std::unique_ptr<MemoSlots>> memo_;
  // Mask words: the text tokens holding a byte that no terminal's DFA takes
  // from any state, which no mask allows. The walks skip subtrees of these
  // and marked tokens alike.
  std::vector<uint32_t> never_;
  mutable std::atomic<size_t> memo_bytes_{0};
};

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_GRAMMAR_INDEX_H_
