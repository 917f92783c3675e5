#!/usr/bin/env bash
# shellcheck disable=SC2034 # the MH_* arrays are read by launch_nodes (common.sh)
# DP, TP and PP groups that span hosts reproduce one worker's losses, and groups within a
# host use shared memory while groups across hosts use TCP (ctest label: multihost).
#
#   tests/multihost/test_layouts.sh path/to/trainctl        (as root)
#
# Hosts are network + UTS + mount namespaces on a bridge (hosts.sh), one launcher each
# with --nnodes. The rank map puts ranks [n * per_node, (n + 1) * per_node) on node n
# with TP fastest, so:
#   dp2 x pp2 on 2 hosts x 2 workers: DP within each host (shared memory), PP across
#   dp2 x tp2 on 2 hosts x 2 workers: TP within each host (shared memory), DP across (TCP)
#   tp2 x pp3 on 3 hosts x 2 workers: TP within each host, PP across three hosts
#   dp4       on 2 hosts x 2 workers: DP across hosts with 2 ranks on each: hierarchical
#             (shared memory within each host, TCP between the hosts' leaders)
#   tp2       on 2 hosts x 1 worker:  TP across hosts (TCP)
# Each run's per-step losses match the single worker's within 2e-5 relative (the
# tolerance of tests/integration/test_layouts_3d.cpp). Last, `trainctl bench comm` runs
# across 2 hosts x 2 workers and allreduces hierarchically.
set -euo pipefail
# shellcheck source=tests/multihost/common.sh
source "$(dirname "$0")/common.sh"
mh_init multihost_layouts "$@"
readonly tol=2e-5

write_spec "$work/ref.yaml" ref "{dp: 1, tp: 1, pp: 1}"
run_single ref "$work/ref.yaml"

# check_layout TAG HOSTS PARALLEL: trains on HOSTS hosts and compares with the reference.
check_layout() {
  local tag=$1 hosts=$2 parallel=$3
  echo "$mh_name: $tag: $parallel on $hosts hosts"
  write_spec "$work/$tag.yaml" "$tag" "$parallel"
  launch_nodes "$tag" "$work/$tag.yaml" "$hosts" --token "$mh_token"
  wait_nodes "$tag" 120
  local i
  for ((i = 1; i <= hosts; ++i)); do expect_rc "$tag" "$i" 0; done
  expect_output "$tag" 1 "all $hosts nodes see run_dir $work/runs/$tag"
  same_losses "$work/runs/ref/metrics.jsonl" "$work/runs/$tag/metrics.jsonl" "$tol"
}

# expect_transport TAG RANK GROUP shm|tcp: how RANK's log says GROUP was connected.
expect_transport() {
  local log=$work/runs/$1/logs/rank$2.log text
  if [[ $4 == shm ]]; then text="group $3: shared memory"; else text="group $3: allreduce over TCP"; fi
  grep -qF "$text" "$log" || {
    grep -F "group " "$log" || true
    fail "$1: rank $2's group $3 is not on $4"
  }
}

hosts_up layouts 3
t0=$SECONDS

check_layout dp2pp2 2 "{dp: 2, tp: 1, pp: 2}"
expect_transport dp2pp2 0 "dp[0]" shm
expect_transport dp2pp2 3 "dp[1]" shm
expect_transport dp2pp2 0 "pp[0]" tcp
grep -qF "group pp[0]: allreduce over TCP, not shared memory: rank 1 runs on another host" \
  "$work/runs/dp2pp2/logs/rank0.log" || fail "dp2pp2: rank 0 does not see rank 2 on another host"
# The world group (2 hosts x 2 ranks) allreduces hierarchically.
grep -qF "group world: hierarchical allreduce" "$work/runs/dp2pp2/logs/rank0.log" ||
  fail "dp2pp2: the world group is not hierarchical"

check_layout dp2tp2 2 "{dp: 2, tp: 2, pp: 1}"
expect_transport dp2tp2 0 "tp[0]" shm
expect_transport dp2tp2 2 "tp[1]" shm
expect_transport dp2tp2 0 "dp[0]" tcp

check_layout tp2pp3 3 "{dp: 1, tp: 2, pp: 3}"
expect_transport tp2pp3 4 "tp[2]" shm
expect_transport tp2pp3 0 "pp[0]" tcp

# DP spanning hosts with 2 ranks on each: shared memory within the host, TCP between the
# hosts' leaders (comm/gloo/hierarchical.h), which `auto` picks.
check_layout dp4 2 "{dp: 4, tp: 1, pp: 1}"
for r in 0 1 2 3; do
  grep -qF "group dp[0]: hierarchical allreduce: shared memory within each of 2 hosts" \
    "$work/runs/dp4/logs/rank$r.log" || fail "dp4: rank $r's DP group is not hierarchical"
done

check_layout tp2 2 "{dp: 1, tp: 2, pp: 1}"
expect_transport tp2 0 "tp[0]" tcp

# The workers on host 2 listened on host 2's address: the traffic crossed the bridge.
grep -qF "listen on $(host_addr 2)" "$work/tp2.node2.log" || fail "tp2: host 2's workers did not listen on $(host_addr 2)"
# bench comm across the hosts: auto allreduces hierarchically, with the right sums (the
# bench checks nothing itself, so the training runs above are the correctness proof).
mh_pids=()
for i in 1 2; do
  on_host "$i" -- "$trainctl" bench comm --world 4 --nnodes 2 --node-rank $((i - 1)) \
    --master-addr "$(host_addr 1)" --master-port "$mh_port" --token "$mh_token" \
    --run-dir "$work/runs/bench" --max-bytes 64K --iters 1 >"$work/bench.node$i.log" 2>&1 &
  mh_pids[i]=$!
done
wait_nodes bench 60
expect_rc bench 1 0
expect_rc bench 2 0
grep -qE '^ *allreduce +65536 .* hierarchical$' "$work/bench.node1.log" || {
  cat "$work/bench.node1.log"
  fail "bench comm across 2 hosts did not allreduce hierarchically"
}
echo "PASS: $mh_name ($((SECONDS - t0)) s on the hosts)"
