#!/usr/bin/env bash
# Party-mode sync benchmark on the LAN harness: a broadcaster on one test host, three listeners
# joining it by mDNS with clocks (−3 s, −120 ppm), (0, 0), (+7.5 s, +150 ppm), a fourth joining
# 20 s into the broadcast (+1 s, +50 ppm), two CPU hogs, one minute of broadband audio. Each
# listener plays on a simulated card; the skew between them is measured from the recordings by
# partycast-skew (cross-correlation), never from the code's own bookkeeping.
#   scripts/bench-sync.sh [BIN_DIR]     → summary on stdout, bench-out/sync-skew.{csv,json,png}
#   KEEP=1 keeps the recordings and logs (the script says where).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/.build/release}
out=$root/bench-out
lan=$root/scripts/lan/lan.sh
export PC_LAN_PREFIX=pcsync PC_LAN_STATE=/tmp/pc-lan-sync PC_LAN_LIFETIME=400
work=$(mktemp -d /tmp/partycast-bench-sync.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  "$lan" down >/dev/null 2>&1 || true
  if [ "${KEEP:-0}" = 1 ]; then echo "bench-sync: recordings and logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM
mkdir -p "$out"

# Waits (bounded) for the PIDs given; fails if one outlives the deadline.
wait_all() {
  local deadline=$((SECONDS + $1)); shift
  for pid in "$@"; do
    while kill -0 "$pid" 2>/dev/null; do
      [ $SECONDS -lt $deadline ] || { echo "bench-sync: process $pid still running after the deadline" >&2; return 1; }
      sleep 0.5
    done
    wait "$pid" || { echo "bench-sync: process $pid failed" >&2; return 1; }
  done
}

echo "bench-sync: one minute of pink noise with a slow swell (sox + lame)"
sox -R -n -r 44100 -c 2 "$work/song.wav" synth 60 pinknoise tremolo 0.5 40 gain -n -3
lame --quiet -b 192 "$work/song.wav" "$work/song.mp3"

echo "bench-sync: LAN of 5 test hosts (namespaces $PC_LAN_PREFIX-*)"
"$lan" up 5 >/dev/null

"$lan" exec pcsync-host1 "$bin/broadcaster" share "$work/song.mp3" --name "Sync bench" --start-in 6 2> "$work/broadcaster.log" &
pids+=($!); broadcaster=$!
launched=$SECONDS
join() {  # HOST NAME CLOCK
  "$lan" exec "$1" "$bin/listener" join "Sync bench" --listener-name "$2" --output "virtual:$work/$2.wav" \
    --simulate-clock="$3" --once --quiet 2> "$work/$2.log" &
  pids+=($!)
}
join pcsync-host2 slow -3,-120
join pcsync-host3 steady 0,0
join pcsync-host4 fast 7.5,150
listeners=("${pids[@]:1}")
for _ in 1 2; do timeout 120 sh -c 'while :; do :; done' & pids+=($!); done
# The broadcast starts 6 s after launch; the late joiner comes 20 s into it.
sleep $((6 + 20 - (SECONDS - launched)))
join pcsync-host5 late 1,50
listeners+=("${pids[-1]}")

wait_all 120 "${listeners[@]}" "$broadcaster"
echo "bench-sync: measuring the skew from the recordings (REF: steady, the (0, 0) clock)"
recordings=("$work/steady.wav" "$work/slow.wav" "$work/fast.wav" "$work/late.wav")
"$bin/partycast-skew" "${recordings[@]}" --settle-s 5 --csv "$out/sync-skew.csv"
"$bin/partycast-skew" "${recordings[@]}" --settle-s 5 --json > "$out/sync-skew.json"

gnuplot <<GNUPLOT
set terminal pngcairo size 1200,600
set output "$out/sync-skew.png"
set title "PartyCast party mode: skew against the (0 s, 0 ppm) listener, measured from the recordings"
set xlabel "seconds since the first sound"
set ylabel "skew (µs)"
set datafile separator ","
set key outside right
set grid
plot "$out/sync-skew.csv" every ::1 using 1:2 with lines title "slow (−3 s, −120 ppm)", \
     "" every ::1 using 1:3 with lines title "fast (+7.5 s, +150 ppm)", \
     "" every ::1 using 1:4 with lines title "late joiner (+1 s, +50 ppm)", \
     "" every ::1 using 1:5 with lines lw 2 title "max pairwise"
GNUPLOT
echo "bench-sync: wrote $out/sync-skew.csv, $out/sync-skew.json, $out/sync-skew.png"
