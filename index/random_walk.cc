#include "index/random_walk.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tokenizer/mask_bits.h"

namespace maskd {

uint32_t CountAllowedTokens(const uint32_t* words, uint32_t num_words) {
  return static_cast<uint32_t>(CountMaskBits(words, num_words));
}

uint32_t NthAllowedToken(const uint32_t* words, uint32_t num_words, uint32_t k) {
  for (uint32_t i = 0; i < num_words; ++i) {
    uint32_t w = words[i];
    uint32_t c = static_cast<uint32_t>(__builtin_popcount(w));
    if (k >= c) {
      k -= c;
      continue;
    }
    for (; k > 0; --k) w &= w - 1;
    return i * 32 + static_cast<uint32_t>(__builtin_ctz(w));
  }
  return UINT32_MAX;
}

void NthAllowedTokens(const uint32_t* words, uint32_t num_words,
                      const std::vector<uint32_t>& sorted_ranks, std::vector<uint32_t>* out) {
  out->clear();
  size_t r = 0;
  uint32_t seen = 0;  // set bits before word i
  for (uint32_t i = 0; i < num_words && r < sorted_ranks.size(); ++i) {
    uint32_t c = static_cast<uint32_t>(__builtin_popcount(words[i]));
    while (r < sorted_ranks.size() && sorted_ranks[r] < seen + c) {
      uint32_t w = words[i];
      for (uint32_t k = sorted_ranks[r] - seen; k > 0; --k) w &= w - 1;
      out->push_back(i * 32 + static_cast<uint32_t>(__builtin_ctz(w)));
      ++r;
    }
    seen += c;
  }
}

absl::StatusOr<RandomWalkResult> RandomWalk(std::shared_ptr<const TokenIndex> index, uint64_t seed,
                                            size_t max_tokens) {
  std::mt19937_64 rng(seed);
  Guide guide(index);
  const Vocabulary& vocab = index->vocabulary();
  const Dfa& dfa = index->dfa();
  std::vector<uint32_t> mask(index->num_words());
  RandomWalkResult out;
  std::vector<uint32_t> ranks, candidates;
  while (out.tokens.size() < max_tokens && !guide.IsFinished()) {
    if (absl::Status s = guide.WriteMaskUnchecked(mask.data()); !s.ok()) return s;
    uint32_t n = CountAllowedTokens(mask.data(), index->num_words());
    if (n == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("no token is allowed after ", out.tokens.size(), " tokens"));
    }
    // Candidates: one uniform pick, plus more in the second half of the budget.
    const bool second_half = out.tokens.size() * 2 >= max_tokens;
    ranks.clear();
    for (int i = 0; i < (second_half ? 17 : 1); ++i) {
      ranks.push_back(std::uniform_int_distribution<uint32_t>(0, n - 1)(rng));
    }
    const uint32_t first_rank = ranks[0];
    std::sort(ranks.begin(), ranks.end());
    NthAllowedTokens(mask.data(), index->num_words(), ranks, &candidates);
    uint32_t pick = candidates[std::lower_bound(ranks.begin(), ranks.end(), first_rank) - ranks.begin()];
    if (second_half) {
      // Finish when possible, else head for acceptance.
      if (guide.IsAccepting() && !vocab.eos_ids().empty()) {
        pick = vocab.eos_ids().front();
      } else {
        uint32_t best = dfa.DistanceToAccept(index->NextState(guide.state(), pick));
        for (uint32_t t : candidates) {
          uint32_t d = vocab.is_eos(t) ? 0 : dfa.DistanceToAccept(index->NextState(guide.state(), t));
          if (d < best) {
            best = d;
            pick = t;
          }
        }
      }
    }
    if (auto s = guide.Advance(pick); !s.ok()) return s;
    out.tokens.push_back(pick);
    if (!vocab.is_eos(pick)) out.text.append(vocab.bytes(pick));
  }
  out.finished = guide.IsFinished();
  return out;
}

}  // namespace maskd
