#!/usr/bin/env bash
# Installs everything trainctl needs to build and test on Debian 12 (run as root or with
# sudo available). Idempotent and quick when everything is already there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build git pkg-config
  libyaml-cpp-dev libcli11-dev libspdlog-dev nlohmann-json3-dev catch2
  libopenblas-dev libgloo-dev
  # MLflow tracking over its REST API (logging.mlflow).
  libcurl4-openssl-dev
  clang-format
  # The portability checks (docs/cpu-kernels.md): CI's Clang build, and lib/ compiled for
  # aarch64 by the test suite.
  clang g++-aarch64-linux-gnu
  # libFuzzer and the sanitizer runtimes for Clang (scripts/fuzz/run_fuzzers.sh).
  libclang-rt-14-dev
  # Reference implementation for the correctness check and benchmarks (/usr/bin/python3).
  python3 python3-torch python3-numpy python3-venv
  # `trainctl report --png` and the report's browser test (headless).
  chromium fonts-dejavu-core
  # Several hosts on one machine for the multihost tests (ip netns, tc; unshare is in
  # util-linux, which every Debian has).
  iproute2
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  echo "[install_deps] installing: ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "[install_deps] all packages present"
fi
