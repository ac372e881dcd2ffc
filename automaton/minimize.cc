#include "automaton/internal/minimize.h"

#include <algorithm>
#include <utility>

#include "automaton/internal/build_abort.h"

namespace maskd::automaton_internal {

void PruneDeadStates(DenseDfa* dfa) {
  const uint32_t n = dfa->num_states;
  const uint32_t k = dfa->num_classes;
  std::vector<uint32_t>& table = dfa->table;
  std::vector<uint8_t>& accepting = dfa->accepting;

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
  dfa->num_states = nl;
  dfa->start = remap[dfa->start];
  dfa->table = std::move(ltable);
  dfa->accepting = std::move(lacc);
}

namespace {

// Inverse live transitions, CSR over (target, class): entry t * k + c, so the
// splitters (t, c) for one block, queued together, read nearby entries.
struct InverseTransitions {
  uint32_t words = 0;               // (k + 63) / 64
  std::vector<uint64_t> in_classes;  // per target state: bitmap (`words` words)
                                     // of the classes with a live transition into it
  std::vector<uint32_t> begin;      // k * n + 1 offsets into `sources`
  std::vector<uint32_t> sources;
};

InverseTransitions InvertLiveTransitions(const DenseDfa& dfa) {
  const std::vector<uint32_t>& table = dfa.table;
  const uint32_t n = dfa.num_states;
  const uint32_t k = dfa.num_classes;
  InverseTransitions inv;
  const uint32_t words = inv.words = (k + 63) / 64;
  inv.in_classes.assign(static_cast<size_t>(n) * words, 0);
  std::vector<uint32_t>& inv_begin = inv.begin;
  inv_begin.assign(static_cast<size_t>(k) * n + 1, 0);
  for (uint32_t s = 0; s < n; ++s) {
    const uint32_t* row = &table[static_cast<size_t>(s) * k];
    for (uint32_t c = 0; c < k; ++c) {
      const uint32_t t = row[c];
      if (t != 0) {
        ++inv_begin[static_cast<size_t>(t) * k + c + 1];
        inv.in_classes[static_cast<size_t>(t) * words + c / 64] |= uint64_t{1} << (c % 64);
      }
    }
  }
  for (size_t i = 1; i < inv_begin.size(); ++i) inv_begin[i] += inv_begin[i - 1];
  inv.sources.resize(inv_begin.back());
  std::vector<uint32_t> fill(inv_begin.begin(), inv_begin.end() - 1);
  for (uint32_t s = 0; s < n; ++s) {
    const uint32_t* row = &table[static_cast<size_t>(s) * k];
    for (uint32_t c = 0; c < k; ++c) {
      if (row[c] != 0) inv.sources[fill[static_cast<size_t>(row[c]) * k + c]++] = s;
    }
  }
  return inv;
}

// A partition of the states: elems ordered by block; block b owns
// elems[first[b], end[b]); pos[s] is the index of s in elems; the first
// marked[b] elements of block b are marked (during one refinement step).
struct Partition {
  std::vector<uint32_t> elems, pos, block;
  std::vector<uint32_t> first, end, marked;
};

// Initial blocks: dead (state 0 alone), non-accepting live, accepting (the
// empty ones left out, the others numbered in that order).
Partition InitialPartition(const DenseDfa& dfa) {
  const uint32_t n = dfa.num_states;
  Partition p;
  p.elems.resize(n);
  p.pos.resize(n);
  p.block.resize(n);
  uint32_t count[3] = {0, 0, 0};
  auto group = [&](uint32_t s) { return s == 0 ? 0 : (dfa.accepting[s] ? 2 : 1); };
  for (uint32_t s = 0; s < n; ++s) ++count[group(s)];
  uint32_t gblock[3] = {0, 0, 0}, fill[3] = {0, 0, 0};
  uint32_t i = 0;
  for (int g = 0; g < 3; ++g) {
    if (count[g] == 0) continue;
    gblock[g] = static_cast<uint32_t>(p.first.size());
    fill[g] = i;
    p.first.push_back(i);
    i += count[g];
    p.end.push_back(i);
    p.marked.push_back(0);
  }
  for (uint32_t s = 0; s < n; ++s) {
    int g = group(s);
    p.elems[fill[g]] = s;
    p.pos[s] = fill[g]++;
    p.block[s] = gblock[g];
  }
  return p;
}

// Hopcroft's refinement of a Partition by a worklist of (block, class)
// splitters, used as a stack.
class Refiner {
 public:
  Refiner(uint32_t num_classes, const InverseTransitions& inv, Partition* p)
      : k_(num_classes), inv_(inv), p_(*p), into_(inv.words) {}

  // Queues every (b, c) with a live c-transition into b, for every block but
  // the dead block 0.
  void QueueInitialSplitters() {
    for (uint32_t b = 1; b < p_.first.size(); ++b) {
      ClassesInto(b);
      for (uint32_t c = 0; c < k_; ++c) {
        if (HasClass(c)) AddWork(b, c);
      }
    }
  }

  // Splits until the worklist is empty. Cancelled or DeadlineExceeded as
  // CheckBuildAbort.
  absl::Status Run(const DfaOptions& options) {
    // Abort checks by work: an iteration costs kStepWork plus its splitter's
    // states, so small ones are checked every 1,024 and a few over huge blocks
    // cannot run long between checks.
    constexpr uint64_t kStepWork = AbortMeter::kCheckWork / 1024;
    AbortMeter meter(options);
    while (!work_.empty()) {
      auto [b, c] = work_.back();
      work_.pop_back();
      in_work_[static_cast<size_t>(b) * k_ + c] = 0;
      if (auto s = meter.Spend(kStepWork + (p_.end[b] - p_.first[b])); !s.ok()) return s;
      MarkPredecessors(b, c);
      SplitTouched();
    }
    return absl::OkStatus();
  }

 private:
  void AddWork(uint32_t b, uint32_t c) {
    size_t idx = static_cast<size_t>(b) * k_ + c;
    if (in_work_.size() <= idx) in_work_.resize((static_cast<size_t>(b) + 1) * k_, 0);
    if (!in_work_[idx]) {
      in_work_[idx] = 1;
      work_.emplace_back(b, c);
    }
  }

  // into_ = the classes with a live transition into block b.
  void ClassesInto(uint32_t b) {
    std::fill(into_.begin(), into_.end(), 0);
    for (uint32_t i = p_.first[b]; i < p_.end[b]; ++i) {
      const uint64_t* w = &inv_.in_classes[static_cast<size_t>(p_.elems[i]) * inv_.words];
      for (uint32_t j = 0; j < inv_.words; ++j) into_[j] |= w[j];
    }
  }
  bool HasClass(uint32_t c) const { return (into_[c / 64] >> (c % 64)) & 1; }

  // Moves every state with a c-transition into block b to the marked prefix
  // of its block; touched_ lists the blocks with a marked state.
  void MarkPredecessors(uint32_t b, uint32_t c) {
    // Snapshot the splitter block (it may be split while we mark).
    splitter_.assign(p_.elems.begin() + p_.first[b], p_.elems.begin() + p_.end[b]);
    touched_.clear();
    for (uint32_t t : splitter_) {
      size_t base = static_cast<size_t>(t) * k_ + c;
      for (uint32_t i = inv_.begin[base]; i < inv_.begin[base + 1]; ++i) {
        uint32_t s = inv_.sources[i];
        uint32_t y = p_.block[s];
        // Move s to the marked prefix of its block.
        uint32_t mpos = p_.first[y] + p_.marked[y];
        if (p_.pos[s] < mpos) continue;  // already marked
        uint32_t other = p_.elems[mpos];
        std::swap(p_.elems[p_.pos[s]], p_.elems[mpos]);
        p_.pos[other] = p_.pos[s];
        p_.pos[s] = mpos;
        if (p_.marked[y]++ == 0) touched_.push_back(y);
      }
    }
  }

  // Splits each touched block that is not wholly marked: its marked prefix
  // becomes a new block, and the splitters are queued as Hopcroft requires.
  void SplitTouched() {
    for (uint32_t y : touched_) {
      uint32_t m = p_.marked[y];
      p_.marked[y] = 0;
      uint32_t size = p_.end[y] - p_.first[y];
      if (m == size) continue;  // whole block marked: no split
      // Split: the marked prefix becomes a new block z.
      uint32_t z = static_cast<uint32_t>(p_.first.size());
      p_.first.push_back(p_.first[y]);
      p_.end.push_back(p_.first[y] + m);
      p_.marked.push_back(0);
      p_.first[y] += m;
      for (uint32_t i = p_.first[z]; i < p_.end[z]; ++i) p_.block[p_.elems[i]] = z;
      // A pending (y, cc) now needs both halves; otherwise the smaller half
      // suffices (Hopcroft).
      const uint32_t smaller = m <= size - m ? z : y;
      ClassesInto(smaller);
      for (uint32_t cc = 0; cc < k_; ++cc) {
        size_t yi = static_cast<size_t>(y) * k_ + cc;
        if (yi < in_work_.size() && in_work_[yi]) {
          AddWork(z, cc);
        } else if (HasClass(cc)) {
          AddWork(smaller, cc);
        }
      }
    }
  }

  const uint32_t k_;
  const InverseTransitions& inv_;
  Partition& p_;
  std::vector<std::pair<uint32_t, uint32_t>> work_;
  std::vector<uint8_t> in_work_;  // [block * k + class]
  std::vector<uint64_t> into_;    // ClassesInto's result
  std::vector<uint32_t> touched_;
  std::vector<uint32_t> splitter_;
};

}  // namespace

absl::StatusOr<std::vector<uint32_t>> Minimize(const DenseDfa& dfa, const DfaOptions& options,
                                               uint32_t* num_blocks) {
  const InverseTransitions inv = InvertLiveTransitions(dfa);
  Partition partition = InitialPartition(dfa);
  Refiner refiner(dfa.num_classes, inv, &partition);
  refiner.QueueInitialSplitters();
  if (absl::Status s = refiner.Run(options); !s.ok()) return s;
  *num_blocks = static_cast<uint32_t>(partition.first.size());
  return std::move(partition.block);
}

}  // namespace maskd::automaton_internal
