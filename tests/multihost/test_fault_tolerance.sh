#!/usr/bin/env bash
# shellcheck disable=SC2034 # the MH_* arrays are read by launch_nodes (common.sh)
# runtime.fault_tolerance across hosts (issue 32; ctest label: multihost): dp 4 on 2 hosts,
# replicas 0 and 1 on host 1 (node 0, the store), 2 and 3 on host 2. Host 2's launcher is
# killed mid-training (its workers die with it): host 1's launcher and workers keep
# running and training with replicas [0,1] once host 2's heartbeats fall silent. Started
# again, host 2's launcher rejoins the running attempt; its replicas heal from host 1's and
# the job ends on all 4 replicas, every step logged once, host 1's workers never restarted.
#
#   tests/multihost/test_fault_tolerance.sh path/to/trainctl        (as root)
set -euo pipefail
# shellcheck source=tests/multihost/common.sh
source "$(dirname "$0")/common.sh"
mh_init multihost_fault_tolerance "$@"

hosts_up ftol 2

steps=4000
run=$work/runs/ft
write_spec "$work/ft.yaml" ft "{dp: 4, tp: 1, pp: 1}" \
  "training: {steps: $steps, micro_batch_size: 2, global_batch_size: 8}" \
  "checkpoint: {every_steps: 100, keep_last: 2}" \
  "runtime: {comm_timeout_s: 30, comm_selftest: false, fault_tolerance: {enabled: true, heartbeat_timeout_s: 3}}"

last_step() {
  local line
  line=$(tail -n1 "$run/metrics.jsonl" 2>/dev/null || true)
  [[ $line =~ \"step\":\ ?([0-9]+) ]] && echo "${BASH_REMATCH[1]}" || echo 0
}
wait_until() {  # wait_until SECONDS WHAT CMD...: until CMD succeeds
  local limit=$1 what=$2 start=$SECONDS
  shift 2
  until "$@"; do
    ((SECONDS - start < limit)) || fail "$what not within $limit s (at step $(last_step))"
    sleep 0.05
  done
}
past_step() { (($(last_step) >= $1)); }
membership_has() { grep -q "\"replicas\":$1,\"generations\":$2" "$run/membership.jsonl" 2>/dev/null; }

launch_nodes ft "$work/ft.yaml" 2 --token "$mh_token"
wait_until 90 "step 30" past_step 30
kill -KILL "$(cat "$work/ft.node2.pid")"
killed_at=$(last_step)
echo "$mh_name: killed host 2's launcher at step $killed_at"

# Host 1 trains on alone: an epoch of replicas 0 and 1, and steps after it.
wait_until 60 "an epoch without host 2" membership_has "\[0,1\]" "\[0,0\]"
resumed=$(last_step)
wait_until 60 "training on host 1 alone" past_step $((resumed + 30))
kill -0 "${mh_pids[1]}" || fail "host 1's launcher stopped when host 2 was lost"
left=$(ip netns pids "$(_mh_ns h2)" || true)
[[ -z $left ]] || fail "processes left on host 2: $(ps -o pid,args -p "$left" || true)"
echo "$mh_name: host 1 trained on from step $resumed with replicas [0,1]"

# Host 2's launcher again, alone: it rejoins the running job.
on_host 2 --pidfile "$work/ft.node2.pid" -- "$trainctl" train "$work/ft.yaml" --nnodes 2 \
  --node-rank 1 --master-addr "$(host_addr 1)" --master-port "$mh_port" --token "$mh_token" \
  >>"$work/ft.node2.log" 2>&1 &
mh_pids[2]=$!
wait_until 90 "host 2's replicas healing" membership_has "\[0,1,2,3\]" "\[0,0,1,1\]"
(($(last_step) < steps)) || fail "the job finished before host 2 rejoined"
echo "$mh_name: host 2 rejoined at step $(last_step)"

wait_nodes ft 240
expect_rc ft 1 0
expect_rc ft 2 0
expect_output ft 1 "its replicas drop out, the others keep training"
expect_output ft 2 "rejoining a running job: replica 2 starts as restart 1"
for r in 0 1; do
  n=$(grep -c "worker started: pid" "$run/logs/rank$r.log")
  ((n == 1)) || fail "rank $r (host 1) started $n times; its replica should never restart"
done
python3 - "$run/metrics.jsonl" "$steps" <<'EOF' || fail "metrics.jsonl does not hold every step once"
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if steps == list(range(1, int(sys.argv[2]) + 1)) else 1)
EOF
echo "PASS: $mh_name"
