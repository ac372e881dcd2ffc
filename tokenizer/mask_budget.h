// MaskBudget: a byte bound on the masks TokenIndex keeps (memoizes), shared
// by every index given it (in maskd: all indexes of one IndexCache, so that
// indexes leased by live sessions cannot grow memory without bound as their
// states are first visited).
//
// A mask that does not fit is computed and used but not kept: the next use
// of its state computes it again (the same mask, at the cost of a walk). An
// index releases what it charged when it is destroyed. Thread-safe,
// lock-free.
#ifndef MASKD_TOKENIZER_MASK_BUDGET_H_
#define MASKD_TOKENIZER_MASK_BUDGET_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace maskd {

class MaskBudget {
 public:
  explicit MaskBudget(uint64_t max_bytes) : max_bytes_(max_bytes) {}
  MaskBudget(const MaskBudget&) = delete;
  MaskBudget& operator=(const MaskBudget&) = delete;

  // Charges `bytes` when used() + bytes <= max_bytes(); false (nothing
  // charged, refused() counts it) otherwise.
  bool TryCharge(uint64_t bytes) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > max_bytes_ || used > max_bytes_ - bytes) {
        refused_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  // Returns bytes charged earlier.
  void Release(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  uint64_t max_bytes() const { return max_bytes_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // Masks not kept for lack of budget, since construction.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

  // RESOURCE_EXHAUSTED for work that needs masks kept (an eager build) when
  // the budget is spent: a state of the process, not of the constraint, so
  // callers can tell it apart (IsExhausted) and not cache it.
  absl::Status ExhaustedError(absl::string_view what) const {
    absl::Status s = absl::ResourceExhaustedError(
        absl::StrCat(what, ": the masks kept exceed the mask budget of ", max_bytes_, " bytes"));
    s.SetPayload(kPayloadUrl, absl::Cord("1"));
    return s;
  }
  static bool IsExhausted(const absl::Status& s) { return s.GetPayload(kPayloadUrl).has_value(); }

 private:
  static constexpr absl::string_view kPayloadUrl = "maskd/mask_budget_exhausted";
  const uint64_t max_bytes_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace maskd

#endif  // MASKD_TOKENIZER_MASK_BUDGET_H_
