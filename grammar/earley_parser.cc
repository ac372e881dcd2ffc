#include "grammar/earley_parser.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace maskd::grammar {
namespace {

uint32_t HashItem(const EarleyItem& it) {
  uint64_t h = (uint64_t{it.kind_id} << 32 | it.pos) * 0x9E3779B97F4A7C15ull;
  h ^= (h >> 29) ^ (uint64_t{it.origin} * 0xBF58476D1CE4E5B9ull);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

}  // namespace

absl::StatusOr<EarleyParser> EarleyParser::Create(std::shared_ptr<const CompiledGrammar> grammar,
                                                  const EarleyOptions& options) {
  EarleyParser p;
  p.g_ = std::move(grammar);
  p.max_items_per_set_ = options.max_items_per_position;
  p.max_steps_per_set_ = options.max_steps_per_position;
  p.max_chart_items_ = options.max_chart_items;
  p.table_.assign(64, 0);
  p.stamp_.assign(64, 0);
  p.BeginSet();
  for (uint32_t prod : p.g_->rule_productions(p.g_->start())) {
    absl::Status s = p.Add(EarleyItem::Make(EarleyItem::kRule, prod, 0, 0));
    if (!s.ok()) return s;
  }
  absl::Status s = p.Closure();
  if (!s.ok()) return s;
  p.FinishSet();  // never empty: the start rule has a production
  return p;
}

void EarleyParser::BeginSet() {
  set_begin_.push_back(static_cast<uint32_t>(items_.size()));
  if (++generation_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    generation_ = 1;
  }
  steps_ = 0;
  ignore_started_ = false;
}

void EarleyParser::AbortSet() {
  items_.resize(set_begin_.back());
  set_begin_.pop_back();
}

bool EarleyParser::FinishSet() {
  const uint32_t begin = set_begin_.back();
  if (begin == items_.size()) {
    set_begin_.pop_back();
    return false;
  }
  const auto& productions = g_->productions();
  const size_t w0 = waiting_.size();
  for (uint32_t k = begin; k < items_.size(); ++k) {
    const EarleyItem& it = items_[k];
    if (it.kind() != EarleyItem::kRule) continue;
    const Production& p = productions[it.id()];
    if (it.pos < p.rhs.size()) waiting_.push_back({EarleyWaitKey(p.rhs[it.pos]), k});
  }
  std::sort(waiting_.begin() + w0, waiting_.end(),
            [](const Waiting& a, const Waiting& b) { return a.key < b.key; });
  wait_begin_.push_back(static_cast<uint32_t>(w0));
  return true;
}

void EarleyParser::PopTo(size_t n) {
  if (n < 1 || n >= num_sets()) return;
  if (finish_begin_.size() > n) {
    finish_.resize(finish_begin_[n]);
    finish_begin_.resize(n);
  }
  items_.resize(set_begin_[n]);
  set_begin_.resize(n);
  waiting_.resize(wait_begin_[n]);
  wait_begin_.resize(n);
}

void EarleyParser::ReleaseSpare() {
  grammar::ReleaseSpare(items_);
  grammar::ReleaseSpare(set_begin_);
  grammar::ReleaseSpare(waiting_);
  grammar::ReleaseSpare(wait_begin_);
  grammar::ReleaseSpare(finish_);
  grammar::ReleaseSpare(finish_begin_);
  ReleaseScratch(finish_edges_);
  ReleaseScratch(finish_heap_);
  // The table holds the set being built; none is now. Room for a set twice
  // the last one's size before GrowTable, as after its own doublings.
  if (HeldBytes(table_) <= chart_memory::kSlackBytes) return;
  size_t cap = 64;
  while (cap < 4 * last_set().size()) cap *= 2;
  if (table_.size() > 2 * cap) {
    ChartVector<uint32_t>(cap, 0).swap(table_);
    ChartVector<uint32_t>(cap, 0).swap(stamp_);
    generation_ = 0;  // BeginSet makes it 1: every stamp 0 is free
  }
}

size_t EarleyParser::allocated_bytes() const {
  return HeldBytes(items_) + HeldBytes(set_begin_) + HeldBytes(waiting_) + HeldBytes(wait_begin_) +
         HeldBytes(table_) + HeldBytes(stamp_) + HeldBytes(finish_) + HeldBytes(finish_begin_) +
         HeldBytes(finish_edges_) + HeldBytes(finish_heap_);
}

void EarleyParser::GrowTable() {
  const size_t cap = table_.size() * 2;
  table_.assign(cap, 0);
  stamp_.assign(cap, 0);
  generation_ = 1;
  const size_t mask = cap - 1;
  for (uint32_t k = set_begin_.back(); k < items_.size(); ++k) {
    size_t slot = HashItem(items_[k]) & mask;
    while (stamp_[slot] == generation_) slot = (slot + 1) & mask;
    stamp_[slot] = generation_;
    table_[slot] = k;
  }
}

void EarleyParser::SetWorkLimit(size_t max_steps, const char* limit,
                                const Interrupt* interrupt) {
  work_ = 0;
  max_work_ = max_steps;
  work_limit_ = limit;
  interrupt_ = interrupt;
  work_check_ = 0;
  (void)CheckWork();  // work_ 0 passes: sets work_check_
}

absl::Status EarleyParser::CheckWork() {
  if (work_ > max_work_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the grammar parser needs more than ", max_work_, " steps in one call (", work_limit_,
        "; a step: one Earley item added or found, by a scan, prediction or completion)"));
  }
  if (interrupt_ != nullptr && work_ > 0) {
    absl::Status s = interrupt_->Check();
    if (!s.ok()) return s;
  }
  const size_t past_limit = max_work_ == SIZE_MAX ? SIZE_MAX : max_work_ + 1;
  const size_t next_poll = interrupt_ != nullptr ? work_ + kInterruptPollSteps : SIZE_MAX;
  work_check_ = std::min(past_limit, next_poll);
  return absl::OkStatus();
}

absl::Status EarleyParser::Add(const EarleyItem& item) {
  const size_t set = num_sets() - 1;
  if (absl::Status w = Tick(); !w.ok()) return w;
  if (++steps_ > max_steps_per_set_) {
    return absl::ResourceExhaustedError(absl::StrCat("Earley set ", set, " needs more than ",
                                                     max_steps_per_set_,
                                                     " steps (max_steps_per_position)"));
  }
  const size_t mask = table_.size() - 1;
  size_t slot = HashItem(item) & mask;
  while (stamp_[slot] == generation_) {
    if (items_[table_[slot]] == item) return absl::OkStatus();
    slot = (slot + 1) & mask;
  }
  const size_t in_set = items_.size() - set_begin_.back();
  if (in_set >= max_items_per_set_) {
    return absl::ResourceExhaustedError(absl::StrCat("Earley set ", set, " holds more than ",
                                                     max_items_per_set_,
                                                     " items (max_items_per_position)"));
  }
  if (items_.size() >= max_chart_items_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the parse holds more than ", max_chart_items_, " Earley items (max_chart_items)"));
  }
  stamp_[slot] = generation_;
  table_[slot] = static_cast<uint32_t>(items_.size());
  items_.push_back(item);
  if ((in_set + 1) * 2 > table_.size()) GrowTable();
  return absl::OkStatus();
}

absl::Status EarleyParser::AdvanceWaiting(uint32_t origin, uint32_t key) {
  const uint32_t begin = wait_begin_[origin];
  const uint32_t end =
      origin + 1 < wait_begin_.size() ? wait_begin_[origin + 1] : static_cast<uint32_t>(waiting_.size());
  auto lo = std::lower_bound(waiting_.begin() + begin, waiting_.begin() + end, key,
                             [](const Waiting& w, uint32_t k) { return w.key < k; });
  for (; lo != waiting_.begin() + end && lo->key == key; ++lo) {
    absl::Status s = Add(items_[lo->item].Advanced());
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status EarleyParser::Closure() {
  const uint32_t set = static_cast<uint32_t>(num_sets() - 1);
  const uint32_t begin = set_begin_.back();
  const auto& productions = g_->productions();
  for (size_t k = begin; k < items_.size(); ++k) {
    const EarleyItem it = items_[k];
    if (it.kind() != EarleyItem::kRule) continue;
    if (!ignore_started_ && !g_->ignore().empty()) {
      ignore_started_ = true;
      for (uint32_t t : g_->ignore()) {
        absl::Status s = Add(EarleyItem::Make(EarleyItem::kIgnore, t, g_->dfa(t).start(), set));
        if (!s.ok()) return s;
      }
    }
    const Production& p = productions[it.id()];
    if (it.pos == p.rhs.size()) {
      const uint32_t key = EarleyWaitKey(Symbol::Rule(p.rule));
      if (it.origin < set) {
        absl::Status s = AdvanceWaiting(it.origin, key);
        if (!s.ok()) return s;
        continue;
      }
      // A rule completed in its own set is nullable: its waiters were already
      // advanced when they predicted it, and later ones will be; this pass
      // catches the rest. The set may grow while we read it: index anew.
      for (size_t j = begin; j < items_.size(); ++j) {
        if (absl::Status t = Tick(); !t.ok()) return t;
        const EarleyItem w = items_[j];
        if (w.kind() != EarleyItem::kRule) continue;
        const Production& wp = productions[w.id()];
        if (w.pos < wp.rhs.size() && EarleyWaitKey(wp.rhs[w.pos]) == key) {
          absl::Status s = Add(w.Advanced());
          if (!s.ok()) return s;
        }
      }
      continue;
    }
    const Symbol& next = p.rhs[it.pos];
    if (next.is_terminal()) {
      absl::Status s =
          Add(EarleyItem::Make(EarleyItem::kScan, next.id, g_->dfa(next.id).start(), set));
      if (!s.ok()) return s;
      if (g_->nullable_terminal(next.id)) {
        s = Add(it.Advanced());
        if (!s.ok()) return s;
      }
    } else {
      for (uint32_t prod : g_->rule_productions(next.id)) {
        absl::Status s = Add(EarleyItem::Make(EarleyItem::kRule, prod, 0, set));
        if (!s.ok()) return s;
      }
      if (g_->nullable_rule(next.id)) {
        absl::Status s = Add(it.Advanced());
        if (!s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> EarleyParser::Push(uint8_t byte) {
  const uint32_t prev_begin = set_begin_.back();
  const uint32_t prev_end = static_cast<uint32_t>(items_.size());
  BeginSet();
  absl::Status s;
  for (uint32_t k = prev_begin; k < prev_end && s.ok(); ++k) {
    const EarleyItem it = items_[k];
    if (it.kind() == EarleyItem::kRule) continue;
    const Dfa& dfa = g_->dfa(it.id());
    const Dfa::State next = dfa.Next(it.pos, byte);
    if (next == Dfa::kDead) continue;
    s = Add(EarleyItem::Make(it.kind(), it.id(), next, it.origin));
    if (s.ok() && dfa.IsAccepting(next)) s = Complete(it);
  }
  return CloseAndFinish(s);
}

absl::StatusOr<bool> EarleyParser::PushCompletion(const EarleyItem& scan) {
  BeginSet();
  return CloseAndFinish(Complete(scan));
}

absl::Status EarleyParser::Complete(const EarleyItem& scan) {
  if (scan.kind() == EarleyItem::kScan) {
    return AdvanceWaiting(scan.origin, EarleyWaitKey(Symbol::Terminal(scan.id())));
  }
  // An ignored string ended: the terminals that could begin at its start
  // (origin) begin here instead, still waited for by the rule items there,
  // and so may more ignored strings. The predictions of the origin set are
  // its non-rule items that begin there.
  const uint32_t o = scan.origin;
  const uint32_t o_end = set_begin_[o + 1];
  for (uint32_t j = set_begin_[o]; j < o_end; ++j) {
    const EarleyItem it = items_[j];
    if (it.kind() == EarleyItem::kRule || it.origin != o) continue;
    absl::Status s = Add(it);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> EarleyParser::CloseAndFinish(absl::Status s) {
  if (s.ok() && set_begin_.back() != items_.size()) s = Closure();
  if (!s.ok()) {
    AbortSet();
    return s;
  }
  return FinishSet();
}

bool EarleyParser::SetAccepts(uint32_t s) const {
  const auto& productions = g_->productions();
  const uint32_t end = s + 1 < num_sets() ? set_begin_[s + 1] : static_cast<uint32_t>(items_.size());
  for (uint32_t k = set_begin_[s]; k < end; ++k) {
    const EarleyItem& it = items_[k];
    if (it.kind() != EarleyItem::kRule || it.origin != 0) continue;
    const Production& p = productions[it.id()];
    if (p.rule == g_->start() && it.pos == p.rhs.size()) return true;
  }
  return false;
}

bool EarleyParser::IsAccepting() const {
  const uint32_t last = static_cast<uint32_t>(num_sets() - 1);
  if (SetAccepts(last)) return true;
  // Or ignored text that may end here follows an accepted text.
  for (const EarleyItem& it : last_set()) {
    if (it.kind() == EarleyItem::kIgnore && g_->dfa(it.id()).IsAccepting(it.pos) &&
        it.origin < last && SetAccepts(it.origin)) {
      return true;
    }
  }
  return false;
}

std::bitset<256> EarleyParser::NextBytes() const {
  std::bitset<256> out;
  for (const EarleyItem& it : last_set()) {
    if (it.kind() == EarleyItem::kRule) continue;
    const Dfa& dfa = g_->dfa(it.id());
    for (int b = 0; b < 256; ++b) {
      if (!out[b] && dfa.Next(it.pos, static_cast<uint8_t>(b)) != Dfa::kDead) out[b] = true;
    }
  }
  return out;
}

absl::Span<const EarleyParser::Waiting> EarleyParser::WaitingOf(uint32_t s) const {
  const uint32_t begin = wait_begin_[s];
  const uint32_t end =
      s + 1 < wait_begin_.size() ? wait_begin_[s + 1] : static_cast<uint32_t>(waiting_.size());
  return absl::MakeConstSpan(waiting_).subspan(begin, end - begin);
}

uint64_t EarleyParser::RuleFinish(uint32_t s, uint32_t r) const {
  // The start rule completed from the start is an accepted text.
  if (s == 0 && r == g_->start()) return 0;
  const auto begin = finish_.begin() + finish_begin_[s];
  const auto end = s + 1 < finish_begin_.size() ? finish_.begin() + finish_begin_[s + 1] : finish_.end();
  auto it = std::lower_bound(begin, end, std::make_pair(r, uint64_t{0}));
  return it != end && it->first == r ? it->second : CompiledGrammar::kNoLength;
}

uint64_t EarleyParser::TerminalFinish(uint32_t s, uint32_t t) const {
  const uint32_t key = EarleyWaitKey(Symbol::Terminal(t));
  absl::Span<const Waiting> w = WaitingOf(s);
  auto lo = std::lower_bound(w.begin(), w.end(), key,
                             [](const Waiting& x, uint32_t k) { return x.key < k; });
  uint64_t best = CompiledGrammar::kNoLength;
  for (; lo != w.end() && lo->key == key; ++lo) {
    const EarleyItem& x = items_[lo->item];
    const Production& p = g_->productions()[x.id()];
    best = std::min(best, CompiledGrammar::SaturatingAdd(g_->min_suffix_length(x.id(), x.pos + 1),
                                                         RuleFinish(x.origin, p.rule)));
  }
  return best;
}

uint64_t EarleyParser::SetFinish(uint32_t s) const {
  const uint32_t end = s + 1 < set_begin_.size() ? set_begin_[s + 1] : static_cast<uint32_t>(items_.size());
  uint64_t best = CompiledGrammar::kNoLength;
  for (uint32_t k = set_begin_[s]; k < end; ++k) {
    const EarleyItem& y = items_[k];
    if (y.kind() != EarleyItem::kRule) continue;
    best = std::min(best, CompiledGrammar::SaturatingAdd(g_->min_suffix_length(y.id(), y.pos),
                                                         RuleFinish(y.origin, g_->productions()[y.id()].rule)));
  }
  return best;
}

// RuleFinish(s, r) = min over the items x of s waiting on r of
//   min_suffix(x after r) + RuleFinish(x.origin, x's rule).
// Items that began in s itself make the rules of s depend on one another
// (weights >= 0): a shortest-path search over s's waited rules, seeded by
// the items that began earlier (their sets are final) and, in the start set,
// by the start rule's own items.
void EarleyParser::ComputeFinish(uint32_t s) const {
  absl::Span<const Waiting> w = WaitingOf(s);
  const uint32_t base = static_cast<uint32_t>(finish_.size());
  finish_begin_.push_back(base);
  for (const Waiting& x : w) {
    if (x.key & kEarleyTerminalKey) break;  // terminals sort after rules
    const uint32_t r = x.key;
    if (finish_.size() == base || finish_.back().first != r) {
      finish_.push_back({r, CompiledGrammar::kNoLength});
    }
  }
  auto index_of = [&](uint32_t r) -> int64_t {
    auto it = std::lower_bound(finish_.begin() + base, finish_.end(), std::make_pair(r, uint64_t{0}));
    return it != finish_.end() && it->first == r ? it - finish_.begin() : -1;
  };
  finish_edges_.clear();
  uint32_t node = base;
  for (const Waiting& x : w) {
    if (x.key & kEarleyTerminalKey) break;
    while (finish_[node].first != x.key) ++node;
    const EarleyItem& item = items_[x.item];
    const uint32_t rule = g_->productions()[item.id()].rule;
    const uint64_t rest = g_->min_suffix_length(item.id(), item.pos + 1);
    if (item.origin < s || (s == 0 && rule == g_->start())) {
      const uint64_t up = item.origin < s ? RuleFinish(item.origin, rule) : 0;
      finish_[node].second = std::min(finish_[node].second, CompiledGrammar::SaturatingAdd(rest, up));
    }
    if (item.origin == s) {
      const int64_t from = index_of(rule);
      if (from >= 0) finish_edges_.push_back({static_cast<uint32_t>(from), node, rest});
    }
  }
  if (finish_edges_.empty()) return;
  std::sort(finish_edges_.begin(), finish_edges_.end(),
            [](const FinishEdge& a, const FinishEdge& b) { return a.from < b.from; });
  const auto later = std::greater<std::pair<uint64_t, uint32_t>>();
  finish_heap_.clear();
  for (uint32_t i = base; i < finish_.size(); ++i) {
    if (finish_[i].second != CompiledGrammar::kNoLength) finish_heap_.push_back({finish_[i].second, i});
  }
  std::make_heap(finish_heap_.begin(), finish_heap_.end(), later);
  while (!finish_heap_.empty()) {
    std::pop_heap(finish_heap_.begin(), finish_heap_.end(), later);
    const auto [d, i] = finish_heap_.back();
    finish_heap_.pop_back();
    if (d != finish_[i].second) continue;
    auto e = std::lower_bound(finish_edges_.begin(), finish_edges_.end(), i,
                              [](const FinishEdge& a, uint32_t v) { return a.from < v; });
    for (; e != finish_edges_.end() && e->from == i; ++e) {
      const uint64_t nd = CompiledGrammar::SaturatingAdd(d, e->bytes);
      if (nd < finish_[e->to].second) {
        finish_[e->to].second = nd;
        finish_heap_.push_back({nd, e->to});
        std::push_heap(finish_heap_.begin(), finish_heap_.end(), later);
      }
    }
  }
}

uint64_t EarleyParser::MinBytesToFinish() const {
  if (IsAccepting()) return 0;
  while (finish_begin_.size() < num_sets()) ComputeFinish(static_cast<uint32_t>(finish_begin_.size()));
  uint64_t best = CompiledGrammar::kNoLength;
  for (const EarleyItem& it : last_set()) {
    uint64_t cost;
    if (it.kind() == EarleyItem::kRule) {
      cost = CompiledGrammar::SaturatingAdd(g_->min_suffix_length(it.id(), it.pos),
                                            RuleFinish(it.origin, g_->productions()[it.id()].rule));
    } else {
      const uint64_t rest = g_->dfa(it.id()).DistanceToAccept(it.pos);
      cost = CompiledGrammar::SaturatingAdd(
          rest, it.kind() == EarleyItem::kScan ? TerminalFinish(it.origin, it.id()) : SetFinish(it.origin));
    }
    best = std::min(best, cost);
  }
  return best;
}

}  // namespace maskd::grammar
