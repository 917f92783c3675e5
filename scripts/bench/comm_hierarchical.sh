#!/usr/bin/env bash
# Flat vs hierarchical allreduce across hosts: `trainctl bench comm` over 2 hosts x 2
# workers made of network namespaces (tests/multihost/hosts.sh), with each host's link
# shaped by tc netem (default 1 Gbit/s and 0.1 ms each way: 0.2 ms round trip). Runs the
# allreduce flat with `direct` and `ring` over all 4 ranks (the 2 ranks of a host still
# talk through the host's own stack, not the shaped link) and with `hierarchical` (shared
# memory within each host, TCP between the hosts' leaders), prints the tables and one
# comparison table (time per call, median of the iterations, slowest rank). Where the
# kernel has no netem, the link is shaped with tbf (rate only) and the header says so.
#
#   scripts/bench/comm_hierarchical.sh build/trainctl [RATE] [DELAY]     (as root)
#   e.g. scripts/bench/comm_hierarchical.sh build/trainctl 1gbit 0.1ms
set -euo pipefail
trainctl=$(realpath "${1:?usage: $0 path/to/trainctl [rate] [delay]}")
rate=${2:-1gbit}
delay=${3:-0.1ms}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/multihost/hosts.sh
source "$here/../../tests/multihost/hosts.sh"
hosts_check
work=$(mktemp -d /tmp/trainctl-bench-hier.XXXXXX)
hosts_on_exit "rm -rf '$work'"
hosts_up benchhier 2
shaped="netem rate $rate, delay $delay each way"
hosts_shape "$rate" "$delay" || shaped="tbf rate $rate (this kernel has no netem: no added delay)"

run() { # ALGO
  local i pids=()
  for i in 1 2; do
    on_host "$i" -- "$trainctl" bench comm --world 4 --nnodes 2 --node-rank $((i - 1)) \
      --master-addr "$(host_addr 1)" --master-port 29500 --token bench --run-dir "$work/$1" \
      --allreduce-algo "$1" --min-bytes 4K --max-bytes 16M --iters "${ITERS:-5}" \
      >"$work/$1.node$i.out" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
  grep -E '^ *allreduce ' "$work/$1.node1.out"
}

echo "== 2 hosts x 2 workers, each host's link: $shaped =="
echo "-- direct (flat: every rank sends its buffer to every other) --"
run direct | tee "$work/direct.rows"
echo "-- ring (flat: one TCP ring over all ranks) --"
run ring | tee "$work/ring.rows"
echo "-- hierarchical --"
run hierarchical | tee "$work/hier.rows"
echo
echo "| bytes | flat direct (ms) | flat ring (ms) | hierarchical (ms) | vs the better flat |"
echo "| ---: | ---: | ---: | ---: | ---: |"
paste "$work/direct.rows" "$work/ring.rows" "$work/hier.rows" | awk '{
  best = $5 < $13 ? $5 : $13
  printf "| %s | %.2f | %.2f | %.2f | %.2fx |\n", $2, $5 / 1000, $13 / 1000, $21 / 1000, best / $21 }'
