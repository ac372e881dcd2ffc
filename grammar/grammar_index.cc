#include "grammar/grammar_index.h"

#include <algorithm>
#include <bitset>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/mask_bits.h"
#include "tokenizer/token_trie.h"

namespace maskd::grammar {
namespace {

void MarkTokens(const TokenTrie& trie, uint32_t node, uint32_t* words) {
  const uint32_t* ids = trie.token_ids();
  for (uint32_t k = trie.token_begin()[node]; k < trie.token_begin()[node + 1]; ++k) {
    words[ids[k] >> 5] |= 1u << (ids[k] & 31);
  }
}

// Answers, along one walk of trie nodes in increasing order that only adds
// tokens to `words`, whether a node's subtree holds a token in neither
// `words` nor `never` (mask words). Invariant: every token slot in
// [token_begin[n], next_) of the last node n asked about is in one of them,
// and stays so; each slot is read at most once per walk.
class UnmarkedCursor {
 public:
  UnmarkedCursor(const TokenTrie& trie, const uint32_t* words, const uint32_t* never)
      : nodes_(trie.nodes()),
        begin_(trie.token_begin()),
        ids_(trie.token_ids()),
        words_(words),
        never_(never) {}

  bool SubtreeHasUnmarked(uint32_t node) {
    const uint32_t end = begin_[nodes_[node].next];
    next_ = std::max(next_, begin_[node]);
    while (next_ < end && IsMarked(ids_[next_])) ++next_;
    return next_ < end;
  }

 private:
  bool IsMarked(uint32_t t) const {
    return ((words_[t >> 5] | never_[t >> 5]) >> (t & 31) & 1) != 0;
  }

  const TokenTrie::Node* nodes_;
  const uint32_t* begin_;
  const uint32_t* ids_;
  const uint32_t* words_;
  const uint32_t* never_;
  uint32_t next_ = 0;
};

}  // namespace

absl::Status GrammarIndex::OverBudget() const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "a grammar mask needs more than ", options_.max_mask_work,
      " steps (trie nodes visited plus Earley sets built; max_mask_work)"));
}

absl::StatusOr<std::shared_ptr<const GrammarIndex>> GrammarIndex::Create(
    const Grammar& g, std::shared_ptr<const TokenizerContext> context, const Options& options) {
  if (context == nullptr) return absl::InvalidArgumentError("GrammarIndex needs a tokenizer");
  TerminalDfas* dfas = options.terminal_dfas.get();
  // The grammar with its regular rules lexed keeps every terminal of `g`, in
  // its order, and adds only terminals whose DFAs compile: it compiles
  // whenever `g` does, and where it does not, `g`'s own compilation gives
  // the error (naming the same terminal) or the grammar to use. So `g` is
  // compiled only then: each of its terminals' DFAs is built once.
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled =
      absl::UnknownError("not compiled");
  if (options.inline_regular_rules) {
    if (absl::Status valid = ValidateRules(g); !valid.ok()) return valid;
    InlineOptions inline_options;
    inline_options.regex_limits = options.earley.regex_limits;
    inline_options.dfa_options = options.earley.dfa_options;
    inline_options.dfas = dfas;
    inline_options.mode = options.earley.terminal_mode;
    compiled = CompiledGrammar::Create(InlineRegularRules(g, inline_options),
                                       options.earley.regex_limits, options.earley.dfa_options,
                                       options.terminal_dfas, options.earley.terminal_mode);
  }
  if (!compiled.ok()) {
    compiled = CompiledGrammar::Create(g, options.earley.regex_limits, options.earley.dfa_options,
                                       options.terminal_dfas, options.earley.terminal_mode);
  }
  if (!compiled.ok()) return compiled.status();
  std::shared_ptr<GrammarIndex> index(new GrammarIndex());
  index->grammar_ = std::move(*compiled);
  index->context_ = std::move(context);
  index->vocab_ = &index->context_->vocabulary();
  index->options_ = options;
  index->num_words_ = (index->vocab_->size() + 31) / 32;
  absl::flat_hash_set<const Dfa*> seen;  // terminals may share a DFA (terminal_dfas.h)
  for (size_t t = 0; t < index->grammar_->num_terminals(); ++t) {
    index->memo_.push_back(std::make_unique<MemoSlots>());
    const Dfa* dfa = index->grammar_->built_dfa(static_cast<uint32_t>(t));
    if (dfa == nullptr) {
      index->deferred_.push_back(static_cast<uint32_t>(t));
      continue;
    }
    if (!seen.insert(dfa).second) continue;
    if (dfa->lazy()) {
      index->lazy_dfas_.push_back(dfa);
    } else {
      index->whole_dfa_states_ += dfa->num_states();
      index->base_bytes_ += dfa->MemoryBytes();
    }
  }
  index->FindNeverAllowed();
  return std::shared_ptr<const GrammarIndex>(std::move(index));
}

void GrammarIndex::FindNeverAllowed() {
  // Bytes some terminal's DFA takes from a live state (with a lazy or
  // deferred DFA, a superset: fewer tokens are never allowed, none wrongly).
  std::bitset<256> taken;
  for (size_t t = 0; t < grammar_->num_terminals() && !taken.all(); ++t) {
    taken |= grammar_->live_bytes(static_cast<uint32_t>(t));
  }
  never_.assign(num_words_, 0);
  base_bytes_ += never_.capacity() * sizeof(uint32_t);
  if (taken.all()) return;
  // Every token below a node whose byte no terminal takes.
  const TokenTrie& trie = context_->trie();
  const TokenTrie::Node* nodes = trie.nodes();
  const uint32_t* ids = trie.token_ids();
  for (uint32_t i = 1; i < trie.num_nodes();) {
    if (taken[nodes[i].byte]) {
      ++i;
      continue;
    }
    for (uint32_t k = trie.token_begin()[i]; k < trie.token_begin()[nodes[i].next]; ++k) {
      never_[ids[k] >> 5] |= 1u << (ids[k] & 31);
    }
    i = nodes[i].next;
  }
}

GrammarIndex::~GrammarIndex() {
  for (size_t t = 0; t < memo_.size(); ++t) {
    // A lazy DFA's states may have grown past the slots a mask touched:
    // Find skips the chunks never made.
    const Dfa* dfa = grammar_->built_dfa(static_cast<uint32_t>(t));
    const uint32_t n = dfa != nullptr ? dfa->num_states() : 0;
    for (uint32_t q = 0; q < n; ++q) {
      if (auto* slot = memo_[t]->Find(q)) delete slot->load(std::memory_order_relaxed);
    }
  }
  if (options_.budget != nullptr) options_.budget->Release(memo_bytes());
}

size_t GrammarIndex::MemoryBytes() const {
  size_t bytes = base_bytes_ + memo_bytes();
  for (const auto& slots : memo_) bytes += slots->MemoryBytes();
  for (const Dfa* dfa : lazy_dfas_) bytes += dfa->MemoryBytes();
  for (uint32_t t : deferred_) {
    if (const Dfa* dfa = grammar_->built_dfa(t)) bytes += dfa->MemoryBytes();
  }
  return bytes;
}

uint32_t GrammarIndex::num_dfa_states() const {
  uint32_t states = whole_dfa_states_;
  for (const Dfa* dfa : lazy_dfas_) states += dfa->num_states();
  for (uint32_t t : deferred_) {
    if (const Dfa* dfa = grammar_->built_dfa(t)) states += dfa->num_states();
  }
  return states;
}

absl::Status GrammarIndex::StateLimitError() const {
  if (absl::Status deferred = grammar_->DeferredError(); !deferred.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("grammar terminal, built when first reached: ", deferred.message()));
  }
  const Dfa* lazy = !lazy_dfas_.empty() ? lazy_dfas_.front() : nullptr;
  for (size_t i = 0; lazy == nullptr && i < deferred_.size(); ++i) {
    const Dfa* dfa = grammar_->built_dfa(deferred_[i]);
    if (dfa != nullptr && dfa->lazy()) lazy = dfa;
  }
  if (lazy == nullptr) return absl::InternalError("no lazy terminal DFA to refuse a state");
  return absl::ResourceExhaustedError(
      absl::StrCat("grammar terminal: ", lazy->StateLimitError().message()));
}

TokenSet TokenSet::FromWords(std::vector<uint32_t> words) {
  TokenSet set;
  const size_t count = CountMaskBits(words.data(), words.size());
  if (count >= words.size()) {
    set.words = std::move(words);
    return set;
  }
  set.ids.reserve(count);
  for (uint32_t w = 0; w < words.size(); ++w) {
    for (uint32_t bits = words[w]; bits != 0; bits &= bits - 1) {
      set.ids.push_back(w * 32 + static_cast<uint32_t>(__builtin_ctz(bits)));
    }
  }
  return set;
}

void TokenSet::MarkInto(uint32_t* out, uint32_t num_words) const {
  if (!words.empty()) {
    const uint32_t* in = words.data();
    for (uint32_t w = 0; w < num_words; ++w) out[w] |= in[w];
  } else {
    for (uint32_t t : ids) out[t >> 5] |= 1u << (t & 31);
  }
}

void Crossings::Build(const TokenTrie& trie, std::vector<uint32_t> ends, const uint32_t* covered,
                      const uint32_t* never) {
  const TokenTrie::Node* nodes = trie.nodes();
  const uint32_t* begin = trie.token_begin();
  const uint32_t* ids = trie.token_ids();
  crossings.clear();
  crossing_begin.clear();
  auto open = [&](uint32_t k) {  // token slot k holds a token in neither set
    const uint32_t t = ids[k];
    return ((covered[t >> 5] | never[t >> 5]) >> (t & 31) & 1) == 0;
  };
  // A single walk lists its ends in order; several walks (Into) may repeat
  // one.
  if (!std::is_sorted(ends.begin(), ends.end())) std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  // Whether child c leads to a token in neither set. With few ends, a read
  // of c's subtree's tokens up to the first such one. With many (a terminal
  // that may end after nearly every prefix: the subtrees nest, and their
  // reads would add up to the tokens' bytes), from the first open slot at or
  // after each slot, one pass over the slots. Kept per thread, not per
  // session: 4 bytes per token (0.5 MiB at 128k tokens) on each thread that
  // ever builds one, the server's threads being bounded.
  thread_local std::vector<uint32_t> next_open;
  const uint32_t slots = static_cast<uint32_t>(trie.num_tokens());
  const bool many = ends.size() > kManyEnds;
  if (many) {
    next_open.resize(size_t{slots} + 1);
    next_open[slots] = slots;
    for (uint32_t k = slots; k-- > 0;) next_open[k] = open(k) ? k : next_open[k + 1];
  }
  auto leads_on = [&](uint32_t c) {
    const uint32_t end = begin[nodes[c].next];
    if (many) return next_open[begin[c]] < end;
    for (uint32_t k = begin[c]; k < end; ++k) {
      if (open(k)) return true;
    }
    return false;
  };
  std::vector<uint32_t> children;
  for (uint32_t e : ends) {
    if (many && next_open[begin[e]] >= begin[nodes[e].next]) continue;  // no child leads on
    for (uint32_t c = e + 1; c < nodes[e].next; c = nodes[c].next) {
      if (leads_on(c)) children.push_back(c);
    }
  }
  if (children.empty()) return;
  crossing_begin.assign(257, 0);
  for (uint32_t c : children) ++crossing_begin[nodes[c].byte + 1];
  for (int x = 0; x < 256; ++x) crossing_begin[x + 1] += crossing_begin[x];
  crossings.resize(children.size());
  std::vector<uint32_t> fill(crossing_begin.begin(), crossing_begin.end() - 1);
  for (uint32_t c : children) crossings[fill[nodes[c].byte]++] = c;
}

size_t MaskScratch::MemoryBytes() const {
  size_t bytes = levels.capacity() * sizeof(Level) + dfa_states.capacity() * sizeof(uint32_t);
  for (const Level& l : levels) {
    bytes += l.items.capacity() * sizeof(EarleyItem) +
             (l.ends.capacity() + l.roots.capacity()) * sizeof(uint32_t);
  }
  if (unkept != nullptr) bytes += sizeof(TerminalStateTokens) + unkept->MemoryBytes();
  if (unkept_into != nullptr) bytes += sizeof(CrossingTokens) + unkept_into->MemoryBytes();
  return bytes;
}

void GrammarIndex::Compute(uint32_t terminal, uint32_t state, MaskScratch& scratch,
                           TerminalStateTokens* out) const {
  if (options_.self_loop_entries && (ComputeSelfLoop(terminal, state, out) ||
                                     ComputeNearLoop(terminal, state, scratch, out))) {
    return;
  }
  std::vector<uint32_t> words(num_words_, 0), ends;
  // Visits each trie node at most once: not counted against max_mask_work.
  WalkDfa(terminal, state, 1, static_cast<uint32_t>(context_->trie().num_nodes()), SIZE_MAX,
          /*skip_marked=*/false, scratch, words.data(), &ends);
  out->crossings.Build(context_->trie(), std::move(ends), words.data(), never_.data());
  out->inside = TokenSet::FromWords(std::move(words));
}

bool GrammarIndex::Reserve(size_t bytes) const {
  if (memo_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes > options_.max_memo_bytes) {
    memo_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  if (options_.budget != nullptr && !options_.budget->TryCharge(bytes)) {
    memo_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void GrammarIndex::Unreserve(size_t bytes) const {
  memo_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  if (options_.budget != nullptr) options_.budget->Release(bytes);
}

const TerminalStateTokens& GrammarIndex::Tokens(uint32_t terminal, uint32_t state,
                                                MaskScratch& scratch) const {
  std::atomic<const TerminalStateTokens*>& slot = *memo_[terminal]->At(state);
  if (const TerminalStateTokens* e = slot.load(std::memory_order_acquire)) return *e;
  auto fresh = std::make_unique<TerminalStateTokens>();
  const RefusalWatch watch;
  Compute(terminal, state, scratch, fresh.get());
  const size_t bytes = fresh->MemoryBytes();
  // An entry a refusal cut short is used once (the caller's work fails for
  // the refusal) and never kept.
  if (watch.refused() || !Reserve(bytes)) {
    scratch.unkept = std::move(fresh);
    return *scratch.unkept;
  }
  const TerminalStateTokens* expected = nullptr;
  if (slot.compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel)) {
    return *fresh.release();
  }
  Unreserve(bytes);
  return *expected;  // another thread stored the same entry first
}

const CrossingTokens& GrammarIndex::Into(const TerminalStateTokens& from, uint32_t u, uint32_t r,
                                         MaskScratch& scratch) const {
  const uint64_t key = uint64_t{u} << 32 | r;
  {
    absl::ReaderMutexLock lock(&from.mu);
    auto found = from.into.find(key);
    if (found != from.into.end()) return *found->second;
  }
  auto fresh = std::make_unique<CrossingTokens>();
  const RefusalWatch watch;
  std::vector<uint32_t> words(num_words_, 0), ends;
  const TokenTrie::Node* nodes = context_->trie().nodes();
  for (uint32_t c : from.crossings.crossings) {
    WalkDfa(u, r, c, nodes[c].next, SIZE_MAX, /*skip_marked=*/false, scratch, words.data(),
            &ends);
  }
  // Marked before the walks from `next` (FillMask, MarkCrossings).
  std::vector<uint32_t> covered = words;
  from.inside.MarkInto(covered.data(), num_words_);
  fresh->next.Build(context_->trie(), std::move(ends), covered.data(), never_.data());
  fresh->tokens = TokenSet::FromWords(std::move(words));
  const size_t bytes = fresh->MemoryBytes();
  if (watch.refused() || !Reserve(bytes)) {  // as in Tokens
    scratch.unkept_into = std::move(fresh);
    return *scratch.unkept_into;
  }
  absl::MutexLock lock(&from.mu);
  auto [it, inserted] = from.into.try_emplace(key, std::move(fresh));
  if (!inserted) Unreserve(bytes);
  return *it->second;
}

absl::Status GrammarIndex::WalkSubtree(EarleyParser& parser, uint32_t node,
                                       MaskScratch& scratch, uint32_t* words) const {
  const TokenTrie& trie = context_->trie();
  const TokenTrie::Node* nodes = trie.nodes();
  const size_t base = parser.num_sets();
  const uint32_t depth0 = nodes[node].depth;
  const uint32_t end = nodes[node].next;
  UnmarkedCursor unmarked(trie, words, never_.data());
  for (uint32_t i = node; i < end;) {
    if (++scratch.work > options_.max_mask_work) {
      parser.PopTo(base);
      return OverBudget();
    }
    const TokenTrie::Node n = nodes[i];
    if (!unmarked.SubtreeHasUnmarked(i)) {
      i = n.next;
      continue;
    }
    parser.PopTo(base + (n.depth - depth0));
    absl::StatusOr<bool> live = parser.Push(n.byte);
    if (!live.ok()) {
      parser.PopTo(base);
      return live.status();
    }
    if (!*live) {
      i = n.next;
      continue;
    }
    MarkTokens(trie, i, words);
    ++i;
  }
  parser.PopTo(base);
  return absl::OkStatus();
}

absl::Status GrammarIndex::FillMask(EarleyParser& parser, MaskScratch& scratch,
                                    uint32_t* words) const {
  std::memset(words, 0, num_words_ * sizeof(uint32_t));
  if (parser.IsAccepting()) {
    for (uint32_t eos : vocab_->eos_ids()) words[eos >> 5] |= 1u << (eos & 31);
  }
  const size_t levels = std::max<size_t>(2, options_.dfa_levels);
  if (scratch.levels.size() < levels) scratch.levels.resize(levels);
  scratch.work = 0;
  MaskScratch::Level& at = scratch.levels[0];
  CollectScanItems(parser, &at.items);
  const size_t base = parser.num_sets();
  // Every item's inside tokens first: the walks past terminal ends below
  // skip the subtrees whose tokens are marked already.
  for (size_t k = 0; k < at.items.size(); ++k) {
    const EarleyItem it = at.items[k];
    if (k == 0 || at.items[k - 1].id() != it.id() || at.items[k - 1].pos != it.pos) {
      Tokens(it.id(), it.pos, scratch).inside.MarkInto(words, num_words_);
    }
  }
  for (size_t k = 0; k < at.items.size(); ++k) {
    const EarleyItem it = at.items[k];
    const TerminalStateTokens& tokens = Tokens(it.id(), it.pos, scratch);
    if (tokens.crossings.empty()) continue;
    absl::StatusOr<bool> pushed = parser.PushCompletion(it);
    if (!pushed.ok()) return pushed.status();
    if (!*pushed) continue;
    absl::Status s = options_.dfa_levels < 2
                         ? MarkLevel(parser, scratch, 1, it,
                                     Filter(tokens.crossings, parser.NextBytes(), &at.roots), words)
                         : MarkCrossings(parser, scratch, tokens, it, words);
    parser.PopTo(base);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

const std::vector<uint32_t>& GrammarIndex::Filter(const Crossings& crossings,
                                                  const std::bitset<256>& first,
                                                  std::vector<uint32_t>* roots) {
  roots->clear();
  if (crossings.empty()) return *roots;
  for (int x = 0; x < 256; ++x) {
    if (!first[x]) continue;
    roots->insert(roots->end(), crossings.crossings.begin() + crossings.crossing_begin[x],
                  crossings.crossings.begin() + crossings.crossing_begin[x + 1]);
  }
  return *roots;
}

absl::Status GrammarIndex::MarkCrossings(EarleyParser& parser, MaskScratch& scratch,
                                         const TerminalStateTokens& from,
                                         const EarleyItem& completed, uint32_t* words) const {
  MaskScratch::Level& at = scratch.levels[1];
  CollectScanItems(parser, &at.items);
  const size_t base = parser.num_sets();
  for (const EarleyItem& u : at.items) {
    if (Redundant(u, completed)) continue;
    const CrossingTokens& into = Into(from, u.id(), u.pos, scratch);
    into.tokens.MarkInto(words, num_words_);
    if (into.next.empty()) continue;
    absl::StatusOr<bool> pushed = parser.PushCompletion(u);
    if (!pushed.ok()) return pushed.status();
    if (!*pushed) continue;
    absl::Status s =
        MarkLevel(parser, scratch, 2, u, Filter(into.next, parser.NextBytes(), &at.roots), words);
    parser.PopTo(base);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void GrammarIndex::CollectScanItems(const EarleyParser& parser, std::vector<EarleyItem>* items) {
  items->clear();
  for (const EarleyItem& it : parser.last_set()) {
    if (it.kind() != EarleyItem::kRule) items->push_back(it);
  }
  // Items with the same (terminal, state) side by side: their inside tokens
  // are marked once.
  std::sort(items->begin(), items->end(), [](const EarleyItem& a, const EarleyItem& b) {
    return std::make_tuple(a.id(), a.pos, a.kind_id, a.origin) <
           std::make_tuple(b.id(), b.pos, b.kind_id, b.origin);
  });
}

bool GrammarIndex::WalkDfa(uint32_t terminal, uint32_t state, uint32_t begin, uint32_t end,
                           size_t budget, bool skip_marked, MaskScratch& scratch, uint32_t* words,
                           std::vector<uint32_t>* ends) const {
  const Dfa& dfa = grammar_->dfa(terminal);
  const TokenTrie& trie = context_->trie();
  const TokenTrie::Node* nodes = trie.nodes();
  scratch.dfa_states.resize(trie.max_depth() + 1);
  uint32_t* states = scratch.dfa_states.data();
  if (begin >= end) return true;
  states[nodes[begin].depth - 1] = state;
  UnmarkedCursor unmarked(trie, words, never_.data());
  for (uint32_t i = begin; i < end;) {
    if (++scratch.work > budget) return false;
    const TokenTrie::Node node = nodes[i];
    const Dfa::State s = dfa.Next(states[node.depth - 1], node.byte);
    if (s == Dfa::kDead || (skip_marked && !unmarked.SubtreeHasUnmarked(i))) {
      i = node.next;
      continue;
    }
    states[node.depth] = s;
    MarkTokens(trie, i, words);
    if (dfa.IsAccepting(s) && node.next > i + 1) ends->push_back(i);
    ++i;
  }
  return true;
}

bool GrammarIndex::Redundant(const EarleyItem& it, const EarleyItem& completed) const {
  // `it` starts terminal t right where `completed` finished t. When L(t) is
  // closed under concatenation, a text continuing in `it` is also a longer
  // match of `completed`, explored at the level above from a deeper node,
  // with `it` matching nothing: possible when `it` is an ignored terminal
  // (the slot may stay empty), t is nullable, or `completed` was ignored
  // (the slot it filled may stay empty and `it` begin there instead).
  const CompiledGrammar& g = *grammar_;
  if (it.id() != completed.id() || !g.concat_closed(it.id())) return false;
  if (it.pos != g.dfa(it.id()).start()) return false;
  return it.kind() == EarleyItem::kIgnore || completed.kind() == EarleyItem::kIgnore ||
         g.nullable_terminal(it.id());
}

absl::Status GrammarIndex::MarkLevel(EarleyParser& parser, MaskScratch& scratch, size_t level,
                                     const EarleyItem& completed,
                                     const std::vector<uint32_t>& roots, uint32_t* words) const {
  if (roots.empty()) return absl::OkStatus();
  if (level >= options_.dfa_levels) {
    for (uint32_t r : roots) {
      absl::Status s = WalkSubtree(parser, r, scratch, words);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  const TokenTrie::Node* nodes = context_->trie().nodes();
  MaskScratch::Level& at = scratch.levels[level];
  CollectScanItems(parser, &at.items);
  const size_t base = parser.num_sets();
  for (const EarleyItem& it : at.items) {
    if (Redundant(it, completed)) continue;
    at.ends.clear();
    for (uint32_t r : roots) {
      if (!WalkDfa(it.id(), it.pos, r, nodes[r].next, options_.max_mask_work,
                   /*skip_marked=*/true, scratch, words, &at.ends)) {
        return OverBudget();
      }
    }
    if (at.ends.empty()) continue;
    // Nested roots reach an end more than once; its children are roots once.
    std::sort(at.ends.begin(), at.ends.end());
    at.ends.erase(std::unique(at.ends.begin(), at.ends.end()), at.ends.end());
    absl::StatusOr<bool> pushed = parser.PushCompletion(it);
    if (!pushed.ok()) return pushed.status();
    if (!*pushed) continue;
    const std::bitset<256> first = parser.NextBytes();
    at.roots.clear();
    for (uint32_t e : at.ends) {
      for (uint32_t c = e + 1; c < nodes[e].next; c = nodes[c].next) {
        if (first[nodes[c].byte]) at.roots.push_back(c);
      }
    }
    absl::Status s = MarkLevel(parser, scratch, level + 1, it, at.roots, words);
    parser.PopTo(base);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace maskd::grammar
