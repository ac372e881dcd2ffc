// TokenIndex: for each state of a Dfa, the tokens of a Vocabulary allowed there.
//
// A token is allowed in state s when its bytes can be walked from s without
// reaching the dead state. EOS ids are allowed exactly in accepting states;
// other special tokens and padding ids never are. Masks are computed on first
// use by walking the tokenizer context's TokenTrie (skipping a subtree at the first
// rejected byte), memoized per state, and shared between identical states.
// Wide states avoid the whole walk in three exact ways, tried in order:
//  - reference: mask(s) and mask(t) agree on the tokens whose first byte b has
//    Next(s, b) == Next(t, b); with t the successor most bytes lead to (a key
//    exclusion's free content), only the other first bytes are walked;
//  - loop: a state inside a wide loop (the content of a JSON string) takes the
//    loop's part from the tokenizer context's LoopMasks, computed once for every
//    index, and walks only the tokens that can leave the loop;
//  - bounded: a state that behaves like a kept loop for every short string (a
//    position in a string with a maxLength) takes the loop's short tokens and
//    walks the long ones and those that leave.
// Masks kept count against Options::budget when one is given; a state whose
// mask does not fit is walked again at each use, with the same result.
// Over a lazy Dfa (automaton/dfa.h) the states are built as the masks and
// steps reach them, and a mask whose walks the DFA's state limit refused is
// neither kept nor written: WriteMask and NextStateChecked say
// ResourceExhausted.
// All methods are thread-safe; reading a computed mask takes no lock.
#ifndef MASKD_INDEX_TOKEN_INDEX_H_
#define MASKD_INDEX_TOKEN_INDEX_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "automaton/dfa.h"
#include "automaton/grow_only_array.h"
#include "automaton/regex.h"
#include "tokenizer/mask_budget.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace maskd {

class StateMask;       // state_mask.h
class StateMaskStore;  // state_mask.h

class TokenIndex {
 public:
  using State = Dfa::State;

  struct Options {
    // Take loop masks from context().loop_masks() (tokenizer/loop_masks.h).
    // Off: every mask is one walk of the whole trie (a baseline for benches).
    bool share_loops = true;
    // Bounds the masks kept, together with every index sharing it; a mask
    // past it is computed at each use (mask_budget.h). Null: no bound.
    std::shared_ptr<MaskBudget> budget;
  };

  // `context` must not be null; the index holds it.
  static std::shared_ptr<const TokenIndex> Create(std::shared_ptr<const Dfa> dfa,
                                                  std::shared_ptr<const TokenizerContext> context);
  static std::shared_ptr<const TokenIndex> Create(std::shared_ptr<const Dfa> dfa,
                                                  std::shared_ptr<const TokenizerContext> context,
                                                  const Options& options);
  ~TokenIndex();
  TokenIndex(const TokenIndex&) = delete;
  TokenIndex& operator=(const TokenIndex&) = delete;

  const Dfa& dfa() const { return *dfa_; }
  const Vocabulary& vocabulary() const { return *vocab_; }
  const TokenizerContext& context() const { return *context_; }
  State start() const { return dfa_->start(); }
  // Words per packed mask row: ceil(vocabulary().size() / 32).
  uint32_t num_words() const { return num_words_; }

  // Writes the mask of live state `s` into words[0, num_words()): bit t & 31 of
  // word t >> 5 is set iff token t is allowed. ResourceExhausted (the words
  // zeroed) when a lazy DFA's state limit refused a state the mask needs.
  absl::Status WriteMask(State s, uint32_t* words) const;
  // Number of tokens allowed in `s` (EOS included when accepting).
  uint32_t CountAllowed(State s) const;
  // False also when a lazy DFA's state limit refuses the token's walk.
  bool IsAllowed(State s, uint32_t token) const;
  // The state after text token `token` from `s`, found by walking its bytes;
  // Dfa::kDead when the token is not an allowed text token (EOS, specials and
  // padding ids are never text), or when a lazy DFA's state limit refused
  // the walk (NextStateChecked tells the two apart).
  State NextState(State s, uint32_t token) const;
  // NextState, with ResourceExhausted for a refused walk.
  absl::StatusOr<State> NextStateChecked(State s, uint32_t token) const;

  // Computes the masks of every state reachable from start() through allowed
  // tokens, on `threads` threads. Fails with DeadlineExceeded or Cancelled,
  // or ResourceExhausted when a mask does not fit Options::budget.
  absl::Status Precompute(int threads, absl::Time deadline = absl::InfiniteFuture(),
                          const std::atomic<bool>* cancel = nullptr) const;
  // States whose masks have been computed so far.
  uint32_t num_computed_states() const;
  // DFA (a lazy one's states built so far) plus the masks computed so far
  // (the trie belongs to the context).
  size_t MemoryBytes() const;

 private:
  class MaskBuild;  // one ComputeMask call (compute_mask.cc)
  TokenIndex(std::shared_ptr<const Dfa> dfa, std::shared_ptr<const TokenizerContext> context,
             const Options& options);
  const StateMask& MaskOf(State s) const;
  // Walks the trie from `s`, publishes and returns its mask; when
  // `successors` is set, appends the distinct states reached by allowed tokens.
  // A mask over the budget is not published: the reference returned is
  // valid on this thread until the next ComputeMask at the same reference
  // depth (see compute_mask.cc).
  const StateMask& ComputeMask(State s, std::vector<State>* successors) const;
  // The shortcut tests below are in mask_shortcuts.cc.
  // Whether s's mask is best built from what keeps s in s (S: its self-loop
  // bytes, and when `*utf8` every well-formed UTF-8 character, which leads
  // from s back to s): the tokens within S by bitmask, and those holding a
  // byte live outside S walked one by one (see compute_mask.cc).
  bool SelfLoopWorthIt(State s, bool* utf8) const;
  // The same along a chain s, s_1, ..., s_kChainDepth that every byte of S
  // (and, with `*utf8`, every UTF-8 character) moves one step (a position in
  // a string with a maxLength): s_1 when it holds and is worth it, else
  // kDead; `*chain` receives s, s_1, ..., s_kChainDepth.
  State ChainWorthIt(State s, bool* utf8, std::vector<State>* chain) const;
  static constexpr uint32_t kChainDepth = 16;  // = LoopMasks::kShortTokenBytes
  // A state whose mask, with some first bytes' subtrees walked again, is
  // s's (see compute_mask.cc); kDead when none is worth it.
  State ReferenceFor(State s) const;
  // ReferenceFor needs the subtrees where s and the reference agree to hold
  // at least this share of the tokens (numerator, denominator).
  static constexpr uint32_t kMinReferenceShare[2] = {3, 4};

  std::shared_ptr<const Dfa> dfa_;
  std::shared_ptr<const TokenizerContext> context_;
  const Vocabulary* vocab_;  // &context_->vocabulary()
  uint32_t num_words_;
  Options options_;
  bool eos_in_trie_ = false;  // some EOS id is also a text token of the trie
  // Per DFA state: its mask once computed (owned by store_), else null.
  // Grows with a lazy DFA's states.
  GrowOnlyArray<std::atomic<const StateMask*>> masks_;
  std::unique_ptr<StateMaskStore> store_;
};

// Options for compiling a regex against a tokenizer.
struct CompileOptions {
  RegexLimits regex;
  DfaOptions dfa;      // its deadline and cancel flag also bound Precompute
  bool eager = false;  // precompute every reachable state's mask
  int threads = 1;     // for eager precomputation
  // Build the DFA's states as walks reach them (Dfa::CompileLazy) unless
  // `eager`, which builds, minimizes and precomputes everything.
  bool lazy_dfa = false;
  TokenIndex::Options index;
};

// Parse + Dfa::Compile (lazy when lazy_dfa and not eager) +
// TokenIndex::Create (+ Precompute when eager).
absl::StatusOr<std::shared_ptr<const TokenIndex>> CompileRegex(
    std::string_view pattern, std::shared_ptr<const TokenizerContext> context,
    const CompileOptions& options = {});
// The same for a regex already parsed (options.regex unused).
absl::StatusOr<std::shared_ptr<const TokenIndex>> CompileRegex(
    const Regex& regex, std::shared_ptr<const TokenizerContext> context,
    const CompileOptions& options = {});

}  // namespace maskd

#endif  // MASKD_INDEX_TOKEN_INDEX_H_
