// TokenIndex::ComputeMask: one DFA state's mask, built by the cheapest exact
// path that applies (token_index.h lists them), then interned and published.
// A computation chooses its path (MaskBuild::ChoosePath), builds the allowed
// tokens either as a dense bitmask or as a list of ids, sets the EOS ids, and
// stores the result (MaskBuild::Publish). Every path gives the same mask.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "index/state_mask.h"
#include "index/token_index.h"
#include "tokenizer/loop_masks.h"
#include "tokenizer/token_trie.h"
#include "tokenizer/trie_walk.h"

namespace maskd {

namespace {

// Per-thread buffers for mask computation, reused across calls.
struct WalkScratch {
  std::vector<uint32_t> ids;  // allowed token ids, in trie order
  std::vector<uint32_t> stack;
  std::vector<uint64_t> seen;  // bitset over DFA states, for successors
  std::vector<Dfa::State> loop_states;  // canonical loop state -> DFA state
  std::vector<uint32_t> exit_words;     // a new loop's exit tokens, packed
  std::vector<Dfa::State> ends;         // states where a new loop's tokens end
  std::vector<Dfa::State> chain;        // s, s_1, ..., s_16 of a chain
  std::vector<uint64_t> chain_keys;     // (characters, cut tail) of chain tokens
};

WalkScratch& Scratch() {
  thread_local WalkScratch scratch;
  return scratch;
}

// How many reference masks this thread is computing inside one another: a
// state's reference mask is computed (one deeper) before the state's own.
thread_local int reference_depth = 0;
// Reference masks nest at most this deep (ComputeMask at depths 0 to 2).
constexpr int kMaxReferenceDepth = 2;

// The exact path that builds a state's mask (see token_index.h) and what it
// needs. At most one path applies to a state; kWholeTrie when none does.
struct MaskPath {
  enum Kind { kWholeTrie, kSelfLoop, kChain, kReference, kBounded, kNewLoop, kLoop };
  Kind kind = kWholeTrie;
  // kSelfLoop, kChain: the state the bytes of S lead s to (s itself for a
  // self-loop), and whether S also holds every well-formed UTF-8 character.
  Dfa::State stay_target = Dfa::kDead;
  bool utf8 = false;
  // kReference: the reference state and its mask.
  Dfa::State ref = Dfa::kDead;
  const StateMask* ref_mask = nullptr;
  std::shared_ptr<const LoopMasks::Loop> loop;  // kLoop
  LoopMasks::Pending pending;                   // kNewLoop
  LoopMasks::Bounded bounded;                   // kBounded
};

}  // namespace

// One ComputeMask call: the state, its path, and the mask under construction.
// The allowed tokens go either to the scratch id list (each id once, any
// order; kWholeTrie) or, on every other path, straight into `words_`, a dense
// bitmask with `count_` bits set.
class TokenIndex::MaskBuild {
 public:
  MaskBuild(const TokenIndex& index, State s, std::vector<State>* successors)
      : index_(index), dfa_(*index.dfa_), s_(s), successors_(successors), w_(Scratch()) {}

  const StateMask& Run();

 private:
  bool want_successors() const { return successors_ != nullptr; }
  // Appends t to *successors_ unless already there.
  ABSL_ATTRIBUTE_ALWAYS_INLINE void AddSuccessor(State t) {
    if ((t >> 6) >= w_.seen.size()) w_.seen.resize((t >> 6) + 1, 0);  // a lazy DFA grew
    if (!((w_.seen[t >> 6] >> (t & 63)) & 1)) {
      w_.seen[t >> 6] |= uint64_t{1} << (t & 63);
      successors_->push_back(t);
    }
  }
  // Adds tokens (not yet in words_) to the dense mask.
  ABSL_ATTRIBUTE_ALWAYS_INLINE void SetBits(const uint32_t* id, const uint32_t* end) {
    count_ += static_cast<uint32_t>(end - id);
    for (; id != end; ++id) words_[*id >> 5] |= 1u << (*id & 31);
  }

  // Whether a lazy DFA refused a state since this build began: then what it
  // built is wrong somewhere and is neither kept nor shared.
  bool Refused() const { return dfa_.lazy() && refusals_.refused(); }
  MaskPath ChoosePath();
  void SetTokensWithinStay();
  void AddChainSuccessors();
  void AddSelfLoopSuccessors();
  void WalkStayExits();
  void PatchReferenceMask();
  void BuildBoundedMask();
  void BuildNewLoopMask();
  void BuildLoopMask();
  void BuildWholeTrieIds();
  void SetEosBits();
  void SetEosIds();
  const StateMask& Publish(bool dense_built);

  const TokenIndex& index_;
  const Dfa& dfa_;
  const State s_;
  std::vector<State>* const successors_;  // null: not wanted
  WalkScratch& w_;
  const RefusalWatch refusals_;  // since the build began
  MaskPath path_;
  std::vector<uint32_t> words_;
  uint32_t count_ = 0;
};

const StateMask& TokenIndex::ComputeMask(State s, std::vector<State>* successors) const {
  return MaskBuild(*this, s, successors).Run();
}

const StateMask& TokenIndex::MaskBuild::Run() {
  // First: a reference state's mask, computed here, may use the scratch space.
  path_ = ChoosePath();
  if (want_successors()) w_.seen.assign((dfa_.num_states() + 63) / 64, 0);
  w_.ids.clear();
  switch (path_.kind) {
    case MaskPath::kChain:
      SetTokensWithinStay();
      if (want_successors()) AddChainSuccessors();
      WalkStayExits();
      break;
    case MaskPath::kSelfLoop:
      SetTokensWithinStay();
      if (want_successors()) AddSelfLoopSuccessors();
      WalkStayExits();
      break;
    case MaskPath::kReference:
      PatchReferenceMask();
      break;
    case MaskPath::kBounded:
      BuildBoundedMask();
      break;
    case MaskPath::kNewLoop:
      BuildNewLoopMask();
      break;
    case MaskPath::kLoop:
      BuildLoopMask();
      break;
    case MaskPath::kWholeTrie:
      BuildWholeTrieIds();
      break;
  }
  const bool dense_built = path_.kind != MaskPath::kWholeTrie;
  if (dense_built) {
    SetEosBits();
  } else {
    SetEosIds();
  }
  return Publish(dense_built);
}

// The paths are tried in this order: a self-loop; a reference (lazy masks
// only); a chain (eager builds: before any loop search); a kept or new loop;
// a kept loop's bounded match (lazy only); a chain (lazy: last, a position in
// a bounded string no kept loop matched); else the whole trie.
MaskPath TokenIndex::MaskBuild::ChoosePath() {
  MaskPath path;
  if (s_ == Dfa::kDead || !index_.options_.share_loops) return path;
  if (index_.SelfLoopWorthIt(s_, &path.utf8)) {
    path.kind = MaskPath::kSelfLoop;
    path.stay_target = s_;
    return path;
  }
  if (!want_successors() && reference_depth < kMaxReferenceDepth) {
    path.ref = index_.ReferenceFor(s_);
    if (path.ref != Dfa::kDead) {
      ++reference_depth;
      path.ref_mask = &index_.MaskOf(path.ref);
      --reference_depth;
      path.kind = MaskPath::kReference;
      return path;
    }
  }
  LoopMasks& loops = index_.context_->loop_masks();
  if (want_successors()) {
    path.stay_target = index_.ChainWorthIt(s_, &path.utf8, &w_.chain);
    if (path.stay_target != Dfa::kDead) {
      path.kind = MaskPath::kChain;
      return path;
    }
  }
  path.loop = loops.Find(dfa_, s_, want_successors() ? &w_.loop_states : nullptr, &path.pending);
  if (path.loop != nullptr || path.pending.exit_trie != nullptr) {
    path.kind = path.loop != nullptr ? MaskPath::kLoop : MaskPath::kNewLoop;
    return path;
  }
  if (want_successors()) return path;
  uint32_t live = 0;
  for (int b = 0; b < 256; ++b) live += dfa_.Next(s_, static_cast<uint8_t>(b)) != Dfa::kDead;
  if (live >= LoopMasks::kMinStayBytes) path.bounded = loops.FindBounded(dfa_, s_);
  if (path.bounded.loop != nullptr) {
    path.kind = MaskPath::kBounded;
    return path;
  }
  path.stay_target = index_.ChainWorthIt(s_, &path.utf8, &w_.chain);
  if (path.stay_target != Dfa::kDead) path.kind = MaskPath::kChain;
  return path;
}

// Self-loop or chain: packs into words_ the trie tokens within S, the bytes
// leading s to stay_target (and with utf8 every well-formed UTF-8
// character); for a chain only those of at most kShortTokenBytes bytes.
void TokenIndex::MaskBuild::SetTokensWithinStay() {
  const LoopMasks& index = index_.context_->loop_masks();
  const uint32_t num_words = index_.num_words_;
  const bool utf8 = path_.utf8;
  const bool chain = path_.kind == MaskPath::kChain;
  bool outside[256];  // a byte outside S
  for (int b = 0; b < 256; ++b) {
    outside[b] = (b < 0x80 || !utf8) && dfa_.Next(s_, static_cast<uint8_t>(b)) != path_.stay_target;
  }
  words_.resize(num_words);
  uint32_t* words = words_.data();
  index.TokensWithin(outside, utf8, num_words, words);
  const uint32_t* long_words = index.LongWords();
  uint32_t count = 0;
  for (uint32_t i = 0; i < num_words; ++i) {
    if (chain) words[i] &= ~long_words[i];
    count += static_cast<uint32_t>(__builtin_popcount(words[i]));
  }
  count_ += count;
}

// Chain: a token within S ends in s_L (L its characters), or inside a
// character after s_L: one walk per distinct (L, cut-short character).
void TokenIndex::MaskBuild::AddChainSuccessors() {
  const LoopMasks& index = index_.context_->loop_masks();
  w_.ends.clear();
  std::vector<uint64_t>& keys = w_.chain_keys;
  keys.clear();
  uint32_t whole = 0;  // bit L: some token of L whole characters
  for (uint32_t i = 0; i < index_.num_words_; ++i) {
    for (uint32_t bits = words_[i]; bits != 0; bits &= bits - 1) {
      const uint32_t id = i * 32 + static_cast<uint32_t>(__builtin_ctz(bits));
      const uint32_t tail = index.CutTailOf(id);
      const uint32_t l = index.CharCount(id);
      if (tail == UINT32_MAX) {
        whole |= 1u << l;
      } else {
        keys.push_back((static_cast<uint64_t>(l) << 32) | tail);
      }
    }
  }
  for (uint32_t l = 0; l <= kChainDepth; ++l) {
    if ((whole >> l) & 1) AddSuccessor(w_.chain[l]);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  for (uint64_t k : keys) {
    const State t = dfa_.Walk(w_.chain[k >> 32], index.CutTail(static_cast<uint32_t>(k)));
    if (t != Dfa::kDead) AddSuccessor(t);
  }
}

// Self-loop: tokens within S end in s, or (cut short inside a character) in
// a state of the UTF-8 sequences: walk those.
void TokenIndex::MaskBuild::AddSelfLoopSuccessors() {
  const uint32_t* cut = index_.context_->loop_masks().Utf8CutWords();
  for (uint32_t i = 0; i < index_.num_words_; ++i) {
    uint32_t bits = words_[i];
    if (path_.utf8) {
      for (uint32_t c = bits & cut[i]; c != 0; c &= c - 1) {
        const uint32_t id = i * 32 + static_cast<uint32_t>(__builtin_ctz(c));
        AddSuccessor(dfa_.Walk(s_, index_.vocab_->bytes(id)));
      }
      bits &= ~cut[i];
    }
    if (bits != 0) AddSuccessor(s_);
  }
}

// Self-loop or chain: a token not within S is decided at its first byte
// outside S, rejected there unless s lets that byte through. So the tokens
// holding such a byte (and, for a chain, those longer than kChainDepth) are
// walked from s one by one, once each; the allowed ones join the mask.
void TokenIndex::MaskBuild::WalkStayExits() {
  const LoopMasks& index = index_.context_->loop_masks();
  const Vocabulary& vocab = *index_.vocab_;
  w_.exit_words.assign(index_.num_words_, 0);  // tokens already walked
  uint32_t* walked = w_.exit_words.data();
  auto walk = [&](uint32_t id) {
    const uint32_t bit = 1u << (id & 31);
    if (walked[id >> 5] & bit) return;
    walked[id >> 5] |= bit;
    const State t = dfa_.Walk(s_, vocab.bytes(id));
    if (t == Dfa::kDead) return;
    words_[id >> 5] |= bit;
    ++count_;
    if (want_successors()) AddSuccessor(t);
  };
  for (int b = 0; b < (path_.utf8 ? 0x80 : 256); ++b) {
    const State t = dfa_.Next(s_, static_cast<uint8_t>(b));
    if (t == path_.stay_target || t == Dfa::kDead) continue;
    auto [id, end] = index.TokensWith(static_cast<uint8_t>(b));
    for (; id != end; ++id) walk(*id);
  }
  if (path_.kind == MaskPath::kChain) {
    for (uint32_t id : index.LongTokens()) walk(id);
  }
}

// mask(s) and mask(ref) agree on the tokens starting with any byte b where
// Next(s, b) == Next(ref, b); the other first bytes' subtrees are walked
// from s.
void TokenIndex::MaskBuild::PatchReferenceMask() {
  const uint32_t num_words = index_.num_words_;
  words_.resize(num_words);
  path_.ref_mask->Write(words_.data(), num_words);
  count_ = path_.ref_mask->count();
  const TokenTrie& trie = index_.context_->trie();
  const uint32_t* token_begin = trie.token_begin();
  const uint32_t* token_ids = trie.token_ids();
  for (int b = 0; b < 256; ++b) {
    const uint32_t node = trie.root_child(static_cast<uint8_t>(b));
    if (node == 0 ||
        dfa_.Next(s_, static_cast<uint8_t>(b)) == dfa_.Next(path_.ref, static_cast<uint8_t>(b))) {
      continue;
    }
    for (uint32_t k = token_begin[node]; k < token_begin[trie.nodes()[node].next]; ++k) {
      const uint32_t id = token_ids[k];
      if ((words_[id >> 5] >> (id & 31)) & 1) {
        words_[id >> 5] &= ~(1u << (id & 31));
        --count_;
      }
    }
    WalkTrie(trie, dfa_, s_, w_.stack,
             [this](State, const uint32_t* id, const uint32_t* end) { SetBits(id, end); }, node);
  }
}

// A kept loop's short tokens, plus the tokens holding an exit byte or longer
// than LoopMasks::kShortTokenBytes, walked here.
void TokenIndex::MaskBuild::BuildBoundedMask() {
  words_ = path_.bounded.loop->short_words;
  count_ = path_.bounded.loop->short_count;
  WalkTrie(*path_.bounded.rest_trie, dfa_, s_, w_.stack,
           [this](State, const uint32_t* id, const uint32_t* end) { SetBits(id, end); });
}

// A loop not kept yet costs this state's direct walk and no more: the
// allowed tokens without an exit byte stay in the loop, so they are its loop
// tokens, handed to LoopMasks::Complete for the states that follow.
void TokenIndex::MaskBuild::BuildNewLoopMask() {
  const uint32_t num_words = index_.num_words_;
  words_.assign(num_words, 0);
  w_.exit_words.assign(num_words, 0);
  uint32_t* exit_words = w_.exit_words.data();
  {
    const TokenTrie& exit_trie = *path_.pending.exit_trie;
    const uint32_t* ids = exit_trie.token_ids();
    for (size_t k = 0; k < exit_trie.num_tokens(); ++k) {
      exit_words[ids[k] >> 5] |= 1u << (ids[k] & 31);
    }
  }
  std::vector<uint32_t> loop_words(num_words, 0);
  uint32_t loop_count = 0;
  w_.ends.clear();
  WalkTrie(index_.context_->trie(), dfa_, s_, w_.stack,
           [&](State t, const uint32_t* id, const uint32_t* end) {
             bool loop_end = false;
             count_ += static_cast<uint32_t>(end - id);
             for (; id != end; ++id) {
               const uint32_t bit = 1u << (*id & 31);
               words_[*id >> 5] |= bit;
               if (!(exit_words[*id >> 5] & bit)) {
                 loop_words[*id >> 5] |= bit;
                 ++loop_count;
                 loop_end = true;
               }
             }
             if (loop_end && (w_.ends.empty() || w_.ends.back() != t)) w_.ends.push_back(t);
             if (want_successors()) AddSuccessor(t);
           });
  if (Refused()) return;  // the loop's tokens may be wrong: not for the shared memo
  index_.context_->loop_masks().Complete(std::move(path_.pending), std::move(loop_words),
                                         loop_count, w_.ends);
}

// Loop tokens (shared) plus the tokens holding an exit byte, walked here.
void TokenIndex::MaskBuild::BuildLoopMask() {
  const LoopMasks::Loop& loop = *path_.loop;
  words_ = loop.words;
  count_ = loop.count;
  WalkTrie(*loop.exit_trie, dfa_, s_, w_.stack,
           [this](State t, const uint32_t* id, const uint32_t* end) {
             SetBits(id, end);
             if (want_successors()) AddSuccessor(t);
           });
  if (want_successors()) {
    for (uint32_t c : loop.end_states) AddSuccessor(w_.loop_states[c]);
  }
}

// The walk's cost is the prefixes it visits, not the vocabulary size: narrow
// states (a JSON key, a digit) cost little more than the trie's first level.
void TokenIndex::MaskBuild::BuildWholeTrieIds() {
  WalkTrie(index_.context_->trie(), dfa_, s_, w_.stack,
           [this](State t, const uint32_t* id, const uint32_t* end) {
             w_.ids.insert(w_.ids.end(), id, end);
             if (want_successors()) AddSuccessor(t);
           });
  count_ = static_cast<uint32_t>(w_.ids.size());
}

// EOS ids: allowed exactly in accepting states, whatever their bytes.
void TokenIndex::MaskBuild::SetEosBits() {
  const bool accepting = s_ != Dfa::kDead && dfa_.IsAccepting(s_);
  for (uint32_t id : index_.vocab_->eos_ids()) {
    const uint32_t bit = 1u << (id & 31);
    const bool set = (words_[id >> 5] & bit) != 0;
    if (set && !accepting) {
      words_[id >> 5] &= ~bit;
      --count_;
    } else if (!set && accepting) {
      words_[id >> 5] |= bit;
      ++count_;
    }
  }
}

// The same for a mask built as ids.
void TokenIndex::MaskBuild::SetEosIds() {
  const bool accepting = s_ != Dfa::kDead && dfa_.IsAccepting(s_);
  const Vocabulary& vocab = *index_.vocab_;
  if (index_.eos_in_trie_) {
    w_.ids.erase(std::remove_if(w_.ids.begin(), w_.ids.end(),
                                [&](uint32_t id) { return vocab.is_eos(id); }),
                 w_.ids.end());
  }
  if (accepting) w_.ids.insert(w_.ids.end(), vocab.eos_ids().begin(), vocab.eos_ids().end());
  count_ = static_cast<uint32_t>(w_.ids.size());
}

// Stores the mask in its cheaper form (StateMask), interns it and publishes
// it as s's mask; one over the budget is returned without being published.
const StateMask& TokenIndex::MaskBuild::Publish(bool dense_built) {
  const uint32_t num_words = index_.num_words_;
  std::vector<uint32_t> data;
  const bool dense = count_ > num_words / 8;
  if (dense) {
    if (dense_built) {
      data = std::move(words_);
    } else {
      data.assign(num_words, 0);
      for (uint32_t id : w_.ids) data[id >> 5] |= 1u << (id & 31);
    }
  } else {
    if (dense_built) {
      for (uint32_t i = 0; i < num_words; ++i) {
        for (uint32_t bits = words_[i]; bits != 0; bits &= bits - 1) {
          w_.ids.push_back(i * 32 + static_cast<uint32_t>(__builtin_ctz(bits)));
        }
      }
    }
    std::sort(w_.ids.begin(), w_.ids.end());
    data.assign(w_.ids.begin(), w_.ids.end());
  }
  const StateMask* m = Refused() ? nullptr : index_.store_->Intern(dense, count_, data);
  if (m == nullptr) {
    // Over the budget (or refused: the caller reports it): kept on this thread only, one slot per reference
    // depth, so a reference mask (depth d + 1) stays valid while the mask
    // at depth d that uses it is computed.
    thread_local std::optional<StateMask> unkept[kMaxReferenceDepth + 1];
    std::optional<StateMask>& slot = unkept[reference_depth];
    slot.emplace(dense, count_, std::move(data));
    return *slot;
  }
  const StateMask* expected = nullptr;
  // Another thread may have published the same state's mask meanwhile: both
  // are equal and interned, so either pointer is the same object.
  index_.masks_.At(s_)->compare_exchange_strong(expected, m, std::memory_order_acq_rel);
  return *m;
}

}  // namespace maskd
