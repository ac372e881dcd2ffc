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

absl::StatusOr<std::vector<uint32_t>> Minimize(const DenseDfa& dfa, const DfaOptions& options,
                                               uint32_t* num_blocks) {
  const std::vector<uint32_t>& table = dfa.table;
  const std::vector<uint8_t>& accepting = dfa.accepting;
  const uint32_t n = dfa.num_states;
  const uint32_t k = dfa.num_classes;
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
  // Abort checks by work: an iteration costs kStepWork plus its splitter's
  // states, so small ones are checked every 1,024 and a few over huge blocks
  // cannot run long between checks.
  constexpr uint64_t kStepWork = AbortMeter::kCheckWork / 1024;
  AbortMeter meter(options);
  while (!work.empty()) {
    auto [b, c] = work.back();
    work.pop_back();
    in_work[static_cast<size_t>(b) * k + c] = 0;
    if (auto s = meter.Spend(kStepWork + (end[b] - first[b])); !s.ok()) return s;
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

}  // namespace maskd::automaton_internal
