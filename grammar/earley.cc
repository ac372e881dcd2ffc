#include "grammar/earley.h"

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grammar/earley_item.h"

namespace maskd::grammar {
namespace {

using Item = EarleyItem;
constexpr EarleyItem::Kind kRule = EarleyItem::kRule;
constexpr EarleyItem::Kind kScan = EarleyItem::kScan;
constexpr EarleyItem::Kind kIgnore = EarleyItem::kIgnore;

// One Earley set: its items in the order they were added, hashed for
// membership, and its rule items by the symbol after their dot.
struct EarleySet {
  std::vector<Item> items;
  absl::flat_hash_set<Item> seen;
  // Rule items (indices into `items`) whose dot is before a symbol, by
  // EarleyWaitKey of that symbol.
  absl::flat_hash_map<uint32_t, std::vector<uint32_t>> waiting;
  bool ignore_started = false;
  size_t steps = 0;  // Add() calls into this set
};

// Fills the Earley sets of one text, set i from set i-1, within the per-set
// limits. `sets` is sized once (one per text position, plus the start set)
// and never reallocated, so references into it stay valid.
class ChartBuilder {
 public:
  ChartBuilder(const CompiledGrammar& g, size_t max_items, size_t max_steps,
               std::vector<EarleySet>* sets)
      : g_(g), max_items_(max_items), max_steps_(max_steps), sets_(*sets) {}

  // Predicts the start rule into set 0 and closes it.
  absl::Status Start() {
    for (uint32_t prod : g_.rule_productions(g_.start())) {
      absl::Status s = Add(0, Item::Make(kRule, prod, 0, 0));
      if (!s.ok()) return s;
    }
    return Closure(0);
  }
  // Scans `byte` from every terminal in progress in set i into set i+1, with
  // what the terminals that end there complete.
  absl::Status Scan(size_t i, uint8_t byte);
  // Predicts and completes within set i until nothing changes.
  absl::Status Closure(size_t i);

 private:
  // Adds `it` to set `i` unless present; fails past a per-set limit.
  absl::Status Add(size_t i, const Item& it);
  // Predicts every ignored terminal into set i.
  absl::Status PredictIgnored(size_t i);
  // Rule item `it` of set i is complete: advances into set i the items of
  // its origin set waiting on its rule.
  absl::Status CompleteRule(size_t i, const Item& it);
  // Rule item `it` of set i has its dot before `next`: predicts it, and
  // steps over it when it is nullable.
  absl::Status Predict(size_t i, const Item& it, const Symbol& next);
  // The terminal of scan item `it` (origin in set <= i) ended at set i+1:
  // advances its waiting parents (kScan), or copies every rule item of its
  // origin set (kIgnore: whatever could follow at its start can follow here).
  absl::Status CompleteTerminal(size_t i, const Item& it);

  const CompiledGrammar& g_;
  const size_t max_items_;
  const size_t max_steps_;
  std::vector<EarleySet>& sets_;
};

absl::Status ChartBuilder::Add(size_t i, const Item& it) {
  EarleySet& set = sets_[i];
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
}

absl::Status ChartBuilder::Closure(size_t i) {
  const auto& productions = g_.productions();
  for (size_t k = 0; k < sets_[i].items.size(); ++k) {
    const Item it = sets_[i].items[k];
    if (it.kind() != kRule) continue;
    if (!g_.ignore().empty() && !sets_[i].ignore_started) {
      absl::Status s = PredictIgnored(i);
      if (!s.ok()) return s;
    }
    const Production& p = productions[it.id()];
    if (it.pos == p.rhs.size()) {
      absl::Status s = CompleteRule(i, it);
      if (!s.ok()) return s;
      continue;
    }
    const Symbol& next = p.rhs[it.pos];
    sets_[i].waiting[EarleyWaitKey(next)].push_back(static_cast<uint32_t>(k));
    absl::Status s = Predict(i, it, next);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ChartBuilder::PredictIgnored(size_t i) {
  sets_[i].ignore_started = true;
  for (uint32_t t : g_.ignore()) {
    absl::Status s = Add(i, Item::Make(kIgnore, t, g_.dfa(t).start(), i));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ChartBuilder::CompleteRule(size_t i, const Item& it) {
  const Production& p = g_.productions()[it.id()];
  auto& waiting = sets_[it.origin].waiting;
  auto found = waiting.find(EarleyWaitKey(Symbol::Rule(p.rule)));
  if (found == waiting.end()) return absl::OkStatus();
  // When origin == i the list may grow while we read it: index anew.
  const uint32_t key = found->first;
  for (size_t w = 0;; ++w) {
    const auto& list = waiting[key];
    if (w >= list.size()) break;
    const Item parent = sets_[it.origin].items[list[w]];
    absl::Status s = Add(i, parent.Advanced());
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ChartBuilder::Predict(size_t i, const Item& it, const Symbol& next) {
  if (next.is_terminal()) {
    absl::Status s = Add(i, Item::Make(kScan, next.id, g_.dfa(next.id).start(), i));
    if (!s.ok()) return s;
    if (g_.nullable_terminal(next.id)) return Add(i, it.Advanced());
    return absl::OkStatus();
  }
  for (uint32_t prod : g_.rule_productions(next.id)) {
    absl::Status s = Add(i, Item::Make(kRule, prod, 0, i));
    if (!s.ok()) return s;
  }
  if (g_.nullable_rule(next.id)) return Add(i, it.Advanced());
  return absl::OkStatus();
}

absl::Status ChartBuilder::Scan(size_t i, uint8_t byte) {
  for (size_t k = 0; k < sets_[i].items.size(); ++k) {
    const Item it = sets_[i].items[k];
    if (it.kind() == kRule) continue;
    const Dfa& dfa = g_.dfa(it.id());
    const Dfa::State next = dfa.Next(it.pos, byte);
    if (next == Dfa::kDead) continue;
    absl::Status s = Add(i + 1, Item::Make(it.kind(), it.id(), next, it.origin));
    if (!s.ok()) return s;
    if (!dfa.IsAccepting(next)) continue;
    s = CompleteTerminal(i, it);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ChartBuilder::CompleteTerminal(size_t i, const Item& it) {
  const EarleySet& origin = sets_[it.origin];
  if (it.kind() == kScan) {
    auto found = origin.waiting.find(EarleyWaitKey(Symbol::Terminal(it.id())));
    if (found == origin.waiting.end()) return absl::OkStatus();
    for (uint32_t w : found->second) {
      absl::Status s = Add(i + 1, origin.items[w].Advanced());
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  for (const Item& o : origin.items) {
    if (o.kind() != kRule) continue;
    absl::Status s = Add(i + 1, o);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

struct EarleyRecognizer::Chart {
  std::vector<EarleySet> sets;
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
  auto& sets = chart->sets;
  sets.clear();
  sets.resize(text.size() + 1);
  ChartBuilder builder(*g_, max_items_, max_steps_, &sets);
  absl::Status s = builder.Start();
  if (!s.ok()) return s;
  for (size_t i = 0; i < text.size(); ++i) {
    s = builder.Scan(i, static_cast<uint8_t>(text[i]));
    if (!s.ok()) return s;
    if (sets[i + 1].items.empty()) {
      // Dead: no later set can gain items either.
      sets.resize(i + 2);
      return absl::OkStatus();
    }
    s = builder.Closure(i + 1);
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
