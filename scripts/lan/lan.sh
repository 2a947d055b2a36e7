#!/usr/bin/env bash
# A LAN of test hosts on this machine, for tests that cross a network with mDNS:
#   lan.sh up N          hosts pc-host1..N (10.77.0.11…) on a bridge inside namespace pc-switch,
#                        each with its own dbus and avahi-daemon in a private mount namespace
#   lan.sh exec HOST CMD runs CMD inside HOST's network and mount namespaces
#   lan.sh kill-avahi HOST / start-avahi HOST   stop or (re)start one host's avahi-daemon
#   lan.sh down          kills exactly the processes it started, deletes its namespaces by name
# mDNS never touches the root namespace: the bridge and every daemon live in namespaces.
# State (PIDs, configs) lives in $PC_LAN_STATE (default /tmp/pc-lan).
set -euo pipefail
state=${PC_LAN_STATE:-/tmp/pc-lan}
switch=pc-switch

die() { echo "lan.sh: $*" >&2; [ -z "${bringing_up:-}" ] || down >/dev/null 2>&1 || true; exit 1; }

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

holder() { cat "$state/$1/holder.pid"; }
in_host() { local h=$1; shift; nsenter --target "$(holder "$h")" --mount --net -- "$@"; }

start_avahi() {
  local h=$1
  in_host "$h" avahi-daemon --daemonize --no-drop-root --no-chroot --no-rlimits -f "$state/$h/avahi-daemon.conf"
  wait_for 10 in_host "$h" test -S /run/avahi-daemon/socket || die "$h: avahi-daemon did not start"
  in_host "$h" cat /run/avahi-daemon/pid > "$state/$h/avahi.pid"
}

stop_pid() {
  local file=$1
  [ -f "$file" ] || return 0
  local pid; pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait_for 5 sh -c "! kill -0 $pid" || kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

up() {
  local n=${1:?usage: lan.sh up N}
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
  command -v avahi-daemon >/dev/null && command -v dbus-daemon >/dev/null || die "needs avahi-daemon and dbus (apt-get install avahi-daemon dbus)"
  down >/dev/null 2>&1 || true
  mkdir -p "$state"
  bringing_up=1
  trap 'down >/dev/null 2>&1' ERR
  ip netns add $switch || die "cannot create network namespaces here"
  echo $switch >> "$state/namespaces"
  ip -n $switch link add pcbr0 type bridge mcast_snooping 0
  ip -n $switch link set pcbr0 up
  for i in $(seq "$n"); do
    local h=pc-host$i
    mkdir -p "$state/$h"
    ip netns add "$h"
    echo "$h" >> "$state/namespaces"
    ip -n "$h" link add eth0 type veth peer name "port$i" netns $switch
    ip -n $switch link set "port$i" master pcbr0 up
    ip -n "$h" addr add "10.77.0.$((10 + i))/24" dev eth0
    ip -n "$h" link set eth0 up
    ip -n "$h" link set lo up
    cat > "$state/$h/avahi-daemon.conf" <<CONF
[server]
host-name=$h
domain-name=local
use-ipv4=yes
use-ipv6=no
allow-interfaces=eth0
enable-dbus=yes
ratelimit-interval-usec=0
[publish]
publish-workstation=no
publish-hinfo=no
[reflector]
[rlimits]
CONF
    # The holder process owns the host's private mount namespace: its own /run/dbus and /run/avahi-daemon.
    ip netns exec "$h" unshare --mount --propagation private --fork \
      sh -c "echo \$\$ > '$state/$h/holder.pid'; mkdir -p /run/dbus /run/avahi-daemon; mount -t tmpfs tmpfs /run/dbus && mount -t tmpfs tmpfs /run/avahi-daemon && exec sleep 86400" &
    wait_for 5 test -s "$state/$h/holder.pid" || die "$h: namespace holder did not start"
    wait_for 5 in_host "$h" mountpoint -q /run/avahi-daemon || die "$h: private /run not mounted"
    in_host "$h" dbus-daemon --system --fork --print-pid > "$state/$h/dbus.pid"
    wait_for 5 in_host "$h" test -S /run/dbus/system_bus_socket || die "$h: dbus did not start"
    start_avahi "$h"
  done
  trap - ERR
  bringing_up=
  echo "lan up: $(seq -s ' ' -f 'pc-host%g' "$n") on 10.77.0.0/24"
}

down() {
  [ -d "$state" ] || return 0
  for dir in "$state"/pc-host*; do
    [ -d "$dir" ] || continue
    stop_pid "$dir/avahi.pid"
    stop_pid "$dir/dbus.pid"
    stop_pid "$dir/holder.pid"
  done
  if [ -f "$state/namespaces" ]; then
    while read -r ns; do ip netns del "$ns" 2>/dev/null || true; done < "$state/namespaces"
  fi
  rm -rf "$state"
}

case ${1:-} in
  up) shift; up "$@" ;;
  down) down ;;
  exec) shift; h=${1:?usage: lan.sh exec HOST CMD...}; shift; in_host "$h" "$@" ;;
  kill-avahi) stop_pid "$state/${2:?host}/avahi.pid" ;;
  start-avahi) start_avahi "${2:?host}" ;;
  address) echo "10.77.0.$((10 + ${2#pc-host}))" ;;
  *) die "usage: lan.sh up N | exec HOST CMD... | kill-avahi HOST | start-avahi HOST | address HOST | down" ;;
esac
