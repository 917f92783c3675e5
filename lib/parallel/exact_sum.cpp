#include "parallel/exact_sum.h"

#include <cstring>
#include <vector>

namespace trainctl::parallel {

double allsum_exact(comm::Communicator& group, double local) {
  return allsum_exact_where(group, local, [](int) { return true; });
}

double allsum_exact_where(comm::Communicator& group, double local,
                          const std::function<bool(int rank)>& counted) {
  if (group.size() == 1) return counted(0) ? local : 0.0;
  static_assert(sizeof(double) == 2 * sizeof(float));
  float mine[2];
  std::memcpy(mine, &local, sizeof local);
  std::vector<float> all(2 * static_cast<size_t>(group.size()));
  group.allgather(mine, all.data(), 2);
  double sum = 0.0;
  for (int r = 0; r < group.size(); ++r) {
    if (!counted(r)) continue;
    double part = 0.0;
    std::memcpy(&part, all.data() + 2 * r, sizeof part);
    sum += part;
  }
  return sum;
}

}  // namespace trainctl::parallel
