#!/usr/bin/env bash
# Runs one fuzz target for TRAINCTL_FUZZ_SECONDS (default 30): the ctest `fuzz_<target>`
# and scripts/fuzz/run_fuzzers.sh both come here. New inputs that reach new code go to
# CORPUS_DIR (kept between runs in the build directory); a crash, sanitizer report, leak,
# timeout or out-of-memory saves the input under ARTIFACT_DIR and fails the run.
# Usage: run_target.sh FUZZER CORPUS_DIR ARTIFACT_DIR [libFuzzer flags...] [SEED_DIR...]
set -euo pipefail
fuzzer=$1 corpus=$2 artifacts=$3
shift 3
seconds=${TRAINCTL_FUZZ_SECONDS:-30}
mkdir -p "$corpus" "$artifacts"
seeds=()
flags=()
for arg in "$@"; do
  if [[ $arg == -* ]]; then flags+=("$arg"); elif [[ -d $arg ]]; then seeds+=("$arg"); fi
done
# libFuzzer's progress goes to a log beside the artifacts; its final statistics are printed
# either way (ctest shows them with -V), the log's end too when the run fails.
logs="$(dirname "$artifacts")/logs"
mkdir -p "$logs"
log="$logs/$(basename "$fuzzer").log"
echo "fuzzing $(basename "$fuzzer") for ${seconds}s; corpus $corpus; crashes go to $artifacts/; log $log"
rc=0
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "${flags[@]}" "$corpus" "${seeds[@]}" >"$log" 2>&1 || rc=$?
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$log" || true
if ((rc != 0)); then
  echo "FAILED (exit $rc); the end of $log:"
  tail -n 60 "$log"
fi
exit "$rc"
