// FlatRows: a lazy DFA's transition table as one flat array of rows
// (`stride` uint32 entries each, row s at s * stride), so a reader finds an
// entry with one load of the table's base (the same address each time, off
// the walk's chain of dependent loads) and one of the entry, as in an eager
// Dfa's table. When a new row does not fit, the writer copies the table into
// one twice as large and publishes it (release); the old one stays allocated
// until the FlatRows goes, since a reader may still hold it. So a reader of
// an old table sees every entry filled before the copy and kUnknown for the
// later ones (and then asks the writer, who reads the current table), and
// the memory held is at most twice the current table's.
//
// Thread-safety: Base() and Row() reads from any thread; AddRow() and the
// entries' writes by one writer at a time (the caller's lock). Internal to
// maskd_automaton.
#ifndef MASKD_AUTOMATON_INTERNAL_FLAT_ROWS_H_
#define MASKD_AUTOMATON_INTERNAL_FLAT_ROWS_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace maskd::automaton_internal {

class FlatRows {
 public:
  using Entry = std::atomic<uint32_t>;
  static constexpr uint32_t kFirstRows = 16;

  FlatRows(uint32_t stride, uint32_t unknown) : stride_(stride), unknown_(unknown) {}
  FlatRows(const FlatRows&) = delete;
  FlatRows& operator=(const FlatRows&) = delete;

  // The current table (acquire): every row added before this load.
  const Entry* Base() const { return base_.load(std::memory_order_acquire); }
  // The base's address, for readers that load it themselves (Dfa::Next).
  const std::atomic<const Entry*>* base_address() const { return &base_; }
  // Writer only: row s of the current table.
  Entry* Row(uint32_t s) { return tables_.back().get() + static_cast<size_t>(s) * stride_; }
  // Writer only: appends row `rows()` (every entry `unknown`), growing the
  // table when full.
  void AddRow() {
    if (rows_ == capacity_) Grow();
    Entry* row = Row(rows_);
    for (uint32_t c = 0; c < stride_; ++c) row[c].store(unknown_, std::memory_order_relaxed);
    ++rows_;
  }
  uint32_t rows() const { return rows_; }
  // Bytes of every table allocated, the old ones included.
  size_t MemoryBytes() const { return bytes_; }

 private:
  void Grow() {
    const uint32_t capacity = std::max(kFirstRows, 2 * capacity_);
    const size_t n = static_cast<size_t>(capacity) * stride_;
    std::unique_ptr<Entry[]> table(new Entry[n]);
    const size_t used = static_cast<size_t>(rows_) * stride_;
    for (size_t i = 0; i < used; ++i) {
      table[i].store(tables_.back()[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
    base_.store(table.get(), std::memory_order_release);
    tables_.push_back(std::move(table));
    bytes_ += n * sizeof(Entry);
    capacity_ = capacity;
  }

  const uint32_t stride_;
  const uint32_t unknown_;
  std::atomic<const Entry*> base_{nullptr};
  std::vector<std::unique_ptr<Entry[]>> tables_;  // the current one last
  uint32_t rows_ = 0, capacity_ = 0;
  size_t bytes_ = 0;
};

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_FLAT_ROWS_H_
