#!/usr/bin/env bash
# The README's first command: install dependencies, build what the quickstart runs (the
# trainctl binary, and the CUDA plugin where the CUDA toolkit is found; not the test
# suite), and train the quickstart job (CPU, small GPT, synthetic data that trainctl
# generates itself).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh" "$root/build" --target quickstart
# --resume none --overwrite: every run of the quickstart trains from scratch, the previous
# one moved to run_dir/previous-<time>/ (a plain `trainctl train`
# would continue from the previous run's final checkpoint and find nothing left to do).
exec "$root/build/trainctl" train "$root/configs/quickstart.yaml" --resume none --overwrite "$@"
