#pragma once
// Which instruction set the CPU kernels (kernels/) run with, chosen once at start-up.
//
// The binary is built for a portable baseline (x86-64-v2; see docs/cpu-kernels.md) and
// carries the hot kernels compiled several times, once per instruction set:
//   generic  baseline flags; attention through single-threaded sgemm (every CPU)
//   avx2     AVX2 + FMA: register-blocked attention on 8-wide vectors (x86-64 only)
//   avx512   AVX-512F: the same algorithm on 16-wide vectors (x86-64 only)
// avx2 and avx512 give bitwise identical results (same arithmetic in the same order);
// generic agrees with them to float rounding (OpenBLAS sums in another order).
//
// The choice is the best path this CPU supports, or the one TRAINCTL_CPU_ISA names.
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace trainctl::ops::cpu {

enum class Isa { generic, avx2, avx512 };

// The environment variable that forces a path.
inline constexpr const char* kIsaVariable = "TRAINCTL_CPU_ISA";

// A requested path that does not exist or that this CPU cannot run (exit code 2 at the CLI).
class IsaError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

std::string_view isa_name(Isa isa);

// Paths compiled into this binary, from the most portable to the fastest.
std::vector<Isa> built_isas();
// Paths this binary carries and this CPU executes, in the same order (generic always).
std::vector<Isa> supported_isas();
// "generic, avx2, avx512"
std::string isa_list(const std::vector<Isa>& isas);

// The path to run: the fastest supported one when `requested` is empty, else the named
// one. Throws IsaError naming the supported paths for an unknown or unsupported name.
Isa choose_isa(std::string_view requested);
// choose_isa with the value of TRAINCTL_CPU_ISA (unset or empty: the fastest).
Isa isa_from_environment();

}  // namespace trainctl::ops::cpu
