#include "index/token_index.h"

#include <algorithm>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "tokenizer/loop_masks.h"
#include "tokenizer/token_trie.h"
#include "tokenizer/trie_walk.h"

namespace maskd {

namespace {

// Copies `n` words with plain vector loads and stores. glibc's memcpy uses
// `rep movsb` for blocks this size, which on AMD Zen runs 15-35x slower when
// (dst - src) mod 4096 is a small positive number (page-offset aliasing); a
// caller's buffer can land there by chance, so the hot path avoids it.
inline void CopyWords(uint32_t* __restrict dst, const uint32_t* __restrict src, size_t n) {
#if defined(__SSE2__)
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 4));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 8));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 12));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 4), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 8), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 12), d);
  }
  if (i < n) std::memcpy(dst + i, src + i, (n - i) * sizeof(uint32_t));
#else
  std::memcpy(dst, src, n * sizeof(uint32_t));
#endif
}

}  // namespace

// The allowed tokens of one or more DFA states (identical masks are shared).
// Stored dense (one bit per token id) or, when few tokens are allowed, as the
// sorted list of their ids: the sparse form is never larger than the dense one
// and writing it costs a memset plus one store per id.
class StateMask {
 public:
  StateMask(bool dense, uint32_t count, std::vector<uint32_t> data)
      : dense_(dense), count_(count), data_(std::move(data)) {}

  void Write(uint32_t* words, uint32_t num_words) const {
    if (dense_) {
      CopyWords(words, data_.data(), num_words);
      return;
    }
    std::memset(words, 0, static_cast<size_t>(num_words) * sizeof(uint32_t));
    for (uint32_t id : data_) words[id >> 5] |= 1u << (id & 31);
  }
  bool Has(uint32_t id) const {
    if (dense_) return (data_[id >> 5] >> (id & 31)) & 1;
    return std::binary_search(data_.begin(), data_.end(), id);
  }
  uint32_t count() const { return count_; }
  bool dense() const { return dense_; }
  const std::vector<uint32_t>& data() const { return data_; }
  size_t MemoryBytes() const { return MemoryBytesFor(data_.capacity()); }
  // MemoryBytes of a mask whose data holds `capacity` words.
  static size_t MemoryBytesFor(size_t capacity) {
    return sizeof(StateMask) + capacity * sizeof(uint32_t);
  }

 private:
  bool dense_;
  uint32_t count_;
  std::vector<uint32_t> data_;
};

// Owns the distinct masks of one index and shares identical ones.
class TokenIndex::MaskStore {
 public:
  explicit MaskStore(std::shared_ptr<MaskBudget> budget) : budget_(std::move(budget)) {}
  ~MaskStore() {
    if (budget_ != nullptr) budget_->Release(bytes_.load(std::memory_order_relaxed));
  }

  // Returns the stored mask equal to (dense, count, data), adding it if new;
  // null (`data` untouched) when a new one does not fit the budget.
  const StateMask* Intern(bool dense, uint32_t count, std::vector<uint32_t>& data) {
    size_t h = absl::HashOf(dense, absl::MakeConstSpan(data));
    absl::MutexLock lock(&mu_);
    auto& bucket = by_hash_[h];
    for (const StateMask* m : bucket) {
      if (m->dense() == dense && m->data() == data) return m;
    }
    const size_t bytes = StateMask::MemoryBytesFor(data.capacity()) + sizeof(void*) * 3;
    if (budget_ != nullptr && !budget_->TryCharge(bytes)) {
      if (bucket.empty()) by_hash_.erase(h);
      return nullptr;
    }
    owned_.push_back(std::make_unique<StateMask>(dense, count, std::move(data)));
    const StateMask* m = owned_.back().get();
    bucket.push_back(m);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    return m;
  }
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  const std::shared_ptr<MaskBudget> budget_;
  absl::Mutex mu_;
  absl::flat_hash_map<size_t, std::vector<const StateMask*>> by_hash_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<StateMask>> owned_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> bytes_{0};
};

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

}  // namespace

TokenIndex::TokenIndex(std::shared_ptr<const Dfa> dfa,
                       std::shared_ptr<const TokenizerContext> context, const Options& options)
    : dfa_(std::move(dfa)),
      context_(std::move(context)),
      vocab_(&context_->vocabulary()),
      num_words_((vocab_->size() + 31) / 32),
      options_(options),
      masks_(new std::atomic<const StateMask*>[dfa_->num_states()]),
      store_(std::make_unique<MaskStore>(options.budget)) {
  for (uint32_t s = 0; s < dfa_->num_states(); ++s) masks_[s].store(nullptr, std::memory_order_relaxed);
  for (uint32_t eos : vocab_->eos_ids()) {
    if (vocab_->has_token(eos) && !vocab_->is_special(eos) && !vocab_->bytes(eos).empty()) {
      eos_in_trie_ = true;  // an EOS override naming a text token
    }
  }
}

TokenIndex::~TokenIndex() = default;

std::shared_ptr<const TokenIndex> TokenIndex::Create(
    std::shared_ptr<const Dfa> dfa, std::shared_ptr<const TokenizerContext> context) {
  return Create(std::move(dfa), std::move(context), Options());
}

std::shared_ptr<const TokenIndex> TokenIndex::Create(
    std::shared_ptr<const Dfa> dfa, std::shared_ptr<const TokenizerContext> context,
    const Options& options) {
  return std::shared_ptr<const TokenIndex>(
      new TokenIndex(std::move(dfa), std::move(context), options));
}

const StateMask& TokenIndex::MaskOf(State s) const {
  const StateMask* m = masks_[s].load(std::memory_order_acquire);
  if (m != nullptr) return *m;
  return ComputeMask(s, nullptr);
}

TokenIndex::State TokenIndex::ReferenceFor(State s) const {
  // The successor most bytes lead to: the state a key-exclusion or opening
  // quote state hands over to (a string's free content).
  const Dfa& dfa = *dfa_;
  const TokenTrie& trie = context_->trie();
  uint32_t best = 0;
  const State ref = dfa.WidestSuccessor(s, &best);
  if (ref == Dfa::kDead || best < LoopMasks::kMinStayBytes) return Dfa::kDead;
  // Worth it when the subtrees s and ref agree on hold most tokens.
  const uint32_t* token_begin = trie.token_begin();
  size_t agree = 0;
  for (int b = 0; b < 256; ++b) {
    const uint32_t node = trie.root_child(static_cast<uint8_t>(b));
    if (node != 0 && dfa.Next(s, static_cast<uint8_t>(b)) == dfa.Next(ref, static_cast<uint8_t>(b))) {
      agree += token_begin[trie.nodes()[node].next] - token_begin[node];
    }
  }
  return agree * kMinReferenceShare[1] >= trie.num_tokens() * kMinReferenceShare[0] ? ref
                                                                                     : Dfa::kDead;
}

namespace {

// Whether every well-formed UTF-8 character leads from s to `target`, and
// every other non-ASCII byte sequence from s dies exactly where strict UTF-8
// does (Dfa states in lockstep with LoopMasks::Utf8Next). Then a token's
// non-ASCII bytes keep s in s when they are well-formed, and kill it
// otherwise; one cut short ends in a live state inside a character.
bool Utf8Closed(const Dfa& dfa, Dfa::State s, Dfa::State target,
                std::vector<std::pair<uint8_t, Dfa::State>>* pairs) {
  constexpr size_t kMaxPairs = 64;
  pairs->assign(1, {LoopMasks::kUtf8Boundary, s});
  for (size_t i = 0; i < pairs->size(); ++i) {
    const auto [u, q] = (*pairs)[i];
    for (int b = u == LoopMasks::kUtf8Boundary ? 0x80 : 0; b < 256; ++b) {
      const uint8_t u2 = LoopMasks::Utf8Next(u, static_cast<uint8_t>(b));
      const Dfa::State q2 = dfa.Next(q, static_cast<uint8_t>(b));
      if ((u2 == 0) != (q2 == Dfa::kDead)) return false;
      if (u2 == 0) continue;
      if (u2 == LoopMasks::kUtf8Boundary) {
        if (q2 != target) return false;
        continue;
      }
      const std::pair<uint8_t, Dfa::State> p(u2, q2);
      if (std::find(pairs->begin(), pairs->end(), p) == pairs->end()) {
        if (pairs->size() >= kMaxPairs) return false;
        pairs->push_back(p);
      }
    }
  }
  return true;
}

// dst[i] |= src[i] for i < n.
inline void OrWords(uint32_t* __restrict dst, const uint32_t* __restrict src, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 4 <= n; i += 4) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(dst + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_or_si128(a, b));
  }
#endif
  for (; i < n; ++i) dst[i] |= src[i];
}

}  // namespace

bool TokenIndex::SelfLoopWorthIt(State s, bool* utf8) const {
  // Worth it when at least kMinStayBytes bytes keep s in s and few tokens
  // (at most 1/kMaxExitShare, counted once per byte) hold a byte that leads
  // elsewhere alive: those are walked one by one, the rest is bitmask work.
  const Dfa& dfa = *dfa_;
  const LoopMasks& index = context_->loop_masks();
  uint32_t stay = 0;
  size_t walked = 0;
  for (int b = 0; b < 0x80; ++b) {
    const State t = dfa.Next(s, static_cast<uint8_t>(b));
    if (t == s) {
      ++stay;
    } else if (t != Dfa::kDead) {
      walked += index.NumTokensWith(static_cast<uint8_t>(b));
    }
  }
  if (walked * LoopMasks::kMaxExitShare > context_->trie().num_tokens()) return false;
  thread_local std::vector<std::pair<uint8_t, Dfa::State>> pairs;
  *utf8 = Utf8Closed(dfa, s, s, &pairs);
  if (*utf8) {
    stay += 0x80;
  } else {
    for (int b = 0x80; b < 256; ++b) {
      const State t = dfa.Next(s, static_cast<uint8_t>(b));
      if (t == s) {
        ++stay;
      } else if (t != Dfa::kDead) {
        walked += index.NumTokensWith(static_cast<uint8_t>(b));
      }
    }
  }
  return stay >= LoopMasks::kMinStayBytes &&
         walked * LoopMasks::kMaxExitShare <= context_->trie().num_tokens();
}

TokenIndex::State TokenIndex::ChainWorthIt(State s, bool* utf8, std::vector<State>* chain) const {
  // s_0 = s, s_1 = the successor most bytes lead to; S: the ASCII bytes
  // leading s to s_1. Each s_i (i < kChainDepth) must lead every byte of S
  // (and, with `utf8`, every well-formed UTF-8 character) to one s_(i+1),
  // kill every other ASCII byte s kills, and (without `utf8`) every
  // non-ASCII byte. Then a token of at most kChainDepth bytes within S is
  // allowed (it ends in some s_i, or inside a character after one), and one
  // holding another byte is decided at its first such byte: rejected there
  // unless s lets that byte through.
  const Dfa& dfa = *dfa_;
  const LoopMasks& index = context_->loop_masks();
  uint32_t widest = 0;
  const State next = dfa.WidestSuccessor(s, &widest);
  if (next == Dfa::kDead || widest < LoopMasks::kMinStayBytes) return Dfa::kDead;
  uint8_t kind[0x80];  // 0 dead, 1 in S, 2 live outside S
  uint32_t stay = 0;
  size_t walked = 0;
  for (int b = 0; b < 0x80; ++b) {
    const State t = dfa.Next(s, static_cast<uint8_t>(b));
    kind[b] = t == Dfa::kDead ? 0 : t == next ? 1 : 2;
    stay += kind[b] == 1;
    if (kind[b] == 2) walked += index.NumTokensWith(static_cast<uint8_t>(b));
  }
  walked += index.LongTokens().size();
  if (stay < LoopMasks::kMinStayBytes ||
      walked * LoopMasks::kMaxExitShare > context_->trie().num_tokens()) {
    return Dfa::kDead;
  }
  thread_local std::vector<std::pair<uint8_t, Dfa::State>> pairs;
  *utf8 = Utf8Closed(dfa, s, next, &pairs);
  auto all_high_dead = [&](State q) {
    for (int b = 0x80; b < 256; ++b) {
      if (dfa.Next(q, static_cast<uint8_t>(b)) != Dfa::kDead) return false;
    }
    return true;
  };
  if (!*utf8 && !all_high_dead(s)) return Dfa::kDead;
  State cur = next;
  chain->assign({s, next});
  for (uint32_t i = 1; i < kChainDepth; ++i) {
    State nxt = Dfa::kDead;
    for (int b = 0; b < 0x80; ++b) {
      const State t = dfa.Next(cur, static_cast<uint8_t>(b));
      if (kind[b] == 1) {
        if (t == Dfa::kDead || (nxt != Dfa::kDead && t != nxt)) return Dfa::kDead;
        nxt = t;
      } else if (kind[b] == 0 && t != Dfa::kDead) {
        return Dfa::kDead;  // a byte s kills must stay dead
      }
    }
    if (*utf8 ? !Utf8Closed(dfa, cur, nxt, &pairs) : !all_high_dead(cur)) return Dfa::kDead;
    cur = nxt;
    chain->push_back(cur);
  }
  return next;
}

const StateMask& TokenIndex::ComputeMask(State s, std::vector<State>* successors) const {
  const Dfa& dfa = *dfa_;
  // A reference state's mask (computed first: it may use the scratch space).
  thread_local int reference_depth = 0;
  bool utf8 = false;
  const bool self_loop = s != Dfa::kDead && options_.share_loops && SelfLoopWorthIt(s, &utf8);

  State ref = Dfa::kDead;
  const StateMask* ref_mask = nullptr;
  if (!self_loop && successors == nullptr && s != Dfa::kDead && options_.share_loops &&
      reference_depth < 2) {
    ref = ReferenceFor(s);
    if (ref != Dfa::kDead) {
      ++reference_depth;
      ref_mask = &MaskOf(ref);
      --reference_depth;
    }
  }
  WalkScratch& w = Scratch();
  const bool want_successors = successors != nullptr;
  if (want_successors) w.seen.assign((dfa.num_states() + 63) / 64, 0);
  auto add_successor = [&](State t) {
    if (!((w.seen[t >> 6] >> (t & 63)) & 1)) {
      w.seen[t >> 6] |= uint64_t{1} << (t & 63);
      successors->push_back(t);
    }
  };

  // The allowed tokens go either to w.ids (each id once, any order) or, for a
  // shared loop, straight into a dense bitmask.
  w.ids.clear();
  std::vector<uint32_t> words;
  uint32_t count = 0;
  // Eager builds (no bounded matches there) try a chain before any loop
  // search; lazy masks try it last, after a kept loop's bounded match.
  const bool early_chain = want_successors && !self_loop && s != Dfa::kDead &&
                           options_.share_loops &&
                           ChainWorthIt(s, &utf8, &w.chain) != Dfa::kDead;
  std::shared_ptr<const LoopMasks::Loop> loop;
  LoopMasks::Pending pending;  // a new loop, completed from this state's walk
  if (!self_loop && !early_chain && ref_mask == nullptr && s != Dfa::kDead &&
      options_.share_loops) {
    loop = context_->loop_masks().Find(dfa, s, want_successors ? &w.loop_states : nullptr,
                                       &pending);
  }
  const bool new_loop = pending.exit_trie != nullptr;
  LoopMasks::Bounded bounded;
  if (!self_loop && ref_mask == nullptr && loop == nullptr && !new_loop &&
      !want_successors &&
      s != Dfa::kDead && options_.share_loops) {
    uint32_t live = 0;
    for (int b = 0; b < 256; ++b) live += dfa.Next(s, static_cast<uint8_t>(b)) != Dfa::kDead;
    if (live >= LoopMasks::kMinStayBytes) bounded = context_->loop_masks().FindBounded(dfa, s);
  }
  // Last before a whole-trie walk: a chain (a position in a bounded string
  // no kept loop matched).
  const bool chain =
      early_chain ||
      (!want_successors && !self_loop && ref_mask == nullptr && loop == nullptr && !new_loop &&
       bounded.loop == nullptr && s != Dfa::kDead && options_.share_loops &&
       ChainWorthIt(s, &utf8, &w.chain) != Dfa::kDead);
  const bool dense_built =
      self_loop || chain || ref_mask != nullptr || loop != nullptr || bounded.loop != nullptr ||
      new_loop;
  // Adds tokens (not yet in `words`) to the dense mask.
  auto set_bits = [&](State, const uint32_t* id, const uint32_t* end) {
    count += static_cast<uint32_t>(end - id);
    for (; id != end; ++id) words[*id >> 5] |= 1u << (*id & 31);
  };
  // With self_loop or chain: the tokens within S (packed in `words`).
  uint32_t unused_bytes = 0;
  const State stay_target =
      self_loop ? s : chain ? dfa.WidestSuccessor(s, &unused_bytes) : Dfa::kDead;
  if (self_loop || chain) {
    const LoopMasks& index = context_->loop_masks();
    auto outside = [&](int b) {  // b is a byte outside S
      return (b < 0x80 || !utf8) && dfa.Next(s, static_cast<uint8_t>(b)) != stay_target;
    };
    bool all_control = true, all_high = !utf8;
    for (int b = 0; b < 0x20; ++b) all_control &= outside(b);
    for (int b = 0x80; b < 256 && all_high; ++b) all_high &= outside(b);
    words.assign(num_words_, 0);  // first: the tokens holding a byte outside S
    if (all_control) OrWords(words.data(), index.ControlWords(), num_words_);
    if (all_high) OrWords(words.data(), index.NonAsciiWords(), num_words_);
    for (int b = all_control ? 0x20 : 0; b < (all_high || utf8 ? 0x80 : 256); ++b) {
      if (!outside(b)) continue;
      if (const uint32_t* bw = index.ByteWords(static_cast<uint8_t>(b)); bw != nullptr) {
        OrWords(words.data(), bw, num_words_);
      } else {
        auto [id, end] = index.TokensWith(static_cast<uint8_t>(b));
        for (; id != end; ++id) words[*id >> 5] |= 1u << (*id & 31);
      }
    }
    const uint32_t* trie_words = index.TrieWords();
    const uint32_t* utf8_words = index.Utf8Words();
    const uint32_t* long_words = index.LongWords();
    for (uint32_t i = 0; i < num_words_; ++i) {
      words[i] = trie_words[i] & ~words[i] & (utf8 ? utf8_words[i] : ~0u) &
                 (chain ? ~long_words[i] : ~0u);
      count += static_cast<uint32_t>(__builtin_popcount(words[i]));
    }
  }
  if (chain) {
    // Tokens of at most kChainDepth bytes within S are in; the longer ones,
    // and those holding a byte outside S that s lets through, are walked.
    const LoopMasks& index = context_->loop_masks();
    if (want_successors) {
      // A token within S ends in s_L (L its characters), or inside a
      // character after s_L: one walk per distinct (L, cut-short character).
      w.ends.clear();
      std::vector<uint64_t>& keys = w.chain_keys;
      keys.clear();
      uint32_t whole = 0;  // bit L: some token of L whole characters
      for (uint32_t i = 0; i < num_words_; ++i) {
        for (uint32_t bits = words[i]; bits != 0; bits &= bits - 1) {
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
        if ((whole >> l) & 1) add_successor(w.chain[l]);
      }
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      for (uint64_t k : keys) {
        const State t = dfa.Walk(w.chain[k >> 32], index.CutTail(static_cast<uint32_t>(k)));
        if (t != Dfa::kDead) add_successor(t);
      }
    }
    w.exit_words.assign(num_words_, 0);  // tokens already walked
    auto walk = [&](uint32_t id) {
      const uint32_t bit = 1u << (id & 31);
      if (w.exit_words[id >> 5] & bit) return;
      w.exit_words[id >> 5] |= bit;
      const State t = dfa.Walk(s, vocab_->bytes(id));
      if (t == Dfa::kDead) return;
      words[id >> 5] |= bit;
      ++count;
      if (want_successors) add_successor(t);
    };
    for (int b = 0; b < (utf8 ? 0x80 : 256); ++b) {
      const State t = dfa.Next(s, static_cast<uint8_t>(b));
      if (t == stay_target || t == Dfa::kDead) continue;
      auto [id, end] = index.TokensWith(static_cast<uint8_t>(b));
      for (; id != end; ++id) walk(*id);
    }
    for (uint32_t id : index.LongTokens()) walk(id);
  } else if (self_loop) {
    // S: the bytes that keep s in s (with `utf8`, also every well-formed
    // UTF-8 character). A token within S is allowed; any other is decided at
    // its first byte outside S, rejected there unless that byte is live from
    // s: so the allowed tokens are those within S (by bitmask: none of the
    // other bytes, and well-formed UTF-8 with `utf8`), plus those holding a
    // byte live outside S, walked one by one.
    const LoopMasks& index = context_->loop_masks();
    if (want_successors) {
      // Tokens within S end in s, or (cut short inside a character) in a
      // state of the UTF-8 sequences: walk those.
      const uint32_t* cut = index.Utf8CutWords();
      for (uint32_t i = 0; i < num_words_; ++i) {
        uint32_t bits = words[i];
        if (utf8) {
          for (uint32_t c = bits & cut[i]; c != 0; c &= c - 1) {
            const uint32_t id = i * 32 + static_cast<uint32_t>(__builtin_ctz(c));
            add_successor(dfa.Walk(s, vocab_->bytes(id)));
          }
          bits &= ~cut[i];
        }
        if (bits != 0) add_successor(s);
      }
    }
    w.exit_words.assign(num_words_, 0);  // candidates already walked
    for (int b = 0; b < (utf8 ? 0x80 : 256); ++b) {
      const State t = dfa.Next(s, static_cast<uint8_t>(b));
      if (t == s || t == Dfa::kDead) continue;
      auto [id, end] = index.TokensWith(static_cast<uint8_t>(b));
      for (; id != end; ++id) {
        const uint32_t bit = 1u << (*id & 31);
        if (w.exit_words[*id >> 5] & bit) continue;
        w.exit_words[*id >> 5] |= bit;
        const State u = dfa.Walk(s, vocab_->bytes(*id));
        if (u == Dfa::kDead) continue;
        words[*id >> 5] |= bit;
        ++count;
        if (want_successors) add_successor(u);
      }
    }
  } else if (ref_mask != nullptr) {
    // mask(s) and mask(ref) agree on the tokens starting with any byte b
    // where Next(s, b) == Next(ref, b); the other first bytes' subtrees are
    // walked from s.
    words.resize(num_words_);
    ref_mask->Write(words.data(), num_words_);
    count = ref_mask->count();
    const TokenTrie& trie = context_->trie();
    const uint32_t* token_begin = trie.token_begin();
    const uint32_t* token_ids = trie.token_ids();
    for (int b = 0; b < 256; ++b) {
      const uint32_t node = trie.root_child(static_cast<uint8_t>(b));
      if (node == 0 || dfa.Next(s, static_cast<uint8_t>(b)) == dfa.Next(ref, static_cast<uint8_t>(b))) {
        continue;
      }
      for (uint32_t k = token_begin[node]; k < token_begin[trie.nodes()[node].next]; ++k) {
        const uint32_t id = token_ids[k];
        if ((words[id >> 5] >> (id & 31)) & 1) {
          words[id >> 5] &= ~(1u << (id & 31));
          --count;
        }
      }
      WalkTrie(trie, dfa, s, w.stack, set_bits, node);
    }
  } else if (bounded.loop != nullptr) {
    // A kept loop's short tokens, plus the tokens holding an exit byte or
    // longer than LoopMasks::kShortTokenBytes, walked here.
    words = bounded.loop->short_words;
    count = bounded.loop->short_count;
    WalkTrie(*bounded.rest_trie, dfa, s, w.stack, set_bits);
  } else if (new_loop) {
    // A loop not kept yet costs this state's direct walk and no more: the
    // allowed tokens without an exit byte stay in the loop, so they are its
    // loop tokens, handed to LoopMasks::Complete for the states that follow.
    words.assign(num_words_, 0);
    w.exit_words.assign(num_words_, 0);
    {
      const TokenTrie& exit_trie = *pending.exit_trie;
      const uint32_t* ids = exit_trie.token_ids();
      for (size_t k = 0; k < exit_trie.num_tokens(); ++k) {
        w.exit_words[ids[k] >> 5] |= 1u << (ids[k] & 31);
      }
    }
    std::vector<uint32_t> loop_words(num_words_, 0);
    uint32_t loop_count = 0;
    w.ends.clear();
    const uint32_t* exit_words = w.exit_words.data();
    WalkTrie(context_->trie(), dfa, s, w.stack,
             [&](State t, const uint32_t* id, const uint32_t* end) {
               bool loop_end = false;
               count += static_cast<uint32_t>(end - id);
               for (; id != end; ++id) {
                 const uint32_t bit = 1u << (*id & 31);
                 words[*id >> 5] |= bit;
                 if (!(exit_words[*id >> 5] & bit)) {
                   loop_words[*id >> 5] |= bit;
                   ++loop_count;
                   loop_end = true;
                 }
               }
               if (loop_end && (w.ends.empty() || w.ends.back() != t)) w.ends.push_back(t);
               if (want_successors) add_successor(t);
             });
    context_->loop_masks().Complete(std::move(pending), std::move(loop_words), loop_count, w.ends);
  } else if (loop != nullptr) {
    // Loop tokens (shared) plus the tokens holding an exit byte, walked here.
    words = loop->words;
    count = loop->count;
    WalkTrie(*loop->exit_trie, dfa, s, w.stack,
             [&](State t, const uint32_t* id, const uint32_t* end) {
               set_bits(t, id, end);
               if (want_successors) add_successor(t);
             });
    if (want_successors) {
      for (uint32_t c : loop->end_states) add_successor(w.loop_states[c]);
    }
  } else {
    // The walk's cost is the prefixes it visits, not the vocabulary size:
    // narrow states (a JSON key, a digit) cost little more than the trie's
    // first level.
    WalkTrie(context_->trie(), dfa, s, w.stack,
             [&](State t, const uint32_t* id, const uint32_t* end) {
               w.ids.insert(w.ids.end(), id, end);
               if (want_successors) add_successor(t);
             });
    count = static_cast<uint32_t>(w.ids.size());
  }

  // EOS ids: allowed exactly in accepting states, whatever their bytes.
  const bool accepting = s != Dfa::kDead && dfa.IsAccepting(s);
  if (dense_built) {
    for (uint32_t id : vocab_->eos_ids()) {
      const uint32_t bit = 1u << (id & 31);
      const bool set = (words[id >> 5] & bit) != 0;
      if (set && !accepting) {
        words[id >> 5] &= ~bit;
        --count;
      } else if (!set && accepting) {
        words[id >> 5] |= bit;
        ++count;
      }
    }
  } else {
    if (eos_in_trie_) {
      w.ids.erase(std::remove_if(w.ids.begin(), w.ids.end(),
                                 [&](uint32_t id) { return vocab_->is_eos(id); }),
                  w.ids.end());
    }
    if (accepting) w.ids.insert(w.ids.end(), vocab_->eos_ids().begin(), vocab_->eos_ids().end());
    count = static_cast<uint32_t>(w.ids.size());
  }

  std::vector<uint32_t> data;
  const bool dense = count > num_words_ / 8;
  if (dense) {
    if (dense_built) {
      data = std::move(words);
    } else {
      data.assign(num_words_, 0);
      for (uint32_t id : w.ids) data[id >> 5] |= 1u << (id & 31);
    }
  } else {
    if (dense_built) {
      for (uint32_t i = 0; i < num_words_; ++i) {
        for (uint32_t bits = words[i]; bits != 0; bits &= bits - 1) {
          w.ids.push_back(i * 32 + static_cast<uint32_t>(__builtin_ctz(bits)));
        }
      }
    }
    std::sort(w.ids.begin(), w.ids.end());
    data.assign(w.ids.begin(), w.ids.end());
  }
  const StateMask* m = store_->Intern(dense, count, data);
  if (m == nullptr) {
    // Over the budget: kept on this thread only, one slot per reference
    // depth, so a reference mask (depth d + 1) stays valid while the mask
    // at depth d that uses it is computed.
    thread_local std::optional<StateMask> unkept[3];
    std::optional<StateMask>& slot = unkept[reference_depth];
    slot.emplace(dense, count, std::move(data));
    return *slot;
  }
  const StateMask* expected = nullptr;
  // Another thread may have published the same state's mask meanwhile: both
  // are equal and interned, so either pointer is the same object.
  masks_[s].compare_exchange_strong(expected, m, std::memory_order_acq_rel);
  return *m;
}

void TokenIndex::WriteMask(State s, uint32_t* words) const { MaskOf(s).Write(words, num_words_); }

uint32_t TokenIndex::CountAllowed(State s) const { return MaskOf(s).count(); }

bool TokenIndex::IsAllowed(State s, uint32_t token) const {
  if (token >= vocab_->size() || s == Dfa::kDead) return false;
  const StateMask* m = masks_[s].load(std::memory_order_acquire);
  if (m != nullptr) return m->Has(token);
  if (vocab_->is_eos(token)) return dfa_->IsAccepting(s);
  return NextState(s, token) != Dfa::kDead;
}

TokenIndex::State TokenIndex::NextState(State s, uint32_t token) const {
  if (token >= vocab_->size() || !vocab_->has_token(token) || vocab_->is_special(token) ||
      vocab_->is_eos(token)) {
    return Dfa::kDead;
  }
  std::string_view bytes = vocab_->bytes(token);
  if (bytes.empty() || bytes.size() > 0xFFFF) return Dfa::kDead;
  return dfa_->Walk(s, bytes);
}

absl::Status TokenIndex::Precompute(int threads, absl::Time deadline,
                                    const std::atomic<bool>* cancel) const {
  const uint32_t n = dfa_->num_states();
  std::vector<uint8_t> queued(n, 0);
  std::vector<State> queue;
  absl::Mutex mu;  // guards queue, queued, next, busy, status
  size_t next = 0;
  int busy = 0;
  absl::Status status;
  if (start() != Dfa::kDead) {
    queue.push_back(start());
    queued[start()] = 1;
  }
  auto worker = [&] {
    std::vector<State> successors;
    while (true) {
      State s;
      {
        // Work is queued, or nobody can queue more, or the build failed.
        auto ready = [&] { return next < queue.size() || busy == 0 || !status.ok(); };
        absl::MutexLock lock(&mu, absl::Condition(&ready));
        if (!status.ok() || next >= queue.size()) return;
        s = queue[next++];
        ++busy;
      }
      absl::Status abort;
      if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
        abort = absl::CancelledError("index precomputation cancelled");
      } else if (deadline != absl::InfiniteFuture() && absl::Now() > deadline) {
        abort = absl::DeadlineExceededError("index precomputation exceeded its deadline");
      }
      successors.clear();
      if (abort.ok()) {
        ComputeMask(s, &successors);
        if (masks_[s].load(std::memory_order_acquire) == nullptr) {
          abort = options_.budget->ExhaustedError("index precomputation");
        }
      }
      absl::MutexLock lock(&mu);
      --busy;
      if (!abort.ok() && status.ok()) status = abort;
      for (State t : successors) {
        if (!queued[t]) {
          queued[t] = 1;
          queue.push_back(t);
        }
      }
    }
  };
  threads = std::max(1, threads);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return status;
}

uint32_t TokenIndex::num_computed_states() const {
  uint32_t c = 0;
  for (uint32_t s = 0; s < dfa_->num_states(); ++s) {
    if (masks_[s].load(std::memory_order_relaxed) != nullptr) ++c;
  }
  return c;
}

size_t TokenIndex::MemoryBytes() const {
  return sizeof(TokenIndex) + dfa_->MemoryBytes() +
         static_cast<size_t>(dfa_->num_states()) * sizeof(std::atomic<const StateMask*>) +
         store_->bytes();
}

absl::StatusOr<std::shared_ptr<const TokenIndex>> CompileRegex(
    std::string_view pattern, std::shared_ptr<const TokenizerContext> context,
    const CompileOptions& options) {
  auto dfa = Dfa::FromPattern(pattern, options.regex, options.dfa);
  if (!dfa.ok()) return dfa.status();
  if ((*dfa)->start() == Dfa::kDead) {
    return absl::InvalidArgumentError("regex: the pattern matches no text");
  }
  auto index = TokenIndex::Create(std::move(*dfa), std::move(context), options.index);
  if (options.eager) {
    auto status = index->Precompute(options.threads, options.dfa.deadline, options.dfa.cancel);
    if (!status.ok()) return status;
  }
  return index;
}

}  // namespace maskd
