#!/usr/bin/env bash
# Broadcaster scaling on loopback: CPU time of `broadcaster share` for one 30 s song with N
# listeners (default 1 10 50 200), each listener checked to have received the whole song, and a
# listener's own CPU use. A benchmark that reports figures, not a test.
#   scripts/bench-broadcast.sh [N...]        (BIN=.build/release by default)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/.build/release}
counts=("$@")
[ $# -gt 0 ] || counts=(1 10 50 200)
work=$(mktemp -d /tmp/partycast-bench-broadcast.XXXXXX)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT INT TERM
# CPU seconds (user + system, all threads) that GNU time wrote for a process (its last line;
# a line before it says when the process exited non-zero).
cpu_seconds() { tail -n 1 "$1" | awk '{ printf "%.3f", $1 + $2 }'; }

sox -R -n -r 44100 -c 2 "$work/song.wav" synth 30 pinknoise tremolo 0.5 40 gain -n -3
lame --quiet -b 192 "$work/song.wav" "$work/song.mp3"
expected=$((30 * 48000))

printf "%9s %16s %9s %12s %20s\n" listeners "broadcaster CPU" "vs 1" "whole song" "listener CPU (mean)"
base=""
for n in "${counts[@]}"; do
  port=$((20000 + RANDOM % 20000))
  # Sample 0 plays once everyone has had time to join (≈ 30 ms per listener to start on 2 cores).
  start_in=$((3 + n / 20))
  /usr/bin/time -f "%U %S" -o "$work/b$n.cpu" \
    "$bin/broadcaster" share "$work/song.mp3" --no-mdns --port "$port" --start-in "$start_in" 2> "$work/b$n.log" &
  broadcaster=$!; pids=("$broadcaster")
  for _ in $(seq 50); do grep -q broadcasting "$work/b$n.log" && break; sleep 0.1; done
  listeners=()
  for i in $(seq "$n"); do
    /usr/bin/time -f "%U %S" -o "$work/l$i.cpu" \
      "$bin/listener" join --host "127.0.0.1:$port" --listener-name "l$i" --output "wav:$work/l$i.wav" --once --quiet 2> "$work/l$i.log" &
    listeners+=($!); pids+=($!)
  done
  deadline=$((SECONDS + start_in + 30 + 60))
  for pid in "$broadcaster" "${listeners[@]}"; do
    while kill -0 "$pid" 2>/dev/null; do
      [ $SECONDS -lt $deadline ] || { echo "bench-broadcast: process $pid still running after the deadline" >&2; exit 1; }
      sleep 0.2
    done
    wait "$pid" || true
  done
  grep -q "the broadcast is over" "$work/b$n.log" || { echo "bench-broadcast: the broadcaster failed: $(tail -1 "$work/b$n.log")" >&2; exit 1; }
  complete=0; listener_cpu=0
  for i in $(seq "$n"); do
    frames=$(soxi -s "$work/l$i.wav" 2>/dev/null || echo 0)
    if [ "$frames" = "$expected" ]; then
      complete=$((complete + 1))
    elif [ -z "${shown:-}" ]; then
      shown=1; echo "bench-broadcast: l$i got $frames of $expected frames: $(tail -n 1 "$work/l$i.log")" >&2
    fi
    listener_cpu=$(echo "$listener_cpu + $(cpu_seconds "$work/l$i.cpu")" | bc -l)
    rm -f "$work/l$i.wav"
  done
  cpu=$(cpu_seconds "$work/b$n.cpu")
  base=${base:-$cpu}
  mean=$(echo "$listener_cpu / $n" | bc -l)
  unset shown
  printf "%9d %14.2f s %8.2fx %7d/%-4d %9.2f s (%4.1f %%)\n" "$n" "$cpu" "$(echo "$cpu / $base" | bc -l)" "$complete" "$n" \
    "$mean" "$(echo "100 * $mean / 30" | bc -l)"
done
