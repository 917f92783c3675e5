#!/usr/bin/env bash
# Configures and builds trainctl.
#   scripts/build.sh [BUILD_DIR] [--target NAME]... [extra cmake args...]
# Defaults to build/ in Release and every target (tests included). With --target, builds
# only those targets (the quickstart builds `quickstart`: the binary and, where the CUDA
# toolkit is found, the CUDA plugin). The binary ends up at BUILD_DIR/trainctl.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${1:-$root/build}
shift || true
targets=()
cmake_args=()
while (($#)); do
  case $1 in
    --target)
      [[ $# -ge 2 ]] || { echo "build.sh: --target needs a target name" >&2; exit 2; }
      targets+=("$2")
      shift 2
      ;;
    *)
      cmake_args+=("$1")
      shift
      ;;
  esac
done
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [[ ! -f $build_dir/CMakeCache.txt ]]; then
  cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}"
else
  cmake -S "$root" -B "$build_dir" "${cmake_args[@]}" >/dev/null
fi
target_args=()
for t in "${targets[@]}"; do target_args+=(--target "$t"); done
cmake --build "$build_dir" -j "$(nproc)" "${target_args[@]}"
