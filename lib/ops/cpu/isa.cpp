#include "ops/cpu/isa.h"

#include <cstdlib>

namespace trainctl::ops::cpu {

namespace {

bool cpu_executes(Isa isa) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // Cached by the runtime after the first call; these also check that the OS saves the
  // wider registers (XCR0), not only that the CPU has them.
  __builtin_cpu_init();
  switch (isa) {
    case Isa::generic:
      return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
             __builtin_cpu_supports("fma");
  }
  return false;
#else
  return isa == Isa::generic;
#endif
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::generic:
      return "generic";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "unknown";
}

std::vector<Isa> built_isas() {
#if TRAINCTL_HAVE_X86_KERNELS
  return {Isa::generic, Isa::avx2, Isa::avx512};
#else
  return {Isa::generic};
#endif
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : built_isas()) {
    if (cpu_executes(isa)) out.push_back(isa);
  }
  return out;
}

std::string isa_list(const std::vector<Isa>& isas) {
  std::string s;
  for (Isa isa : isas) {
    if (!s.empty()) s += ", ";
    s += isa_name(isa);
  }
  return s;
}

Isa choose_isa(std::string_view requested) {
  const std::vector<Isa> supported = supported_isas();
  if (requested.empty()) return supported.back();
  for (Isa isa : supported) {
    if (isa_name(isa) == requested) return isa;
  }
  std::string why = "is not a CPU kernel path";
  for (Isa isa : built_isas()) {
    if (isa_name(isa) == requested) why = "needs instructions this CPU lacks";
  }
  throw IsaError(std::string(kIsaVariable) + "=" + std::string(requested) + " " + why +
                 "; this CPU supports: " + isa_list(supported) + " (unset it to use the fastest)");
}

Isa isa_from_environment() {
  const char* v = std::getenv(kIsaVariable);
  return choose_isa(v == nullptr ? std::string_view{} : std::string_view{v});
}

}  // namespace trainctl::ops::cpu
