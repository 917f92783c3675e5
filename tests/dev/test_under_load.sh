#!/usr/bin/env bash
# shellcheck disable=SC2016 # the commands' $VARIABLES are for the shells they start
# scripts/dev/under_load.sh (issue 36): the busy loops run while the command runs and are
# gone after it, also after an interruption or a SIGKILL of the script; the command's
# exit status is the script's.
#
#   tests/dev/test_under_load.sh
set -euo pipefail
under_load=$(cd "$(dirname "$0")/../.." && pwd)/scripts/dev/under_load.sh

fail() {
  echo "FAIL: under_load: $*"
  exit 1
}

# all_dead PIDS...: true once none of PIDS runs (within 3 s; pids are not reused that fast).
all_dead() {
  local deadline=$((SECONDS + 3)) p alive
  while ((SECONDS <= deadline)); do
    alive=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  return 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The command sees its loops running, and its exit status comes through.
rc=0
"$under_load" --loops 2 -- bash -c '
  set -- $UNDER_LOAD_PIDS
  [[ $# -eq 2 ]] || exit 90
  for p in "$@"; do kill -0 "$p" || exit 91; done
  echo "$UNDER_LOAD_PIDS" > "$0"
  exit 7' "$work/pids" || rc=$?
((rc == 7)) || fail "exit status $rc, expected the command's 7 (90: not 2 loops, 91: a loop not running)"
read -ra pids <"$work/pids"
all_dead "${pids[@]}" || fail "loops ${pids[*]} still run after the command ended"
"$under_load" true || fail "a command that succeeds made the script fail"
"$under_load" -- bash -c '[[ $UNDER_LOAD_PIDS =~ ^[0-9]+$ ]]' || fail "the default is not one loop"

# Stopped (SIGTERM: after the command, which a shell script cannot interrupt) or killed
# (SIGKILL: at once): no loop is left behind.
for sig in TERM KILL; do
  rm -f "$work/pids"
  "$under_load" -- bash -c 'echo "$UNDER_LOAD_PIDS" > "$0"; sleep 2' "$work/pids" &
  script=$!
  for _ in $(seq 50); do
    [[ -s $work/pids ]] && break
    sleep 0.1
  done
  [[ -s $work/pids ]] || fail "the command did not start"
  read -ra pids <"$work/pids"
  kill -"$sig" "$script"
  rc=0
  wait "$script" 2>/dev/null || rc=$?
  [[ $sig == KILL ]] || ((rc == 143)) || fail "SIGTERM: exit status $rc, expected 143"
  all_dead "${pids[@]}" || fail "loops ${pids[*]} still run after SIG$sig to the script"
done

# A wrong --loops is refused before anything starts.
rc=0
"$under_load" --loops many -- true 2>/dev/null || rc=$?
((rc == 2)) || fail "--loops many: exit status $rc, expected 2"
echo "PASS: under_load"
