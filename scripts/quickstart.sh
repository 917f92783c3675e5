#!/usr/bin/env bash
# The README's first command: install dependencies, build, and train the quickstart job
# (CPU, small GPT, synthetic data that trainctl generates itself).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh" "$root/build"
# --resume none: every run of the quickstart trains from scratch (a plain `trainctl train`
# would continue from the previous run's final checkpoint and find nothing left to do).
exec "$root/build/trainctl" train "$root/configs/quickstart.yaml" --resume none "$@"
