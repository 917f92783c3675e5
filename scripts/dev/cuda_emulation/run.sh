#!/usr/bin/env bash
# Runs the CUDA backend's attention and Llama-family kernels on the CPU, for machines
# without a GPU: their .cu sources, with each `kernel<<<grid, block, 0, s>>>(args)` rewritten
# to `emulated_launch(grid, block, kernel, args)`, compiled by g++ against the warp emulator
# of include/cuda_runtime.h, and compared by check_kernels.cpp with the CPU backend and a
# naive reference. It checks indexing and formulas, not what nvcc generates; takes ~1 min.
#
#   scripts/dev/cuda_emulation/run.sh [BUILD_DIR]     (a configured build; default build/)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-$root/build}
ninja -C "$build" trainctl_ops >/dev/null  # the CPU backend to compare with
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for kernel in kernels_attention kernels_llama; do
  python3 - "$root/lib/ops/cuda/$kernel.cu" "$work/$kernel.cpp" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
out, n = re.subn(r'(\w+)<<<(.*?),\s*0,\s*s>>>\(', r'emulated_launch(\2, \1, ', src, flags=re.S)
if n == 0 or '<<<' in out:
    sys.exit(f'{sys.argv[1]}: a launch run.sh cannot rewrite')
open(sys.argv[2], 'w').write(out)
PY
done
flags=(-std=c++20 -O2 -pthread -I"$here/include" -I"$root/lib" -I"$root/tests")
for f in "$work/kernels_attention.cpp" "$work/kernels_llama.cpp" "$here/check_kernels.cpp"; do
  g++ "${flags[@]}" -Wno-unknown-pragmas -c "$f" -o "$work/$(basename "$f" .cpp).o" &
done
wait
libs=("$build"/lib/libtrainctl_ops.a "$build"/lib/libtrainctl_tensor.a "$build"/lib/libtrainctl_util.a)
g++ -pthread "$work"/*.o "${libs[@]}" -lopenblas -o "$work/check_kernels"
"$work/check_kernels"
