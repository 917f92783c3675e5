#include "ops/cpu/cpu_kernels.h"

namespace trainctl::ops::cpu {

// Each instruction set's table, compiled from kernels/ into its own namespace.
namespace generic {
const CpuKernels& kernel_table();
}
#if TRAINCTL_HAVE_X86_KERNELS
namespace avx2 {
const CpuKernels& kernel_table();
}
namespace avx512 {
const CpuKernels& kernel_table();
}
#endif

const CpuKernels& cpu_kernels(Isa isa) {
  switch (isa) {
    case Isa::generic:
      return generic::kernel_table();
#if TRAINCTL_HAVE_X86_KERNELS
    case Isa::avx2:
      return avx2::kernel_table();
    case Isa::avx512:
      return avx512::kernel_table();
#else
    case Isa::avx2:
    case Isa::avx512:
      break;
#endif
  }
  throw IsaError("CPU kernels '" + std::string(isa_name(isa)) + "' are not in this build (" +
                 isa_list(built_isas()) + ")");
}

}  // namespace trainctl::ops::cpu
