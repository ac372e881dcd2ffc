#include "index/dfa.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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
// Thompson NFA over bytes.

struct NfaState {
  std::vector<uint32_t> eps;
  struct Edge {
    uint8_t lo, hi;
    uint32_t to;
  };
  std::vector<Edge> edges;
};

class NfaBuilder {
 public:
  explicit NfaBuilder(const DfaOptions& options) : options_(options) {}

  absl::StatusOr<uint32_t> NewState() {
    if (states_.size() >= options_.max_nfa_states) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "regex: the automaton needs more than %d NFA states (limit max_nfa_states)",
          options_.max_nfa_states));
    }
    states_.emplace_back();
    return static_cast<uint32_t>(states_.size() - 1);
  }

  // Adds the fragment for `n` starting at state `in`; returns its end state.
  absl::StatusOr<uint32_t> Build(const RegexNode& n, uint32_t in) {
    if (++steps_ % 4096 == 0) {
      if (auto s = CheckAbort(); !s.ok()) return s;
    }
    switch (n.kind) {
      case RegexNode::Kind::kEmpty:
        return in;
      case RegexNode::Kind::kSet: {
        auto out = NewState();
        if (!out.ok()) return out.status();
        if (auto s = AddSet(n.set, in, *out); !s.ok()) return s;
        return *out;
      }
      case RegexNode::Kind::kConcat: {
        uint32_t s = in;
        for (const auto& c : n.children) {
          auto next = Build(*c, s);
          if (!next.ok()) return next;
          s = *next;
        }
        return s;
      }
      case RegexNode::Kind::kAlternate: {
        auto out = NewState();
        if (!out.ok()) return out.status();
        for (const auto& c : n.children) {
          auto cin = NewState();
          if (!cin.ok()) return cin.status();
          states_[in].eps.push_back(*cin);
          auto cout = Build(*c, *cin);
          if (!cout.ok()) return cout;
          states_[*cout].eps.push_back(*out);
        }
        return *out;
      }
      case RegexNode::Kind::kRepeat: {
        const RegexNode& body = *n.children[0];
        uint32_t s = in;
        for (uint32_t i = 0; i < n.min; ++i) {
          auto cin = NewState();
          if (!cin.ok()) return cin.status();
          states_[s].eps.push_back(*cin);
          auto next = Build(body, *cin);
          if (!next.ok()) return next;
          s = *next;
        }
        if (n.max == RegexNode::kUnbounded) {
          auto loop = NewState();
          if (!loop.ok()) return loop.status();
          auto bin = NewState();
          if (!bin.ok()) return bin.status();
          states_[s].eps.push_back(*loop);
          states_[*loop].eps.push_back(*bin);
          auto bout = Build(body, *bin);
          if (!bout.ok()) return bout;
          states_[*bout].eps.push_back(*loop);
          return *loop;
        }
        if (n.max == n.min) return s;
        auto out = NewState();
        if (!out.ok()) return out.status();
        for (uint32_t i = n.min; i < n.max; ++i) {
          states_[s].eps.push_back(*out);
          auto cin = NewState();
          if (!cin.ok()) return cin.status();
          states_[s].eps.push_back(*cin);
          auto next = Build(body, *cin);
          if (!next.ok()) return next;
          s = *next;
        }
        states_[s].eps.push_back(*out);
        return *out;
      }
    }
    return absl::InternalError("regex: unknown node kind");
  }

  absl::Status CheckAbort() const {
    if (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed)) {
      return absl::CancelledError("regex compilation cancelled");
    }
    if (options_.deadline != absl::InfiniteFuture() && absl::Now() > options_.deadline) {
      return absl::DeadlineExceededError("regex compilation exceeded its deadline");
    }
    return absl::OkStatus();
  }

  std::vector<NfaState>& states() { return states_; }

 private:
  absl::Status AddSet(const CodepointSet& set, uint32_t in, uint32_t out) {
    seqs_.clear();
    for (const auto& [lo, hi] : set.ranges()) Utf8Sequences(lo, hi, &seqs_);
    // Share the states of a common leading byte range: sequences come sorted,
    // so consecutive ones often start with the same range.
    for (const ByteSeq& q : seqs_) {
      uint32_t s = in;
      for (int i = 0; i < q.len; ++i) {
        uint32_t to;
        if (i == q.len - 1) {
          to = out;
        } else {
          auto t = NewState();
          if (!t.ok()) return t.status();
          to = *t;
        }
        states_[s].edges.push_back({q.lo[i], q.hi[i], to});
        s = to;
      }
    }
    return absl::OkStatus();
  }

  const DfaOptions& options_;
  std::vector<NfaState> states_;
  std::vector<ByteSeq> seqs_;
  uint64_t steps_ = 0;
};

// A sorted set of NFA states: a DFA state during subset construction.
using StateSet = std::vector<uint32_t>;

struct StateSetHash {
  size_t operator()(const StateSet& s) const {
    return absl::HashOf(absl::MakeConstSpan(s));
  }
};

}  // namespace

// Builds a Dfa; a class so it can fill Dfa's private fields.
class DfaBuilder {
 public:
  static absl::StatusOr<std::shared_ptr<const Dfa>> Build(const Regex& regex, const DfaOptions& options);
};

namespace {

// Minimizes a complete DFA given as a dense table (state-major, `k` columns),
// with state 0 dead. Returns the block of each state; blocks are numbered with
// the dead state's block first. Hopcroft's algorithm over inverse transitions.
absl::StatusOr<std::vector<uint32_t>> Minimize(const std::vector<uint32_t>& table,
                                               const std::vector<uint8_t>& accepting,
                                               uint32_t n, uint32_t k,
                                               const NfaBuilder& abort_check,
                                               uint32_t* num_blocks) {
  // Inverse transitions, CSR per class: for class c and target t, the sources.
  std::vector<uint32_t> inv_begin(static_cast<size_t>(k) * (n + 1) + 1, 0);
  std::vector<uint32_t> inv(static_cast<size_t>(n) * k);
  for (uint32_t s = 0; s < n; ++s) {
    for (uint32_t c = 0; c < k; ++c) ++inv_begin[static_cast<size_t>(c) * (n + 1) + table[s * k + c] + 1];
  }
  for (size_t i = 1; i < inv_begin.size(); ++i) inv_begin[i] += inv_begin[i - 1];
  {
    std::vector<uint32_t> fill(inv_begin.begin(), inv_begin.end() - 1);
    for (uint32_t s = 0; s < n; ++s) {
      for (uint32_t c = 0; c < k; ++c) inv[fill[static_cast<size_t>(c) * (n + 1) + table[s * k + c]]++] = s;
    }
  }

  // Partition: elems ordered by block; block b owns elems[first[b], end[b]).
  std::vector<uint32_t> elems(n), pos(n), block(n);
  std::vector<uint32_t> first, end, marked;
  {
    // Initial blocks: dead (state 0 alone), non-accepting live, accepting.
    std::vector<uint32_t> groups[3];
    for (uint32_t s = 0; s < n; ++s) groups[s == 0 ? 0 : (accepting[s] ? 2 : 1)].push_back(s);
    uint32_t i = 0;
    for (auto& g : groups) {
      if (g.empty()) continue;
      uint32_t b = static_cast<uint32_t>(first.size());
      first.push_back(i);
      for (uint32_t s : g) {
        elems[i] = s;
        pos[s] = i;
        block[s] = b;
        ++i;
      }
      end.push_back(i);
      marked.push_back(0);
    }
  }
  // Worklist of (block, class) splitters; all initial blocks but the first
  // suffice (Hopcroft), but adding all is simpler and still correct.
  std::deque<std::pair<uint32_t, uint32_t>> work;
  std::vector<uint8_t> in_work;  // [block * k + class]
  auto add_work = [&](uint32_t b, uint32_t c) {
    size_t idx = static_cast<size_t>(b) * k + c;
    if (in_work.size() <= idx) in_work.resize((static_cast<size_t>(b) + 1) * k, 0);
    if (!in_work[idx]) {
      in_work[idx] = 1;
      work.emplace_back(b, c);
    }
  };
  for (uint32_t b = 0; b < first.size(); ++b) {
    for (uint32_t c = 0; c < k; ++c) add_work(b, c);
  }

  std::vector<uint32_t> touched;
  std::vector<uint32_t> splitter;
  uint64_t iterations = 0;
  while (!work.empty()) {
    auto [b, c] = work.front();
    work.pop_front();
    in_work[static_cast<size_t>(b) * k + c] = 0;
    if (++iterations % 1024 == 0) {
      if (auto s = abort_check.CheckAbort(); !s.ok()) return s;
    }
    // Snapshot the splitter block (it may be split while we mark).
    splitter.assign(elems.begin() + first[b], elems.begin() + end[b]);
    touched.clear();
    for (uint32_t t : splitter) {
      size_t base = static_cast<size_t>(c) * (n + 1) + t;
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
      for (uint32_t cc = 0; cc < k; ++cc) {
        size_t yi = static_cast<size_t>(y) * k + cc;
        if (yi < in_work.size() && in_work[yi]) {
          add_work(z, cc);
        } else if (m <= size - m) {
          add_work(z, cc);
        } else {
          add_work(y, cc);
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
  NfaBuilder nfa(options);
  auto start = nfa.NewState();
  if (!start.ok()) return start.status();
  auto match = nfa.Build(regex.root(), *start);
  if (!match.ok()) return match.status();
  std::vector<NfaState>& ns = nfa.states();
  const uint32_t match_state = *match;

  // Byte classes from the NFA's range boundaries.
  std::array<uint8_t, 257> boundary{};
  boundary[0] = 1;
  for (const NfaState& s : ns) {
    for (const auto& e : s.edges) {
      boundary[e.lo] = 1;
      boundary[e.hi + 1] = 1;
    }
  }
  uint8_t cls[256];
  int num_classes = 0;
  std::vector<uint8_t> class_rep;  // a representative byte per class
  for (int b = 0; b < 256; ++b) {
    if (boundary[b]) {
      class_rep.push_back(static_cast<uint8_t>(b));
      ++num_classes;
    }
    cls[b] = static_cast<uint8_t>(num_classes - 1);
  }
  const uint32_t k = static_cast<uint32_t>(num_classes);

  // Subset construction. DFA state 0 is the dead (empty) set.
  std::vector<uint32_t> mark(ns.size(), 0);
  uint32_t generation = 0;
  std::vector<uint32_t> stack;
  auto closure = [&](StateSet& set) {
    ++generation;
    stack.assign(set.begin(), set.end());
    for (uint32_t s : set) mark[s] = generation;
    while (!stack.empty()) {
      uint32_t s = stack.back();
      stack.pop_back();
      for (uint32_t t : ns[s].eps) {
        if (mark[t] != generation) {
          mark[t] = generation;
          set.push_back(t);
          stack.push_back(t);
        }
      }
    }
    // Keep only states that matter: with byte edges, or the match state.
    set.erase(std::remove_if(set.begin(), set.end(),
                             [&](uint32_t s) { return ns[s].edges.empty() && s != match_state; }),
              set.end());
    std::sort(set.begin(), set.end());
  };

  absl::flat_hash_map<StateSet, uint32_t, StateSetHash> ids;
  std::vector<StateSet> sets;
  std::vector<uint32_t> table;
  std::vector<uint8_t> accepting;
  sets.emplace_back();
  ids.emplace(StateSet{}, 0);
  table.assign(k, 0);
  accepting.push_back(0);

  StateSet init = {*start};
  closure(init);
  auto intern = [&](StateSet&& set) -> absl::StatusOr<uint32_t> {
    auto it = ids.find(set);
    if (it != ids.end()) return it->second;
    if (sets.size() >= options.max_states) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "regex: the DFA needs more than %d states (limit max_states)", options.max_states));
    }
    uint32_t id = static_cast<uint32_t>(sets.size());
    bool acc = std::binary_search(set.begin(), set.end(), match_state);
    ids.emplace(set, id);
    sets.push_back(std::move(set));
    table.resize(table.size() + k, 0);
    accepting.push_back(acc ? 1 : 0);
    return id;
  };
  auto start_id = intern(std::move(init));
  if (!start_id.ok()) return start_id.status();

  std::vector<StateSet> moves(k);
  for (uint32_t d = 1; d < sets.size(); ++d) {
    if (d % 64 == 0) {
      if (auto s = nfa.CheckAbort(); !s.ok()) return s;
    }
    for (auto& m : moves) m.clear();
    for (uint32_t s : sets[d]) {
      for (const auto& e : ns[s].edges) {
        for (uint32_t c = cls[e.lo]; c <= cls[e.hi]; ++c) moves[c].push_back(e.to);
      }
    }
    for (uint32_t c = 0; c < k; ++c) {
      if (moves[c].empty()) continue;  // to dead
      StateSet next = moves[c];
      std::sort(next.begin(), next.end());
      next.erase(std::unique(next.begin(), next.end()), next.end());
      closure(next);
      auto id = intern(std::move(next));
      if (!id.ok()) return id.status();
      table[static_cast<size_t>(d) * k + c] = *id;
    }
  }
  const uint32_t n = static_cast<uint32_t>(sets.size());
  sets.clear();
  ids.clear();

  // Live states (can reach an accepting state); the others merge into dead.
  std::vector<std::vector<uint32_t>> preds(n);
  for (uint32_t s = 0; s < n; ++s) {
    for (uint32_t c = 0; c < k; ++c) {
      uint32_t t = table[static_cast<size_t>(s) * k + c];
      if (preds[t].empty() || preds[t].back() != s) preds[t].push_back(s);
    }
  }
  std::vector<uint8_t> live(n, 0);
  std::vector<uint32_t> queue;
  for (uint32_t s = 1; s < n; ++s) {
    if (accepting[s]) {
      live[s] = 1;
      queue.push_back(s);
    }
  }
  for (size_t i = 0; i < queue.size(); ++i) {
    for (uint32_t p : preds[queue[i]]) {
      if (p != 0 && !live[p]) {
        live[p] = 1;
        queue.push_back(p);
      }
    }
  }
  for (uint32_t s = 0; s < n; ++s) {
    for (uint32_t c = 0; c < k; ++c) {
      uint32_t& t = table[static_cast<size_t>(s) * k + c];
      if (!live[t]) t = 0;
    }
  }
  // Non-live states keep their rows but are unreachable; make them dead-like
  // so minimization merges them with state 0.
  for (uint32_t s = 1; s < n; ++s) {
    if (!live[s]) {
      for (uint32_t c = 0; c < k; ++c) table[static_cast<size_t>(s) * k + c] = 0;
    }
  }
  std::vector<uint8_t> acc_for_min = accepting;
  for (uint32_t s = 1; s < n; ++s) {
    if (!live[s]) acc_for_min[s] = 0;
  }
  // Merge non-live states into the dead block up front.
  std::vector<uint32_t> remap(n);
  uint32_t m = 0;
  for (uint32_t s = 0; s < n; ++s) remap[s] = (s == 0 || !live[s]) ? 0 : ++m;
  const uint32_t nl = m + 1;
  std::vector<uint32_t> ltable(static_cast<size_t>(nl) * k, 0);
  std::vector<uint8_t> lacc(nl, 0);
  for (uint32_t s = 1; s < n; ++s) {
    if (!live[s]) continue;
    for (uint32_t c = 0; c < k; ++c) {
      ltable[static_cast<size_t>(remap[s]) * k + c] = remap[table[static_cast<size_t>(s) * k + c]];
    }
    lacc[remap[s]] = accepting[s];
  }
  uint32_t lstart = remap[*start_id];
  table.clear();
  table.shrink_to_fit();

  uint32_t num_blocks = 0;
  auto blocks = Minimize(ltable, lacc, nl, k, nfa, &num_blocks);
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
  std::vector<uint32_t> col_of_class(k);
  std::vector<uint32_t> col_rep;  // original class of each merged column
  {
    absl::flat_hash_map<std::vector<uint32_t>, uint32_t> columns;
    std::vector<uint32_t> col(final_n);
    for (uint32_t c = 0; c < k; ++c) {
      for (uint32_t s = 0; s < final_n; ++s) col[s] = full[static_cast<size_t>(s) * k + c];
      auto [it, inserted] = columns.emplace(col, static_cast<uint32_t>(col_rep.size()));
      if (inserted) col_rep.push_back(c);
      col_of_class[c] = it->second;
    }
  }
  const uint32_t fk = static_cast<uint32_t>(col_rep.size());

  dfa->num_states_ = final_n;
  dfa->num_classes_ = fk;
  for (int b = 0; b < 256; ++b) dfa->byte_class_[b] = static_cast<uint8_t>(col_of_class[cls[b]]);
  dfa->table_.assign(static_cast<size_t>(final_n) * fk, Dfa::kDead);
  dfa->accepting_ = std::move(final_acc);
  for (uint32_t s = 0; s < final_n; ++s) {
    for (uint32_t j = 0; j < fk; ++j) {
      dfa->table_[static_cast<size_t>(s) * fk + j] = full[static_cast<size_t>(s) * k + col_rep[j]];
    }
  }
  dfa->start_ = lstart == 0 ? Dfa::kDead : order[(*blocks)[lstart]];

  // Distance to accept: breadth-first over reversed edges.
  dfa->distance_.assign(final_n, Dfa::kNoDistance);
  std::vector<std::vector<uint32_t>> rpreds(final_n);
  for (uint32_t s = 1; s < final_n; ++s) {
    for (uint32_t j = 0; j < fk; ++j) {
      uint32_t t = dfa->table_[static_cast<size_t>(s) * fk + j];
      if (t != Dfa::kDead) rpreds[t].push_back(s);
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
    for (uint32_t p : rpreds[t]) {
      if (dfa->distance_[p] == Dfa::kNoDistance) {
        dfa->distance_[p] = dfa->distance_[t] + 1;
        queue.push_back(p);
      }
    }
  }

  // Forced bytes: a non-accepting state with exactly one live byte.
  dfa->forced_byte_.assign(final_n, -1);
  for (uint32_t s = 1; s < final_n; ++s) {
    if (dfa->accepting_[s]) continue;
    int forced = -1;
    int live_bytes = 0;
    for (int b = 0; b < 256 && live_bytes < 2; ++b) {
      if (dfa->Next(s, static_cast<uint8_t>(b)) != Dfa::kDead) {
        forced = b;
        ++live_bytes;
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

bool Dfa::Matches(std::string_view text) const {
  State s = Walk(start_, text);
  return s != kDead && IsAccepting(s);
}

size_t Dfa::MemoryBytes() const {
  return sizeof(Dfa) + table_.capacity() * sizeof(State) + accepting_.capacity() +
         distance_.capacity() * sizeof(uint32_t) + forced_byte_.capacity() * sizeof(int16_t);
}

}  // namespace maskd
