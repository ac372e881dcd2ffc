#include "grammar/grammar_guide.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tokenizer/token_trie.h"
#include "tokenizer/tokenizer_context.h"

namespace maskd::grammar {

absl::StatusOr<GrammarGuide> GrammarGuide::Create(std::shared_ptr<const GrammarIndex> index) {
  if (index == nullptr) return absl::InvalidArgumentError("GrammarGuide needs an index");
  auto parser = index->NewParser();
  if (!parser.ok()) return parser.status();
  return GrammarGuide(std::move(index), std::move(*parser));
}

absl::Status GrammarGuide::WriteMask(absl::Span<uint32_t> words) {
  const uint32_t n = index_->num_words();
  if (words.size() < n) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask buffer holds ", words.size(), " words; the vocabulary needs ", n));
  }
  std::fill(words.begin() + n, words.end(), 0u);
  if (finished_) {
    std::fill(words.begin(), words.begin() + n, 0u);
    for (uint32_t eos : index_->vocab().eos_ids()) words[eos >> 5] |= 1u << (eos & 31);
    return absl::OkStatus();
  }
  BeginWork();
  const RefusalWatch watch;
  absl::Status s = index_->FillMask(parser_, scratch_, words.data());
  return Refused(watch) ? index_->StateLimitError() : s;
}

absl::StatusOr<bool> GrammarGuide::PushToken(uint32_t token) {
  const std::string_view bytes = index_->vocab().bytes(token);
  const size_t before = parser_.num_sets();
  for (char c : bytes) {
    absl::StatusOr<bool> live = parser_.Push(static_cast<uint8_t>(c));
    if (!live.ok() || !*live) {
      parser_.PopTo(before);
      return live;
    }
  }
  return true;
}

absl::StatusOr<bool> GrammarGuide::IsAllowed(uint32_t token) {
  const Vocabulary& vocab = index_->vocab();
  if (!vocab.has_token(token)) return false;
  if (vocab.is_eos(token)) return finished_ || parser_.IsAccepting();
  if (finished_ || vocab.is_special(token) || vocab.bytes(token).empty()) return false;
  BeginWork();
  const RefusalWatch watch;
  const size_t before = parser_.num_sets();
  absl::StatusOr<bool> live = PushToken(token);
  parser_.PopTo(before);
  if (Refused(watch)) return index_->StateLimitError();
  return live;
}

absl::Status GrammarGuide::Advance(uint32_t token) {
  BeginWork();
  return AdvanceOne(token);
}

absl::Status GrammarGuide::AdvanceOne(uint32_t token) {
  const Vocabulary& vocab = index_->vocab();
  if (token >= vocab.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", token, " is outside the vocabulary (size ", vocab.size(), ")"));
  }
  if (token_start_.size() >= index_->options().earley.max_chart_items) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sequence of ", token_start_.size(), " tokens: at most ",
                     index_->options().earley.max_chart_items, " (max_chart_items)"));
  }
  const uint32_t start = static_cast<uint32_t>(parser_.num_sets());
  if (vocab.has_token(token) && vocab.is_eos(token) && (finished_ || parser_.IsAccepting())) {
    if (!finished_) {
      finished_ = true;
      finished_at_ = token_start_.size();
    }
    tokens_.push_back(token);
    token_start_.push_back(start);
    return absl::OkStatus();
  }
  bool ok = false;
  if (!finished_ && vocab.has_token(token) && !vocab.is_special(token) &&
      !vocab.bytes(token).empty()) {
    const RefusalWatch watch;
    absl::StatusOr<bool> pushed = PushToken(token);
    if (Refused(watch)) {
      parser_.PopTo(start);  // a set the refusal cut short stays out
      return index_->StateLimitError();
    }
    if (!pushed.ok()) return pushed.status();
    ok = *pushed;
  }
  if (!ok) {
    return absl::FailedPreconditionError(
        absl::StrCat("token ", token, " is not allowed after ", num_tokens(), " tokens (",
                     num_bytes(), " bytes)", finished_ ? "; the sequence has ended" : ""));
  }
  tokens_.push_back(token);
  token_start_.push_back(start);
  return absl::OkStatus();
}

absl::Status GrammarGuide::Advance(absl::Span<const uint32_t> tokens) {
  const size_t before = num_tokens();
  BeginWork();
  for (size_t i = 0; i < tokens.size(); ++i) {
    absl::Status s = AdvanceOne(tokens[i]);
    if (!s.ok()) {
      (void)Rollback(num_tokens() - before);
      return absl::Status(s.code(), absl::StrCat("tokens[", i, "]: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status GrammarGuide::Readvance(absl::Span<const uint32_t> tokens) {
  parser_.SetWorkLimit(SIZE_MAX, "", nullptr);
  const size_t before = num_tokens();
  for (uint32_t t : tokens) {
    absl::Status s = AdvanceOne(t);
    if (!s.ok()) {
      (void)Rollback(num_tokens() - before);
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status GrammarGuide::Rollback(size_t n) {
  if (n > num_tokens()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot roll back ", n, " tokens: only ",
                                                   num_tokens(), " were advanced"));
  }
  if (n == 0) return absl::OkStatus();
  PopTokens(n);
  ReleaseSpare();
  return absl::OkStatus();
}

void GrammarGuide::PopTokens(size_t n) {
  if (n == 0) return;
  const size_t keep = num_tokens() - n;
  parser_.PopTo(token_start_[keep]);
  tokens_.resize(keep);
  token_start_.resize(keep);
  if (finished_ && keep <= finished_at_) finished_ = false;
}

void GrammarGuide::ReleaseSpare() {
  parser_.ReleaseSpare();
  grammar::ReleaseSpare(tokens_);
  grammar::ReleaseSpare(token_start_);
}

absl::Status GrammarGuide::RollbackAndAdvance(size_t n, absl::Span<const uint32_t> tokens) {
  if (n > num_tokens()) return Rollback(n);
  undone_.assign(tokens_.end() - static_cast<ptrdiff_t>(n), tokens_.end());
  PopTokens(n);
  absl::Status s = Advance(tokens);
  if (!s.ok()) {
    // The same tokens from the same parser state: accepted as before.
    absl::Status redo = Readvance(undone_);
    if (!redo.ok()) return absl::InternalError(absl::StrCat("rollback not undone: ", redo.message()));
  }
  if (n > 0) ReleaseSpare();
  return s;
}

size_t GrammarGuide::chart_bytes() const {
  return sizeof(*this) + parser_.allocated_bytes() + HeldBytes(tokens_) + HeldBytes(token_start_) +
         HeldBytes(undone_) + HeldBytes(budget_) + scratch_.MemoryBytes();
}

absl::StatusOr<std::string> GrammarGuide::ForcedContinuation(size_t max_bytes) {
  std::string out;
  if (finished_) return out;
  BeginWork();
  const RefusalWatch watch;
  const size_t before = parser_.num_sets();
  while (out.size() < max_bytes && !parser_.IsAccepting()) {
    const std::bitset<256> next = parser_.NextBytes();
    if (next.count() != 1) break;
    int b = 0;
    while (!next[b]) ++b;
    absl::StatusOr<bool> live = parser_.Push(static_cast<uint8_t>(b));
    if (!live.ok()) {
      parser_.PopTo(before);
      return live.status();
    }
    out.push_back(static_cast<char>(b));
  }
  parser_.PopTo(before);
  if (Refused(watch)) return index_->StateLimitError();
  return out;
}

uint32_t GrammarGuide::MinBytesToFinish() const {
  if (finished_) return 0;
  return static_cast<uint32_t>(std::min<uint64_t>(parser_.MinBytesToFinish(), 0xFFFFFFFFu));
}

absl::Status GrammarGuide::ApplyTokenBudget(uint32_t tokens_left, absl::Span<uint32_t> words) {
  if (finished_) return absl::OkStatus();  // only EOS is allowed anyway
  const Vocabulary& vocab = index_->vocab();
  const TokenTrie& trie = index_->context().trie();
  const TokenTrie::Node* nodes = trie.nodes();
  const size_t base = parser_.num_sets();
  const size_t max_work = index_->options().max_mask_work;
  auto allowed = [&](uint32_t t) { return (words[t >> 5] >> (t & 31)) & 1; };
  budget_.clear();
  BeginWork();
  const RefusalWatch watch;
  size_t work = 0;
  for (uint32_t i = 1; i < trie.num_nodes();) {
    const TokenTrie::Node& node = nodes[i];
    parser_.PopTo(base + node.depth - 1);
    if (++work > max_work) {
      parser_.PopTo(base);
      return absl::ResourceExhaustedError(absl::StrCat(
          "token budget: more than ", max_work, " parser steps (max_mask_work)"));
    }
    absl::StatusOr<bool> live = parser_.Push(node.byte);
    if (!live.ok()) {
      parser_.PopTo(base);
      return live.status();
    }
    if (!*live) {
      i = node.next;
      continue;
    }
    for (uint32_t k = trie.token_begin()[i]; k < trie.token_begin()[i + 1]; ++k) {
      const uint32_t t = trie.token_ids()[k];
      if (allowed(t) && !vocab.is_eos(t)) budget_.push_back({t, parser_.MinBytesToFinish()});
    }
    ++i;
  }
  parser_.PopTo(base);
  if (Refused(watch)) return index_->StateLimitError();  // `words` unchanged
  uint64_t best = CompiledGrammar::kNoLength;
  bool keep_any = false;
  for (uint32_t eos : vocab.eos_ids()) keep_any = keep_any || allowed(eos);
  for (const auto& [t, d] : budget_) {
    best = std::min(best, d);
    if (d + 2 > tokens_left) {
      words[t >> 5] &= ~(1u << (t & 31));
    } else {
      keep_any = true;
    }
  }
  if (keep_any) return absl::OkStatus();
  // Nothing can finish in the budget: keep the tokens closest to an end.
  for (const auto& [t, d] : budget_) {
    if (d == best) words[t >> 5] |= 1u << (t & 31);
  }
  return absl::OkStatus();
}

}  // namespace maskd::grammar
