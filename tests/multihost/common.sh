# shellcheck shell=bash
# shellcheck disable=SC2034 # mh_* results are read by the tests that source this file
# What the multi-host tests share: set-up, a job spec, launching one launcher per host,
# and comparing losses. Source it from a test as
#
#   source "$(dirname "$0")/common.sh"; mh_init NAME "$@"      # $1: path to trainctl
#
# Exit codes of a test: 0 pass, 1 fail, 77 skipped (not root, or no network namespaces).
# TRAINCTL_TEST_KEEP=1 keeps the work directory (specs, run dirs, every launcher's output).

# shellcheck source=tests/multihost/hosts.sh
source "$(dirname "${BASH_SOURCE[0]}")/hosts.sh"

mh_name=""
trainctl=""
work=""
readonly mh_port=29500
# shellcheck disable=SC2034 # the tests' token
readonly mh_token=multihost-test-token

fail() {
  echo "FAIL: $mh_name: $*"
  exit 1
}

mh_init() {
  mh_name=$1
  [[ $# -eq 2 ]] || {
    echo "usage: $0 path/to/trainctl" >&2
    exit 2
  }
  trainctl=$(realpath "$2")
  [[ -x $trainctl ]] || fail "no trainctl binary at $2"
  hosts_check
  work=$(mktemp -d "/tmp/trainctl-$mh_name.XXXXXX")
  hosts_on_exit _mh_finish
}

_mh_finish() {
  local rc=$?
  if [[ ${TRAINCTL_TEST_KEEP:-0} == 1 || $rc -ne 0 ]]; then
    echo "$mh_name: work directory kept: $work"
  else
    rm -rf "$work"
  fi
}

# write_spec FILE NAME PARALLEL [YAML LINE]...: a small GPT on synthetic data (6 blocks, 4
# heads: every layout below splits it evenly), logging every step, run_dir $work/runs/NAME.
write_spec() {
  local file=$1 name=$2 parallel=$3
  shift 3
  {
    echo "name: $name"
    echo "run_dir: $work/runs/$name"
    echo "seed: 11"
    echo "model: {vocab_size: 64, seq_len: 16, n_layer: 6, n_head: 4, d_model: 32}"
    echo "data: {type: synthetic}"
    echo "parallel: $parallel"
    echo "optimizer: {lr: 1.0e-2, warmup_steps: 1, min_lr: 1.0e-3}"
    echo "logging: {every_steps: 1}"
    local line has_training=0 has_runtime=0
    for line in "$@"; do
      echo "$line"
      [[ $line == training:* ]] && has_training=1
      [[ $line == runtime:* ]] && has_runtime=1
    done
    ((has_training)) || echo "training: {steps: 6, micro_batch_size: 2, global_batch_size: 8}"
    ((has_runtime)) || echo "runtime: {comm_timeout_s: 30}"
  } >"$file"
}

# launch_nodes TAG SPEC N [ARG]...: one launcher per host 1..N (node rank = host - 1),
# master on host 1, in the background. Per-host on_host options come from the array
# MH_HOST_OPTS_<i> if set (e.g. MH_HOST_OPTS_2=(--private DIR)); extra launcher arguments
# from MH_NODE_ARGS_<i>; a command that runs trainctl (its last arguments) from MH_WRAP_<i>. Output: $work/TAG.node<i>.log. Pids (of the on_host subshells):
# mh_pids[i]; the launcher's own pid: $work/TAG.node<i>.pid.
declare -a mh_pids=()
# _mh_copy_array DEST SRC: DEST=("${SRC[@]}"), or empty when SRC is not set.
_mh_copy_array() {
  local -n _mh_dst=$1
  _mh_dst=()
  if declare -p "$2" >/dev/null 2>&1; then
    local -n _mh_src=$2
    _mh_dst=("${_mh_src[@]}")
  fi
}
launch_nodes() {
  local tag=$1 spec=$2 n=$3
  shift 3
  local i
  mh_pids=()
  for ((i = 1; i <= n; ++i)); do
    local host_opts=() node_args=() wrap=()
    _mh_copy_array host_opts "MH_HOST_OPTS_$i"
    _mh_copy_array node_args "MH_NODE_ARGS_$i"
    _mh_copy_array wrap "MH_WRAP_$i"
    on_host "$i" "${host_opts[@]}" --pidfile "$work/$tag.node$i.pid" -- \
      "${wrap[@]}" "$trainctl" train "$spec" --nnodes "$n" --node-rank $((i - 1)) \
      --master-addr "$(host_addr 1)" --master-port "$mh_port" "${node_args[@]}" "$@" \
      >"$work/$tag.node$i.log" 2>&1 &
    mh_pids[i]=$!
  done
}

# wait_nodes TAG SECONDS: waits for every launcher of launch_nodes; their exit codes go to
# mh_rc[i] and their run times (s) to mh_secs[i]. Fails when one runs longer.
# shellcheck disable=SC2034 # read by the tests
declare -a mh_rc=() mh_secs=()
wait_nodes() {
  local tag=$1 limit=$2 start=$SECONDS i
  mh_rc=()
  mh_secs=()
  local left=${#mh_pids[@]}
  while ((left > 0)); do
    for i in "${!mh_pids[@]}"; do
      [[ -n ${mh_rc[i]:-} ]] && continue
      if ! kill -0 "${mh_pids[i]}" 2>/dev/null; then
        wait "${mh_pids[i]}" && mh_rc[i]=0 || mh_rc[i]=$?
        mh_secs[i]=$((SECONDS - start))
        left=$((left - 1))
      fi
    done
    if ((left > 0 && SECONDS - start > limit)); then
      for i in "${!mh_pids[@]}"; do
        [[ -z ${mh_rc[i]:-} ]] && echo "--- $tag node $i (still running) ---" &&
          tail -n 30 "$work/$tag.node$i.log"
      done
      fail "$tag: launchers still running after $limit s"
    fi
    sleep 0.1
  done
}

# show_nodes TAG: every launcher's output, for a failure message.
show_nodes() {
  local f
  for f in "$work/$1".node*.log; do
    echo "--- $(basename "$f") ---"
    tail -n 40 "$f"
  done
}

# expect_rc TAG I CODE: launcher I of TAG exited with CODE.
expect_rc() {
  [[ ${mh_rc[$2]} == "$3" ]] || {
    show_nodes "$1"
    fail "$1: launcher on host $2 exited ${mh_rc[$2]}, expected $3"
  }
}

# expect_output TAG I TEXT: launcher I's output contains TEXT.
expect_output() {
  grep -qF -- "$3" "$work/$1.node$2.log" || {
    show_nodes "$1"
    fail "$1: launcher on host $2 did not say: $3"
  }
}

# expect_output_re TAG I REGEX: launcher I's output matches the extended REGEX.
expect_output_re() {
  grep -qE -- "$3" "$work/$1.node$2.log" || {
    show_nodes "$1"
    fail "$1: launcher on host $2 did not say: $3"
  }
}

# run_single TAG SPEC: the same job with one launcher on this machine (the reference).
run_single() {
  "$trainctl" train "$2" >"$work/$1.log" 2>&1 || {
    tail -n 40 "$work/$1.log"
    fail "$1: the single-node reference run failed"
  }
}

# same_losses A.jsonl B.jsonl REL_TOL: every step's loss (the last logged for it) agrees.
same_losses() {
  python3 - "$1" "$2" "$3" <<'EOF' || fail "losses of $1 and $2 differ"
import json, sys
def losses(path):
    out = {}
    for line in open(path):
        row = json.loads(line)
        if "loss" in row:
            out[row["step"]] = row["loss"]
    return out
a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
if not a or sorted(a) != sorted(b):
    sys.exit(f"steps differ: {sorted(a)[:5]}... vs {sorted(b)[:5]}... ({len(a)} vs {len(b)})")
worst = max(abs(a[s] - b[s]) / max(abs(a[s]), 1e-12) for s in a)
if worst > tol:
    bad = [s for s in a if abs(a[s] - b[s]) / max(abs(a[s]), 1e-12) > tol][:3]
    sys.exit(f"worst relative difference {worst:.3g} > {tol} (steps {bad})")
print(f"  {len(a)} steps agree (worst relative difference {worst:.2g})")
EOF
}
