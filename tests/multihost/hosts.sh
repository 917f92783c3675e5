# shellcheck shell=bash
# Several "hosts" on one machine, for tests of multi-node jobs (ctest label: multihost).
# Source this file, then:
#
#   hosts_check                  exit 77 (skip) unless root with working `ip netns`
#   hosts_up TAG N               N hosts joined by one bridge; cleaned up on EXIT, INT, TERM
#   on_host I [OPTION]... -- CMD runs CMD on host I (1-based); exits with CMD's code
#       --private DIR            DIR is an empty tmpfs that only this command sees (a
#                                directory that is not shared with the other hosts)
#       --hosts-file FILE        FILE is /etc/hosts for this command (names of the hosts)
#       --pidfile FILE           FILE gets CMD's pid (CMD is exec'd: the pid is CMD's own)
#   host_addr I / host_name I    10.77.<subnet>.I / node<I>
#   hosts_down                   kills what still runs on the hosts and removes them
#   hosts_export / hosts_attach  a helper script started by the test (e.g. a fake srun)
#                                reaches the test's hosts: the test runs hosts_export,
#                                which sets MH_HOSTS in the environment; the helper
#                                sources this file and runs hosts_attach
#
# A host is a network namespace (its own interface eth0 with host_addr, its own loopback)
# plus, for every command, a UTS namespace with the host's name and a mount namespace.
# Workers of one launcher share all of these, so they meet through shared memory; two
# hosts differ in hostname and namespaces (comm/shm/shm_group.h, host_identity), so they
# talk over TCP, through the bridge. The bridge lives in a namespace of its own, so nothing
# is added to the machine's own network: addresses 10.77.x.x exist only inside the hosts.
#
# Namespaces are named mh-<TAG>-<pid>-{sw,h1,h2,...}: tests running at once do not clash,
# and hosts_up removes those of a test that was killed outright (its pid is gone).

_mh_tag=""
_mh_n=0
_mh_subnet=0

_mh_ns() { echo "mh-${_mh_tag}-$1"; }
host_addr() { echo "10.77.${_mh_subnet}.$1"; }
host_name() { echo "node$1"; }

hosts_check() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: multi-host tests need root (network namespaces)"
    exit 77
  fi
  local probe="mh-probe-$$"
  if ! command -v ip >/dev/null || ! command -v unshare >/dev/null; then
    echo "SKIP: multi-host tests need ip (iproute2) and unshare (util-linux)"
    exit 77
  fi
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "SKIP: cannot create network namespaces here (ip netns add failed)"
    exit 77
  fi
  ip netns del "$probe"
}

hosts_export() { export MH_HOSTS="$_mh_tag $_mh_subnet $_mh_n"; }
hosts_attach() { read -r _mh_tag _mh_subnet _mh_n <<<"$MH_HOSTS"; }

hosts_down() {
  local ns pids
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^mh-${_mh_tag}-" || true); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [[ -n $pids ]]; then
      # shellcheck disable=SC2086 # one pid per word
      kill -KILL $pids 2>/dev/null || true
    fi
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^mh-${_mh_tag}-" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
}

# Cleanup runs however the test ends. An EXIT trap of the test itself would replace this
# one: tests add their own steps with `hosts_on_exit CMD` instead.
_mh_exit_steps=()
hosts_on_exit() { _mh_exit_steps+=("$*"); }
_mh_on_exit() {
  local rc=$?
  local step
  for step in "${_mh_exit_steps[@]}"; do eval "$step" || true; done
  hosts_down
  exit "$rc"
}

# Hosts left behind by a test that was killed outright (SIGKILL runs no trap): their
# creator's pid is in their name and no longer alive.
_mh_reap_stale() {
  local ns pid pids
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns =~ ^mh-.*-([0-9]+)-(sw|h[0-9]+)$ ]] || continue
    pid=${BASH_REMATCH[1]}
    kill -0 "$pid" 2>/dev/null && continue
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    # shellcheck disable=SC2086 # one pid per word
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}

hosts_up() {
  _mh_reap_stale
  _mh_tag="$1-$$"
  _mh_n=$2
  # A subnet per test process only makes logs easier to tell apart; hosts of different
  # tests never see each other anyway.
  _mh_subnet=$(($$ % 250 + 1))
  trap _mh_on_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  local sw i
  sw=$(_mh_ns sw)
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for ((i = 1; i <= _mh_n; ++i)); do
    local h
    h=$(_mh_ns "h$i")
    ip netns add "$h"
    # Created straight inside the two namespaces: no name is ever taken in the machine's own.
    ip link add eth0 netns "$h" type veth peer name "p$i" netns "$sw"
    ip -n "$sw" link set "p$i" master br0 up
    ip -n "$h" addr add "$(host_addr "$i")/24" dev eth0
    ip -n "$h" link set lo up
    ip -n "$h" link set eth0 up
  done
  # A bridge without STP forwards at once; the launchers retry their first connection
  # anyway.
}

# hosts_shape RATE DELAY: shapes every host's link (its eth0 egress) with tc netem (rate
# and one-way delay, e.g. 1gbit 0.1ms). Kernels without netem (sch_netem) get tbf: the
# rate only; it says so on stderr and returns 3.
hosts_shape() {
  local i rc=0
  for ((i = 1; i <= _mh_n; ++i)); do
    local ns
    ns=$(_mh_ns "h$i")
    if ! ip netns exec "$ns" tc qdisc replace dev eth0 root netem rate "$1" delay "$2" 2>/dev/null; then
      ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate "$1" burst 256kb latency 100ms
      rc=3
    fi
  done
  if ((rc == 3)); then echo "hosts_shape: no netem in this kernel: rate $1 only (tbf), no delay" >&2; fi
  return "$rc"
}

on_host() {
  local i=$1
  shift
  local private="" hosts_file="" pidfile=""
  while [[ $# -gt 0 && $1 != -- ]]; do
    case $1 in
      --private) private+="${private:+:}$2" && shift 2 ;;
      --hosts-file) hosts_file=$2 && shift 2 ;;
      --pidfile) pidfile=$2 && shift 2 ;;
      *)
        echo "on_host: unknown option $1" >&2
        return 2
        ;;
    esac
  done
  [[ ${1:-} == -- ]] || {
    echo "on_host: missing -- before the command" >&2
    return 2
  }
  shift
  # shellcheck disable=SC2016 # expanded by the inner shell
  MH_PRIVATE=$private MH_HOSTS_FILE=$hosts_file MH_PIDFILE=$pidfile \
    ip netns exec "$(_mh_ns "h$i")" unshare --uts --mount --propagation private \
    /bin/sh -c '
      hostname "$0" || exit 1
      old_ifs=$IFS; IFS=:
      for d in $MH_PRIVATE; do
        mkdir -p "$d" && mount -t tmpfs -o size=512m mh-private "$d" || exit 1
      done
      IFS=$old_ifs
      if [ -n "$MH_HOSTS_FILE" ]; then mount --bind "$MH_HOSTS_FILE" /etc/hosts || exit 1; fi
      if [ -n "$MH_PIDFILE" ]; then echo $$ > "$MH_PIDFILE"; fi
      unset MH_PRIVATE MH_HOSTS_FILE MH_PIDFILE old_ifs
      exec "$@"' "$(host_name "$i")" "$@"
}
