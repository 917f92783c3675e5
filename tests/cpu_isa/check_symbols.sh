#!/usr/bin/env bash
# Guards the one-binary-many-CPUs build (docs/cpu-kernels.md): the kernels compiled with
# AVX2 or AVX-512 flags may define global symbols only in their own namespace
# (trainctl::ops::cpu::<isa>::, or naming a type of it). A template or inline function from a shared header
# instantiated there (std::min, std::vector, ...) is a weak symbol that the linker may pick
# for baseline code too, which would then die with SIGILL on an older CPU.
#   check_symbols.sh ISA OBJECT...
set -euo pipefail
isa=$1
shift
bad=$(nm -C --defined-only "$@" | awk -v ns="trainctl::ops::cpu::$isa::" '
  NF >= 3 && $2 ~ /^[A-Z]$/ && $2 != "U" {
    name = $0; sub(/^[0-9a-fA-F]* *[A-Za-z] /, "", name)
    if (index(name, ns) == 0) print "  " $2 " " name
  }')
if [[ -n $bad ]]; then
  echo "global symbols outside trainctl::ops::cpu::$isa:: in the $isa kernels:"
  echo "$bad"
  exit 1
fi
echo "ok: $# object file(s) of the $isa kernels define symbols only in trainctl::ops::cpu::$isa::"
