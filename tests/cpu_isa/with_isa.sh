#!/usr/bin/env bash
# Runs a test command with the CPU kernels forced to one instruction set:
#   with_isa.sh ISA COMMAND [ARGS...]
# Exits 77 (ctest: skipped) when this CPU cannot run ISA, so a machine without AVX-512
# skips that path instead of failing; the same flags as ops/cpu/isa.cpp decide.
set -euo pipefail
isa=$1
shift
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { [[ $flags == *" $1 "* ]]; }
case $isa in
  generic) ;;
  avx2) has avx2 && has fma || { echo "this CPU has no AVX2+FMA: skipped"; exit 77; } ;;
  avx512) has avx512f && has avx2 && has fma || { echo "this CPU has no AVX-512F: skipped"; exit 77; } ;;
  *) echo "with_isa.sh: unknown ISA '$isa'" >&2; exit 2 ;;
esac
export TRAINCTL_CPU_ISA=$isa
exec "$@"
