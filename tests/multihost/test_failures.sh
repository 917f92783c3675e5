#!/usr/bin/env bash
# shellcheck disable=SC2034 # the MH_* arrays are read by launch_nodes (common.sh)
# Failures of a multi-node job across hosts (ctest label: multihost):
#   1. a wrong token: the node with it exits 5 at once saying the store rejected the
#      token; node 0 logs the rejected address and, at its join timeout, names the node
#      that did not join (exit 5);
#   2. a host's launcher killed (SIGKILL) mid-training: its workers die with it, the other
#      host's launcher stops its workers and exits 3 naming the node that stopped
#      responding; started again, the job resumes from the newest checkpoint; then node
#      0's launcher is killed and host 2's launcher names node 0; started once more, the
#      job ends with the per-step losses of an uninterrupted run of the same layout (1e-6
#      relative); whichever the surviving launcher notices first (its workers failing,
#      hanging in a collective, or the heartbeats or the store going silent), it names the
#      node (issue 36);
#   3. a worker killed on host 2 with runtime.max_restarts 1: both launchers restart
#      their workers from the newest checkpoint and finish with the same losses.
#
#   tests/multihost/test_failures.sh path/to/trainctl        (as root)
set -euo pipefail
# shellcheck source=tests/multihost/common.sh
source "$(dirname "$0")/common.sh"
mh_init multihost_failures "$@"
readonly tol=1e-6

hosts_up failures 2

# 1. Wrong token.
write_spec "$work/token.yaml" token "{dp: 2, tp: 1, pp: 1}" "runtime: {comm_timeout_s: 6}"
MH_NODE_ARGS_1=(--token right-token)
MH_NODE_ARGS_2=(--token wrong-token)
launch_nodes token "$work/token.yaml" 2
wait_nodes token 60
unset MH_NODE_ARGS_1 MH_NODE_ARGS_2
expect_rc token 2 5
expect_output token 2 "rejected the job token"
((mh_secs[2] <= 5)) || fail "token: host 2 took ${mh_secs[2]} s to give up on a rejected token"
expect_rc token 1 5
expect_output token 1 "rejected a client from $(host_addr 2) that presented a wrong job token"
expect_output token 1 "node(s) 1 did not join within 6 s"
echo "$mh_name: wrong token: host 2 exit 5 after ${mh_secs[2]} s, host 1 exit 5 after ${mh_secs[1]} s"

# The reference: the same layout on the same hosts, uninterrupted.
steps=150
job=(training: "{steps: $steps, micro_batch_size: 2, global_batch_size: 8}")
# (The collective self-test is left out: tests/multihost/test_layouts.sh runs it.)
write_spec "$work/ref.yaml" ref "{dp: 2, tp: 1, pp: 2}" "${job[*]}" \
  "checkpoint: {every_steps: 10, keep_last: 2}" "runtime: {comm_timeout_s: 30, comm_selftest: false}"
launch_nodes ref "$work/ref.yaml" 2 --token "$mh_token"
wait_nodes ref 120
expect_rc ref 1 0
expect_rc ref 2 0

# last_step RUN_DIR: the step of metrics.jsonl's last line (0 before the first).
last_step() {
  local line
  line=$(tail -n1 "$1/metrics.jsonl" 2>/dev/null || true)
  [[ $line =~ \"step\":\ ?([0-9]+) ]] && echo "${BASH_REMATCH[1]}" || echo 0
}

# wait_for_step RUN_DIR STEP: until step STEP is logged and a checkpoint exists.
wait_for_step() {
  local start=$SECONDS
  until [[ -e $1/checkpoints/latest ]] && (($(last_step "$1") >= $2)); do
    ((SECONDS - start < 90)) || fail "no step $2 in $1 within 90 s"
    sleep 0.05
  done
}

# 2. Host 2's launcher killed.
write_spec "$work/kill.yaml" kill "{dp: 2, tp: 1, pp: 2}" "${job[*]}" \
  "checkpoint: {every_steps: 10, keep_last: 2}" "runtime: {comm_timeout_s: 30, comm_selftest: false}"
launch_nodes kill "$work/kill.yaml" 2 --token "$mh_token"
wait_for_step "$work/runs/kill" 25
kill -KILL "$(cat "$work/kill.node2.pid")"
echo "$mh_name: killed host 2's launcher at step $(last_step "$work/runs/kill")"
wait_nodes kill 60
expect_rc kill 1 3
expect_output kill 1 "node 1 ($(host_addr 2)) stopped responding"
((mh_secs[1] <= 15)) || fail "kill: host 1 took ${mh_secs[1]} s to stop"
left=$(ip netns pids "$(_mh_ns h2)" || true)
[[ -z $left ]] || fail "kill: processes left on host 2: $(ps -o pid,args -p "$left" || true)"
echo "$mh_name: host 1 stopped after ${mh_secs[1]} s naming node 1"
(($(last_step "$work/runs/kill") < steps)) || fail "kill: the job finished before the launcher was killed"

# Started again, the job resumes; then node 0's launcher is killed: host 2 names node 0.
launch_nodes kill "$work/kill.yaml" 2 --token "$mh_token"
wait_for_step "$work/runs/kill" 60
kill -KILL "$(cat "$work/kill.node1.pid")"
echo "$mh_name: killed host 1's launcher (node 0) at step $(last_step "$work/runs/kill")"
wait_nodes kill 60
expect_output kill 1 "resumed from $work/runs/kill/checkpoints/step_"
expect_rc kill 2 3
# Whichever comes first (a worker failing because its peers on host 1 are gone, or the
# launcher noticing the store is gone), host 2 names node 0.
expect_output kill 2 "node 0 ($(host_addr 1), whose rendezvous store is gone) stopped responding"
(($(last_step "$work/runs/kill") < steps)) || fail "kill: the job finished before node 0 was killed"

launch_nodes kill "$work/kill.yaml" 2 --token "$mh_token"
wait_nodes kill 120
expect_rc kill 1 0
expect_rc kill 2 0
expect_output kill 1 "resumed from $work/runs/kill/checkpoints/step_"
same_losses "$work/runs/ref/metrics.jsonl" "$work/runs/kill/metrics.jsonl" "$tol"

# 3. A worker on host 2 killed; the job restarts itself from the newest checkpoint.
write_spec "$work/restart.yaml" restart "{dp: 2, tp: 1, pp: 2}" "${job[*]}" \
  "checkpoint: {every_steps: 10, keep_last: 2}" "runtime: {comm_timeout_s: 30, comm_selftest: false, max_restarts: 1}"
launch_nodes restart "$work/restart.yaml" 2 --token "$mh_token"
wait_for_step "$work/runs/restart" 25
victim=""
for pid in $(ip netns pids "$(_mh_ns h2)"); do
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q " worker"; then victim=$pid; fi
done
[[ -n $victim ]] || fail "restart: no worker process found on host 2"
kill -KILL "$victim"
wait_nodes restart 120
expect_rc restart 1 0
expect_rc restart 2 0
expect_output restart 2 "restarting all workers (restart 1 of 1)"
expect_output restart 1 "restarting all workers (restart 1 of 1)"
same_losses "$work/runs/ref/metrics.jsonl" "$work/runs/restart/metrics.jsonl" "$tol"
echo "PASS: $mh_name"
