#include "tokenizer/loop_masks.h"

#include <algorithm>
#include <string_view>

#include "absl/hash/hash.h"
#include "absl/types/span.h"
#include "tokenizer/loop_shape.h"
#include "tokenizer/trie_walk.h"
#include "tokenizer/vocabulary.h"

namespace maskd {

namespace {

using State = Dfa::State;
using ByteSet = LoopMasks::ByteSet;

constexpr auto Has = LoopMasks::Has;
constexpr auto Add = LoopMasks::Add;

}  // namespace

size_t LoopMasks::Loop::MemoryBytes() const {
  return sizeof(Loop) + byte_map.capacity() +
         (table.capacity() + words.capacity() + end_states.capacity()) * sizeof(uint32_t);
}

LoopMasks::LoopMasks(const Vocabulary& vocab, const TokenTrie& trie) : vocab_(vocab), trie_(trie) {
  IndexTokensByByte();
  IndexTokenClasses();
  IndexDenseBytes();
}

void LoopMasks::IndexTokensByByte() {
  // Counts, then fills: each token once per distinct byte it holds.
  const uint32_t* ids = trie_.token_ids();
  const size_t n = trie_.num_tokens();
  uint32_t stamp[256];
  std::fill(stamp, stamp + 256, UINT32_MAX);
  for (size_t k = 0; k < n; ++k) {
    std::string_view bytes = vocab_.bytes(ids[k]);
    if (bytes.size() > kShortTokenBytes) long_tokens_.push_back(ids[k]);
    for (char c : bytes) {
      const uint8_t b = static_cast<uint8_t>(c);
      if (stamp[b] != k) {
        stamp[b] = static_cast<uint32_t>(k);
        ++tokens_with_byte_[b];
      }
    }
  }
  std::sort(long_tokens_.begin(), long_tokens_.end());
  byte_begin_.assign(257, 0);
  for (int b = 0; b < 256; ++b) byte_begin_[b + 1] = byte_begin_[b] + tokens_with_byte_[b];
  byte_tokens_.resize(byte_begin_[256]);
  std::vector<uint32_t> fill(byte_begin_.begin(), byte_begin_.end() - 1);
  // Ascending ids per byte: visit tokens by id.
  std::vector<uint32_t> sorted(ids, ids + n);
  std::sort(sorted.begin(), sorted.end());
  std::fill(stamp, stamp + 256, UINT32_MAX);
  for (uint32_t id : sorted) {
    for (char c : vocab_.bytes(id)) {
      const uint8_t b = static_cast<uint8_t>(c);
      if (stamp[b] != id) {
        stamp[b] = id;
        byte_tokens_[fill[b]++] = id;
      }
    }
  }
}

void LoopMasks::IndexTokenClasses() {
  const uint32_t* ids = trie_.token_ids();
  const size_t n = trie_.num_tokens();
  const uint32_t num_words = (vocab_.size() + 31) / 32;
  trie_words_.assign(num_words, 0);
  non_ascii_words_.assign(num_words, 0);
  control_words_.assign(num_words, 0);
  utf8_words_.assign(num_words, 0);
  utf8_cut_words_.assign(num_words, 0);
  long_words_.assign(num_words, 0);
  char_count_.assign(vocab_.size(), 0);
  cut_tail_of_.assign(vocab_.size(), UINT32_MAX);
  for (uint32_t id : long_tokens_) long_words_[id >> 5] |= 1u << (id & 31);
  std::vector<std::pair<std::string, uint32_t>> tails;  // (cut-short character, id)
  for (size_t k = 0; k < n; ++k) {
    const uint32_t id = ids[k];
    const uint32_t bit = 1u << (id & 31);
    trie_words_[id >> 5] |= bit;
    bool non_ascii = false, control = false;
    uint8_t u = kUtf8Boundary;
    uint32_t chars = 0;
    for (char c : vocab_.bytes(id)) {
      const uint8_t b = static_cast<uint8_t>(c);
      non_ascii |= b >= 0x80;
      control |= b < 0x20;
      if (u != 0) {
        u = Utf8Next(u, b);
        chars += u == kUtf8Boundary;
      }
    }
    char_count_[id] = static_cast<uint8_t>(std::min<uint32_t>(chars, 255));
    if (non_ascii) non_ascii_words_[id >> 5] |= bit;
    if (control) control_words_[id >> 5] |= bit;
    if (u != 0) utf8_words_[id >> 5] |= bit;
    if (u != 0 && u != kUtf8Boundary) {
      utf8_cut_words_[id >> 5] |= bit;
      std::string_view bytes = vocab_.bytes(id);
      size_t start = bytes.size();
      while (start > 0 && (static_cast<uint8_t>(bytes[start - 1]) & 0xC0) == 0x80) --start;
      --start;  // the lead byte of the last character
      tails.emplace_back(std::string(bytes.substr(start)), id);
    }
  }
  std::sort(tails.begin(), tails.end());
  cut_tail_begin_.push_back(0);
  for (size_t i = 0; i < tails.size(); ++i) {
    if (i == 0 || tails[i].first != tails[i - 1].first) {
      if (i > 0) cut_tail_begin_.push_back(static_cast<uint32_t>(i));
      cut_tails_.push_back(tails[i].first);
    }
    cut_tail_ids_.push_back(tails[i].second);
    cut_tail_of_[tails[i].second] = static_cast<uint32_t>(cut_tails_.size() - 1);
  }
  cut_tail_begin_.push_back(static_cast<uint32_t>(tails.size()));
  if (cut_tails_.empty()) cut_tail_begin_.assign(1, 0);
}

void LoopMasks::IndexDenseBytes() {
  const uint32_t num_words = (vocab_.size() + 31) / 32;
  size_t dense = 0;
  for (int b = 0; b < 256; ++b) {
    byte_words_[b] = UINT32_MAX;
    if (static_cast<uint64_t>(tokens_with_byte_[b]) * kDenseByteShare >= num_words) {
      byte_words_[b] = static_cast<uint32_t>(dense * num_words);
      ++dense;
    }
  }
  dense_words_.assign(dense * num_words, 0);
  for (int b = 0; b < 256; ++b) {
    if (byte_words_[b] == UINT32_MAX) continue;
    uint32_t* words = dense_words_.data() + byte_words_[b];
    for (uint32_t k = byte_begin_[b]; k < byte_begin_[b + 1]; ++k) {
      words[byte_tokens_[k] >> 5] |= 1u << (byte_tokens_[k] & 31);
    }
  }
}

LoopMasks::~LoopMasks() = default;

uint8_t LoopMasks::Utf8Next(uint8_t state, uint8_t b) {
  // States: 1 boundary; 2, 3, 4 need 1, 2, 3 continuation bytes; 5 after E0
  // (A0-BF next), 6 after ED (80-9F), 7 after F0 (90-BF), 8 after F4 (80-8F).
  switch (state) {
    case kUtf8Boundary:
      if (b < 0x80) return kUtf8Boundary;
      if (b >= 0xC2 && b <= 0xDF) return 2;
      if (b == 0xE0) return 5;
      if (b == 0xED) return 6;
      if (b >= 0xE1 && b <= 0xEF) return 3;
      if (b == 0xF0) return 7;
      if (b >= 0xF1 && b <= 0xF3) return 4;
      if (b == 0xF4) return 8;
      return 0;
    case 2: return b >= 0x80 && b <= 0xBF ? kUtf8Boundary : 0;
    case 3: return b >= 0x80 && b <= 0xBF ? 2 : 0;
    case 4: return b >= 0x80 && b <= 0xBF ? 3 : 0;
    case 5: return b >= 0xA0 && b <= 0xBF ? 2 : 0;
    case 6: return b >= 0x80 && b <= 0x9F ? 2 : 0;
    case 7: return b >= 0x90 && b <= 0xBF ? 3 : 0;
    case 8: return b >= 0x80 && b <= 0x8F ? 3 : 0;
    default: return 0;
  }
}

size_t LoopMasks::IndexBytes() const {
  return (byte_begin_.capacity() + byte_tokens_.capacity() + long_tokens_.capacity() +
          dense_words_.capacity() + trie_words_.capacity() + non_ascii_words_.capacity() +
          control_words_.capacity() + utf8_words_.capacity() + utf8_cut_words_.capacity() +
          long_words_.capacity() + cut_tail_of_.capacity() + cut_tail_ids_.capacity() +
          cut_tail_begin_.capacity()) *
             sizeof(uint32_t) +
         char_count_.capacity();
}

const TokenTrie* LoopMasks::ExitTrieFor(const ByteSet& x, uint32_t max_len) {
  {
    absl::MutexLock lock(&mu_);
    for (const auto& e : exit_tries_) {
      if (e->bytes == x && e->max_len == max_len) return e->trie.get();
    }
    if (bytes_ >= max_bytes()) return nullptr;
  }
  // Tokens holding a byte of x number at least the most holding any one of
  // them: past the share, refuse without a scan (and remember the refusal).
  const size_t limit = trie_.num_tokens() / kMaxExitShare;
  bool too_many = false;
  for (int b = 0; b < 256; ++b) {
    if (Has(x, static_cast<uint8_t>(b)) && tokens_with_byte_[b] > limit) too_many = true;
  }
  // Built outside the lock from the byte index; a racing thread may build
  // the same set, and the first one kept wins.
  auto entry = std::make_unique<ExitTrie>();
  entry->bytes = x;
  entry->max_len = max_len;
  if (!too_many) {
    std::vector<uint32_t> ids;
    for (int b = 0; b < 256; ++b) {
      if (Has(x, static_cast<uint8_t>(b))) {
        ids.insert(ids.end(), byte_tokens_.begin() + byte_begin_[b],
                   byte_tokens_.begin() + byte_begin_[b + 1]);
      }
    }
    if (max_len > 0) ids.insert(ids.end(), long_tokens_.begin(), long_tokens_.end());
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    if (ids.size() <= limit) entry->trie = TokenTrie::BuildFromIds(vocab_, std::move(ids));
  }
  absl::MutexLock lock(&mu_);
  for (const auto& e : exit_tries_) {
    if (e->bytes == x && e->max_len == max_len) return e->trie.get();
  }
  if (entry->trie != nullptr) bytes_ += entry->trie->MemoryBytes();
  exit_tries_.push_back(std::move(entry));
  return exit_tries_.back()->trie.get();
}

std::vector<std::pair<size_t, LoopMasks::ByteSet>> LoopMasks::CandidateCuts(const Dfa& dfa,
                                                                     State anchor) const {
  const size_t limit = trie_.num_tokens() / kMaxExitShare;
  std::vector<std::pair<size_t, ByteSet>> cuts;  // (tokens holding a byte, bytes)
  ByteSet all = {};
  size_t all_tokens = 0;
  std::vector<std::pair<size_t, ByteSet>> singles;
  std::vector<uint8_t> done(dfa.num_classes(), 0);
  for (int b = 0; b < 0x80; ++b) {
    const uint8_t c = dfa.byte_class(static_cast<uint8_t>(b));
    const State t = dfa.Next(anchor, static_cast<uint8_t>(b));
    if (done[c] || t == Dfa::kDead || t == anchor) continue;
    done[c] = 1;
    ByteSet cls = {};
    size_t tokens = 0;
    bool ascii = true;
    for (int b2 = 0; b2 < 256; ++b2) {
      if (dfa.byte_class(static_cast<uint8_t>(b2)) != c) continue;
      ascii &= b2 < 0x80;
      Add(cls, static_cast<uint8_t>(b2));
      tokens += tokens_with_byte_[b2];
    }
    if (!ascii || tokens > limit) continue;
    singles.push_back({tokens, cls});
    for (int k = 0; k < 4; ++k) all[k] |= cls[k];
    all_tokens += tokens;
  }
  std::sort(singles.begin(), singles.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  if (singles.size() > 1 && all_tokens <= limit) cuts.push_back({all_tokens, all});
  for (size_t k = 0; k < singles.size() && k < kMaxCutTries; ++k) cuts.push_back(singles[k]);
  return cuts;
}

std::shared_ptr<const LoopMasks::Loop> LoopMasks::Find(const Dfa& dfa, State s,
                                                       std::vector<State>* states,
                                                       Pending* pending) {
  if (pending != nullptr) pending->exit_trie = nullptr;
  if (s == Dfa::kDead) return nullptr;
  // Most states are narrow (a key, a digit, punctuation): fewer live bytes
  // than could make a loop worth sharing. Rule them out before any search.
  uint32_t live = 0;
  for (int b = 0; b < 256; ++b) live += dfa.Next(s, static_cast<uint8_t>(b)) != Dfa::kDead;
  if (live < kMinStayBytes) return nullptr;

  // The tight loop first. A loop's exits are usually few structural bytes (a
  // JSON string's quote), but the cycle through them can be wide (the array
  // of strings around the string). So the search first cuts candidate exits:
  // the ASCII classes by which the loop's entry leaves to another state,
  // together, then one at a time (rarest first); then nothing.
  uint32_t widest = 0, self = 0;
  const State widest_successor = dfa.WidestSuccessor(s, &widest, &self);
  const State anchor = self > 0 || widest_successor == Dfa::kDead ? s : widest_successor;
  const std::vector<std::pair<size_t, ByteSet>> cuts = CandidateCuts(dfa, anchor);
  LoopShape shape;
  const TokenTrie* exit_trie = nullptr;
  for (const auto& cut : cuts) {
    if (FindShape(dfa, s, &cut.second, &shape)) {
      exit_trie = ExitTrieFor(shape.x);
      if (exit_trie != nullptr) break;
    }
  }
  if (exit_trie == nullptr && FindShape(dfa, s, nullptr, &shape)) {
    exit_trie = ExitTrieFor(shape.x);
  }
  if (exit_trie == nullptr) return nullptr;
  const ByteSet& x = shape.x;
  std::vector<uint8_t>& byte_map = shape.byte_map;
  std::vector<uint32_t>& table = shape.table;
  const uint32_t rows = static_cast<uint32_t>(shape.canon.size());
  std::vector<State>& canon = shape.canon;

  const size_t h = absl::HashOf(x, absl::MakeConstSpan(byte_map), absl::MakeConstSpan(table));
  std::shared_ptr<const Loop> loop;
  {
    absl::MutexLock lock(&mu_);
    auto it = loops_.find(h);
    if (it != loops_.end()) {
      for (const auto& l : it->second) {
        if (l->exit_bytes == x && l->byte_map == byte_map && l->table == table) loop = l;
      }
    }
  }
  if (loop != nullptr) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    if (states != nullptr) *states = std::move(canon);
    return loop;
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  if (pending != nullptr) {
    pending->x = x;
    pending->byte_map = std::move(byte_map);
    pending->table = std::move(table);
    pending->rows = rows;
    pending->hash = h;
    pending->exit_trie = exit_trie;
    pending->canon = std::move(canon);
  }
  return nullptr;
}

std::shared_ptr<const LoopMasks::Loop> LoopMasks::Complete(Pending pending,
                                                          std::vector<uint32_t> words,
                                                          uint32_t count,
                                                          const std::vector<State>& end_states) {
  auto loop = std::make_shared<Loop>();
  loop->exit_bytes = pending.x;
  loop->byte_map = std::move(pending.byte_map);
  loop->table = std::move(pending.table);
  loop->num_classes = static_cast<uint32_t>(loop->table.size() / (pending.rows + 1));
  loop->exit_trie = pending.exit_trie;
  loop->words = std::move(words);
  loop->count = count;
  loop->short_words = loop->words;
  loop->short_count = count;
  for (uint32_t id : long_tokens_) {
    uint32_t& w = loop->short_words[id >> 5];
    if ((w >> (id & 31)) & 1) {
      w &= ~(1u << (id & 31));
      --loop->short_count;
    }
  }
  // Canonical states in which a loop token ends (canon holds at most
  // kMaxLoopStates states; end_states are among them).
  std::vector<std::pair<State, uint32_t>> index;
  index.reserve(pending.canon.size());
  for (uint32_t i = 0; i < pending.canon.size(); ++i) index.emplace_back(pending.canon[i], i);
  std::sort(index.begin(), index.end());
  for (State t : end_states) {
    auto it = std::lower_bound(index.begin(), index.end(), std::make_pair(t, uint32_t{0}));
    if (it != index.end() && it->first == t) loop->end_states.push_back(it->second);
  }
  std::sort(loop->end_states.begin(), loop->end_states.end());
  loop->end_states.erase(std::unique(loop->end_states.begin(), loop->end_states.end()),
                         loop->end_states.end());

  absl::MutexLock lock(&mu_);
  auto& bucket = loops_[pending.hash];
  for (const auto& l : bucket) {
    if (l->exit_bytes == loop->exit_bytes && l->byte_map == loop->byte_map &&
        l->table == loop->table) {
      return l;  // a racing thread kept an equal loop first
    }
  }
  if (bytes_ + loop->MemoryBytes() <= max_bytes()) {
    bytes_ += loop->MemoryBytes();
    ++num_loops_;
    bucket.push_back(loop);
    // A bounded candidate: its entry state loops on itself.
    bool self_loop = false;
    for (uint32_t c = 1; c < loop->num_classes; ++c) self_loop |= loop->table[loop->num_classes + c] == 1;
    if (self_loop && bounded_candidates_.size() < kMaxBoundedCandidates) {
      bounded_candidates_.push_back(loop);
    }
  }
  return loop;
}

LoopMasks::Bounded LoopMasks::FindBounded(const Dfa& dfa, State s) {
  std::vector<std::shared_ptr<const Loop>> candidates;
  {
    absl::MutexLock lock(&mu_);
    candidates = bounded_candidates_;
  }
  // Pairs (DFA state, loop row) reached by the same string; both live.
  constexpr size_t kMaxPairs = 512;
  std::vector<std::pair<State, uint32_t>> pairs, next;
  std::vector<uint8_t> reps;  // one byte per (DFA class, loop class) met
  for (const auto& loop : candidates) {
    const uint32_t nc = loop->num_classes;
    const uint32_t* table = loop->table.data();
    const uint8_t* byte_map = loop->byte_map.data();
    reps.clear();
    {
      std::vector<uint8_t> seen(static_cast<size_t>(dfa.num_classes()) * nc, 0);
      for (int b = 0; b < 256; ++b) {
        if (Has(loop->exit_bytes, static_cast<uint8_t>(b))) continue;
        uint8_t& met = seen[static_cast<size_t>(dfa.byte_class(static_cast<uint8_t>(b))) * nc +
                            byte_map[b]];
        if (!met) {
          met = 1;
          reps.push_back(static_cast<uint8_t>(b));
        }
      }
    }
    bool same = true;
    pairs.assign(1, {s, 1});
    for (uint32_t depth = 0; depth < kShortTokenBytes && same && !pairs.empty(); ++depth) {
      next.clear();
      for (const auto& [q, r] : pairs) {
        for (uint8_t b : reps) {
          const State q2 = dfa.Next(q, b);
          const uint32_t r2 = table[static_cast<size_t>(r) * nc + byte_map[b]];
          if ((q2 != Dfa::kDead) != (r2 != 0)) {
            same = false;
            break;
          }
          if (q2 != Dfa::kDead && depth + 1 < kShortTokenBytes) next.emplace_back(q2, r2);
        }
        if (!same) break;
      }
      std::sort(next.begin(), next.end());
      next.erase(std::unique(next.begin(), next.end()), next.end());
      if (next.size() > kMaxPairs) same = false;
      pairs.swap(next);
    }
    if (!same) continue;
    const TokenTrie* rest = ExitTrieFor(loop->exit_bytes, kShortTokenBytes);
    if (rest != nullptr) {
      bounded_.fetch_add(1, std::memory_order_relaxed);
      return Bounded{loop, rest};
    }
  }
  return Bounded{};
}

void LoopMasks::Clear() {
  absl::MutexLock lock(&mu_);
  loops_.clear();
  exit_tries_.clear();
  bounded_candidates_.clear();
  bytes_ = 0;
  num_loops_ = 0;
  hits_.store(0, std::memory_order_relaxed);
  misses_.store(0, std::memory_order_relaxed);
  bounded_.store(0, std::memory_order_relaxed);
}

LoopMasks::Stats LoopMasks::stats() const {
  Stats st;
  absl::MutexLock lock(&mu_);
  st.loops = num_loops_;
  for (const auto& e : exit_tries_) st.exit_tries += e->trie != nullptr;
  st.bytes = bytes_;
  st.hits = hits_.load(std::memory_order_relaxed);
  st.misses = misses_.load(std::memory_order_relaxed);
  st.bounded = bounded_.load(std::memory_order_relaxed);
  return st;
}

void LoopMasks::TokensWithin(const bool outside[256], bool utf8, uint32_t num_words,
                             uint32_t* words) const {
  auto or_words = [words, num_words](const uint32_t* __restrict src) {
    uint32_t* __restrict dst = words;  // vectorized at -O3
    for (uint32_t w = 0; w < num_words; ++w) dst[w] |= src[w];
  };
  bool all_control = true, all_high = !utf8;
  for (int b = 0; b < 0x20; ++b) all_control &= outside[b];
  for (int b = 0x80; b < 256 && all_high; ++b) all_high &= outside[b];
  std::fill(words, words + num_words, 0u);  // first: the tokens holding a byte outside
  if (all_control) or_words(ControlWords());
  if (all_high) or_words(NonAsciiWords());
  for (int b = all_control ? 0x20 : 0; b < (all_high || utf8 ? 0x80 : 256); ++b) {
    if (!outside[b]) continue;
    if (const uint32_t* bw = ByteWords(static_cast<uint8_t>(b)); bw != nullptr) {
      or_words(bw);
    } else {
      auto [id, end] = TokensWith(static_cast<uint8_t>(b));
      for (; id != end; ++id) words[*id >> 5] |= 1u << (*id & 31);
    }
  }
  const uint32_t* trie_words = TrieWords();
  const uint32_t* utf8_words = Utf8Words();
  for (uint32_t w = 0; w < num_words; ++w) {
    words[w] = trie_words[w] & ~words[w] & (utf8 ? utf8_words[w] : ~0u);
  }
}

}  // namespace maskd
