// RandomWalk: drive a Guide with random allowed tokens until EOS or a budget.
//
// Used by `maskctl sample`, by tests (every walked text must fully match the
// constraint) and by benchmarks. Each step picks uniformly among the allowed
// tokens (EOS included where allowed). Once half the budget is spent it
// prefers, among a few random allowed tokens, the one whose next state is
// closest to accepting, and takes EOS as soon as it is allowed, so that most
// walks finish.
#ifndef MASKD_INDEX_RANDOM_WALK_H_
#define MASKD_INDEX_RANDOM_WALK_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "index/guide.h"

namespace maskd {

struct RandomWalkResult {
  std::vector<uint32_t> tokens;  // EOS included when taken
  std::string text;              // bytes of the text tokens
  bool finished = false;         // EOS was taken
};

// Token number `k` (0-based) among the set bits of a packed mask, or
// UINT32_MAX when there are not that many.
uint32_t NthAllowedToken(const uint32_t* words, uint32_t num_words, uint32_t k);
// For each rank in `sorted_ranks` (ascending, each < the number of set bits),
// the token with that rank among the set bits, in one pass over the mask.
void NthAllowedTokens(const uint32_t* words, uint32_t num_words,
                      const std::vector<uint32_t>& sorted_ranks, std::vector<uint32_t>* out);
// Number of set bits of a packed mask.
uint32_t CountAllowedTokens(const uint32_t* words, uint32_t num_words);

// Walks from the start of `index` with a generator seeded with `seed`.
// FailedPrecondition if a state allows no token (a bug: live states always
// allow a continuation or EOS... unless the vocabulary cannot spell it).
absl::StatusOr<RandomWalkResult> RandomWalk(std::shared_ptr<const TokenIndex> index, uint64_t seed,
                                            size_t max_tokens);

}  // namespace maskd

#endif  // MASKD_INDEX_RANDOM_WALK_H_
