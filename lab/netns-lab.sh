#!/usr/bin/env bash
# A two-host lab in network namespaces: client — router — server, joined by veth pairs, with the
# router forwarding and (optionally) shaping its egress toward the server with tc tbf (and netem
# where the kernel has it). It runs the server in one namespace and the client in the other, and
# always tears everything down (trap), even after a failure. Needs root and iproute2.
#
#   lab/netns-lab.sh [OPTIONS] wirebench [RUN-ARGS...]   # wirebench server + wirebench run --server S RUN-ARGS
#   lab/netns-lab.sh [OPTIONS] iperf3 [IPERF3-ARGS...]   # iperf3 -s -1 + iperf3 -c S IPERF3-ARGS
#   lab/netns-lab.sh [OPTIONS] rr [RR-ARGS...]           # wirebench server + wirebench rr --server S
#   lab/netns-lab.sh [OPTIONS] latency [LATENCY-ARGS...] # wirebench server + wirebench latency --server S
#                                                        #   --path-note "netns lab: ..." RR-ARGS
#
# rr records the lab's path with every result (--path-note "netns lab: tbf rate R burst B limit L,
# MTU N"), so `wirebench report --rr` says what measured what: the router's tbf queue drops UDP
# datagrams and TCP segments alike, so UDP loss and TCP retransmissions are both real drops.
# Pass --db PATH among RR-ARGS to store the sweep where you want it.
#
# Options:
#   --rate RATE       shape the router's egress toward the server: tc tbf rate RATE (e.g. 100mbit)
#   --burst SIZE      tbf bucket (default 32kb)
#   --tbf-limit SIZE  tbf queue limit in bytes (default 256kb); excess packets are dropped there
#   --netem "ARGS"    add netem ARGS (e.g. "delay 10ms") under tbf (refused where the kernel lacks it)
#   --mtu N           MTU of both links (default 1500)
#   --bin PATH        the wirebench binary (default: $WIREBENCH, else wirebench on PATH, else target/release)
#   --stats FILE      after the client ends, write the router's tc counters and the client's TCP
#                     retransmissions to FILE as KEY=VALUE lines
#
# The shaper sits on the router, not on the sender's own interface: there a UDP sender would be
# slowed by back-pressure and nothing would be dropped. Addresses (10.77.1.0/24 client side,
# 10.77.2.0/24 server side) exist only inside the namespaces the script creates; namespace names
# carry the script's PID, so parallel runs do not collide. IPv6 is off in the lab and neighbours
# are static, so the only traffic on the links is the test's own.
set -euo pipefail

rate="" burst="32kb" limit="256kb" netem="" mtu=1500 bin="${WIREBENCH:-}" stats=""
usage() { sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate="$2"; shift 2 ;;
    --burst) burst="$2"; shift 2 ;;
    --tbf-limit) limit="$2"; shift 2 ;;
    --netem) netem="$2"; shift 2 ;;
    --mtu) mtu="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --stats) stats="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    wirebench|iperf3|rr|latency) break ;;
    *) echo "netns-lab: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "netns-lab: say what to run: wirebench [RUN-ARGS], rr [RR-ARGS], latency [LATENCY-ARGS] or iperf3 [ARGS]" >&2; exit 2; }
tool="$1"; shift
args=("$@")
if [ "$tool" != iperf3 ] && [ -z "$bin" ]; then
  here="$(cd "$(dirname "$0")/.." && pwd)"
  if command -v wirebench >/dev/null 2>&1; then bin="$(command -v wirebench)"
  elif [ -x "$here/target/release/wirebench" ]; then bin="$here/target/release/wirebench"
  else echo "netns-lab: no wirebench binary: pass --bin PATH or build with cargo build --release" >&2; exit 2
  fi
fi
if [ "$tool" = iperf3 ] && ! command -v iperf3 >/dev/null 2>&1; then
  echo "netns-lab: iperf3 is not installed (apt-get install iperf3)" >&2; exit 2
fi
[ "$(id -u)" = 0 ] || { echo "netns-lab: needs root (ip netns)" >&2; exit 2; }

id=$$
C="wblabc$id" R="wblabr$id" S="wblabs$id"
server_pid=""
cleanup() {
  local status=$?
  set +e
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  # Deleting a namespace deletes the veth ends inside it, and with them the pairs.
  for ns in "$C" "$R" "$S"; do ip netns del "$ns" 2>/dev/null; done
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "netns-lab: $*" >&2; }
in_ns() { local ns="$1"; shift; ip netns exec "$ns" "$@"; }

for ns in "$C" "$R" "$S"; do
  ip netns add "$ns"
  in_ns "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$ns" link set lo up
done
# Created inside the namespaces directly: no name ever exists in the caller's namespace.
ip link add c0 netns "$C" type veth peer r0 netns "$R"
ip link add s0 netns "$S" type veth peer r1 netns "$R"
ip -n "$C" addr add 10.77.1.2/24 dev c0
ip -n "$R" addr add 10.77.1.1/24 dev r0
ip -n "$R" addr add 10.77.2.1/24 dev r1
ip -n "$S" addr add 10.77.2.2/24 dev s0
ip -n "$C" link set c0 mtu "$mtu" up
ip -n "$R" link set r0 mtu "$mtu" up
ip -n "$R" link set r1 mtu "$mtu" up
ip -n "$S" link set s0 mtu "$mtu" up
ip -n "$C" route add default via 10.77.1.1
ip -n "$S" route add default via 10.77.2.1
in_ns "$R" sysctl -qw net.ipv4.ip_forward=1
# Static neighbours: no ARP on the links while measuring.
mac() { ip -n "$1" -o link show "$2" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p'; }
ip -n "$C" neigh replace 10.77.1.1 lladdr "$(mac "$R" r0)" dev c0 nud permanent
ip -n "$R" neigh replace 10.77.1.2 lladdr "$(mac "$C" c0)" dev r0 nud permanent
ip -n "$R" neigh replace 10.77.2.2 lladdr "$(mac "$S" s0)" dev r1 nud permanent
ip -n "$S" neigh replace 10.77.2.1 lladdr "$(mac "$R" r1)" dev s0 nud permanent

if [ -n "$rate" ]; then
  tc -n "$R" qdisc add dev r1 root handle 1: tbf rate "$rate" burst "$burst" limit "$limit"
  log "router egress toward the server: tbf rate $rate burst $burst limit $limit"
  if [ -n "$netem" ]; then
    # shellcheck disable=SC2086
    tc -n "$R" qdisc add dev r1 parent 1:1 handle 10: netem $netem \
      || { log "netem is not available in this kernel (modprobe sch_netem); use wirebench relay instead"; exit 1; }
  fi
elif [ -n "$netem" ]; then
  # shellcheck disable=SC2086
  tc -n "$R" qdisc add dev r1 root netem $netem \
    || { log "netem is not available in this kernel (modprobe sch_netem); use wirebench relay instead"; exit 1; }
fi

wait_listening() { # PORT
  for _ in $(seq 200); do
    in_ns "$S" ss -Hltn "sport = :$1" | grep -q . && return 0
    sleep 0.05
  done
  log "the server did not start listening on port $1"; exit 1
}

snmp() { # NS PROTO FIELD: a counter from /proc/net/snmp inside NS
  in_ns "$1" awk -v p="$2:" -v f="$3" '$1 == p { if (!n) { for (i = 2; i <= NF; i++) if ($i == f) c = i; n = 1 } else print $c }' /proc/net/snmp
}

rc=0
case "$tool" in
  wirebench)
    # Not through in_ns: $! must be the server itself (ip netns exec execs it), so kill stops it.
    ip netns exec "$S" "$bin" server --bind 10.77.2.2 --port 5310 >&2 &
    server_pid=$!
    wait_listening 5310
    log "client: wirebench run --server 10.77.2.2:5310 ${args[*]}"
    in_ns "$C" "$bin" run --server 10.77.2.2:5310 "${args[@]}" || rc=$?
    ;;
  rr)
    ip netns exec "$S" "$bin" server --bind 10.77.2.2 --port 5310 >/dev/null 2>&1 &
    server_pid=$!
    wait_listening 5310
    if [ -n "$rate" ]; then path="netns lab: tbf rate $rate burst $burst limit $limit toward the server"; else path="netns lab: no shaping"; fi
    [ -z "$netem" ] || path="$path, netem $netem"
    path="$path, MTU $mtu, client -> router -> server"
    log "client: wirebench rr --server 10.77.2.2:5310 --path-note \"$path\" ${args[*]}"
    in_ns "$C" "$bin" rr --server 10.77.2.2:5310 --path-note "$path" "${args[@]}" || rc=$?
    ;;
  latency)
    ip netns exec "$S" "$bin" server --bind 10.77.2.2 --port 5310 >/dev/null 2>&1 &
    server_pid=$!
    wait_listening 5310
    log "client: wirebench latency --server 10.77.2.2:5310 ${args[*]}"
    in_ns "$C" "$bin" latency --server 10.77.2.2:5310 "${args[@]}" || rc=$?
    ;;
  iperf3)
    ip netns exec "$S" iperf3 -s -1 -B 10.77.2.2 -p 5201 >/dev/null &
    server_pid=$!
    wait_listening 5201
    log "client: iperf3 -c 10.77.2.2 ${args[*]}"
    in_ns "$C" iperf3 -c 10.77.2.2 -p 5201 "${args[@]}" || rc=$?
    ;;
esac

if [ -n "$stats" ]; then
  q="$(tc -n "$R" -s -j qdisc show dev r1)"
  field() { printf '%s' "$q" | grep -o "\"$1\":[0-9]*" | head -1 | cut -d: -f2; }
  {
    echo "tc_bytes=$(field bytes)"
    echo "tc_packets=$(field packets)"
    echo "tc_drops=$(field drops)"
    echo "tc_overlimits=$(field overlimits)"
    echo "client_tcp_retrans_segs=$(snmp "$C" Tcp RetransSegs)"
    echo "server_udp_rcvbuf_errors=$(snmp "$S" Udp RcvbufErrors)"
    echo "server_udp_in_datagrams=$(snmp "$S" Udp InDatagrams)"
  } >"$stats"
fi
if [ -n "$rate$netem" ]; then
  log "router egress counters: $(tc -n "$R" -s qdisc show dev r1 | tr -s ' \n' ' ')"
fi
exit "$rc"
