// The one percentile rule of maskctl's reports (maskbench, bench, shm-demo).
#ifndef MASKD_TOOLS_MASKCTL_PERCENTILE_H_
#define MASKD_TOOLS_MASKCTL_PERCENTILE_H_

#include <vector>

namespace maskctl {

// The `p` quantile (0..1) of `v` by nearest rank: the smallest value with at
// least a fraction p of the values at or below it, i.e. the ceil(p * n)-th
// smallest (the smallest for p = 0; no interpolation, so a reported figure is
// always a measured one). 0 when `v` is empty. The p50 of an even count is
// the lower middle value.
double Percentile(std::vector<double> v, double p);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_PERCENTILE_H_
