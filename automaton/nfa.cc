#include "automaton/internal/nfa.h"

#include <array>
#include <optional>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "automaton/internal/build_abort.h"
#include "automaton/internal/span_interner.h"
#include "automaton/internal/utf8_ranges.h"

namespace maskd::automaton_internal {
namespace {

// Structural ids for syntax tree nodes: two subtrees get the same id exactly
// when they are equal. Nodes are numbered in preorder; the children of node
// `i` start at i + 1 and child j + 1 starts size(child j) after child j.
class NodeIds {
 public:
  explicit NodeIds(const RegexNode& root) {
    // Postorder over an explicit stack: trees nest as deep as the parser's
    // max_nesting allows, deeper than a recursive walk's frames fit in a
    // default thread's stack under the sanitizers.
    struct Frame {
      const RegexNode* node;
      uint32_t pre;
      size_t next_child;
    };
    std::vector<Frame> stack;
    auto enter = [&](const RegexNode& n) {
      stack.push_back({&n, static_cast<uint32_t>(ids_.size()), 0});
      ids_.push_back(0);
      sizes_.push_back(0);
    };
    enter(root);
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next_child < f.node->children.size()) {
        enter(*f.node->children[f.next_child++]);
        continue;
      }
      Number(*f.node, f.pre);
      stack.pop_back();
    }
  }
  uint32_t id(uint32_t pre) const { return ids_[pre]; }
  uint32_t subtree_size(uint32_t pre) const { return sizes_[pre]; }
  uint32_t num_ids() const { return keys_.size(); }

 private:
  // Gives node n (preorder index `pre`), whose children are numbered, its id.
  void Number(const RegexNode& n, uint32_t pre) {
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
      : options_(options), root_(root), ids_(root), seqs_of_id_(ids_.num_ids(), kNoSeqs) {}

  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<uint32_t> NewState() {
    if (num_states_ >= options_.max_nfa_states) return StateLimitError();
    return num_states_++;
  }

  absl::Status StateLimitError() const {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "regex: the automaton needs more than %d NFA states (limit max_nfa_states)",
        options_.max_nfa_states));
  }

  // Builds the whole regex in front of `out`; returns the start state.
  absl::StatusOr<uint32_t> BuildRoot(uint32_t out) { return Build(root_, 0, out); }

  uint32_t num_states() const { return num_states_; }
  const std::vector<std::pair<uint32_t, uint32_t>>& eps() const { return eps_; }
  const std::vector<ByteEdge>& edges() const { return edges_; }

 private:
  // `pre` is n's preorder index (see NodeIds). Recursive to the tree's depth
  // (the parser's max_nesting bounds it), so its frame holds only what the
  // recursion needs; the rest is in out-of-line helpers.
  absl::StatusOr<uint32_t> Build(const RegexNode& n, uint32_t pre, uint32_t out) {
    if (n.kind == RegexNode::Kind::kEmpty) return out;
    const uint64_t key = (static_cast<uint64_t>(ids_.id(pre)) << 32) | out;
    if (uint32_t in = FindMemo(key); in != kNoState) return in;
    if (auto tick = Tick(); !tick.ok()) return tick;
    absl::StatusOr<uint32_t> s = out;
    uint32_t in = out;
    switch (n.kind) {
      case RegexNode::Kind::kEmpty:
        break;
      case RegexNode::Kind::kSet:
        s = AddSet(ids_.id(pre), n.set, out);
        if (!s.ok()) return s;
        in = *s;
        break;
      case RegexNode::Kind::kConcat: {
        // Children back to front, each in front of the next one's start.
        const size_t base = PushChildren(n, pre);
        for (size_t j = n.children.size(); j-- > 0;) {
          s = Build(*n.children[j], child_pre_[base + j], in);
          if (!s.ok()) return s;
          in = *s;
        }
        child_pre_.resize(base);
        break;
      }
      case RegexNode::Kind::kAlternate: {
        s = NewState();
        if (!s.ok()) return s;
        in = *s;
        for (uint32_t j = 0, c = pre + 1; j < n.children.size(); ++j) {
          s = Build(*n.children[j], c, out);
          if (!s.ok()) return s;
          AddEps(in, *s);
          c += ids_.subtree_size(c);
        }
        break;
      }
      case RegexNode::Kind::kRepeat: {
        const RegexNode& body = *n.children[0];
        const uint32_t body_pre = pre + 1;
        if (n.max == RegexNode::kUnbounded) {
          // loop: epsilon to `out` and to the body, which returns to loop.
          s = NewState();
          if (!s.ok()) return s;
          const uint32_t loop = *s;
          s = Build(body, body_pre, loop);
          if (!s.ok()) return s;
          AddEps(loop, *s);
          AddEps(loop, out);
          in = loop;
        }
        const uint32_t copies = n.min + (n.max == RegexNode::kUnbounded ? 0 : n.max - n.min);
        if (copies == 0) break;
        Copier copier(body, body_pre, copies);
        if (n.max != RegexNode::kUnbounded) {
          // Optional copies, innermost first: x{0,2} is (x(x)?)?.
          for (uint32_t i = n.min; i < n.max; ++i) {
            s = NewState();
            if (!s.ok()) return s;
            const uint32_t opt = *s;
            s = CopyBody(&copier, in);
            if (!s.ok()) return s;
            AddEps(opt, *s);
            AddEps(opt, out);
            in = opt;
          }
        }
        for (uint32_t i = 0; i < n.min; ++i) {
          s = CopyBody(&copier, in);
          if (!s.ok()) return s;
          in = *s;
        }
        break;
      }
    }
    SaveMemo(key, in);
    return in;
  }

  static constexpr uint32_t kNoState = ~uint32_t{0};

  ABSL_ATTRIBUTE_NOINLINE uint32_t FindMemo(uint64_t key) const {
    auto it = memo_.find(key);
    return it == memo_.end() ? kNoState : it->second;
  }
  ABSL_ATTRIBUTE_NOINLINE void SaveMemo(uint64_t key, uint32_t in) { memo_.emplace(key, in); }
  ABSL_ATTRIBUTE_NOINLINE void AddEps(uint32_t from, uint32_t to) { eps_.emplace_back(from, to); }

  // The build's abort check (deadline, cancellation), every 4096 steps (a
  // Build call, or a copied state).
  ABSL_ATTRIBUTE_NOINLINE absl::Status Tick(uint64_t steps = 1) {
    const uint64_t before = steps_;
    steps_ += steps;
    return before / 4096 != steps_ / 4096 ? CheckBuildAbort(options_) : absl::OkStatus();
  }

  // Pushes the preorder indices of n's children onto child_pre_; returns
  // where they start.
  ABSL_ATTRIBUTE_NOINLINE size_t PushChildren(const RegexNode& n, uint32_t pre) {
    const size_t base = child_pre_.size();
    for (uint32_t j = 0, c = pre + 1; j < n.children.size(); ++j) {
      child_pre_.push_back(c);
      c += ids_.subtree_size(c);
    }
    return base;
  }

  // A state matching one codepoint of `set` (as UTF-8) and then L(out);
  // `id` is the set node's structural id (its byte sequences are computed
  // once per id).
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<uint32_t> AddSet(uint32_t id, const CodepointSet& set,
                                                          uint32_t out) {
    if (seqs_of_id_[id] == kNoSeqs) {
      const uint32_t first = static_cast<uint32_t>(seqs_.size());
      for (const auto& [lo, hi] : set.ranges()) Utf8Sequences(lo, hi, &seqs_);
      seqs_of_id_[id] = {first, static_cast<uint32_t>(seqs_.size())};
    }
    const auto [first, end] = seqs_of_id_[id];
    auto in = NewState();
    if (!in.ok()) return in;
    for (uint32_t k = first; k < end; ++k) {
      const ByteSeq& q = seqs_[k];
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

  // A repeat's body built once in front of `hole`, a fresh state that no
  // state built before reaches: its states are [first_state, end_state),
  // every edge from them is in edges_[first_edge, end_edge) and eps_[first_eps,
  // end_eps) (states are given edges only while built), and what they reach
  // is `hole`, one of them, or a state built before that does not depend on
  // the continuation.
  struct Template {
    uint32_t hole, in;
    uint32_t first_state, end_state;
    size_t first_edge, end_edge, first_eps, end_eps;
  };

  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<Template> BuildTemplate(const RegexNode& body,
                                                                 uint32_t body_pre) {
    Template t;
    auto hole = NewState();
    if (!hole.ok()) return hole.status();
    t.hole = *hole;
    t.first_state = num_states_;
    t.first_edge = edges_.size();
    t.first_eps = eps_.size();
    auto in = Build(body, body_pre, t.hole);
    if (!in.ok()) return in.status();
    t.in = *in;
    t.end_state = num_states_;
    t.end_edge = edges_.size();
    t.end_eps = eps_.size();
    return t;
  }

  // What Build(body, out) would build, as a copy of `t` with `out` for its
  // hole: a repeat's copies cost a copy of its edges, not a build each.
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<uint32_t> Copy(const Template& t, uint32_t out) {
    const uint32_t size = t.end_state - t.first_state;
    if (num_states_ + uint64_t{size} > uint64_t{options_.max_nfa_states}) return StateLimitError();
    if (auto tick = Tick(size); !tick.ok()) return tick;
    const uint32_t base = num_states_;
    num_states_ += size;
    auto map = [&](uint32_t s) {
      if (s == t.hole) return out;
      return s >= t.first_state && s < t.end_state ? s - t.first_state + base : s;
    };
    for (size_t e = t.first_edge; e < t.end_edge; ++e) {
      const ByteEdge edge = edges_[e];
      edges_.push_back({map(edge.from), map(edge.to), edge.lo, edge.hi});
    }
    for (size_t e = t.first_eps; e < t.end_eps; ++e) {
      const auto [from, to] = eps_[e];
      eps_.emplace_back(map(from), map(to));
    }
    return map(t.in);
  }

  // The template itself made a copy in front of `out`: its hole's edges
  // point to `out`. Memo and tail entries keyed by the hole go stale, but the
  // hole is never a continuation again.
  uint32_t FillHole(const Template& t, uint32_t out) {
    for (size_t e = t.first_edge; e < t.end_edge; ++e) {
      if (edges_[e].to == t.hole) edges_[e].to = out;
    }
    for (size_t e = t.first_eps; e < t.end_eps; ++e) {
      if (eps_[e].second == t.hole) eps_[e].second = out;
    }
    return t.in == t.hole ? out : t.in;
  }

  // The copies of a repeat's body, each in front of its own continuation.
  struct Copier {
    Copier(const RegexNode& body, uint32_t body_pre, uint32_t copies)
        : body(body), body_pre(body_pre), left(copies) {}
    const RegexNode& body;
    const uint32_t body_pre;
    uint32_t left;                     // copies still to make
    std::optional<Template> built;     // once a copy needed a build
  };

  // What Build(c->body, out) returns, for the next of c's copies: the memo's
  // state when there is one (x+ builds x twice in front of its loop), else a
  // copy of a template built once for the repeat (the last copy being the
  // template itself), or a build when only one copy is left to make.
  absl::StatusOr<uint32_t> CopyBody(Copier* c, uint32_t out) {
    --c->left;
    const uint64_t key = (static_cast<uint64_t>(ids_.id(c->body_pre)) << 32) | out;
    // A template left unfilled by a memo hit on the last copy is unreachable
    // (nothing points to its states) and harmless.
    if (uint32_t in = FindMemo(key); in != kNoState) return in;
    if (!c->built && c->left == 0) return Build(c->body, c->body_pre, out);
    if (!c->built) {
      auto t = BuildTemplate(c->body, c->body_pre);
      if (!t.ok()) return t.status();
      c->built = *t;
    }
    absl::StatusOr<uint32_t> in = c->left == 0 ? FillHole(*c->built, out) : Copy(*c->built, out);
    if (in.ok()) SaveMemo(key, *in);
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
  // Set node id -> its UTF-8 byte sequences, [begin, end) of seqs_ (kNoSeqs
  // until the set is first built).
  static constexpr std::pair<uint32_t, uint32_t> kNoSeqs = {~uint32_t{0}, 0};
  std::vector<std::pair<uint32_t, uint32_t>> seqs_of_id_;
  std::vector<ByteSeq> seqs_;
  uint64_t steps_ = 0;
};

}  // namespace

absl::StatusOr<CompactNfa> BuildNfa(const Regex& regex, const DfaOptions& options) {
  NfaBuilder builder(options, regex.root());
  if (auto s = CheckBuildAbort(options); !s.ok()) return s;
  auto match = builder.NewState();
  if (!match.ok()) return match.status();
  auto start = builder.BuildRoot(*match);
  if (!start.ok()) return start.status();

  CompactNfa nfa;
  // Byte classes from the NFA's range boundaries.
  std::array<uint8_t, 257> boundary{};
  boundary[0] = 1;
  for (const auto& e : builder.edges()) {
    boundary[e.lo] = 1;
    boundary[e.hi + 1] = 1;
  }
  int num_classes = 0;
  for (int b = 0; b < 256; ++b) {
    if (boundary[b]) ++num_classes;
    nfa.byte_class[b] = static_cast<uint8_t>(num_classes - 1);
  }
  nfa.num_classes = static_cast<uint32_t>(num_classes);
  const uint8_t* cls = nfa.byte_class;

  // Compressed rows of byte edges (as class ranges) and epsilon edges.
  nfa.num_states = builder.num_states();
  nfa.start = *start;
  nfa.match = *match;
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
  return nfa;
}

}  // namespace maskd::automaton_internal
