#include "index/state_mask.h"

#include "absl/hash/hash.h"
#include "absl/types/span.h"

namespace maskd {

StateMaskStore::~StateMaskStore() {
  if (budget_ != nullptr) budget_->Release(bytes_.load(std::memory_order_relaxed));
}

const StateMask* StateMaskStore::Intern(bool dense, uint32_t count, std::vector<uint32_t>& data) {
  size_t h = absl::HashOf(dense, absl::MakeConstSpan(data));
  absl::MutexLock lock(&mu_);
  auto& bucket = by_hash_[h];
  for (const StateMask* m : bucket) {
    if (m->dense() == dense && m->data() == data) return m;
  }
  const size_t bytes = StateMask::MemoryBytesFor(data.capacity()) + sizeof(void*) * 3;
  if (budget_ != nullptr && !budget_->TryCharge(bytes)) {
    if (bucket.empty()) by_hash_.erase(h);
    return nullptr;
  }
  owned_.push_back(std::make_unique<StateMask>(dense, count, std::move(data)));
  const StateMask* m = owned_.back().get();
  bucket.push_back(m);
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return m;
}

}  // namespace maskd
