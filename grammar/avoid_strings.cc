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

}  // namespace

absl::StatusOr<std::string> RegexAvoiding(const std::vector<std::string>& strings,
                                          const AvoidLimits& limits) {
  // The trie of the strings, by code point.
  struct Node {
    std::map<uint32_t, int> next;
    int fail = 0;
    bool bad = false;  // ends a string, or its failure chain does
  };
  std::vector<Node> nodes(1);
  std::set<uint32_t> alphabet;
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
      alphabet.insert(cp);
      auto [it, added] = nodes[s].next.try_emplace(cp, static_cast<int>(nodes.size()));
      if (added) nodes.emplace_back();
      s = it->second;
    }
    nodes[s].bad = true;
  }
  // Failure links, breadth first; goto(s, cp) completed into a DFA.
  std::vector<int> order;
  std::queue<int> queue;
  for (auto& [cp, child] : nodes[0].next) queue.push(child);
  while (!queue.empty()) {
    const int s = queue.front();
    queue.pop();
    order.push_back(s);
    for (auto& [cp, child] : nodes[s].next) {
      int f = nodes[s].fail;
      while (f != 0 && !nodes[f].next.count(cp)) f = nodes[f].fail;
      auto it = nodes[f].next.find(cp);
      nodes[child].fail = it != nodes[f].next.end() && it->second != child ? it->second : 0;
      nodes[child].bad = nodes[child].bad || nodes[nodes[child].fail].bad;
      queue.push(child);
    }
  }
  auto go = [&](int s, uint32_t cp) {
    while (true) {
      auto it = nodes[s].next.find(cp);
      if (it != nodes[s].next.end()) return it->second;
      if (s == 0) return 0;
      s = nodes[s].fail;
    }
  };
  // States: the good nodes, renumbered; the last two are start and final.
  std::vector<int> id(nodes.size(), -1);
  int n = 0;
  for (size_t s = 0; s < nodes.size(); ++s) {
    if (!nodes[s].bad) id[s] = n++;
  }
  const int start = n, final_state = n + 1;
  std::vector<std::vector<Re>> r(n + 2, std::vector<Re>(n + 2));
  r[start][id[0]] = "";
  for (size_t s = 0; s < nodes.size(); ++s) {
    if (nodes[s].bad) continue;
    r[id[s]][final_state] = "";
    // Targets by code point of the alphabet; every other code point goes to
    // the root.
    std::map<int, std::vector<uint32_t>> to;
    for (uint32_t cp : alphabet) to[go(static_cast<int>(s), cp)].push_back(cp);
    for (const auto& [t, cps] : to) {
      if (nodes[t].bad || t == 0) continue;
      std::string cls = "[";
      for (uint32_t cp : cps) AppendHexEscape(&cls, cp, HexDigits::kLower);
      r[id[s]][id[t]] = Union(r[id[s]][id[t]], cls + "]");
    }
    std::string root = "[^";  // the code points that lead to the root
    for (uint32_t cp : alphabet) {
      const int t = go(static_cast<int>(s), cp);
      if (t != 0) AppendHexEscape(&root, cp, HexDigits::kLower);
    }
    r[id[s]][id[0]] = Union(r[id[s]][id[0]], root == "[^" ? "[\\x{0}-\\x{10ffff}]" : root + "]");
  }
  // Eliminate the deepest states first (their edges are mostly back edges).
  std::vector<int> elim;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!nodes[*it].bad) elim.push_back(id[*it]);
  }
  elim.push_back(id[0]);
  std::vector<bool> gone(n + 2, false);
  for (int k : elim) {
    const std::string loop = Star(r[k][k]);
    for (int i = 0; i < n + 2; ++i) {
      if (gone[i] || i == k || !r[i][k]) continue;
      for (int j = 0; j < n + 2; ++j) {
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
    for (int i = 0; i < n + 2; ++i) r[i][k] = r[k][i] = std::nullopt;
  }
  return r[start][final_state].value_or("");
}

}  // namespace maskd::grammar
