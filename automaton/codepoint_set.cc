#include "automaton/codepoint_set.h"

#include <algorithm>
#include <iterator>

namespace maskd {

CodepointSet CodepointSet::Range(uint32_t lo, uint32_t hi) {
  CodepointSet set;
  set.AssignSorted({{lo, hi}});
  return set;
}

void CodepointSet::AddRange(uint32_t lo, uint32_t hi) {
  if (shared_ == nullptr && (own_.empty() || lo > own_.back().second + 1) &&
      own_.size() < kSharedAbove) {
    own_.emplace_back(lo, hi);  // above every range: still sorted and disjoint
    return;
  }
  Ranges r = ranges();
  r.emplace_back(lo, hi);
  Assign(std::move(r));
}

void CodepointSet::Add(const CodepointSet& other) {
  if (other.empty() || (shared_ != nullptr && other.shared_ == shared_)) return;
  if (empty()) {
    *this = other;
    return;
  }
  // Both sorted: a merge, linear in the two sizes.
  Ranges merged;
  merged.reserve(ranges().size() + other.ranges().size());
  std::merge(ranges().begin(), ranges().end(), other.ranges().begin(), other.ranges().end(),
             std::back_inserter(merged));
  AssignSorted(std::move(merged));
}

void CodepointSet::AddRanges(absl::Span<const std::pair<uint32_t, uint32_t>> ranges) {
  Ranges r = this->ranges();
  r.insert(r.end(), ranges.begin(), ranges.end());
  Assign(std::move(r));
}

void CodepointSet::Assign(Ranges ranges) {
  std::sort(ranges.begin(), ranges.end());
  AssignSorted(std::move(ranges));
}

void CodepointSet::AssignSorted(Ranges ranges) {
  // Merged in place: ranges[0, n) is the result so far.
  size_t n = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (n > 0 && ranges[i].first <= ranges[n - 1].second + 1) {
      ranges[n - 1].second = std::max(ranges[n - 1].second, ranges[i].second);
    } else {
      ranges[n++] = ranges[i];
    }
  }
  ranges.resize(n);
  if (n > kSharedAbove) {
    ranges.shrink_to_fit();
    shared_ = std::make_shared<const Ranges>(std::move(ranges));
    own_ = Ranges();
  } else {
    own_ = std::move(ranges);
    shared_.reset();
  }
}

void CodepointSet::Subtract(const CodepointSet& other) {
  if (empty() || other.empty()) return;
  const Ranges& minus = other.ranges();
  Ranges out;
  size_t j = 0;  // minus[..j) lie below every range still to come
  for (const auto& [lo, hi] : ranges()) {
    while (j < minus.size() && minus[j].second < lo) ++j;
    // `next` is the lowest codepoint of [lo, hi] not yet kept or removed.
    uint32_t next = lo;
    bool rest = true;
    for (size_t k = j; k < minus.size() && minus[k].first <= hi; ++k) {
      if (minus[k].first > next) out.emplace_back(next, minus[k].first - 1);
      if (minus[k].second >= hi) {
        rest = false;
        break;
      }
      next = std::max(next, minus[k].second + 1);
    }
    if (rest) out.emplace_back(next, hi);
  }
  AssignSorted(std::move(out));
}

CodepointSet CodepointSet::IntersectRange(uint32_t lo, uint32_t hi) const {
  Ranges out;
  for (const auto& [l, h] : ranges()) {
    const uint32_t a = std::max(l, lo), b = std::min(h, hi);
    if (a <= b) out.emplace_back(a, b);
  }
  CodepointSet set;
  set.AssignSorted(std::move(out));
  return set;
}

CodepointSet CodepointSet::Complement() const {
  // Universe: every Unicode scalar value (surrogates cannot be encoded in UTF-8).
  Ranges out;
  auto emit = [&](uint32_t lo, uint32_t hi) {
    if (lo < 0xD800) out.emplace_back(lo, std::min<uint32_t>(hi, 0xD7FF));
    if (hi > 0xDFFF) out.emplace_back(std::max<uint32_t>(lo, 0xE000), hi);
  };
  uint32_t next = 0;
  for (const auto& [lo, hi] : ranges()) {
    if (lo > next) emit(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) emit(next, kMaxCodepoint);
  CodepointSet set;
  set.AssignSorted(std::move(out));  // emitted in order
  return set;
}

bool CodepointSet::Contains(uint32_t cp) const {
  const Ranges& r = ranges();
  auto it = std::upper_bound(r.begin(), r.end(), std::make_pair(cp, kMaxCodepoint + 1));
  if (it == r.begin()) return false;
  --it;
  return cp >= it->first && cp <= it->second;
}

}  // namespace maskd
