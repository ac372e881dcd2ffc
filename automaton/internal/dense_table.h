// Column operations on dense transition tables (state-major, `n` rows of `k`
// columns, one column per byte class), used to merge byte classes that every
// state treats alike. Internal to maskd_automaton.
#ifndef MASKD_AUTOMATON_INTERNAL_DENSE_TABLE_H_
#define MASKD_AUTOMATON_INTERNAL_DENSE_TABLE_H_

#include <cstdint>
#include <vector>

namespace maskd::automaton_internal {

// Groups equal columns of `table`: sets (*group_of)[c] for every column,
// groups numbered in order of their first column, and returns the first
// column of each group. Two row-major passes: a running hash per column,
// then a check against the group's first column (a hash collision falls back
// to exact comparison).
std::vector<uint32_t> GroupEqualColumns(const std::vector<uint32_t>& table, uint32_t n, uint32_t k,
                                        std::vector<uint32_t>* group_of);

// The columns `reps` of `table`, in that order, as a new table with
// reps.size() columns.
std::vector<uint32_t> SelectColumns(const std::vector<uint32_t>& table, uint32_t n, uint32_t k,
                                    const std::vector<uint32_t>& reps);

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_DENSE_TABLE_H_
