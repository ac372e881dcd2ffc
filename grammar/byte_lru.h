// ByteLru<V>: a thread-safe cache from string keys to shared, immutable
// values, bounded by bytes, the least recently used dropped first. The
// compilers' caches of work shared across requests stand on it
// (grammar/terminal_dfas.h, constraint/schema_grammars.h).
//
// GetOrMake(key, make, bytes_of): the value kept under `key`, or `make()`'s,
// kept for later and charged bytes_of(value) + key.size() + kEntryBytes. An
// error from make() is returned and forgotten; a value larger than max_bytes
// is returned but not kept. A value still held by a caller stays alive after
// its eviction (shared_ptr).
//
// One mutex guards the table; make() runs outside it, so two concurrent
// misses of one key both make a value and the first stored wins. Not for a
// step path: a hit still takes the mutex.
#ifndef MASKD_GRAMMAR_BYTE_LRU_H_
#define MASKD_GRAMMAR_BYTE_LRU_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace maskd {

struct ByteLruStats {
  uint64_t hits = 0;     // lookups answered from the cache
  uint64_t misses = 0;   // lookups that made a value
  uint64_t evicted = 0;  // entries dropped for room
  size_t entries = 0;
  size_t bytes = 0;  // held: values and keys, as charged
};

template <typename V>
class ByteLru {
 public:
  // A table entry's own bytes beyond its value and key (node, list link).
  static constexpr size_t kEntryBytes = 96;

  explicit ByteLru(size_t max_bytes) : max_bytes_(max_bytes) {}

  // `make`: () -> absl::StatusOr<std::shared_ptr<const V>>;
  // `bytes_of`: (const V&) -> size_t.
  template <typename Make, typename BytesOf>
  absl::StatusOr<std::shared_ptr<const V>> GetOrMake(std::string key, const Make& make,
                                                     const BytesOf& bytes_of) {
    {
      absl::MutexLock lock(&mu_);
      if (auto it = table_.find(key); it != table_.end()) {
        ++stats_.hits;
        lru_.splice(lru_.begin(), lru_, it->second.lru);
        return it->second.value;
      }
      ++stats_.misses;
    }
    absl::StatusOr<std::shared_ptr<const V>> made = make();
    if (!made.ok()) return made.status();
    const size_t bytes = bytes_of(**made) + key.size() + kEntryBytes;
    absl::MutexLock lock(&mu_);
    if (bytes > max_bytes_ || table_.contains(key)) return made;
    EvictFor(bytes);
    auto [it, inserted] = table_.emplace(std::move(key), Entry{*made, bytes, {}});
    lru_.push_front(&it->first);
    it->second.lru = lru_.begin();
    stats_.bytes += bytes;
    ++stats_.entries;
    return made;
  }

  ByteLruStats stats() const {
    absl::MutexLock lock(&mu_);
    return stats_;
  }
  size_t max_bytes() const { return max_bytes_; }

 private:
  struct Entry {
    std::shared_ptr<const V> value;
    size_t bytes;
    std::list<const std::string*>::iterator lru;  // into lru_
  };

  // Drops the least recently used entries until `bytes` more fit.
  void EvictFor(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!lru_.empty() && stats_.bytes + bytes > max_bytes_) {
      auto it = table_.find(*lru_.back());
      stats_.bytes -= it->second.bytes;
      --stats_.entries;
      ++stats_.evicted;
      lru_.pop_back();
      table_.erase(it);
    }
  }

  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  absl::node_hash_map<std::string, Entry> table_ ABSL_GUARDED_BY(mu_);  // nodes are stable
  std::list<const std::string*> lru_ ABSL_GUARDED_BY(mu_);  // keys, most recent first
  ByteLruStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maskd

#endif  // MASKD_GRAMMAR_BYTE_LRU_H_
