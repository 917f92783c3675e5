#!/usr/bin/env bash
# Fuzzes the readers of untrusted input (issues 15 and 36) with libFuzzer under ASan+UBSan:
# fuzz_spec (job-spec parser), fuzz_token_file (llm.c / raw token files), fuzz_safetensors
# (checkpoint shards), fuzz_metadata (checkpoint metadata.json), fuzz_ps_wire (the
# parameter-server wire format and handshake), fuzz_tokenizer (tokenizer.json, GPT-2
# vocab.json + merges.txt), fuzz_cluster (configs/clusters/*.yaml) and fuzz_manifest (a
# prepared directory's manifest.json).
#   scripts/fuzz/run_fuzzers.sh [SECONDS_PER_TARGET] [BUILD_DIR]
# SECONDS_PER_TARGET defaults to 600 (the long run; CI runs 30 s each through
# `ctest -L fuzz`). Targets run side by side, one per core. The corpus grows in
# BUILD_DIR/tests/fuzz/corpus/ and is reused by the next run; a failing input is saved in
# BUILD_DIR/tests/fuzz/crashes/ (reproduce: BUILD_DIR/tests/fuzz/fuzz_<target> FILE).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-600}
build_dir=${2:-$root/build-fuzz}
targets=(spec token_file safetensors metadata ps_wire tokenizer cluster manifest)
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
CC=clang CXX=clang++ cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTRAINCTL_FUZZ=ON -DTRAINCTL_BUILD_TESTS=OFF -DTRAINCTL_CUDA=OFF >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target fuzz_seeds "${targets[@]/#/fuzz_}"
cd "$build_dir"
TRAINCTL_FUZZ_SECONDS=$seconds ctest -L fuzz -j "$(nproc)" --output-on-failure --timeout $((seconds + 300))
echo "fuzzing done: $seconds s per target, no failure."
for t in "${targets[@]}"; do
  log=tests/fuzz/logs/fuzz_$t.log
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  echo "  fuzz_$t: $runs inputs ($rate/s); corpus $(find "tests/fuzz/corpus/$t" -type f | wc -l) inputs"
done
