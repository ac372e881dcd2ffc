// Internal to maskd_kernels: the vectorised inner loops (Google Highway,
// dynamic dispatch) shared by the single-threaded and pooled CPU paths.
#ifndef MASKD_KERNELS_APPLY_MASK_INTERNAL_H_
#define MASKD_KERNELS_APPLY_MASK_INTERNAL_H_

#include <cstddef>
#include <cstdint>

namespace maskd::internal {

// Applies `num_words` whole mask words to 32 * num_words 16-bit logits at
// `row` (any alignment): element 32*w + b keeps its bits when bit b of
// words[w] is set and becomes `neg_inf` (the dtype's -inf bit pattern)
// otherwise. Words of all ones are skipped without touching memory; zero
// words store 32 x neg_inf without loading.
void ApplyWords16(uint16_t* row, const uint32_t* words, size_t num_words,
                  uint16_t neg_inf);
// Same for 32-bit logits.
void ApplyWords32(uint32_t* row, const uint32_t* words, size_t num_words,
                  uint32_t neg_inf);

// Name of the instruction set chosen at run time (e.g. "AVX2").
const char* ApplySimdTargetName();

}  // namespace maskd::internal

#endif  // MASKD_KERNELS_APPLY_MASK_INTERNAL_H_
