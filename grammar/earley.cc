#include "grammar/earley.h"

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace maskd::grammar {
namespace {

// An Earley item. kRule: production `id` with the dot before rhs[pos].
// kScan: terminal `id` scanned up to DFA state `pos`. kIgnore: the same for
// an ignored terminal between symbols; completing it copies every rule item
// of the origin set forward. `origin` is the set where the item began.
enum Kind : uint32_t { kRule = 0, kScan = 1, kIgnore = 2 };

struct Item {
  uint32_t kind_id;  // kind << 30 | id
  uint32_t pos;
  uint32_t origin;

  static Item Make(Kind k, uint32_t id, uint32_t pos, uint32_t origin) {
    return {static_cast<uint32_t>(k) << 30 | id, pos, origin};
  }
  Kind kind() const { return static_cast<Kind>(kind_id >> 30); }
  uint32_t id() const { return kind_id & ((1u << 30) - 1); }
  friend bool operator==(const Item& a, const Item& b) {
    return a.kind_id == b.kind_id && a.pos == b.pos && a.origin == b.origin;
  }
  template <typename H>
  friend H AbslHashValue(H h, const Item& it) {
    return H::combine(std::move(h), it.kind_id, it.pos, it.origin);
  }
};

uint64_t WaitKey(const Symbol& s) {
  return (s.is_terminal() ? uint64_t{1} << 32 : 0) | s.id;
}

}  // namespace

struct EarleyRecognizer::Chart {
  struct Set {
    std::vector<Item> items;
    absl::flat_hash_set<Item> seen;
    // Rule items (indices into `items`) whose dot is before a symbol.
    absl::flat_hash_map<uint64_t, std::vector<uint32_t>> waiting;
    bool ignore_started = false;
    size_t steps = 0;  // add() calls into this set
  };
  std::vector<Set> sets;
};

absl::StatusOr<EarleyRecognizer> EarleyRecognizer::Create(const Grammar& g,
                                                          const EarleyOptions& options) {
  auto compiled = CompiledGrammar::Create(g, options.regex_limits, options.dfa_options);
  if (!compiled.ok()) return compiled.status();
  EarleyRecognizer r;
  r.g_ = std::move(*compiled);
  r.max_items_ = options.max_items_per_position;
  r.max_steps_ = options.max_steps_per_position;
  return r;
}

absl::Status EarleyRecognizer::Run(std::string_view text, Chart* chart) const {
  const auto& productions = g_->productions();
  const auto& ignore = g_->ignore();
    chart->sets.clear();
  chart->sets.resize(text.size() + 1);
  auto& sets = chart->sets;

  // Adds `it` to set `i` unless present; fails past the item cap.
  auto add = [&](size_t i, const Item& it) -> absl::Status {
    auto& set = sets[i];
    if (++set.steps > max_steps_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("Earley set at byte offset ", i, " needs more than ", max_steps_,
                       " steps (max_steps_per_position)"));
    }
    if (!set.seen.insert(it).second) return absl::OkStatus();
    if (set.items.size() >= max_items_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("Earley set at byte offset ", i, " holds more than ", max_items_,
                       " items (max_items_per_position)"));
    }
    set.items.push_back(it);
    return absl::OkStatus();
  };
  auto advance = [](const Item& it) { return Item::Make(kRule, it.id(), it.pos + 1, it.origin); };

  // Predicts and completes within set i until nothing changes.
  auto closure = [&](size_t i) -> absl::Status {
    for (size_t k = 0; k < sets[i].items.size(); ++k) {
      const Item it = sets[i].items[k];
      if (it.kind() != kRule) continue;
      if (!ignore.empty() && !sets[i].ignore_started) {
        sets[i].ignore_started = true;
        for (uint32_t t : ignore) {
          absl::Status s = add(i, Item::Make(kIgnore, t, g_->dfa(t).start(), i));
          if (!s.ok()) return s;
        }
      }
      const Production& p = productions[it.id()];
      if (it.pos == p.rhs.size()) {
        // Complete: advance the items of the origin set waiting on p.rule.
        // When origin == i the list may grow while we read it: index anew.
        auto found = sets[it.origin].waiting.find(WaitKey(Symbol::Rule(p.rule)));
        if (found == sets[it.origin].waiting.end()) continue;
        const uint64_t key = found->first;
        for (size_t w = 0;; ++w) {
          const auto& list = sets[it.origin].waiting[key];
          if (w >= list.size()) break;
          const Item parent = sets[it.origin].items[list[w]];
          absl::Status s = add(i, advance(parent));
          if (!s.ok()) return s;
        }
        continue;
      }
      const Symbol& next = p.rhs[it.pos];
      sets[i].waiting[WaitKey(next)].push_back(static_cast<uint32_t>(k));
      if (next.is_terminal()) {
        absl::Status s = add(i, Item::Make(kScan, next.id, g_->dfa(next.id).start(), i));
        if (!s.ok()) return s;
        if (g_->nullable_terminal(next.id)) {
          s = add(i, advance(it));
          if (!s.ok()) return s;
        }
      } else {
        for (uint32_t prod : g_->rule_productions(next.id)) {
          absl::Status s = add(i, Item::Make(kRule, prod, 0, i));
          if (!s.ok()) return s;
        }
        if (g_->nullable_rule(next.id)) {
          absl::Status s = add(i, advance(it));
          if (!s.ok()) return s;
        }
      }
    }
    return absl::OkStatus();
  };

  for (uint32_t prod : g_->rule_productions(g_->start())) {
    absl::Status s = add(0, Item::Make(kRule, prod, 0, 0));
    if (!s.ok()) return s;
  }
  absl::Status s = closure(0);
  if (!s.ok()) return s;
  for (size_t i = 0; i < text.size(); ++i) {
    const uint8_t byte = static_cast<uint8_t>(text[i]);
    // Scan: every terminal in progress takes the byte.
    for (size_t k = 0; k < sets[i].items.size(); ++k) {
      const Item it = sets[i].items[k];
      if (it.kind() == kRule) continue;
      const Dfa& dfa = g_->dfa(it.id());
      const Dfa::State next = dfa.Next(it.pos, byte);
      if (next == Dfa::kDead) continue;
      s = add(i + 1, Item::Make(it.kind(), it.id(), next, it.origin));
      if (!s.ok()) return s;
      if (!dfa.IsAccepting(next)) continue;
      auto& origin = sets[it.origin];
      if (it.kind() == kScan) {
        auto found = origin.waiting.find(WaitKey(Symbol::Terminal(it.id())));
        if (found == origin.waiting.end()) continue;
        for (uint32_t w : found->second) {
          s = add(i + 1, advance(origin.items[w]));
          if (!s.ok()) return s;
        }
      } else {
        // An ignored string ended: whatever could follow at its start can
        // follow here.
        for (const Item& o : origin.items) {
          if (o.kind() != kRule) continue;
          s = add(i + 1, o);
          if (!s.ok()) return s;
        }
      }
    }
    if (sets[i + 1].items.empty()) {
      // Dead: no later set can gain items either.
      sets.resize(i + 2);
      return absl::OkStatus();
    }
    s = closure(i + 1);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> EarleyRecognizer::Accepts(std::string_view text) const {
  Chart chart;
  absl::Status s = Run(text, &chart);
  if (!s.ok()) return s;
  if (chart.sets.size() != text.size() + 1) return false;
  const auto& productions = g_->productions();
  for (const Item& it : chart.sets.back().items) {
    if (it.kind() != kRule || it.origin != 0) continue;
    const Production& p = productions[it.id()];
    if (p.rule == g_->start() && it.pos == p.rhs.size()) return true;
  }
  return false;
}

absl::StatusOr<bool> EarleyRecognizer::IsViablePrefix(std::string_view prefix) const {
  Chart chart;
  absl::Status s = Run(prefix, &chart);
  if (!s.ok()) return s;
  return chart.sets.size() == prefix.size() + 1 && !chart.sets.back().items.empty();
}

absl::StatusOr<std::bitset<256>> EarleyRecognizer::NextBytes(std::string_view prefix) const {
  Chart chart;
  absl::Status s = Run(prefix, &chart);
  if (!s.ok()) return s;
  std::bitset<256> out;
  if (chart.sets.size() != prefix.size() + 1) return out;
  // The next set is seeded only by scans, and a live DFA state is viable.
  for (const Item& it : chart.sets.back().items) {
    if (it.kind() == kRule) continue;
    const Dfa& dfa = g_->dfa(it.id());
    for (int b = 0; b < 256; ++b) {
      if (!out[b] && dfa.Next(it.pos, static_cast<uint8_t>(b)) != Dfa::kDead) out[b] = true;
    }
  }
  return out;
}

}  // namespace maskd::grammar
