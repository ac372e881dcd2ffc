#include "grammar/avoid_strings.h"

#include <algorithm>
#include <map>
#include <optional>
#include <queue>
#include <set>

#include "absl/strings/str_cat.h"
#include "automaton/regex_text.h"
#include "automaton/utf8.h"

namespace maskd::grammar {
namespace {

// Decodes `s` as UTF-8 into code points; false when malformed.
bool DecodeCodepoints(std::string_view s, std::vector<uint32_t>* out) {
  for (size_t i = 0; i < s.size();) {
    std::optional<uint32_t> cp = DecodeUtf8(s, &i);
    if (!cp) return false;
    out->push_back(*cp);
  }
  return true;
}

// A regex under construction: nullopt is "no path", "" the empty string.
using Re = std::optional<std::string>;

std::string Group(const std::string& r) { return absl::StrCat("(?:", r, ")"); }

Re Union(const Re& a, const Re& b) {
  if (!a) return b;
  if (!b) return a;
  if (*a == *b) return a;
  if (a->empty()) return Group(*b) + "?";
  if (b->empty()) return Group(*a) + "?";
  return Group(absl::StrCat(*a, "|", *b));
}

Re Concat(const Re& a, const Re& b) {
  if (!a || !b) return std::nullopt;
  return *a + *b;
}

std::string Star(const Re& a) { return !a || a->empty() ? "" : Group(*a) + "*"; }

// The Aho-Corasick automaton of the strings to avoid, by code point.
struct AvoidAutomaton {
  struct Node {
    std::map<uint32_t, int> next;
    int fail = 0;
    bool bad = false;  // ends a string, or its failure chain does
  };
  std::vector<Node> nodes = std::vector<Node>(1);  // nodes[0]: the root
  std::set<uint32_t> alphabet;                     // every code point of the strings
  std::vector<int> order;                          // the non-root nodes, breadth first

  // goto(s, cp) completed into a DFA through the failure links.
  int Go(int s, uint32_t cp) const {
    while (true) {
      auto it = nodes[s].next.find(cp);
      if (it != nodes[s].next.end()) return it->second;
      if (s == 0) return 0;
      s = nodes[s].fail;
    }
  }
};

// Adds the strings to the trie of `a`; fails on an empty or non-UTF-8 string
// or past max_code_points.
absl::Status BuildTrie(const std::vector<std::string>& strings, const AvoidLimits& limits,
                       AvoidAutomaton* a) {
  size_t total = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    std::vector<uint32_t> cps;
    if (strings[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("string ", i, " to avoid is empty"));
    }
    if (!DecodeCodepoints(strings[i], &cps)) {
      return absl::InvalidArgumentError(absl::StrCat("string ", i, " to avoid is not UTF-8"));
    }
    total += cps.size();
    if (total > limits.max_code_points) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "strings to avoid have more than ", limits.max_code_points, " code points (max_code_points)"));
    }
    int s = 0;
    for (uint32_t cp : cps) {
      a->alphabet.insert(cp);
      auto [it, added] = a->nodes[s].next.try_emplace(cp, static_cast<int>(a->nodes.size()));
      if (added) a->nodes.emplace_back();
      s = it->second;
    }
    a->nodes[s].bad = true;
  }
  return absl::OkStatus();
}

// Sets the failure links and `bad` through them, breadth first, filling
// `order`.
void LinkFailures(AvoidAutomaton* a) {
  auto& nodes = a->nodes;
  std::queue<int> queue;
  for (auto& [cp, child] : nodes[0].next) queue.push(child);
  while (!queue.empty()) {
    const int s = queue.front();
    queue.pop();
    a->order.push_back(s);
    for (auto& [cp, child] : nodes[s].next) {
      int f = nodes[s].fail;
      while (f != 0 && !nodes[f].next.count(cp)) f = nodes[f].fail;
      auto it = nodes[f].next.find(cp);
      nodes[child].fail = it != nodes[f].next.end() && it->second != child ? it->second : 0;
      nodes[child].bad = nodes[child].bad || nodes[nodes[child].fail].bad;
      queue.push(child);
    }
  }
}

// The automaton of the texts avoiding the strings as a matrix of edge
// regexes (r[i][j]: the regex of the edge i -> j, nullopt when none). Its
// states: the good nodes, renumbered by `id` (-1 for bad nodes), then a
// start state (edge "" to the root) and a final state (edge "" from every
// good node).
struct EdgeMatrix {
  std::vector<int> id;
  int n = 0;  // good nodes
  int start() const { return n; }
  int final_state() const { return n + 1; }
  std::vector<std::vector<Re>> r;
};

EdgeMatrix BuildEdges(const AvoidAutomaton& a) {
  const auto& nodes = a.nodes;
  EdgeMatrix m;
  m.id.assign(nodes.size(), -1);
  for (size_t s = 0; s < nodes.size(); ++s) {
    if (!nodes[s].bad) m.id[s] = m.n++;
  }
  const std::vector<int>& id = m.id;
  auto& r = m.r;
  r.assign(m.n + 2, std::vector<Re>(m.n + 2));
  r[m.start()][id[0]] = "";
  for (size_t s = 0; s < nodes.size(); ++s) {
    if (nodes[s].bad) continue;
    r[id[s]][m.final_state()] = "";
    // Targets by code point of the alphabet; every other code point goes to
    // the root.
    std::map<int, std::vector<uint32_t>> to;
    for (uint32_t cp : a.alphabet) to[a.Go(static_cast<int>(s), cp)].push_back(cp);
    for (const auto& [t, cps] : to) {
      if (nodes[t].bad || t == 0) continue;
      std::string cls = "[";
      for (uint32_t cp : cps) AppendHexEscape(&cls, cp, HexDigits::kLower);
      r[id[s]][id[t]] = Union(r[id[s]][id[t]], cls + "]");
    }
    std::string root = "[^";  // the code points that lead to the root
    for (uint32_t cp : a.alphabet) {
      const int t = a.Go(static_cast<int>(s), cp);
      if (t != 0) AppendHexEscape(&root, cp, HexDigits::kLower);
    }
    r[id[s]][id[0]] = Union(r[id[s]][id[0]], root == "[^" ? "[\\x{0}-\\x{10ffff}]" : root + "]");
  }
  return m;
}

// Eliminates every good node's state from `m` (the deepest first: their
// edges are mostly back edges), leaving the regex of start -> final.
absl::StatusOr<std::string> EliminateStates(const AvoidAutomaton& a, const AvoidLimits& limits,
                                            EdgeMatrix* m) {
  std::vector<int> elim;
  for (auto it = a.order.rbegin(); it != a.order.rend(); ++it) {
    if (!a.nodes[*it].bad) elim.push_back(m->id[*it]);
  }
  elim.push_back(m->id[0]);
  auto& r = m->r;
  const int size = m->n + 2;
  std::vector<bool> gone(size, false);
  for (int k : elim) {
    const std::string loop = Star(r[k][k]);
    for (int i = 0; i < size; ++i) {
      if (gone[i] || i == k || !r[i][k]) continue;
      for (int j = 0; j < size; ++j) {
        if (gone[j] || j == k || !r[k][j]) continue;
        r[i][j] = Union(r[i][j], Concat(Concat(r[i][k], loop), r[k][j]));
        if (r[i][j] && r[i][j]->size() > limits.max_regex_bytes) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "the regex avoiding the strings needs more than ", limits.max_regex_bytes,
              " bytes (max_regex_bytes)"));
        }
      }
    }
    gone[k] = true;
    for (int i = 0; i < size; ++i) r[i][k] = r[k][i] = std::nullopt;
  }
  return r[m->start()][m->final_state()].value_or("");
}

}  // namespace

absl::StatusOr<std::string> RegexAvoiding(const std::vector<std::string>& strings,
                                          const AvoidLimits& limits) {
  AvoidAutomaton a;
  if (absl::Status s = BuildTrie(strings, limits, &a); !s.ok()) return s;
  LinkFailures(&a);
  EdgeMatrix m = BuildEdges(a);
  return EliminateStates(a, limits, &m);
}

}  // namespace maskd::grammar
