#!/usr/bin/env bash
# A non-x86 build must at least compile (docs/cpu-kernels.md): every CPU-side source of
# lib/ is compiled for aarch64 with Debian's cross compiler (syntax and templates, with the
# project's warnings as errors), where only the generic kernel path exists. Skipped (77)
# without the cross compiler (Debian: g++-aarch64-linux-gnu; .ci/run installs it).
#   check_aarch64.sh SOURCE_DIR
set -euo pipefail
root=$1
cxx=aarch64-linux-gnu-g++
command -v "$cxx" >/dev/null 2>&1 || { echo "no $cxx: skipped"; exit 77; }
cd "$root/lib"
# The CUDA plugin's folders and the AVX kernels are not part of an aarch64 CPU build.
mapfile -t sources < <(find . -name '*.cpp' | sed 's|^\./||' | sort |
  grep -v -E '^(ops/cuda|comm/nccl|cuda_plugin)/|^ops/cpu/kernels/attention_tiles\.cpp$')
# libcurl's headers (observe/http_client.cpp) are architecture-independent, but Debian keeps
# them under the host's multiarch folder: a folder of their own, searched last.
curl_dir=$(mktemp -d)
trap 'rm -rf "$curl_dir"' EXIT
[[ -d /usr/include/x86_64-linux-gnu/curl ]] && ln -s /usr/include/x86_64-linux-gnu/curl "$curl_dir/curl"
failed=0
for src in "${sources[@]}"; do
  # Architecture-independent headers (yaml-cpp, spdlog, gloo, cblas) come from the host's
  # /usr/include after the cross compiler's own C library.
  if ! "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Wpedantic -Wshadow -Werror \
      -DTRAINCTL_ISA=generic -DTRAINCTL_VERSION='"0"' -I. -idirafter /usr/include -idirafter "$curl_dir" \
      -idirafter /usr/include/x86_64-linux-gnu/openblas-pthread "$src"; then
    echo "FAILED for aarch64: lib/$src"
    failed=1
  fi
done
((failed == 0)) && echo "ok: ${#sources[@]} sources of lib/ compile for aarch64 (generic CPU kernels only)"
exit $failed
