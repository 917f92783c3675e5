#!/usr/bin/env bash
# Runs a command while busy loops keep cores loaded, so that tests with a timing
# assumption fail in CI rather than now and then on a busy machine (issue 36: every test
# must pass while other processes load the cores).
#
#   scripts/dev/under_load.sh [--loops N] [--] COMMAND [ARG]...
#
# N busy loops (default 1: one core) start before COMMAND and are killed after it; it
# exits with COMMAND's exit status (130/143 after SIGINT/SIGTERM, which end it once
# COMMAND has ended). The loops also end by themselves within a moment when this script
# is killed. COMMAND finds the loops' pids in UNDER_LOAD_PIDS. CI runs the timing-sensitive tests this way:
#
#   scripts/dev/under_load.sh -- ctest --output-on-failure -j "$(nproc)" -L timing
set -uo pipefail

usage() {
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
}

loops=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --loops)
      [[ ${2:-} =~ ^[0-9]+$ ]] || {
        echo "under_load.sh: --loops takes a number of busy loops, got '${2:-}'" >&2
        exit 2
      }
      loops=$2
      shift 2
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    --)
      shift
      break
      ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || {
  usage >&2
  exit 2
}

pids=()
stop_loops() {
  local p
  # SIGKILL: a loop signalled before its bash has started would run a SIGTERM through
  # this script's trap (inherited until exec) and lose it.
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  pids=()
}
trap stop_loops EXIT
trap 'stop_loops; exit 130' INT
trap 'stop_loops; exit 143' TERM

for ((i = 0; i < loops; ++i)); do
  # A plain shell loop at the command's priority, no I/O, no sleep; it checks now and then
  # (a builtin, no fork) that this script still runs, so even a SIGKILL leaves none behind.
  bash -c 'while kill -0 "$1" 2>/dev/null; do for ((j = 0; j < 100000; ++j)); do :; done; done' \
    under_load_loop $$ &
  pids+=("$!")
done
export UNDER_LOAD_PIDS="${pids[*]}"

"$@"
rc=$?
stop_loops
exit "$rc"
