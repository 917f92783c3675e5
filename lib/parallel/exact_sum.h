#pragma once
// A double summed over a group so that every rank gets the bit-identical result: each
// rank's value travels bit for bit (as two floats' worth of bytes) and every rank adds
// them in rank order. Used for global gradient norms, which must agree everywhere or
// ranks would clip by different factors.
#include <functional>

#include "comm/communicator.h"

namespace trainctl::parallel {

double allsum_exact(comm::Communicator& group, double local);

// The same, adding only the values of the ranks `counted` accepts (every rank still sends
// its value): a sum over a subset of the group without a communicator of its own.
double allsum_exact_where(comm::Communicator& group, double local,
                          const std::function<bool(int rank)>& counted);

}  // namespace trainctl::parallel
