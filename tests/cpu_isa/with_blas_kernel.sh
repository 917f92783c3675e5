#!/usr/bin/env bash
# Runs a test command with OpenBLAS's sgemm forced to another kernel:
#   with_blas_kernel.sh CORETYPE COMMAND [ARGS...]
# OpenBLAS picks its kernel per CPU, and kernels sum in different orders; a tolerance that
# holds on one kernel only is not a tolerance (issue 36). On an AVX-512 machine the default
# is SkylakeX; OPENBLAS_CORETYPE=Haswell runs the kernel an AVX2 machine (or an AMD Zen)
# uses. Skipped (77), never overridden, where the environment already sets
# OPENBLAS_CORETYPE: some machines set it to keep OpenBLAS from faulting, and the default
# runs of the suite already test that kernel there. Skipped as well where the CPU cannot
# run the kernel.
set -euo pipefail
coretype=$1
shift
if [[ -n ${OPENBLAS_CORETYPE:-} ]]; then
  echo "the environment sets OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE: left as it is; skipped"
  exit 77
fi
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { [[ $flags == *" $1 "* ]]; }
case $coretype in
  Haswell | Zen) has avx2 && has fma || { echo "this CPU has no AVX2+FMA: skipped"; exit 77; } ;;
  SkylakeX) has avx512f || { echo "this CPU has no AVX-512F: skipped"; exit 77; } ;;
  *) echo "with_blas_kernel.sh: unsupported OPENBLAS_CORETYPE '$coretype'" >&2; exit 2 ;;
esac
export OPENBLAS_CORETYPE=$coretype
echo "OPENBLAS_CORETYPE=$coretype"
exec "$@"
