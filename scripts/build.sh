#!/usr/bin/env bash
# Configures and builds trainctl. Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
# Defaults to build/ in Release. The binary ends up at BUILD_DIR/trainctl.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${1:-$root/build}
shift || true
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [[ ! -f $build_dir/CMakeCache.txt ]]; then
  cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
else
  cmake -S "$root" -B "$build_dir" "$@" >/dev/null
fi
cmake --build "$build_dir" -j "$(nproc)"
