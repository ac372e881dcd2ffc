#include "automaton/dfa.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"

namespace maskd {
namespace {

// ---------------------------------------------------------------------------
// UTF-8: a codepoint range becomes a union of byte-range sequences, each the
// cartesian product of per-byte ranges (the decomposition of the utf8-ranges
// technique). Ranges never include surrogates.

struct ByteSeq {
  int len;
  uint8_t lo[4], hi[4];
};

int EncodeUtf8(uint32_t cp, uint8_t out[4]) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<ByteSeq>* out) {
  static constexpr uint32_t kMaxOfLen[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  // Split on encoding-length boundaries.
  for (int n = 0; n < 3; ++n) {
    if (lo <= kMaxOfLen[n] && hi > kMaxOfLen[n]) {
      Utf8Sequences(lo, kMaxOfLen[n], out);
      Utf8Sequences(kMaxOfLen[n] + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out->push_back(ByteSeq{1, {static_cast<uint8_t>(lo)}, {static_cast<uint8_t>(hi)}});
    return;
  }
  // Split until every continuation byte spans a whole or a product range.
  for (int i = 1; i < 4; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Utf8Sequences(lo, lo | m, out);
        Utf8Sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Utf8Sequences(lo, (hi & ~m) - 1, out);
        Utf8Sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  ByteSeq s;
  uint8_t a[4], b[4];
  s.len = EncodeUtf8(lo, a);
  EncodeUtf8(hi, b);
  for (int i = 0; i < s.len; ++i) {
    s.lo[i] = a[i];
    s.hi[i] = b[i];
  }
  out->push_back(s);
}

// ---------------------------------------------------------------------------
// SpanInterner: equal spans of uint32_t get equal dense ids, with all keys in
// one pool (no allocation per key). Spans returned by Get() are invalidated by
// Add().

class SpanInterner {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  uint32_t size() const { return static_cast<uint32_t>(begin_.size() - 1); }
  absl::Span<const uint32_t> Get(uint32_t id) const {
    return absl::MakeConstSpan(pool_.data() + begin_[id], begin_[id + 1] - begin_[id]);
  }
  static uint64_t Hash(absl::Span<const uint32_t> key) {
    uint64_t h = 0x9E3779B97F4A7C15ull * (key.size() + 1);
    for (uint32_t x : key) {
      h = (h ^ x) * 0xFF51AFD7ED558CCDull;
      h ^= h >> 29;
    }
    return h;
  }
  // The id of `key`, or kNone. `hash` is Hash(key).
  uint32_t Find(absl::Span<const uint32_t> key, uint64_t hash) const {
    auto it = head_.find(hash);
    if (it == head_.end()) return kNone;
    for (uint32_t id = it->second; id != kNone; id = next_[id]) {
      if (Get(id) == key) return id;
    }
    return kNone;
  }
  // Adds `key`, which must be absent, and returns its id. `key` must not
  // point into this interner.
  uint32_t Add(absl::Span<const uint32_t> key, uint64_t hash) {
    uint32_t id = size();
    pool_.insert(pool_.end(), key.begin(), key.end());
    begin_.push_back(static_cast<uint32_t>(pool_.size()));
    auto [it, inserted] = head_.try_emplace(hash, id);
    next_.push_back(inserted ? kNone : it->second);
    it->second = id;
    return id;
  }
  void Reserve(size_t keys) {
    begin_.reserve(keys + 1);
    next_.reserve(keys);
    head_.reserve(keys);
  }

 private:
  std::vector<uint32_t> pool_;
  std::vector<uint32_t> begin_ = {0};  // key id -> offset in pool_; size() + 1 entries
  std::vector<uint32_t> next_;         // key id -> older id with the same hash, or kNone
  absl::flat_hash_map<uint64_t, uint32_t> head_;  // hash -> newest id with it
};

// ---------------------------------------------------------------------------
// Structural ids for syntax tree nodes: two subtrees get the same id exactly
// when they are equal. Nodes are numbered in preorder; the children of node
// `i` start at i + 1 and child j + 1 starts size(child j) after child j.

class NodeIds {
 public:
  explicit NodeIds(const RegexNode& root) { Visit(root); }
  uint32_t id(uint32_t pre) const { return ids_[pre]; }
  uint32_t subtree_size(uint32_t pre) const { return sizes_[pre]; }

 private:
  void Visit(const RegexNode& n) {
    const uint32_t pre = static_cast<uint32_t>(ids_.size());
    ids_.push_back(0);
    sizes_.push_back(0);
    for (const auto& c : n.children) Visit(*c);
    // Key: kind, min, max, child count, child ids, set ranges.
    key_.clear();
    key_.push_back(static_cast<uint32_t>(n.kind));
    key_.push_back(n.min);
    key_.push_back(n.max);
    key_.push_back(static_cast<uint32_t>(n.children.size()));
    uint32_t c = pre + 1;
    for (size_t j = 0; j < n.children.size(); ++j) {
      key_.push_back(ids_[c]);
      c += sizes_[c];
    }
    for (const auto& [lo, hi] : n.set.ranges()) {
      key_.push_back(lo);
      key_.push_back(hi);
    }
    uint64_t h = SpanInterner::Hash(key_);
    uint32_t id = keys_.Find(key_, h);
    if (id == SpanInterner::kNone) id = keys_.Add(key_, h);
    ids_[pre] = id;
    sizes_[pre] = static_cast<uint32_t>(ids_.size()) - pre;
  }

  std::vector<uint32_t> ids_;    // preorder index -> structural id
  std::vector<uint32_t> sizes_;  // preorder index -> nodes in the subtree
  std::vector<uint32_t> key_;
  SpanInterner keys_;
};

// ---------------------------------------------------------------------------
// Thompson NFA over bytes, built backwards: Build(n, out) returns a state
// whose language is L(n)·L(out). A state is never given more edges once a
// Build call has returned it, so Build is a function of (structure of n, out)
// and is memoized on that pair: equal subexpressions with the same
// continuation share their states. JSON-Schema regexes repeat the same string
// and value patterns in front of the same continuation many times, and the
// sharing keeps the NFA, and the DFA built from it, close to minimal.

class NfaBuilder {
 public:
  struct ByteEdge {
    uint32_t from, to;
    uint8_t lo, hi;  // byte range, inclusive
  };

  NfaBuilder(const DfaOptions& options, const RegexNode& root)
      : options_(options), root_(root), ids_(root) {}

  absl::StatusOr<uint32_t> NewState() {
    if (num_states_ >= options_.max_nfa_states) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "regex: the automaton needs more than %d NFA states (limit max_nfa_states)",
          options_.max_nfa_states));
    }
    return num_states_++;
  }

  // Builds the whole regex in front of `out`; returns the start state.
  absl::StatusOr<uint32_t> BuildRoot(uint32_t out) { return Build(root_, 0, out); }

  absl::Status CheckAbort() const {
    if (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed)) {
      return absl::CancelledError("regex compilation cancelled");
    }
    if (options_.deadline != absl::InfiniteFuture() && absl::Now() > options_.deadline) {
      return absl::DeadlineExceededError("regex compilation exceeded its deadline");
    }
    return absl::OkStatus();
  }

  uint32_t num_states() const { return num_states_; }
  const std::vector<std::pair<uint32_t, uint32_t>>& eps() const { return eps_; }
  const std::vector<ByteEdge>& edges() const { return edges_; }

 private:
  // `pre` is n's preorder index (see NodeIds).
  absl::StatusOr<uint32_t> Build(const RegexNode& n, uint32_t pre, uint32_t out) {
    if (n.kind == RegexNode::Kind::kEmpty) return out;
    const uint64_t key = (static_cast<uint64_t>(ids_.id(pre)) << 32) | out;
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    if (++steps_ % 4096 == 0) {
      if (auto s = CheckAbort(); !s.ok()) return s;
    }
    uint32_t in = out;
    switch (n.kind) {
      case RegexNode::Kind::kEmpty:
        break;
      case RegexNode::Kind::kSet: {
        auto s = AddSet(n.set, out);
        if (!s.ok()) return s;
        in = *s;
        break;
      }
      case RegexNode::Kind::kConcat: {
        // Children back to front, each in front of the next one's start.
        const size_t base = child_pre_.size();
        for (uint32_t j = 0, c = pre + 1; j < n.children.size(); ++j) {
          child_pre_.push_back(c);
          c += ids_.subtree_size(c);
        }
        for (size_t j = n.children.size(); j-- > 0;) {
          auto s = Build(*n.children[j], child_pre_[base + j], in);
          if (!s.ok()) return s;
          in = *s;
        }
        child_pre_.resize(base);
        break;
      }
      case RegexNode::Kind::kAlternate: {
        auto s = NewState();
        if (!s.ok()) return s;
        in = *s;
        for (uint32_t j = 0, c = pre + 1; j < n.children.size(); ++j) {
          auto cin = Build(*n.children[j], c, out);
          if (!cin.ok()) return cin;
          eps_.emplace_back(in, *cin);
          c += ids_.subtree_size(c);
        }
        break;
      }
      case RegexNode::Kind::kRepeat: {
        const RegexNode& body = *n.children[0];
        const uint32_t body_pre = pre + 1;
        if (n.max == RegexNode::kUnbounded) {
          // loop: epsilon to `out` and to the body, which returns to loop.
          auto loop = NewState();
          if (!loop.ok()) return loop;
          auto bin = Build(body, body_pre, *loop);
          if (!bin.ok()) return bin;
          eps_.emplace_back(*loop, *bin);
          eps_.emplace_back(*loop, out);
          in = *loop;
        } else {
          // Optional copies, innermost first: x{0,2} is (x(x)?)?.
          for (uint32_t i = n.min; i < n.max; ++i) {
            auto opt = NewState();
            if (!opt.ok()) return opt;
            auto bin = Build(body, body_pre, in);
            if (!bin.ok()) return bin;
            eps_.emplace_back(*opt, *bin);
            eps_.emplace_back(*opt, out);
            in = *opt;
          }
        }
        for (uint32_t i = 0; i < n.min; ++i) {
          auto bin = Build(body, body_pre, in);
          if (!bin.ok()) return bin;
          in = *bin;
        }
        break;
      }
    }
    memo_.emplace(key, in);
    return in;
  }

  // A state matching one codepoint of `set` (as UTF-8) and then L(out).
  absl::StatusOr<uint32_t> AddSet(const CodepointSet& set, uint32_t out) {
    seqs_.clear();
    for (const auto& [lo, hi] : set.ranges()) Utf8Sequences(lo, hi, &seqs_);
    auto in = NewState();
    if (!in.ok()) return in;
    for (const ByteSeq& q : seqs_) {
      uint32_t t = out;
      for (int i = q.len - 1; i >= 1; --i) {
        auto s = Tail(q.lo[i], q.hi[i], t);
        if (!s.ok()) return s;
        t = *s;
      }
      edges_.push_back({*in, t, q.lo[0], q.hi[0]});
    }
    return in;
  }

  // The shared state whose only edge is [lo, hi] -> t.
  absl::StatusOr<uint32_t> Tail(uint8_t lo, uint8_t hi, uint32_t t) {
    const uint64_t key = (static_cast<uint64_t>(t) << 16) | (lo << 8) | hi;
    if (auto it = tails_.find(key); it != tails_.end()) return it->second;
    auto s = NewState();
    if (!s.ok()) return s;
    edges_.push_back({*s, t, lo, hi});
    tails_.emplace(key, *s);
    return s;
  }

  const DfaOptions& options_;
  const RegexNode& root_;
  NodeIds ids_;
  uint32_t num_states_ = 0;
  std::vector<std::pair<uint32_t, uint32_t>> eps_;  // (from, to)
  std::vector<ByteEdge> edges_;
  absl::flat_hash_map<uint64_t, uint32_t> memo_;   // (node id, out) -> in
  absl::flat_hash_map<uint64_t, uint32_t> tails_;  // (t, lo, hi) -> state
  std::vector<uint32_t> child_pre_;                // stack for kConcat
  std::vector<ByteSeq> seqs_;
  uint64_t steps_ = 0;
};

// The NFA in compressed rows, with byte ranges turned into class ranges.
struct CompactNfa {
  struct Edge {
    uint32_t to;
    uint16_t lo, hi;  // byte classes, inclusive
  };
  uint32_t num_states = 0;
  uint32_t match = 0;
  std::vector<uint32_t> edge_begin;  // num_states + 1
  std::vector<Edge> edges;
  std::vector<uint32_t> eps_begin;   // num_states + 1
  std::vector<uint32_t> eps_to;
};

// Epsilon closures restricted to "important" states (with byte edges, or the
// match state), computed once per NFA state on first use and kept sorted.
class Closures {
 public:
  explicit Closures(const CompactNfa& nfa)
      : nfa_(nfa), begin_(nfa.num_states, kUnknown), end_(nfa.num_states, 0),
        mark_(nfa.num_states, 0) {}

  // Invalidated by the next call.
  absl::Span<const uint32_t> Get(uint32_t s) {
    if (begin_[s] == kUnknown) Compute(s);
    return absl::MakeConstSpan(pool_.data() + begin_[s], end_[s] - begin_[s]);
  }

 private:
  static constexpr uint32_t kUnknown = 0xFFFFFFFFu;

  bool Important(uint32_t s) const {
    return s == nfa_.match || nfa_.edge_begin[s] != nfa_.edge_begin[s + 1];
  }

  void Compute(uint32_t s) {
    ++generation_;
    const size_t first = pool_.size();
    stack_.assign(1, s);
    mark_[s] = generation_;
    while (!stack_.empty()) {
      uint32_t x = stack_.back();
      stack_.pop_back();
      if (Important(x)) pool_.push_back(x);
      for (uint32_t i = nfa_.eps_begin[x]; i < nfa_.eps_begin[x + 1]; ++i) {
        uint32_t t = nfa_.eps_to[i];
        if (mark_[t] != generation_) {
          mark_[t] = generation_;
          stack_.push_back(t);
        }
      }
    }
    std::sort(pool_.begin() + first, pool_.end());
    begin_[s] = static_cast<uint32_t>(first);
    end_[s] = static_cast<uint32_t>(pool_.size());
  }

  const CompactNfa& nfa_;
  std::vector<uint32_t> pool_;
  std::vector<uint32_t> begin_, end_;  // per NFA state: its closure in pool_
  std::vector<uint32_t> mark_;
  uint32_t generation_ = 0;
  std::vector<uint32_t> stack_;
};

}  // namespace

// Builds a Dfa; a class so it can fill Dfa's private fields.
class DfaBuilder {
 public:
  static absl::StatusOr<std::shared_ptr<const Dfa>> Build(const Regex& regex, const DfaOptions& options);
};

namespace {

// Groups equal columns of a dense table (state-major, `n` rows, `k` columns):
// sets (*group_of)[c] for every column, groups numbered in order of their
// first column, and returns the first column of each group. Two row-major
// passes: a running hash per column, then a check against the group's first
// column (a hash collision falls back to exact comparison).
std::vector<uint32_t> GroupEqualColumns(const std::vector<uint32_t>& table, uint32_t n, uint32_t k,
                                        std::vector<uint32_t>* group_of) {
  std::vector<uint64_t> hash(k, 0x9E3779B97F4A7C15ull);
  for (uint32_t s = 0; s < n; ++s) {
    const uint32_t* row = &table[static_cast<size_t>(s) * k];
    for (uint32_t c = 0; c < k; ++c) {
      uint64_t h = (hash[c] ^ row[c]) * 0xFF51AFD7ED558CCDull;
      hash[c] = h ^ (h >> 29);
    }
  }
  // Candidate: the first column with the same hash.
  std::vector<uint32_t> cand(k);
  {
    absl::flat_hash_map<uint64_t, uint32_t> first;
    for (uint32_t c = 0; c < k; ++c) cand[c] = first.try_emplace(hash[c], c).first->second;
  }
  std::vector<uint8_t> ok(k, 1);
  for (uint32_t s = 0; s < n; ++s) {
    const uint32_t* row = &table[static_cast<size_t>(s) * k];
    for (uint32_t c = 0; c < k; ++c) {
      if (row[c] != row[cand[c]]) ok[c] = 0;
    }
  }
  auto equal = [&](uint32_t a, uint32_t b) {
    for (uint32_t s = 0; s < n; ++s) {
      if (table[static_cast<size_t>(s) * k + a] != table[static_cast<size_t>(s) * k + b]) return false;
    }
    return true;
  };
  std::vector<uint32_t> reps;
  group_of->assign(k, 0);
  for (uint32_t c = 0; c < k; ++c) {
    uint32_t rep = c;
    if (ok[c] && cand[c] != c) {
      rep = cand[c];
    } else if (!ok[c]) {
      for (uint32_t r : reps) {
        if (equal(r, c)) {
          rep = r;
          break;
        }
      }
    }
    if (rep == c) {
      (*group_of)[c] = static_cast<uint32_t>(reps.size());
      reps.push_back(c);
    } else {
      (*group_of)[c] = (*group_of)[rep];
    }
  }
  return reps;
}

// The columns `reps` of a dense table with `k` columns, as a new table.
std::vector<uint32_t> SelectColumns(const std::vector<uint32_t>& table, uint32_t n, uint32_t k,
                                    const std::vector<uint32_t>& reps) {
  const size_t nk = reps.size();
  std::vector<uint32_t> out(static_cast<size_t>(n) * nk);
  for (uint32_t s = 0; s < n; ++s) {
    for (size_t j = 0; j < nk; ++j) out[s * nk + j] = table[static_cast<size_t>(s) * k + reps[j]];
  }
  return out;
}

// Minimizes a complete DFA given as a dense table (state-major, `k` columns),
// with state 0 dead. Returns the block of each state; the dead state's block
// is 0. Hopcroft's algorithm over inverse transitions, with two savings that
// keep its result: transitions into the dead state are never scanned (the dead
// block is the one initial block left out of the worklist, and it never splits,
// having one state), and a splitter (B, c) is queued only when some
// c-transition enters B, since one with an empty preimage splits nothing.
absl::StatusOr<std::vector<uint32_t>> Minimize(const std::vector<uint32_t>& table,
                                               const std::vector<uint8_t>& accepting,
                                               uint32_t n, uint32_t k,
                                               const NfaBuilder& abort_check,
                                               uint32_t* num_blocks) {
  // Inverse live transitions, CSR over (target, class): entry t * k + c, so
  // the splitters (t, c) for one block, queued together, read nearby entries.
  // in_classes: per target state, a bitmap (`words` words) of the classes
  // with a live transition into it.
  const uint32_t words = (k + 63) / 64;
  std::vector<uint64_t> in_classes(static_cast<size_t>(n) * words, 0);
  std::vector<uint32_t> inv_begin(static_cast<size_t>(k) * n + 1, 0);
  for (uint32_t s = 0; s < n; ++s) {
    const uint32_t* row = &table[static_cast<size_t>(s) * k];
    for (uint32_t c = 0; c < k; ++c) {
      const uint32_t t = row[c];
      if (t != 0) {
        ++inv_begin[static_cast<size_t>(t) * k + c + 1];
        in_classes[static_cast<size_t>(t) * words + c / 64] |= uint64_t{1} << (c % 64);
      }
    }
  }
  for (size_t i = 1; i < inv_begin.size(); ++i) inv_begin[i] += inv_begin[i - 1];
  std::vector<uint32_t> inv(inv_begin.back());
  {
    std::vector<uint32_t> fill(inv_begin.begin(), inv_begin.end() - 1);
    for (uint32_t s = 0; s < n; ++s) {
      const uint32_t* row = &table[static_cast<size_t>(s) * k];
      for (uint32_t c = 0; c < k; ++c) {
        if (row[c] != 0) inv[fill[static_cast<size_t>(row[c]) * k + c]++] = s;
      }
    }
  }

  // Partition: elems ordered by block; block b owns elems[first[b], end[b]).
  std::vector<uint32_t> elems(n), pos(n), block(n);
  std::vector<uint32_t> first, end, marked;
  {
    // Initial blocks: dead (state 0 alone), non-accepting live, accepting.
    uint32_t count[3] = {0, 0, 0};
    auto group = [&](uint32_t s) { return s == 0 ? 0 : (accepting[s] ? 2 : 1); };
    for (uint32_t s = 0; s < n; ++s) ++count[group(s)];
    uint32_t gblock[3] = {0, 0, 0}, fill[3] = {0, 0, 0};
    uint32_t i = 0;
    for (int g = 0; g < 3; ++g) {
      if (count[g] == 0) continue;
      gblock[g] = static_cast<uint32_t>(first.size());
      fill[g] = i;
      first.push_back(i);
      i += count[g];
      end.push_back(i);
      marked.push_back(0);
    }
    for (uint32_t s = 0; s < n; ++s) {
      int g = group(s);
      elems[fill[g]] = s;
      pos[s] = fill[g]++;
      block[s] = gblock[g];
    }
  }
  // Worklist of (block, class) splitters, used as a stack.
  std::vector<std::pair<uint32_t, uint32_t>> work;
  std::vector<uint8_t> in_work;  // [block * k + class]
  auto add_work = [&](uint32_t b, uint32_t c) {
    size_t idx = static_cast<size_t>(b) * k + c;
    if (in_work.size() <= idx) in_work.resize((static_cast<size_t>(b) + 1) * k, 0);
    if (!in_work[idx]) {
      in_work[idx] = 1;
      work.emplace_back(b, c);
    }
  };
  // The classes with a live transition into block b.
  std::vector<uint64_t> into(words);
  auto classes_into = [&](uint32_t b) {
    std::fill(into.begin(), into.end(), 0);
    for (uint32_t i = first[b]; i < end[b]; ++i) {
      const uint64_t* w = &in_classes[static_cast<size_t>(elems[i]) * words];
      for (uint32_t j = 0; j < words; ++j) into[j] |= w[j];
    }
  };
  auto has_class = [&](uint32_t c) { return (into[c / 64] >> (c % 64)) & 1; };
  for (uint32_t b = 1; b < first.size(); ++b) {  // all but the dead block 0
    classes_into(b);
    for (uint32_t c = 0; c < k; ++c) {
      if (has_class(c)) add_work(b, c);
    }
  }

  std::vector<uint32_t> touched;
  std::vector<uint32_t> splitter;
  uint64_t iterations = 0;
  while (!work.empty()) {
    auto [b, c] = work.back();
    work.pop_back();
    in_work[static_cast<size_t>(b) * k + c] = 0;
    if (++iterations % 1024 == 0) {
      if (auto s = abort_check.CheckAbort(); !s.ok()) return s;
    }
    // Snapshot the splitter block (it may be split while we mark).
    splitter.assign(elems.begin() + first[b], elems.begin() + end[b]);
    touched.clear();
    for (uint32_t t : splitter) {
      size_t base = static_cast<size_t>(t) * k + c;
      for (uint32_t i = inv_begin[base]; i < inv_begin[base + 1]; ++i) {
        uint32_t s = inv[i];
        uint32_t y = block[s];
        // Move s to the marked prefix of its block.
        uint32_t mpos = first[y] + marked[y];
        if (pos[s] < mpos) continue;  // already marked
        uint32_t other = elems[mpos];
        std::swap(elems[pos[s]], elems[mpos]);
        pos[other] = pos[s];
        pos[s] = mpos;
        if (marked[y]++ == 0) touched.push_back(y);
      }
    }
    for (uint32_t y : touched) {
      uint32_t m = marked[y];
      marked[y] = 0;
      uint32_t size = end[y] - first[y];
      if (m == size) continue;  // whole block marked: no split
      // Split: the marked prefix becomes a new block z.
      uint32_t z = static_cast<uint32_t>(first.size());
      first.push_back(first[y]);
      end.push_back(first[y] + m);
      marked.push_back(0);
      first[y] += m;
      for (uint32_t i = first[z]; i < end[z]; ++i) block[elems[i]] = z;
      // A pending (y, cc) now needs both halves; otherwise the smaller half
      // suffices (Hopcroft).
      const uint32_t smaller = m <= size - m ? z : y;
      classes_into(smaller);
      for (uint32_t cc = 0; cc < k; ++cc) {
        size_t yi = static_cast<size_t>(y) * k + cc;
        if (yi < in_work.size() && in_work[yi]) {
          add_work(z, cc);
        } else if (has_class(cc)) {
          add_work(smaller, cc);
        }
      }
    }
  }
  *num_blocks = static_cast<uint32_t>(first.size());
  return block;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Dfa>> DfaBuilder::Build(const Regex& regex,
                                                             const DfaOptions& options) {
  NfaBuilder builder(options, regex.root());
  if (auto s = builder.CheckAbort(); !s.ok()) return s;
  auto match = builder.NewState();
  if (!match.ok()) return match.status();
  auto start = builder.BuildRoot(*match);
  if (!start.ok()) return start.status();

  // Byte classes from the NFA's range boundaries.
  std::array<uint8_t, 257> boundary{};
  boundary[0] = 1;
  for (const auto& e : builder.edges()) {
    boundary[e.lo] = 1;
    boundary[e.hi + 1] = 1;
  }
  uint8_t cls[256];
  int num_classes = 0;
  for (int b = 0; b < 256; ++b) {
    if (boundary[b]) ++num_classes;
    cls[b] = static_cast<uint8_t>(num_classes - 1);
  }
  uint32_t k = static_cast<uint32_t>(num_classes);  // columns of the tables below

  // Compressed rows of byte edges (as class ranges) and epsilon edges.
  CompactNfa nfa;
  nfa.num_states = builder.num_states();
  nfa.match = *match;
  {
    const uint32_t ns = nfa.num_states;
    nfa.edge_begin.assign(ns + 1, 0);
    for (const auto& e : builder.edges()) ++nfa.edge_begin[e.from + 1];
    for (uint32_t s = 0; s < ns; ++s) nfa.edge_begin[s + 1] += nfa.edge_begin[s];
    nfa.edges.resize(builder.edges().size());
    std::vector<uint32_t> fill(nfa.edge_begin.begin(), nfa.edge_begin.end() - 1);
    for (const auto& e : builder.edges()) nfa.edges[fill[e.from]++] = {e.to, cls[e.lo], cls[e.hi]};

    nfa.eps_begin.assign(ns + 1, 0);
    for (const auto& [from, to] : builder.eps()) ++nfa.eps_begin[from + 1];
    for (uint32_t s = 0; s < ns; ++s) nfa.eps_begin[s + 1] += nfa.eps_begin[s];
    nfa.eps_to.resize(builder.eps().size());
    fill.assign(nfa.eps_begin.begin(), nfa.eps_begin.end() - 1);
    for (const auto& [from, to] : builder.eps()) nfa.eps_to[fill[from]++] = to;
  }
  Closures closures(nfa);

  // Subset construction over byte classes. A DFA state is a sorted set of
  // important NFA states (SpanInterner id); DFA state 0 is the empty set,
  // which is dead. Row d of `table` holds k entries.
  SpanInterner sets;
  std::vector<uint32_t> table;
  std::vector<uint8_t> accepting;
  sets.Add({}, SpanInterner::Hash({}));
  table.assign(k, 0);
  accepting.push_back(0);
  auto intern = [&](absl::Span<const uint32_t> set) -> absl::StatusOr<uint32_t> {
    const uint64_t h = SpanInterner::Hash(set);
    uint32_t id = sets.Find(set, h);
    if (id != SpanInterner::kNone) return id;
    if (sets.size() >= options.max_states) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "regex: the DFA needs more than %d states (limit max_states)", options.max_states));
    }
    id = sets.Add(set, h);
    accepting.push_back(std::binary_search(set.begin(), set.end(), nfa.match) ? 1 : 0);
    table.resize(table.size() + k, 0);
    return id;
  };
  std::vector<uint32_t> scratch;
  {
    auto init = closures.Get(*start);
    scratch.assign(init.begin(), init.end());
  }
  auto start_id = intern(scratch);
  if (!start_id.ok()) return start_id.status();

  // Per DFA state: its NFA edges sorted by first class, swept over the class
  // boundaries; between two boundaries the set of targets is constant.
  std::vector<CompactNfa::Edge> out_edges, active;
  std::vector<uint16_t> bounds;
  std::vector<uint32_t> targets, prev_targets;
  std::vector<uint32_t> mark(nfa.num_states, 0);
  uint32_t generation = 0;
  for (uint32_t d = 1; d < sets.size(); ++d) {
    if (d % 64 == 0) {
      if (auto s = builder.CheckAbort(); !s.ok()) return s;
    }
    out_edges.clear();
    for (uint32_t s : sets.Get(d)) {
      out_edges.insert(out_edges.end(), nfa.edges.begin() + nfa.edge_begin[s],
                       nfa.edges.begin() + nfa.edge_begin[s + 1]);
    }
    if (out_edges.empty()) continue;  // the match state alone: all to dead
    std::sort(out_edges.begin(), out_edges.end(),
              [](const CompactNfa::Edge& a, const CompactNfa::Edge& b) { return a.lo < b.lo; });
    bounds.clear();
    for (const auto& e : out_edges) {
      bounds.push_back(e.lo);
      bounds.push_back(static_cast<uint16_t>(e.hi + 1));
    }
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    active.clear();
    prev_targets.clear();
    uint32_t prev_id = 0;
    size_t next_edge = 0;
    for (size_t bi = 0; bi + 1 < bounds.size(); ++bi) {
      const uint32_t a = bounds[bi], b = bounds[bi + 1];  // classes [a, b)
      active.erase(std::remove_if(active.begin(), active.end(),
                                  [a](const CompactNfa::Edge& e) { return e.hi < a; }),
                   active.end());
      while (next_edge < out_edges.size() && out_edges[next_edge].lo == a) {
        active.push_back(out_edges[next_edge++]);
      }
      if (active.empty()) continue;
      targets.clear();
      for (const auto& e : active) targets.push_back(e.to);
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      uint32_t id;
      if (targets == prev_targets) {
        id = prev_id;
      } else {
        absl::StatusOr<uint32_t> got;
        if (targets.size() == 1) {
          got = intern(closures.Get(targets[0]));
        } else {
          ++generation;
          scratch.clear();
          for (uint32_t t : targets) {
            for (uint32_t x : closures.Get(t)) {
              if (mark[x] != generation) {
                mark[x] = generation;
                scratch.push_back(x);
              }
            }
          }
          std::sort(scratch.begin(), scratch.end());
          got = intern(scratch);
        }
        if (!got.ok()) return got.status();
        id = *got;
        prev_targets.swap(targets);
        prev_id = id;
      }
      uint32_t* row = &table[static_cast<size_t>(d) * k];
      std::fill(row + a, row + b, id);
    }
  }
  const uint32_t n = sets.size();
  // Classes whose columns are equal in every state stay equal through pruning
  // and minimization: merge them first (cls keeps mapping bytes to columns).
  {
    std::vector<uint32_t> group_of;
    std::vector<uint32_t> reps = GroupEqualColumns(table, n, k, &group_of);
    if (reps.size() < k) {
      table = SelectColumns(table, n, k, reps);
      for (int b = 0; b < 256; ++b) cls[b] = static_cast<uint8_t>(group_of[cls[b]]);
      k = static_cast<uint32_t>(reps.size());
    }
  }

  // Live states (can reach an accepting state); the others merge into dead.
  // Predecessors in compressed rows, each source listed once per target run.
  std::vector<uint8_t> live(n, 0);
  std::vector<uint32_t> queue;
  {
    std::vector<uint32_t> pred_begin(n + 1, 0);
    for (uint32_t s = 1; s < n; ++s) {
      const uint32_t* row = &table[static_cast<size_t>(s) * k];
      for (uint32_t c = 0; c < k; ++c) {
        if (row[c] != 0 && (c == 0 || row[c] != row[c - 1])) ++pred_begin[row[c] + 1];
      }
    }
    for (uint32_t s = 0; s < n; ++s) pred_begin[s + 1] += pred_begin[s];
    std::vector<uint32_t> preds(pred_begin[n]);
    std::vector<uint32_t> fill(pred_begin.begin(), pred_begin.end() - 1);
    for (uint32_t s = 1; s < n; ++s) {
      const uint32_t* row = &table[static_cast<size_t>(s) * k];
      for (uint32_t c = 0; c < k; ++c) {
        if (row[c] != 0 && (c == 0 || row[c] != row[c - 1])) preds[fill[row[c]]++] = s;
      }
    }
    for (uint32_t s = 1; s < n; ++s) {
      if (accepting[s]) {
        live[s] = 1;
        queue.push_back(s);
      }
    }
    for (size_t i = 0; i < queue.size(); ++i) {
      const uint32_t t = queue[i];
      for (uint32_t j = pred_begin[t]; j < pred_begin[t + 1]; ++j) {
        uint32_t p = preds[j];
        if (!live[p]) {
          live[p] = 1;
          queue.push_back(p);
        }
      }
    }
  }
  // Merge non-live states into the dead state 0 and renumber the live ones.
  std::vector<uint32_t> remap(n);
  uint32_t m = 0;
  for (uint32_t s = 0; s < n; ++s) remap[s] = (s == 0 || !live[s]) ? 0 : ++m;
  const uint32_t nl = m + 1;
  std::vector<uint32_t> ltable;
  std::vector<uint8_t> lacc;
  if (nl == n) {
    ltable = std::move(table);  // all live: remap is the identity
    lacc = std::move(accepting);
  } else {
    ltable.assign(static_cast<size_t>(nl) * k, 0);
    lacc.assign(nl, 0);
    for (uint32_t s = 1; s < n; ++s) {
      if (!live[s]) continue;
      for (uint32_t c = 0; c < k; ++c) {
        ltable[static_cast<size_t>(remap[s]) * k + c] = remap[table[static_cast<size_t>(s) * k + c]];
      }
      lacc[remap[s]] = accepting[s];
    }
    table.clear();
    table.shrink_to_fit();
  }
  const uint32_t lstart = remap[*start_id];

  uint32_t num_blocks = 0;
  auto blocks = Minimize(ltable, lacc, nl, k, builder, &num_blocks);
  if (!blocks.ok()) return blocks.status();

  // Renumber blocks: dead -> 0, then breadth-first from the start state.
  auto dfa = std::shared_ptr<Dfa>(new Dfa());
  std::vector<uint32_t> rep(num_blocks, UINT32_MAX);  // a state of each block
  for (uint32_t s = 0; s < nl; ++s) {
    if (rep[(*blocks)[s]] == UINT32_MAX) rep[(*blocks)[s]] = s;
  }
  std::vector<uint32_t> order(num_blocks, UINT32_MAX);
  uint32_t next_id = 0;
  order[(*blocks)[0]] = next_id++;
  std::vector<uint32_t> bfs;
  if (lstart != 0) {
    order[(*blocks)[lstart]] = next_id++;
    bfs.push_back((*blocks)[lstart]);
  }
  for (size_t i = 0; i < bfs.size(); ++i) {
    uint32_t s = rep[bfs[i]];
    for (uint32_t c = 0; c < k; ++c) {
      uint32_t b = (*blocks)[ltable[static_cast<size_t>(s) * k + c]];
      if (order[b] == UINT32_MAX) {
        order[b] = next_id++;
        bfs.push_back(b);
      }
    }
  }
  const uint32_t final_n = next_id;  // reachable blocks only

  // Final table with one column per NFA byte class, then merge classes whose
  // columns are identical in every state.
  std::vector<uint32_t> full(static_cast<size_t>(final_n) * k, Dfa::kDead);
  std::vector<uint8_t> final_acc(final_n, 0);
  for (uint32_t b = 0; b < num_blocks; ++b) {
    if (order[b] == UINT32_MAX) continue;
    uint32_t s = rep[b];
    uint32_t id = order[b];
    final_acc[id] = (b == (*blocks)[0]) ? 0 : lacc[s];
    for (uint32_t c = 0; c < k; ++c) {
      full[static_cast<size_t>(id) * k + c] = order[(*blocks)[ltable[static_cast<size_t>(s) * k + c]]];
    }
  }
  ltable.clear();
  ltable.shrink_to_fit();
  std::vector<uint32_t> col_of_class;  // column of `full` -> merged column
  const std::vector<uint32_t> col_rep = GroupEqualColumns(full, final_n, k, &col_of_class);
  const uint32_t fk = static_cast<uint32_t>(col_rep.size());

  dfa->num_states_ = final_n;
  dfa->num_classes_ = fk;
  for (int b = 0; b < 256; ++b) dfa->byte_class_[b] = static_cast<uint8_t>(col_of_class[cls[b]]);
  dfa->table_ = SelectColumns(full, final_n, k, col_rep);
  dfa->accepting_ = std::move(final_acc);
  dfa->start_ = lstart == 0 ? Dfa::kDead : order[(*blocks)[lstart]];

  // Distance to accept: breadth-first over reversed edges (compressed rows).
  dfa->distance_.assign(final_n, Dfa::kNoDistance);
  {
    std::vector<uint32_t> rbegin(final_n + 1, 0);
    for (uint32_t s = 1; s < final_n; ++s) {
      for (uint32_t j = 0; j < fk; ++j) {
        uint32_t t = dfa->table_[static_cast<size_t>(s) * fk + j];
        if (t != Dfa::kDead) ++rbegin[t + 1];
      }
    }
    for (uint32_t s = 0; s < final_n; ++s) rbegin[s + 1] += rbegin[s];
    std::vector<uint32_t> rpreds(rbegin[final_n]);
    std::vector<uint32_t> fill(rbegin.begin(), rbegin.end() - 1);
    for (uint32_t s = 1; s < final_n; ++s) {
      for (uint32_t j = 0; j < fk; ++j) {
        uint32_t t = dfa->table_[static_cast<size_t>(s) * fk + j];
        if (t != Dfa::kDead) rpreds[fill[t]++] = s;
      }
    }
    queue.clear();
    for (uint32_t s = 1; s < final_n; ++s) {
      if (dfa->accepting_[s]) {
        dfa->distance_[s] = 0;
        queue.push_back(s);
      }
    }
    for (size_t i = 0; i < queue.size(); ++i) {
      uint32_t t = queue[i];
      for (uint32_t j = rbegin[t]; j < rbegin[t + 1]; ++j) {
        uint32_t p = rpreds[j];
        if (dfa->distance_[p] == Dfa::kNoDistance) {
          dfa->distance_[p] = dfa->distance_[t] + 1;
          queue.push_back(p);
        }
      }
    }
    // Breadth-first: the last state reached is the farthest.
    dfa->max_distance_ = queue.empty() ? 0 : dfa->distance_[queue.back()];
  }

  // Forced bytes: a non-accepting state with exactly one live byte, i.e. one
  // live class and that class a single byte.
  std::vector<uint16_t> class_bytes(fk, 0);  // bytes per final class
  std::vector<int16_t> class_byte(fk, 0);    // some byte of each final class
  for (int b = 0; b < 256; ++b) {
    ++class_bytes[dfa->byte_class_[b]];
    class_byte[dfa->byte_class_[b]] = static_cast<int16_t>(b);
  }
  dfa->forced_byte_.assign(final_n, -1);
  for (uint32_t s = 1; s < final_n; ++s) {
    if (dfa->accepting_[s]) continue;
    int live_bytes = 0;
    int forced = -1;
    for (uint32_t j = 0; j < fk && live_bytes < 2; ++j) {
      if (dfa->table_[static_cast<size_t>(s) * fk + j] != Dfa::kDead) {
        live_bytes += class_bytes[j];
        forced = class_byte[j];
      }
    }
    if (live_bytes == 1) dfa->forced_byte_[s] = static_cast<int16_t>(forced);
  }
  return std::shared_ptr<const Dfa>(std::move(dfa));
}

absl::StatusOr<std::shared_ptr<const Dfa>> Dfa::Compile(const Regex& regex, const DfaOptions& options) {
  return DfaBuilder::Build(regex, options);
}

absl::StatusOr<std::shared_ptr<const Dfa>> Dfa::FromPattern(std::string_view pattern,
                                                            const RegexLimits& limits,
                                                            const DfaOptions& options) {
  auto re = Regex::Parse(pattern, limits);
  if (!re.ok()) return re.status();
  return Compile(*re, options);
}

Dfa::State Dfa::WidestSuccessor(State s, uint32_t* bytes, uint32_t* self_bytes) const {
  uint32_t class_size[256] = {};
  for (int b = 0; b < 256; ++b) ++class_size[byte_class_[b]];
  // Bytes per successor, summed over classes (few distinct successors).
  std::vector<std::pair<State, uint32_t>> to;
  uint32_t self = 0;
  for (uint32_t c = 0; c < num_classes_; ++c) {
    const State t = table_[static_cast<size_t>(s) * num_classes_ + c];
    if (t == kDead) continue;
    if (t == s) {
      self += class_size[c];
      continue;
    }
    auto it = std::find_if(to.begin(), to.end(), [&](const auto& p) { return p.first == t; });
    if (it == to.end()) {
      to.emplace_back(t, class_size[c]);
    } else {
      it->second += class_size[c];
    }
  }
  State best = kDead;
  uint32_t most = 0;
  for (const auto& [t, n] : to) {
    if (n > most || (n == most && t < best)) {
      best = t;
      most = n;
    }
  }
  if (bytes != nullptr) *bytes = most;
  if (self_bytes != nullptr) *self_bytes = self;
  return best;
}

bool Dfa::Matches(std::string_view text) const {
  State s = Walk(start_, text);
  return s != kDead && IsAccepting(s);
}

size_t Dfa::MemoryBytes() const {
  return sizeof(Dfa) + table_.capacity() * sizeof(State) + accepting_.capacity() +
         distance_.capacity() * sizeof(uint32_t) + forced_byte_.capacity() * sizeof(int16_t);
}

}  // namespace maskd
