#include "automaton/internal/dense_table.h"

#include "absl/container/flat_hash_map.h"

namespace maskd::automaton_internal {

std::vector<uint32_t> GroupEqualColumns(const std::vector<uint32_t>& table, uint32_t n, uint32_t k,
                                        std::vector<uint32_t>* group_of) {
  std::vector<uint64_t> hash(k, 0x9E3779B97F4A7C15ull);
  for (uint32_t s = 0; s < n; ++s) {
    const uint32_t* row = &table[static_cast<size_t>(s) * k];
    for (uint32_t c = 0; c < k; ++c) {
      uint64_t h = (hash[c] ^ row[c]) * 0xFF51AFD7ED558CCDull;
      hash[c] = h ^ (h >> 29);
    }
  }
  // Candidate: the first column with the same hash.
  std::vector<uint32_t> cand(k);
  {
    absl::flat_hash_map<uint64_t, uint32_t> first;
    for (uint32_t c = 0; c < k; ++c) cand[c] = first.try_emplace(hash[c], c).first->second;
  }
  std::vector<uint8_t> ok(k, 1);
  for (uint32_t s = 0; s < n; ++s) {
    const uint32_t* row = &table[static_cast<size_t>(s) * k];
    for (uint32_t c = 0; c < k; ++c) {
      if (row[c] != row[cand[c]]) ok[c] = 0;
    }
  }
  auto equal = [&](uint32_t a, uint32_t b) {
    for (uint32_t s = 0; s < n; ++s) {
      if (table[static_cast<size_t>(s) * k + a] != table[static_cast<size_t>(s) * k + b]) return false;
    }
    return true;
  };
  std::vector<uint32_t> reps;
  group_of->assign(k, 0);
  for (uint32_t c = 0; c < k; ++c) {
    uint32_t rep = c;
    if (ok[c] && cand[c] != c) {
      rep = cand[c];
    } else if (!ok[c]) {
      for (uint32_t r : reps) {
        if (equal(r, c)) {
          rep = r;
          break;
        }
      }
    }
    if (rep == c) {
      (*group_of)[c] = static_cast<uint32_t>(reps.size());
      reps.push_back(c);
    } else {
      (*group_of)[c] = (*group_of)[rep];
    }
  }
  return reps;
}

std::vector<uint32_t> SelectColumns(const std::vector<uint32_t>& table, uint32_t n, uint32_t k,
                                    const std::vector<uint32_t>& reps) {
  const size_t nk = reps.size();
  std::vector<uint32_t> out(static_cast<size_t>(n) * nk);
  for (uint32_t s = 0; s < n; ++s) {
    for (size_t j = 0; j < nk; ++j) out[s * nk + j] = table[static_cast<size_t>(s) * k + reps[j]];
  }
  return out;
}

}  // namespace maskd::automaton_internal
