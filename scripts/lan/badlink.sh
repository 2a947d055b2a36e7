#!/usr/bin/env bash
# A bad IP link between two test hosts on this machine, for sync tests and benchmarks under jitter,
# loss and stalls (`tc netem` is not available; /dev/net/tun is).
#
#   badlink.sh up [NETEM OPTIONS…]   network namespaces PREFIX-near and PREFIX-far, joined only by
#                           partycast-netem: TUN device netem0 in each (10.78.0.1/24 near,
#                           10.78.0.2/24 far), every packet between them forwarded with the
#                           impairments given (see Tools/partycast-netem/main.swift; "down" is
#                           near → far); no options: a clean link through the same relay
#   badlink.sh exec HOST CMD..  runs CMD in HOST's network namespace (HOST: near, far or
#                           PREFIX-near, PREFIX-far; CMD replaces this script: same PID)
#   badlink.sh check        MTU, then a TCP and a UDP round trip near → far (python3), bounded
#   badlink.sh address HOST prints HOST's address
#   badlink.sh status       what is up, and netem's options
#   badlink.sh down         stops exactly the processes it started (by recorded PID, checked to be
#                           in our namespaces), prints netem's summary line, deletes its namespaces
#                           by exact name; idempotent
#
# No mDNS: listeners join with --host 10.78.0.1. Everything is bounded: each wait has a timeout,
# netem exits after PC_BADLINK_LIFETIME s by itself, and a watchdog runs `down` then.
#
# Environment: PC_BADLINK_STATE   state directory (PIDs, logs), default /tmp/pc-badlink
#              PC_BADLINK_PREFIX  namespace name prefix, default "pcbl" (pcbl-near, pcbl-far)
#              PC_BADLINK_LIFETIME  seconds before the watchdog runs `down`, default 3600
#              PC_BADLINK_NETEM   the partycast-netem binary, default .build/release/partycast-netem
set -euo pipefail

state=${PC_BADLINK_STATE:-/tmp/pc-badlink}
prefix=${PC_BADLINK_PREFIX:-pcbl}
lifetime=${PC_BADLINK_LIFETIME:-3600}
self=$(readlink -f "$0")
netem=${PC_BADLINK_NETEM:-$(dirname "$self")/../../.build/release/partycast-netem}
near=$prefix-near
far=$prefix-far
device=netem0
subnet=10.78.0

name=badlink.sh watchdog=pc-badlink-watchdog
source "$(dirname "$self")/common.sh"

# near/far or the full name → the namespace's full name.
host_name() {
  case $1 in
    near|"$near") echo "$near" ;;
    far|"$far") echo "$far" ;;
    *) die "no such host \"$1\" (hosts are near and far: $near, $far)" ;;
  esac
}

address() { [ "$(host_name "$1")" = "$near" ] && echo "$subnet.1" || echo "$subnet.2"; }

up() {
  [[ $lifetime =~ ^[1-9][0-9]*$ ]] || die "PC_BADLINK_LIFETIME must be a number of seconds, not \"$lifetime\""
  [[ $prefix =~ ^[A-Za-z0-9_.-]+$ ]] || die "PC_BADLINK_PREFIX may hold letters, digits, _ . - only"
  [ "$(id -u)" = 0 ] || die "needs root: network namespaces cannot be created here"
  for tool in ip nsenter; do command -v "$tool" >/dev/null || die "needs $tool (apt-get install iproute2 util-linux)"; done
  [ -x "$netem" ] || die "no $netem: swift build -c release --product partycast-netem (or set PC_BADLINK_NETEM)"
  [ -c /dev/net/tun ] || die "cannot create network namespaces here with a TUN link: no /dev/net/tun"
  down
  local ns why
  for ns in "$near" "$far"; do
    [ ! -e "/run/netns/$ns" ] || die "network namespace $ns already exists: another bad link is up (badlink.sh down with its PC_BADLINK_STATE), or set PC_BADLINK_PREFIX"
  done
  mkdir -p "$state"
  bringing_up=1
  for ns in "$near" "$far"; do
    why=$(ip netns add "$ns" 2>&1) || die "cannot create network namespaces here: $why"
    echo "$ns" >> "$state/namespaces"
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || true
  done
  # The watchdog: whatever happens to whoever ran this, the link goes away after $lifetime s.
  bash -c "$closefds" closefds bash -c 'trap "kill \$s 2>/dev/null; exit 0" TERM; sleep "$1" & s=$!; wait $s; exec "$2" down' \
    pc-badlink-watchdog "$lifetime" "$self" </dev/null >>"$state/watchdog.log" 2>&1 &
  echo $! > "$state/watchdog.pid"

  # netem runs in the near namespace (so `down` can check it is ours) and makes the far device from
  # there; it exits by itself after the same lifetime.
  printf '%s\n' "$*" > "$state/netem.args"
  rm -f "$state/netem.ready"
  bash -c "$closefds" closefds nsenter --net="/run/netns/$near" -- "$netem" --dev "$device" --peer-netns "/run/netns/$far" \
    --lifetime-s "$lifetime" --ready-file "$state/netem.ready" "$@" </dev/null >>"$state/netem.log" 2>&1 &
  echo $! > "$state/netem.pid"
  local pid=$! deadline=$((SECONDS + 10))
  until [ -s "$state/netem.ready" ]; do
    alive "$pid" || die "partycast-netem exited: $(head -n 1 "$state/netem.log")"
    [ $SECONDS -lt $deadline ] || die "partycast-netem made no devices within 10 s (see $state/netem.log)"
    sleep 0.05
  done
  [ "$(cat "$state/netem.ready")" = "$pid" ] || die "the netem that is ready is not the one started"
  pid_in_netns "$pid" "$near" || die "partycast-netem $pid is not in namespace $near"
  ip -n "$near" addr add "$subnet.1/24" dev "$device"
  ip -n "$far" addr add "$subnet.2/24" dev "$device"
  ip -n "$near" link set "$device" up
  ip -n "$far" link set "$device" up
  bringing_up=0
  echo "bad link up: $near ($subnet.1) ↔ $far ($subnet.2), mtu $(mtu "$near"); netem: ${*:-no impairment} (down within $lifetime s)"
}

mtu() { ip -n "$1" -o link show "$device" | sed -n 's/.* mtu \([0-9]*\) .*/\1/p'; }

# Round trips near → far: a TCP echo of 64 KiB (full-size segments), and UDP datagrams of the
# largest size the MTU takes unfragmented (DF set), retried against loss; everything bounded.
check() {
  [ -f "$state/namespaces" ] || die "no bad link up (state $state)"
  command -v python3 >/dev/null || die "check needs python3"
  local near_mtu far_mtu
  near_mtu=$(mtu "$near")
  far_mtu=$(mtu "$far")
  [ "$near_mtu" = "$far_mtu" ] || die "MTUs differ: $near $near_mtu, $far $far_mtu"
  local server
  ip netns exec "$far" timeout 30 python3 -c '
import socket, sys, threading, time
port = int(sys.argv[1])
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("0.0.0.0", port))
tcp = socket.socket(); tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); tcp.bind(("0.0.0.0", port)); tcp.listen(1)
def echo_udp():
    while True:
        data, peer = udp.recvfrom(65536); udp.sendto(data, peer)
threading.Thread(target=echo_udp, daemon=True).start()
print("ready", flush=True)
conn, _ = tcp.accept()
while True:
    data = conn.recv(65536)
    if not data: break
    conn.sendall(data)
time.sleep(30)  # UDP echoes go on until the client is done (timeout ends this)
' 7999 > "$state/check-server.out" 2>&1 &
  server=$!
  wait_for 10 grep -q ready "$state/check-server.out" || { kill "$server" 2>/dev/null; die "check: the echo server in $far did not start: $(cat "$state/check-server.out")"; }
  local result=0
  ip netns exec "$near" timeout 25 python3 -c '
import os, socket, sys, time
host, port, mtu = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
payload = os.urandom(64 * 1024)
t = time.monotonic()
tcp = socket.create_connection((host, port), timeout=10)
tcp.sendall(payload); tcp.shutdown(socket.SHUT_WR)
back = b""
while len(back) < len(payload):
    data = tcp.recv(65536)
    if not data: break
    back += data
assert back == payload, "TCP echo differs (%d of %d bytes back)" % (len(back), len(payload))
print("tcp: 64 KiB echoed in %.0f ms" % ((time.monotonic() - t) * 1000))
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.settimeout(0.5)
udp.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO: never fragment
datagram = os.urandom(mtu - 28)
for attempt in range(1, 21):
    udp.sendto(datagram, (host, port))
    try:
        if udp.recvfrom(65536)[0] == datagram:
            print("udp: %d-byte datagram (an MTU-sized packet, DF) echoed, attempt %d" % (len(datagram), attempt)); break
    except socket.timeout:
        pass
else:
    sys.exit("udp: no echo in 20 attempts")
' "$subnet.2" 7999 "$near_mtu" || result=$?
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  [ $result = 0 ] || die "check failed across the link (status $result)"
  echo "mtu: $near_mtu on both sides"
}

down() {
  [ -d "$state" ] || return 0
  stop_pid "$state/watchdog.pid" -
  stop_pid "$state/netem.pid" "$near"
  [ -f "$state/netem.log" ] && grep -h '^partycast-netem: .* after ' "$state/netem.log" | tail -n 1 || true
  local ns
  # Anything a test left running inside our namespaces: ours, by namespace.
  for ns in "$near" "$far"; do stop_strays "$ns" "$state/stray.pid"; done
  delete_namespaces
}

status() {
  [ -f "$state/namespaces" ] || { echo "no bad link up (state $state)"; return 0; }
  local pid
  pid=$(cat "$state/netem.pid" 2>/dev/null || echo none)
  if pid_in_netns "$pid" "$near" && alive "$pid"; then
    echo "$near $subnet.1 ↔ $far $subnet.2: partycast-netem $pid, options: $(cat "$state/netem.args")"
  else
    echo "$near $subnet.1 ↔ $far $subnet.2: partycast-netem stopped (see $state/netem.log)"
  fi
}

bringing_up=0
trap 'rc=$?; if [ "$bringing_up" = 1 ]; then log "up failed: taking down what was started"; bringing_up=0; down || true; fi; exit $rc' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

case ${1:-} in
  up) shift; up "$@" ;;
  down) down ;;
  exec)
    shift
    h=$(host_name "${1:?usage: badlink.sh exec HOST CMD...}"); shift
    [ $# -gt 0 ] || die "usage: badlink.sh exec HOST CMD..."
    [ -e "/run/netns/$h" ] && [ -f "$state/namespaces" ] || die "$h is not up (run badlink.sh up)"
    trap - EXIT
    exec nsenter --net="/run/netns/$h" --wd="$PWD" -- "$@"
    ;;
  check) check ;;
  address) address "${2:?usage: badlink.sh address HOST}" ;;
  status) status ;;
  *) die "usage: badlink.sh up [NETEM OPTIONS…] | exec HOST CMD... | check | address HOST | status | down" ;;
esac
