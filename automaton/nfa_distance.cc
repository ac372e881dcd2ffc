#include "automaton/internal/nfa_distance.h"

#include <deque>

#include "automaton/dfa.h"

namespace maskd::automaton_internal {
namespace {

// Reversed edges in compressed rows: those into t are
// from[begin[t] .. begin[t + 1]), with cost[i] 1 for a byte edge, 0 for an
// epsilon edge.
struct ReversedEdges {
  std::vector<uint32_t> begin, from;
  std::vector<uint8_t> cost;
};

ReversedEdges Reverse(const CompactNfa& nfa) {
  const uint32_t n = nfa.num_states;
  ReversedEdges r;
  r.begin.assign(n + 1, 0);
  for (const auto& e : nfa.edges) ++r.begin[e.to + 1];
  for (uint32_t t : nfa.eps_to) ++r.begin[t + 1];
  for (uint32_t s = 0; s < n; ++s) r.begin[s + 1] += r.begin[s];
  r.from.resize(r.begin[n]);
  r.cost.resize(r.begin[n]);
  std::vector<uint32_t> fill(r.begin.begin(), r.begin.end() - 1);
  for (uint32_t s = 0; s < n; ++s) {
    for (uint32_t i = nfa.edge_begin[s]; i < nfa.edge_begin[s + 1]; ++i) {
      const uint32_t k = fill[nfa.edges[i].to]++;
      r.from[k] = s;
      r.cost[k] = 1;
    }
    for (uint32_t i = nfa.eps_begin[s]; i < nfa.eps_begin[s + 1]; ++i) {
      const uint32_t k = fill[nfa.eps_to[i]]++;
      r.from[k] = s;
      r.cost[k] = 0;
    }
  }
  return r;
}

}  // namespace

std::vector<uint32_t> NfaDistances(const CompactNfa& nfa) {
  const ReversedEdges r = Reverse(nfa);
  std::vector<uint32_t> dist(nfa.num_states, Dfa::kNoDistance);
  std::deque<uint32_t> queue;
  dist[nfa.match] = 0;
  queue.push_back(nfa.match);
  while (!queue.empty()) {
    const uint32_t t = queue.front();
    queue.pop_front();
    for (uint32_t i = r.begin[t]; i < r.begin[t + 1]; ++i) {
      const uint32_t s = r.from[i];
      const uint32_t d = dist[t] + r.cost[i];
      if (d >= dist[s]) continue;
      dist[s] = d;
      if (r.cost[i] == 0) {
        queue.push_front(s);
      } else {
        queue.push_back(s);
      }
    }
  }
  return dist;
}

}  // namespace maskd::automaton_internal
