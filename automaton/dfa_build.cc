// Dfa::Compile: the stages of internal/ in order (NFA, subset construction,
// class merging, pruning, minimisation), then the final numbering and the
// per-state facts the queries read (distance to accept, forced bytes).
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "automaton/dfa.h"
#include "automaton/internal/dense_table.h"
#include "automaton/internal/forced_byte.h"
#include "automaton/internal/lazy_dfa.h"
#include "automaton/internal/minimize.h"
#include "automaton/internal/nfa.h"
#include "automaton/internal/subset_construction.h"

namespace maskd {

using automaton_internal::BuildNfa;
using automaton_internal::DenseDfa;
using automaton_internal::GroupEqualColumns;
using automaton_internal::Minimize;
using automaton_internal::PruneDeadStates;
using automaton_internal::SelectColumns;
using automaton_internal::SubsetConstruction;

namespace {

// The subset construction's DFA of `nfa` and `cls`, byte -> column of its table.
absl::StatusOr<DenseDfa> BuildDense(const automaton_internal::CompactNfa& nfa,
                                    const DfaOptions& options, uint8_t cls[256]) {
  std::memcpy(cls, nfa.byte_class, 256);
  return SubsetConstruction(nfa, options);
}

// Merges the classes whose columns are equal in every state (they stay equal
// through pruning and minimization); `cls` keeps mapping bytes to columns.
void MergeEqualClasses(DenseDfa* dense, uint8_t cls[256]) {
  const uint32_t n = dense->num_states, k = dense->num_classes;
  std::vector<uint32_t> group_of;
  std::vector<uint32_t> reps = GroupEqualColumns(dense->table, n, k, &group_of);
  if (reps.size() < k) {
    dense->table = SelectColumns(dense->table, n, k, reps);
    for (int b = 0; b < 256; ++b) cls[b] = static_cast<uint8_t>(group_of[cls[b]]);
    dense->num_classes = static_cast<uint32_t>(reps.size());
  }
}

// The final numbering of the minimized DFA's blocks: the dead block is 0,
// then the blocks reachable from the start state, breadth-first.
struct BlockNumbering {
  std::vector<uint32_t> rep;    // per block: a state of `dense` in it
  std::vector<uint32_t> order;  // per block: its final id; UINT32_MAX if unreachable
  uint32_t count = 0;           // final states (reachable blocks and the dead one)
};

BlockNumbering NumberBlocks(const DenseDfa& dense, const std::vector<uint32_t>& blocks,
                            uint32_t num_blocks) {
  const uint32_t k = dense.num_classes;
  BlockNumbering out;
  out.rep.assign(num_blocks, UINT32_MAX);
  for (uint32_t s = 0; s < dense.num_states; ++s) {
    if (out.rep[blocks[s]] == UINT32_MAX) out.rep[blocks[s]] = s;
  }
  out.order.assign(num_blocks, UINT32_MAX);
  uint32_t next_id = 0;
  out.order[blocks[0]] = next_id++;
  std::vector<uint32_t> bfs;
  if (dense.start != 0) {
    out.order[blocks[dense.start]] = next_id++;
    bfs.push_back(blocks[dense.start]);
  }
  for (size_t i = 0; i < bfs.size(); ++i) {
    uint32_t s = out.rep[bfs[i]];
    for (uint32_t c = 0; c < k; ++c) {
      uint32_t b = blocks[dense.table[static_cast<size_t>(s) * k + c]];
      if (out.order[b] == UINT32_MAX) {
        out.order[b] = next_id++;
        bfs.push_back(b);
      }
    }
  }
  out.count = next_id;
  return out;
}

// The quotient of `dense` by `blocks` under `numbering`: a table of
// numbering.count rows with one column per class of `dense`, and the
// accepting flags (the dead state never accepts).
void QuotientTable(const DenseDfa& dense, const std::vector<uint32_t>& blocks,
                   const BlockNumbering& numbering, std::vector<uint32_t>* table,
                   std::vector<uint8_t>* accepting) {
  const uint32_t k = dense.num_classes;
  table->assign(static_cast<size_t>(numbering.count) * k, Dfa::kDead);
  accepting->assign(numbering.count, 0);
  for (uint32_t b = 0; b < numbering.order.size(); ++b) {
    if (numbering.order[b] == UINT32_MAX) continue;
    uint32_t s = numbering.rep[b];
    uint32_t id = numbering.order[b];
    (*accepting)[id] = (b == blocks[0]) ? 0 : dense.accepting[s];
    for (uint32_t c = 0; c < k; ++c) {
      (*table)[static_cast<size_t>(id) * k + c] =
          numbering.order[blocks[dense.table[static_cast<size_t>(s) * k + c]]];
    }
  }
}

}  // namespace

// Builds a Dfa; a class so it can fill Dfa's private fields.
class DfaBuilder {
 public:
  static absl::StatusOr<std::shared_ptr<const Dfa>> Build(const automaton_internal::CompactNfa& nfa,
                                                          const DfaOptions& options);
  // Lazy mode: the NFA and the start state only.
  static absl::StatusOr<std::shared_ptr<const Dfa>> BuildLazy(automaton_internal::CompactNfa nfa,
                                                              const DfaOptions& options);
  // Dfa::CompileLazy: Build when the subset construction fits
  // options.eager_up_to_states, else BuildLazy.
  static absl::StatusOr<std::shared_ptr<const Dfa>> BuildHybrid(const Regex& regex,
                                                                const DfaOptions& options);

 private:
  // Sets distance_ and max_distance_ from table_ and accepting_.
  static void ComputeDistances(Dfa* dfa);
  // Sets forced_byte_ from table_, accepting_ and byte_class_.
  static void ComputeForcedBytes(Dfa* dfa);
};

absl::StatusOr<std::shared_ptr<const Dfa>> DfaBuilder::Build(
    const automaton_internal::CompactNfa& nfa, const DfaOptions& options) {
  uint8_t cls[256];  // byte -> column of the tables below
  auto dense = BuildDense(nfa, options, cls);
  if (!dense.ok()) return dense.status();
  MergeEqualClasses(&*dense, cls);
  PruneDeadStates(&*dense);

  uint32_t num_blocks = 0;
  auto blocks = Minimize(*dense, options, &num_blocks);
  if (!blocks.ok()) return blocks.status();
  const BlockNumbering numbering = NumberBlocks(*dense, *blocks, num_blocks);
  const uint32_t final_n = numbering.count;  // reachable blocks only
  const uint32_t k = dense->num_classes;

  // Final table with one column per NFA byte class, then merge classes whose
  // columns are identical in every state.
  auto dfa = std::shared_ptr<Dfa>(new Dfa());
  std::vector<uint32_t> full;
  QuotientTable(*dense, *blocks, numbering, &full, &dfa->accepting_);
  dense->table.clear();
  dense->table.shrink_to_fit();
  std::vector<uint32_t> col_of_class;  // column of `full` -> merged column
  const std::vector<uint32_t> col_rep = GroupEqualColumns(full, final_n, k, &col_of_class);

  dfa->num_states_ = final_n;
  dfa->num_classes_ = static_cast<uint32_t>(col_rep.size());
  for (int b = 0; b < 256; ++b) dfa->byte_class_[b] = static_cast<uint8_t>(col_of_class[cls[b]]);
  dfa->table_ = SelectColumns(full, final_n, k, col_rep);
  dfa->start_ = dense->start == 0 ? Dfa::kDead : numbering.order[(*blocks)[dense->start]];
  ComputeDistances(dfa.get());
  ComputeForcedBytes(dfa.get());
  return std::shared_ptr<const Dfa>(std::move(dfa));
}

absl::StatusOr<std::shared_ptr<const Dfa>> DfaBuilder::BuildLazy(automaton_internal::CompactNfa nfa,
                                                                 const DfaOptions& options) {
  auto dfa = std::shared_ptr<Dfa>(new Dfa());
  std::memcpy(dfa->byte_class_, nfa.byte_class, 256);
  dfa->num_classes_ = nfa.num_classes;
  auto lazy = automaton_internal::LazyDfa::Create(std::move(nfa), options);
  if (!lazy.ok()) return lazy.status();
  dfa->start_ = (*lazy)->start();
  dfa->max_distance_ = dfa->start_ == Dfa::kDead ? 0 : (*lazy)->MaxDistanceBound();
  dfa->lazy_ = *std::move(lazy);
  dfa->lazy_table_ = dfa->lazy_->table_base();
  return std::shared_ptr<const Dfa>(std::move(dfa));
}

// Distance to accept: breadth-first over reversed edges (compressed rows).
void DfaBuilder::ComputeDistances(Dfa* dfa) {
  const uint32_t final_n = dfa->num_states_, fk = dfa->num_classes_;
  dfa->distance_.assign(final_n, Dfa::kNoDistance);
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
  std::vector<uint32_t> queue;
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
void DfaBuilder::ComputeForcedBytes(Dfa* dfa) {
  const uint32_t n = dfa->num_states_, k = dfa->num_classes_;
  const automaton_internal::ClassBytes classes(dfa->byte_class_);
  dfa->forced_byte_.assign(n, -1);
  for (uint32_t s = 1; s < n; ++s) {
    if (dfa->accepting_[s]) continue;
    dfa->forced_byte_[s] =
        automaton_internal::ForcedByteOfRow(&dfa->table_[static_cast<size_t>(s) * k], k, classes);
  }
}

absl::StatusOr<std::shared_ptr<const Dfa>> DfaBuilder::BuildHybrid(const Regex& regex,
                                                                   const DfaOptions& options) {
  auto nfa = BuildNfa(regex, options);
  if (!nfa.ok()) return nfa.status();
  if (options.eager_up_to_states > 0) {
    // The trial stops at its state cap, so it costs at most what that many
    // states cost; past it (whichever cap it hit) the DFA goes lazy, and
    // options.max_states is then enforced while walking.
    DfaOptions trial = options;
    trial.max_states = std::min(options.max_states, options.eager_up_to_states);
    auto whole = Build(*nfa, trial);
    if (whole.ok() || whole.status().code() != absl::StatusCode::kResourceExhausted) return whole;
  }
  return BuildLazy(*std::move(nfa), options);
}

absl::StatusOr<std::shared_ptr<const Dfa>> Dfa::Compile(const Regex& regex, const DfaOptions& options) {
  auto nfa = BuildNfa(regex, options);
  if (!nfa.ok()) return nfa.status();
  return DfaBuilder::Build(*nfa, options);
}

absl::StatusOr<std::shared_ptr<const Dfa>> Dfa::CompileLazy(const Regex& regex,
                                                            const DfaOptions& options) {
  return DfaBuilder::BuildHybrid(regex, options);
}

}  // namespace maskd
