#include "tools/maskctl/percentile.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace maskctl {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const double rank = std::ceil(p * static_cast<double>(v.size()));  // 1-based
  const size_t k = rank < 1 ? 0 : std::min(v.size(), static_cast<size_t>(rank)) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace maskctl
