// Dfa::Compile: the stages of internal/ in order (NFA, subset construction,
// class merging, pruning, minimisation), then the final numbering and the
// per-state facts the queries read (distance to accept, forced bytes).
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "automaton/dfa.h"
#include "automaton/internal/dense_table.h"
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

// Builds a Dfa; a class so it can fill Dfa's private fields.
class DfaBuilder {
 public:
  static absl::StatusOr<std::shared_ptr<const Dfa>> Build(const Regex& regex, const DfaOptions& options);
};

absl::StatusOr<std::shared_ptr<const Dfa>> DfaBuilder::Build(const Regex& regex,
                                                             const DfaOptions& options) {
  uint8_t cls[256];  // byte -> column of the tables below
  DenseDfa dense;
  {
    auto nfa = BuildNfa(regex, options);
    if (!nfa.ok()) return nfa.status();
    std::memcpy(cls, nfa->byte_class, sizeof(cls));
    auto subsets = SubsetConstruction(*nfa, options);
    if (!subsets.ok()) return subsets.status();
    dense = *std::move(subsets);
  }
  // Classes whose columns are equal in every state stay equal through pruning
  // and minimization: merge them first (cls keeps mapping bytes to columns).
  {
    const uint32_t n = dense.num_states, k = dense.num_classes;
    std::vector<uint32_t> group_of;
    std::vector<uint32_t> reps = GroupEqualColumns(dense.table, n, k, &group_of);
    if (reps.size() < k) {
      dense.table = SelectColumns(dense.table, n, k, reps);
      for (int b = 0; b < 256; ++b) cls[b] = static_cast<uint8_t>(group_of[cls[b]]);
      dense.num_classes = static_cast<uint32_t>(reps.size());
    }
  }
  PruneDeadStates(&dense);

  uint32_t num_blocks = 0;
  auto blocks = Minimize(dense, options, &num_blocks);
  if (!blocks.ok()) return blocks.status();
  const uint32_t k = dense.num_classes;
  const uint32_t nl = dense.num_states;
  const uint32_t lstart = dense.start;
  std::vector<uint32_t>& ltable = dense.table;
  const std::vector<uint8_t>& lacc = dense.accepting;

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

}  // namespace maskd
