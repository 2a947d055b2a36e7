#!/usr/bin/env bash
# Decode speed: `listener play F --output null` against `mpg123 -t F` (decode, no output) on a
# 5-minute 320 kbps MP3, runs alternating, median of RUNS each. Prints the ratio and × real time.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-7}
work=${BENCH_DIR:-/tmp/partycast-bench}
mkdir -p "$work"
mp3="$work/five-minutes-320k.mp3"
if [ ! -s "$mp3" ]; then
  sox -R -n -r 44100 -c 2 "$work/src.wav" synth 300 sine 100-8000 pinknoise remix 1 2v0.5 gain -n -3
  lame --quiet -b 320 "$work/src.wav" "$mp3"
  rm -f "$work/src.wav"
fi
listener=.build/release/listener
[ -x "$listener" ] || swift build -c release
seconds() { local start end; start=$(date +%s.%N); "$@" >/dev/null 2>&1; end=$(date +%s.%N); echo "$end - $start" | bc -l; }
ours=() theirs=()
for _ in $(seq "$runs"); do
  theirs+=("$(seconds mpg123 -q -t "$mp3")")
  ours+=("$(seconds "$listener" play --quiet "$mp3" --output null)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
m_ours=$(median "${ours[@]}")
m_theirs=$(median "${theirs[@]}")
printf 'mpg123 -t:        median %.3f s  (runs: %s)\n' "$m_theirs" "${theirs[*]}"
printf 'listener → null:  median %.3f s  (runs: %s)\n' "$m_ours" "${ours[*]}"
printf 'ratio: %.3f   listener speed: %.0f× real time\n' "$(echo "$m_ours / $m_theirs" | bc -l)" "$(echo "300 / $m_ours" | bc -l)"
