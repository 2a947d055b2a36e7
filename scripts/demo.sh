#!/usr/bin/env bash
# The whole system on one machine: a broadcaster shares SONG and two listeners join it, one on
# ALSA's default device (or the simulated card where there is none), one on a simulated card whose
# recording shows what it played. Found by mDNS when avahi-daemon runs here, else by address.
#   scripts/demo.sh BIN_DIR SONG
set -euo pipefail
bin=$1 song=$2
port=7360
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM

if avahi-daemon --check 2>/dev/null; then
  discovery=(--name "PartyCast demo") join=("PartyCast demo")
  echo "demo: avahi-daemon is running: the listeners find the broadcaster by mDNS"
else
  discovery=(--no-mdns) join=(--host "127.0.0.1:$port")
  echo "demo: no avahi-daemon here: the listeners join by address (127.0.0.1:$port)"
fi

"$bin/broadcaster" share "$song" --port "$port" --start-in 3 "${discovery[@]}" &
pids+=($!)
broadcaster=$!
sleep 0.5
"$bin/listener" join "${join[@]}" --listener-name demo-1 --output auto --once --quiet &
pids+=($!)
"$bin/listener" join "${join[@]}" --listener-name demo-2 --output virtual:partycast-demo-2.wav --once --quiet &
pids+=($!)
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
trap - EXIT
[ $status = 0 ] || { echo "demo: something failed (exit $status)" >&2; exit $status; }
echo "demo: demo-2 recorded what it played to partycast-demo-2.wav (+ .json: when each frame played)"
