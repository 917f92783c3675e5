#!/usr/bin/env bash
# shellcheck disable=SC2034 # the MH_* arrays are read by launch_nodes (common.sh)
# The start-up checks of a multi-node job (launch/shared_dir_check.h): a node that does not
# see node 0's run_dir or has another data file stops the job before training, with exit 2
# on every node, within seconds, naming run_dir (or the file), the node and what to do
# (ctest label: multihost).
#
#   tests/multihost/test_startup_checks.sh path/to/trainctl        (as root)
#
# "Not shared" is made real with a mount namespace: host 2 gets an empty tmpfs over the
# directory that holds run_dir (or the data file), as a node-local disk would be.
#   1. run_dir private to host 2, token given: both launchers exit 2 naming run_dir and
#      node 1, nothing is trained;
#   2. another data file at the same path on host 2: both exit 2 naming data.path;
#   3. run_dir private to host 2, no token: host 2 cannot read node 0's token file and
#      exits 2 saying run_dir is not shared; node 0 gives up when its join timeout ends
#      and says the node did not join (it cannot hear from a node without the token).
set -euo pipefail
# shellcheck source=tests/multihost/common.sh
source "$(dirname "$0")/common.sh"
mh_init multihost_startup_checks "$@"

hosts_up startup 2

# 1. A run_dir on host 2's own disk.
write_spec "$work/private.yaml" private "{dp: 2, tp: 1, pp: 1}"
MH_HOST_OPTS_2=(--private "$work/runs")
launch_nodes private "$work/private.yaml" 2 --token "$mh_token"
wait_nodes private 60
for i in 1 2; do
  expect_rc private "$i" 2
  expect_output private "$i" "run_dir $work/runs/private is not one directory that every node sees"
  expect_output private "$i" "node 1 (host node2, $(host_addr 2)) cannot see $work/runs/private/.shared_dir_check"
  expect_output private "$i" "shared file system"
  ((mh_secs[i] <= 20)) || fail "private: host $i took ${mh_secs[i]} s to stop"
done
[[ ! -e $work/runs/private/metrics.jsonl && ! -e $work/runs/private/checkpoints ]] ||
  fail "private: training started although run_dir is not shared"
echo "$mh_name: private run_dir: exit 2 on both hosts after ${mh_secs[1]} s / ${mh_secs[2]} s"
unset MH_HOST_OPTS_2

# 2. Another data file at the same path on host 2.
mkdir -p "$work/data"
python3 - "$work/data/train.bin" "$work/other.bin" <<'PY'
import random, struct, sys
for path, seed in ((sys.argv[1], 1), (sys.argv[2], 2)):
    rng = random.Random(seed)
    with open(path, "wb") as f:
        f.write(struct.pack("<20000H", *(rng.randrange(64) for _ in range(20000))))
PY
write_spec "$work/data.yaml" data "{dp: 2, tp: 1, pp: 1}"
sed -i "s|^data: .*|data: {type: tokens, path: $work/data/train.bin}|" "$work/data.yaml"
MH_HOST_OPTS_2=(--private "$work/data")
# shellcheck disable=SC2016 # for the inner shell
MH_WRAP_2=(sh -c 'cp "$1" "$2" && shift 2 && exec "$@"' copy "$work/other.bin" "$work/data/train.bin")
launch_nodes data "$work/data.yaml" 2 --token "$mh_token"
wait_nodes data 60
for i in 1 2; do
  expect_rc data "$i" 2
  expect_output data "$i" "data.path $work/data/train.bin is not the same file on every node"
  expect_output data "$i" "node 1 (host node2, $(host_addr 2)): 40000 bytes, first MiB hash"
done
echo "$mh_name: another data file: exit 2 on both hosts after ${mh_secs[1]} s / ${mh_secs[2]} s"
unset MH_HOST_OPTS_2 MH_WRAP_2

# 3. No token, run_dir on host 2's own disk: the token file never reaches host 2.
write_spec "$work/notoken.yaml" notoken "{dp: 2, tp: 1, pp: 1}" "runtime: {comm_timeout_s: 15}"
MH_HOST_OPTS_2=(--private "$work/runs")
launch_nodes notoken "$work/notoken.yaml" 2
wait_nodes notoken 60
expect_rc notoken 2 2
expect_output notoken 2 "$work/runs/notoken/.rendezvous_token, which node 0 writes before starting it, is missing here"
expect_output notoken 2 "shared file system"
expect_rc notoken 1 5
expect_output notoken 1 "node(s) 1 did not join within 15 s"
expect_output notoken 1 "a run_dir that all nodes share"
echo "$mh_name: no token: host 2 exit 2 after ${mh_secs[2]} s, host 1 exit 5 after ${mh_secs[1]} s"
echo "PASS: $mh_name"
