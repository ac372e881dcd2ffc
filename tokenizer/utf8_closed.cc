#include "tokenizer/utf8_closed.h"

#include <algorithm>

#include "tokenizer/loop_masks.h"

namespace maskd {

bool Utf8Closed(const Dfa& dfa, Dfa::State s, Dfa::State target,
                std::vector<std::pair<uint8_t, Dfa::State>>* pairs) {
  constexpr size_t kMaxPairs = 64;
  pairs->assign(1, {LoopMasks::kUtf8Boundary, s});
  for (size_t i = 0; i < pairs->size(); ++i) {
    const auto [u, q] = (*pairs)[i];
    for (int b = u == LoopMasks::kUtf8Boundary ? 0x80 : 0; b < 256; ++b) {
      const uint8_t u2 = LoopMasks::Utf8Next(u, static_cast<uint8_t>(b));
      const Dfa::State q2 = dfa.Next(q, static_cast<uint8_t>(b));
      if ((u2 == 0) != (q2 == Dfa::kDead)) return false;
      if (u2 == 0) continue;
      if (u2 == LoopMasks::kUtf8Boundary) {
        if (q2 != target) return false;
        continue;
      }
      const std::pair<uint8_t, Dfa::State> p(u2, q2);
      if (std::find(pairs->begin(), pairs->end(), p) == pairs->end()) {
        if (pairs->size() >= kMaxPairs) return false;
        pairs->push_back(p);
      }
    }
  }
  return true;
}

}  // namespace maskd
