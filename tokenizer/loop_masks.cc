#include "tokenizer/loop_masks.h"

#include <algorithm>
#include <string_view>

#include "absl/hash/hash.h"
#include "absl/types/span.h"
#include "tokenizer/trie_walk.h"
#include "tokenizer/vocabulary.h"

namespace maskd {

namespace {

using State = Dfa::State;
using ByteSet = LoopMasks::ByteSet;

bool Has(const ByteSet& set, uint8_t b) { return (set[b >> 6] >> (b & 63)) & 1; }
void Add(ByteSet& set, uint8_t b) { set[b >> 6] |= uint64_t{1} << (b & 63); }

// The shape of the loop around one state: what LoopMasks::Find keys on.
struct LoopShape {
  ByteSet x = {};                  // exit bytes
  std::vector<uint8_t> byte_map;   // byte -> loop class (256 entries)
  std::vector<uint32_t> table;     // (rows + 1) x loop classes; row 0 dead
  std::vector<State> canon;        // canonical state -> DFA state (s first)
};

// Finds the loop of live state `s` (see loop_masks.h). With `cut` set, the
// bytes in `cut_bytes` are exits by fiat and the search does not follow them:
// it then finds the tight loop (a string's content, not the array of strings
// around it). Returns false when s leads into no cycle among the first
// max_states states, or fewer than min_stay bytes keep s in the loop.
bool FindShape(const Dfa& dfa, State s, const ByteSet* cut_bytes, uint32_t max_states,
               uint32_t min_stay, LoopShape* out) {
  // Byte classes: one representative byte each, and their sizes. Every byte
  // of a class has the same transition from every state, so the search works
  // per class.
  const uint32_t nc = dfa.num_classes();
  uint8_t rep[256];
  uint32_t class_size[256] = {};
  std::vector<uint8_t> cut_class(nc, 0);
  for (int b = 255; b >= 0; --b) {
    uint8_t c = dfa.byte_class(static_cast<uint8_t>(b));
    rep[c] = static_cast<uint8_t>(b);
    ++class_size[c];
    if (cut_bytes != nullptr && Has(*cut_bytes, static_cast<uint8_t>(b))) cut_class[c] = 1;
  }

  // Live states breadth-first from s (at most max_states), not following cut
  // classes. succ[i * nc + c] is the found index of state i's successor by
  // class c, kNone when it is dead, kOutside when cut or past the search.
  // Found indices live in a thread-local stamp array over DFA states.
  constexpr int32_t kNone = -1, kOutside = -2;
  thread_local std::vector<std::pair<uint32_t, uint32_t>> stamp;  // (epoch, index)
  thread_local uint32_t epoch = 0;
  if (stamp.size() < dfa.num_states()) stamp.assign(dfa.num_states(), {0, 0});
  if (++epoch == 0) {
    std::fill(stamp.begin(), stamp.end(), std::make_pair(0u, 0u));
    epoch = 1;
  }
  std::vector<State> found = {s};
  stamp[s] = {epoch, 0};
  std::vector<int32_t> succ;
  for (size_t i = 0; i < found.size(); ++i) {
    for (uint32_t c = 0; c < nc; ++c) {
      State t = dfa.Next(found[i], rep[c]);
      int32_t j = kNone;
      if (t != Dfa::kDead) {
        if (cut_class[c]) {
          j = kOutside;
        } else if (stamp[t].first == epoch) {
          j = static_cast<int32_t>(stamp[t].second);
        } else if (found.size() < max_states) {
          j = static_cast<int32_t>(found.size());
          stamp[t] = {epoch, static_cast<uint32_t>(j)};
          found.push_back(t);
        } else {
          j = kOutside;
        }
      }
      succ.push_back(j);
    }
  }
  const uint32_t nf = static_cast<uint32_t>(found.size());
  // Predecessors among found states (CSR), for reverse reachability.
  std::vector<uint32_t> pred_begin(nf + 1, 0), preds;
  for (int32_t j : succ) {
    if (j >= 0) ++pred_begin[j + 1];
  }
  for (uint32_t i = 0; i < nf; ++i) pred_begin[i + 1] += pred_begin[i];
  preds.resize(pred_begin[nf]);
  {
    std::vector<uint32_t> fill(pred_begin.begin(), pred_begin.end() - 1);
    for (size_t e = 0; e < succ.size(); ++e) {
      if (succ[e] >= 0) preds[fill[succ[e]]++] = static_cast<uint32_t>(e / nc);
    }
  }

  // C: the found states that reach the loop's anchor through found states,
  // plus s. The anchor is s when s is on a cycle; otherwise the successor s
  // reaches by the most bytes (s may be the state just before a loop, such as
  // a string's opening quote before its content). close() fills in_loop and
  // returns whether the anchor is on a cycle.
  std::vector<uint8_t> in_loop(nf, 0);
  std::vector<uint32_t> work;
  auto close = [&](uint32_t anchor) {
    std::fill(in_loop.begin(), in_loop.end(), 0);
    bool on_cycle = false;
    work.assign(1, anchor);
    while (!work.empty()) {
      uint32_t j = work.back();
      work.pop_back();
      for (uint32_t k = pred_begin[j]; k < pred_begin[j + 1]; ++k) {
        uint32_t i = preds[k];
        on_cycle |= i == anchor;
        if (!in_loop[i]) {
          in_loop[i] = 1;
          work.push_back(i);
        }
      }
    }
    in_loop[anchor] = 1;
    return on_cycle;
  };
  if (!close(0)) {
    uint32_t widest = 0;
    const State t = dfa.WidestSuccessor(s, &widest);
    if (t == Dfa::kDead || stamp[t].first != epoch) return false;
    const uint32_t anchor = stamp[t].second;
    if (anchor == 0 || !close(anchor)) return false;
    in_loop[0] = 1;
  }

  // Exit classes: those by which some state of C leaves C alive (X is their
  // bytes). Stay: the bytes of the other classes that keep s in C.
  std::vector<uint8_t> exit_class(nc, 0);
  for (uint32_t i = 0; i < nf; ++i) {
    if (!in_loop[i]) continue;
    for (uint32_t c = 0; c < nc; ++c) {
      int32_t j = succ[i * nc + c];
      if (j == kOutside || (j >= 0 && !in_loop[j])) exit_class[c] = 1;
    }
  }
  uint32_t stay = 0;
  for (uint32_t c = 0; c < nc; ++c) {
    if (!exit_class[c] && succ[c] >= 0) stay += class_size[c];
  }
  if (stay < min_stay) return false;
  out->x = {};
  for (int b = 0; b < 256; ++b) {
    if (exit_class[dfa.byte_class(static_cast<uint8_t>(b))]) Add(out->x, static_cast<uint8_t>(b));
  }

  // Canonical numbering: breadth-first from s over the non-exit classes in
  // the order of their first byte, so it does not depend on how this DFA
  // numbers its classes.
  std::vector<uint32_t> class_order;  // DFA classes by first byte
  {
    std::vector<uint8_t> listed(nc, 0);
    for (int b = 0; b < 256; ++b) {
      uint8_t c = dfa.byte_class(static_cast<uint8_t>(b));
      if (!listed[c]) {
        listed[c] = 1;
        class_order.push_back(c);
      }
    }
  }
  std::vector<State>& canon = out->canon;
  canon.assign(1, s);
  std::vector<uint32_t> canon_found = {0};  // canonical -> found index
  std::vector<int32_t> canon_of(nf, -1);
  canon_of[0] = 0;
  std::vector<uint32_t> by_class;  // canonical rows x DFA classes: 0 dead/exit, else row + 1
  for (size_t r = 0; r < canon.size(); ++r) {
    by_class.resize(by_class.size() + nc, 0);
    uint32_t* row = by_class.data() + r * nc;
    const int32_t* from = succ.data() + static_cast<size_t>(canon_found[r]) * nc;
    for (uint32_t c : class_order) {
      const int32_t j = from[c];
      if (exit_class[c] || j < 0) continue;  // exit or dead (j is in C otherwise)
      if (canon_of[j] < 0) {
        canon_of[j] = static_cast<int32_t>(canon.size());
        canon.push_back(found[j]);
        canon_found.push_back(static_cast<uint32_t>(j));
      }
      row[c] = static_cast<uint32_t>(canon_of[j]) + 1;
    }
  }
  const uint32_t rows = static_cast<uint32_t>(canon.size());
  // The loop's own byte classes: DFA classes with equal columns merge; loop
  // class 0 holds the bytes dead (or exits) from every row.
  std::vector<int32_t> local_of(nc, -1);
  std::vector<uint32_t> local_rep = {nc};  // a DFA class per loop class (0: none)
  for (uint32_t c : class_order) {
    bool all_dead = true;
    for (uint32_t r = 0; r < rows && all_dead; ++r) all_dead = by_class[r * nc + c] == 0;
    if (all_dead) {
      local_of[c] = 0;
      continue;
    }
    for (uint32_t l = 1; l < local_rep.size() && local_of[c] < 0; ++l) {
      bool same = true;
      for (uint32_t r = 0; r < rows && same; ++r) {
        same = by_class[r * nc + c] == by_class[r * nc + local_rep[l]];
      }
      if (same) local_of[c] = static_cast<int32_t>(l);
    }
    if (local_of[c] < 0) {
      local_of[c] = static_cast<int32_t>(local_rep.size());
      local_rep.push_back(c);
    }
  }
  const uint32_t nl = static_cast<uint32_t>(local_rep.size());
  out->byte_map.resize(256);
  for (int b = 0; b < 256; ++b) {
    out->byte_map[b] = static_cast<uint8_t>(local_of[dfa.byte_class(static_cast<uint8_t>(b))]);
  }
  out->table.assign(static_cast<size_t>(rows + 1) * nl, 0);
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t l = 1; l < nl; ++l) out->table[(r + 1) * nl + l] = by_class[r * nc + local_rep[l]];
  }
  return true;
}

}  // namespace

size_t LoopMasks::Loop::MemoryBytes() const {
  return sizeof(Loop) + byte_map.capacity() +
         (table.capacity() + words.capacity() + end_states.capacity()) * sizeof(uint32_t);
}

LoopMasks::LoopMasks(const Vocabulary& vocab, const TokenTrie& trie) : vocab_(vocab), trie_(trie) {
  // Counts, then fills: each token once per distinct byte it holds.
  const uint32_t* ids = trie.token_ids();
  const size_t n = trie.num_tokens();
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
  const size_t limit = trie_.num_tokens() / kMaxExitShare;
  uint32_t widest = 0, self = 0;
  const State widest_successor = dfa.WidestSuccessor(s, &widest, &self);
  const State anchor = self > 0 || widest_successor == Dfa::kDead ? s : widest_successor;
  std::vector<std::pair<size_t, ByteSet>> cuts;  // (tokens holding a byte, bytes)
  {
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
  }
  LoopShape shape;
  const TokenTrie* exit_trie = nullptr;
  for (const auto& cut : cuts) {
    if (FindShape(dfa, s, &cut.second, kMaxLoopStates, kMinStayBytes, &shape)) {
      exit_trie = ExitTrieFor(shape.x);
      if (exit_trie != nullptr) break;
    }
  }
  if (exit_trie == nullptr && FindShape(dfa, s, nullptr, kMaxLoopStates, kMinStayBytes, &shape)) {
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

}  // namespace maskd
