#include "parallel/exact_sum.h"

#include <cstring>
#include <vector>

namespace trainctl::parallel {

double allsum_exact(comm::Communicator& group, double local) {
  if (group.size() == 1) return local;
  static_assert(sizeof(double) == 2 * sizeof(float));
  float mine[2];
  std::memcpy(mine, &local, sizeof local);
  std::vector<float> all(2 * static_cast<size_t>(group.size()));
  group.allgather(mine, all.data(), 2);
  double sum = 0.0;
  for (int r = 0; r < group.size(); ++r) {
    double part = 0.0;
    std::memcpy(&part, all.data() + 2 * r, sizeof part);
    sum += part;
  }
  return sum;
}

}  // namespace trainctl::parallel
