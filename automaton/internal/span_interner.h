// SpanInterner: equal spans of uint32_t get equal dense ids, with all keys in
// one pool (no allocation per key). Spans returned by Get() are invalidated by
// Add(). Internal to maskd_automaton (the NFA's structural node ids, the
// subset construction's state sets).
#ifndef MASKD_AUTOMATON_INTERNAL_SPAN_INTERNER_H_
#define MASKD_AUTOMATON_INTERNAL_SPAN_INTERNER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace maskd::automaton_internal {

class SpanInterner {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  uint32_t size() const { return static_cast<uint32_t>(begin_.size() - 1); }
  absl::Span<const uint32_t> Get(uint32_t id) const {
    return absl::MakeConstSpan(pool_.data() + begin_[id], begin_[id + 1] - begin_[id]);
  }
  static uint64_t Hash(absl::Span<const uint32_t> key) {
    uint64_t h = 0x9E3779B97F4A7C15ull * (key.size() + 1);
    for (uint32_t x : key) {
      h = (h ^ x) * 0xFF51AFD7ED558CCDull;
      h ^= h >> 29;
    }
    return h;
  }
  // The id of `key`, or kNone. `hash` is Hash(key).
  uint32_t Find(absl::Span<const uint32_t> key, uint64_t hash) const {
    auto it = head_.find(hash);
    if (it == head_.end()) return kNone;
    for (uint32_t id = it->second; id != kNone; id = next_[id]) {
      if (Get(id) == key) return id;
    }
    return kNone;
  }
  // Adds `key`, which must be absent, and returns its id. `key` must not
  // point into this interner.
  uint32_t Add(absl::Span<const uint32_t> key, uint64_t hash) {
    uint32_t id = size();
    pool_.insert(pool_.end(), key.begin(), key.end());
    begin_.push_back(static_cast<uint32_t>(pool_.size()));
    auto [it, inserted] = head_.try_emplace(hash, id);
    next_.push_back(inserted ? kNone : it->second);
    it->second = id;
    return id;
  }
  // Bytes held (the hash map's slots estimated from its capacity).
  size_t MemoryBytes() const {
    return (pool_.capacity() + begin_.capacity() + next_.capacity()) * sizeof(uint32_t) +
           head_.capacity() * (sizeof(uint64_t) + sizeof(uint32_t) + 1);
  }
  void Reserve(size_t keys) {
    begin_.reserve(keys + 1);
    next_.reserve(keys);
    head_.reserve(keys);
  }

 private:
  std::vector<uint32_t> pool_;
  std::vector<uint32_t> begin_ = {0};  // key id -> offset in pool_; size() + 1 entries
  std::vector<uint32_t> next_;         // key id -> older id with the same hash, or kNone
  absl::flat_hash_map<uint64_t, uint32_t> head_;  // hash -> newest id with it
};

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_SPAN_INTERNER_H_
