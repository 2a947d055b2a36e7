#!/usr/bin/env bash
# The whole system on one machine: a broadcaster shares SONG and three listeners join it, two on
# simulated cards whose recordings show what they played and when, one on ALSA's default device (or
# the simulated card where there is none). Found by mDNS when avahi-daemon runs here, else by
# address. Midway the party is paused and resumed from the command line, as the web remote would;
# at the end, the skew between the two recordings is measured from the audio.
#   scripts/demo.sh BIN_DIR SONG
set -euo pipefail
bin=$1 song=$2
port=7360 control=7361
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
echo "demo: the web remote is at http://$(hostname):$control/ (open it on a phone on this network)"
for n in 1 2; do
  "$bin/listener" join "${join[@]}" --listener-name "demo-$n" --output "virtual:partycast-demo-$n.wav" --once --quiet &
  pids+=($!)
done
"$bin/listener" join "${join[@]}" --listener-name demo-speaker --output auto --once --quiet &
pids+=($!)
ctl() { "$bin/broadcaster" ctl --url "http://127.0.0.1:$control" "$@"; }
sleep 6
echo "demo: broadcaster ctl pause; one second later, resume"
ctl pause >/dev/null && sleep 1 && ctl resume >/dev/null
ctl status
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
trap - EXIT
[ $status = 0 ] || { echo "demo: something failed (exit $status)" >&2; exit $status; }
echo "demo: demo-1 and demo-2 recorded what they played to partycast-demo-{1,2}.wav (+ .json: when each frame played)"
echo "demo: skew between them, measured from the recordings (from 2 s after the first sound):"
# The sample's sine sweep correlates with itself a period away: long windows and a 1 ms search
# (the listeners are microseconds apart) keep each point's peak unambiguous.
"$bin/partycast-skew" partycast-demo-1.wav partycast-demo-2.wav --settle-s 2 --window-ms 200 --search-ms 1
