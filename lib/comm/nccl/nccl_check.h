#pragma once
// Every NCCL call goes through TRAINCTL_NCCL_CHECK: a failure throws comm::CommError with
// the call as written, its file:line, NCCL's error string and its last detailed message.
#include <nccl.h>

#include <string>

#include "comm/communicator.h"

namespace trainctl::comm::nccl {

[[noreturn]] inline void throw_nccl_error(const char* call, const char* file, int line,
                                          ncclResult_t r, const std::string& context) {
  std::string msg = context + (context.empty() ? "" : ": ") + call + " failed at " + file + ":" +
                    std::to_string(line) + ": " + ncclGetErrorString(r);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') msg += std::string(" (") + last + ")";
  throw CommError(msg);
}

}  // namespace trainctl::comm::nccl

// `context` names the group and operation ("allreduce on group dp[1]").
#define TRAINCTL_NCCL_CHECK(call, context)                                                  \
  do {                                                                                      \
    const ncclResult_t trainctl_nccl_r_ = (call);                                           \
    if (trainctl_nccl_r_ != ncclSuccess) {                                                  \
      ::trainctl::comm::nccl::throw_nccl_error(#call, __FILE__, __LINE__, trainctl_nccl_r_, \
                                               (context));                                  \
    }                                                                                       \
  } while (0)
