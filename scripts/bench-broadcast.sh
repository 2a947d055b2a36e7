#!/usr/bin/env bash
# Fan-out cost: CPU time of `broadcaster share` for one 30 s song with N listeners on loopback, and
# whether every listener got the whole song. The bar: CPU(50) ≤ 3 × CPU(1), every listener complete.
# Usage: scripts/bench-broadcast.sh [N...]   (default 1 10 50 200; CODEC=opus|pcm, SONG_SECONDS=30,
# KEEP_LOGS=1 keeps every process's stderr and times in the work directory, whose path it prints)
#
# CPU times are the rusage of each process as its parent reaps it (GNU time -f around the broadcaster
# and around each listener): every thread, whole life, exact at exit, nothing sampled. Each listener
# writes a WAV that must hold SONG_SECONDS × 48000 frames (the song is 48 kHz, so neither codec
# resamples); it is checked and deleted as soon as the round ends.
set -euo pipefail
cd "$(dirname "$0")/.."
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1 10 50 200)
codec=${CODEC:-opus}
song_seconds=${SONG_SECONDS:-30}
bin=${BIN:-.build/release}
[ -x "$bin/broadcaster" ] && [ -x "$bin/listener" ] || swift build -c release
for tool in sox lame soxi /usr/bin/time timeout; do
  command -v "$tool" >/dev/null || { echo "bench-broadcast: needs $tool (make deps installs it)" >&2; exit 2; }
done

source scripts/bench-common.sh
bench_workdir bench-broadcast

# Broadband "music" at 48 kHz (a sweep and pink noise, plus a chord), as make-fixtures.sh does.
sox -R -n -r 48000 -c 2 "$work/a.wav" synth "$song_seconds" sine 200-4000 pinknoise remix 1 2v0.5 gain -n -3
sox -R "$work/a.wav" "$work/b.wav" synth "$song_seconds" sine mix 523.25 gain -n -3
lame --quiet --noreplaygain -b 192 "$work/b.wav" "$work/song.mp3"
rm -f "$work/a.wav" "$work/b.wav"
expected=$((song_seconds * 48000))

now() { date +%s.%N; }
calc() { awk "BEGIN { $1 }"; }
# user + system seconds (and elapsed) from a GNU time file; fails when the process was killed.
times_of() { [ -s "$1" ] && tail -n 1 "$1" | awk 'NF == 3 { print $1 + $2, $3; ok = 1 } END { exit !ok }'; }
joined() { grep -c ' joined$' "$1" || true; }

rows=() base="" verdict=""
for n in "${counts[@]}"; do
  dir="$work/n$n"
  mkdir -p "$dir"
  # Listeners must all have joined before sample 0 to get the whole song: launching one costs
  # ~20 ms of CPU, so 3 s plus 50 ms each is ample on two cores (checked below, not assumed).
  start_in=$(calc "printf \"%.1f\", 3 + 0.05 * $n")
  limit=$(calc "printf \"%d\", $start_in + $song_seconds + 30")
  launched=$(now)
  timeout -k 5 $((limit + 15)) /usr/bin/time -f '%U %S %e' -o "$dir/broadcaster.time" \
    "$bin/broadcaster" share "$work/song.mp3" --port 0 --no-mdns --start-in "$start_in" --codec "$codec" 2>"$dir/broadcaster.err" &
  broadcaster=$!
  port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/^broadcaster: broadcasting .* on .*:\([0-9]*\) (.*/\1/p' "$dir/broadcaster.err")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "bench-broadcast: the broadcaster did not start:" >&2; cat "$dir/broadcaster.err" >&2; exit 1; }
  listeners=()
  for i in $(seq "$n"); do
    timeout -k 5 "$limit" /usr/bin/time -f '%U %S %e' -o "$dir/l$i.time" \
      "$bin/listener" join --host "127.0.0.1:$port" --once --quiet --listener-name "l$i" --output "wav:$dir/l$i.wav" \
      2>"$dir/l$i.err" &
    listeners+=($!)
  done
  deadline=$(calc "printf \"%.3f\", $launched + $start_in")
  while [ "$(joined "$dir/broadcaster.err")" -lt "$n" ] && calc "exit !($(now) < $deadline)"; do sleep 0.1; done
  on_time=$(joined "$dir/broadcaster.err")
  waited=$(calc "printf \"%.1f\", $(now) - $launched")

  failed=0
  for pid in "${listeners[@]}"; do wait "$pid" || failed=$((failed + 1)); done
  wait "$broadcaster" || echo "bench-broadcast: N=$n: the broadcaster exited with status $?" >&2

  complete=0 cpu_sum=0 life_sum=0 measured=0 short=""
  for i in $(seq "$n"); do
    frames=$(soxi -s "$dir/l$i.wav" 2>/dev/null || echo 0)
    if [ "$frames" = "$expected" ]; then complete=$((complete + 1))
    elif [ -z "$short" ]; then short="l$i has $frames of $expected frames ($(tail -n 1 "$dir/l$i.err"))"
    fi
    if t=$(times_of "$dir/l$i.time"); then
      read -r cpu life <<<"$t"
      cpu_sum=$(calc "print $cpu_sum + $cpu") life_sum=$(calc "print $life_sum + $life") measured=$((measured + 1))
    fi
    rm -f "$dir/l$i.wav"
  done
  b_cpu=n/a
  if t=$(times_of "$dir/broadcaster.time"); then b_cpu=$(calc "printf \"%.2f\", ${t% *}"); fi
  [ -n "$base" ] || base=$b_cpu
  ratio=$(calc "a = \"$b_cpu\" + 0; b = \"$base\" + 0; if (a > 0 && b > 0) printf \"%.2f×\", a / b; else print \"n/a\"")
  if [ "$measured" -gt 0 ]; then
    l_cpu=$(calc "printf \"%.3f\", $cpu_sum / $measured")
    l_song=$(calc "printf \"%.1f%%\", 100 * $cpu_sum / $measured / $song_seconds")
    l_life=$(calc "printf \"%.1f%%\", 100 * $cpu_sum / $life_sum")
  else
    l_cpu=n/a l_song=n/a l_life=n/a
  fi
  rows+=("$(printf '%5s  %12s  %7s  %9s  %13s  %8s  %8s  %s' "$n" "$b_cpu" "$ratio" "$complete/$n" "$l_cpu" "$l_song" "$l_life" \
    "$on_time/$n at ${waited}s of ${start_in}s")")
  [ "$failed" = 0 ] || echo "bench-broadcast: N=$n: $failed listener(s) exited non-zero or timed out" >&2
  [ -z "$short" ] || echo "bench-broadcast: N=$n: $((n - complete)) incomplete, first: $short" >&2
  if [ "$n" = 50 ] && [ "${counts[0]}" = 1 ]; then
    verdict=$(calc "a = \"$b_cpu\" + 0; b = \"$base\" + 0; ok = (a > 0 && b > 0 && a <= 3 * b && $complete == $n); \
      printf \"bar (CPU at N=50 ≤ 3 × CPU at N=1, every listener whole): %s\", ok ? \"met\" : \"NOT met\"")
  fi
  [ -n "${KEEP_LOGS:-}" ] || rm -rf "$dir"
done

echo "codec $codec, ${song_seconds} s song, $(nproc) cores; CPU = user + system seconds; ratio to N=${counts[0]};"
echo "listener CPU is per listener, whole life (start-in wait included), as % of one core over the song and over its life"
printf '%5s  %12s  %7s  %9s  %13s  %8s  %8s  %s\n' N "broadcaster" ratio complete "listener CPU" "of song" "of life" "joined before sample 0"
printf '%s\n' "${rows[@]}"
[ -z "$verdict" ] || echo "$verdict"
