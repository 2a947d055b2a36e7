#!/usr/bin/env bash
# Footprint against Snapcast (issue 14): CPU seconds and peak RSS of `listener join` against Debian's
# snapclient, and of `broadcaster share` against snapserver with 1 and 10 clients, all on 127.0.0.1,
# the same music-like signal (48 kHz stereo, sent as Opus 128 kbit/s complexity 10 by both), both
# paced in real time, every client run for the same wall time. Median of BENCH_RUNS alternating runs.
# The bars: listener CPU ≤ 1.0 × snapclient's, listener peak RSS ≤ 12 MB, broadcaster CPU with 10
# listeners ≤ snapserver's. Installs snapclient and snapserver with apt-get when missing.
# Usage: scripts/bench-footprint.sh   (BENCH_SECONDS=25 per client, BENCH_RUNS=3, BIN=.build/release,
# KEEP_LOGS=1 keeps every process's stderr and times in the work directory, whose path it prints)
#
# Measuring: each program runs as `timeout -s INT W /usr/bin/time -f … PROGRAM`. timeout leads its
# own process group and, after W seconds, sends SIGINT to it; GNU time ignores SIGINT, the program
# (all four handle it) stops cleanly, and time reports the rusage wait4() returns for it: user +
# system seconds of every thread over its whole life, and ru_maxrss, the kernel's high-water mark of
# its resident set (VmHWM), both exact at exit, nothing sampled or polled (time prints CPU to 10 ms).
# MB here = 2^20 bytes.
# Same wall time: every client is launched as soon as its server listens and stopped W =
# BENCH_SECONDS later; every server is stopped BENCH_SECONDS + 2 s after its launch. The sources
# last 10 s longer than that, so nothing ends early on its own (an early exit fails the run).
# Received audio: each client's output (our virtual card's WAV, snapclient's raw file) must hold at
# least 70 % of W as sound above -60 dBFS, checked in 20 ms blocks, or the run fails loudly.
# Not equal: `broadcaster share` takes MP3 (it decodes it with mpg123), snapserver takes raw PCM
# from a pipe; the decode's own cost (mpg123 -t on the same file) is printed for reference.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${BENCH_SECONDS:-25}
runs=${BENCH_RUNS:-3}
bin=${BIN:-.build/release}
counts=(1 10)
[ -x "$bin/broadcaster" ] && [ -x "$bin/listener" ] || swift build -c release
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
missing=""
for p in snapclient snapserver; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "bench-footprint: installing$missing" >&2
  timeout 600 $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive timeout 600 $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
for tool in sox lame mpg123 python3 ss snapserver snapclient /usr/bin/time timeout; do
  command -v "$tool" >/dev/null || { echo "bench-footprint: needs $tool (make deps installs it)" >&2; exit 2; }
done

source scripts/bench-common.sh
bench_workdir bench-footprint

# Broadband "music" at 48 kHz (a sweep and pink noise, plus a chord), as bench-broadcast.sh makes it:
# MP3 for ours, the same signal as raw 48000:16:2 PCM for snapserver's pipe.
song_seconds=$((seconds + 12))
sox -R -n -r 48000 -c 2 "$work/a.wav" synth "$song_seconds" sine 200-4000 pinknoise remix 1 2v0.5 gain -n -3
sox -R "$work/a.wav" "$work/b.wav" synth "$song_seconds" sine mix 523.25 gain -n -3
lame --quiet --noreplaygain -b 192 "$work/b.wav" "$work/song.mp3"
sox -R "$work/b.wav" -t raw -b 16 -e signed-integer -L "$work/song.raw"
rm -f "$work/a.wav" "$work/b.wav"

now() { date +%s.%N; }
calc() { awk "BEGIN { $1 }"; }
# "cpu elapsed maxrss_kb" from a GNU time file (its last line); fails when there is none.
times_of() { [ -s "$1" ] && tail -n 1 "$1" | awk 'NF == 4 { print $1 + $2, $3, $4; ok = 1 } END { exit !ok }'; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
listening() { [ -n "$(ss -Hltn "sport = :$1")" ]; }
measured() { timeout -s INT -k 5 "$1" /usr/bin/time -f '%U %S %e %M' -o "$2" "${@:3}"; }
# Seconds of sound above -60 dBFS in a client's output, in 20 ms blocks: f32wav (ours) or s16 (raw).
audible() {
  python3 - "$1" "$2" <<'EOF'
import array, sys
path, kind = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
if kind == "f32wav":
    at = data.find(b"data") + 8          # sizes may read 0 if the writer was stopped: take it all
    samples, full = array.array("f", data[at:at + (len(data) - at) // 4 * 4]), 1.0
else:
    samples, full = array.array("h", data[:len(data) // 2 * 2]), 32768.0
block, floor = 960 * 2, 0.001 * full
loud = sum(1 for i in range(0, len(samples) - block + 1, block) if max(map(abs, samples[i:i + block])) > floor)
print(f"{loud * 0.02:.1f}")
EOF
}

listener_cmd=("$bin/listener" join --host "127.0.0.1:PORT" --once --quiet --listener-name lN --output "virtual:DIR/lN.wav")
broadcaster_cmd=("$bin/broadcaster" share "$work/song.mp3" --port 0 --no-mdns --codec opus --bitrate 128)
snapclient_cmd=(snapclient -h 127.0.0.1 -p PORT --hostID benchN --player "file:filename=DIR/cN.raw" --logsink stderr)
snapserver_cmd=(snapserver -c DIR/snapserver.conf)

fail() { echo "bench-footprint: $*" >&2; exit 1; }
# Checks one client: it ran the whole window and played sound; prints "cpu rss_kb" for it.
client_result() {
  local name=$1 timefile=$2 output=$3 kind=$4 t cpu life rss heard
  t=$(times_of "$timefile") || fail "$name left no rusage (killed?): $(cat "$timefile" 2>/dev/null)"
  read -r cpu life rss <<<"$t"
  calc "exit !($life >= $seconds - 0.5)" || fail "$name ran ${life}s, not the ${seconds}s window (see $work)"
  heard=$(audible "$output" "$kind" 2>/dev/null || echo 0)
  calc "exit !($heard >= 0.7 * $seconds)" || fail "$name played only ${heard}s of sound in ${seconds}s (see $work)"
  echo "$cpu $rss $heard"
}
server_result() {
  local name=$1 timefile=$2 t cpu life rss
  t=$(times_of "$timefile") || fail "$name left no rusage (killed?): $(cat "$timefile" 2>/dev/null)"
  read -r cpu life rss <<<"$t"
  echo "$cpu $rss $life"
}

declare -A values=()
record() { values[$1]="${values[$1]:-} $2"; }
# record_client SIDE N "CPU RSS HEARD", record_server SIDE N "CPU RSS LIFE": one round's figures.
record_client() {
  local figures=($3)
  record "client_cpu_$1_$2" "${figures[0]}"; record "client_rss_$1_$2" "${figures[1]}"; record "client_heard_$1_$2" "${figures[2]}"
}
record_server() {
  local figures=($3)
  record "server_cpu_$1_$2" "${figures[0]}"; record "server_rss_$1_$2" "${figures[1]}"; record "server_life_$1_$2" "${figures[2]}"
}

# One round of ours: the broadcaster and N listeners, each on the virtual card (real time, to a WAV).
round_ours() {
  local n=$1 dir=$2 port="" i pids=() r
  measured $((seconds + 2)) "$dir/server.time" \
    "$bin/broadcaster" share "$work/song.mp3" --port 0 --no-mdns --codec opus --bitrate 128 2>"$dir/server.err" &
  local server=$!
  for _ in $(seq 100); do
    port=$(sed -n 's/^broadcaster: broadcasting .* on .*:\([0-9]*\) (.*/\1/p' "$dir/server.err")
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || fail "the broadcaster did not start: $(cat "$dir/server.err")"
  for i in $(seq "$n"); do
    measured "$seconds" "$dir/l$i.time" "$bin/listener" join --host "127.0.0.1:$port" --once --quiet \
      --listener-name "l$i" --output "virtual:$dir/l$i.wav" 2>"$dir/l$i.err" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  wait "$server" || true
  for i in $(seq "$n"); do
    r=$(client_result "listener l$i (N=$n)" "$dir/l$i.time" "$dir/l$i.wav" f32wav)
    [ "$i" != 1 ] || record_client ours "$n" "$r"
  done
  record_server ours "$n" "$(server_result broadcaster "$dir/server.time")"
  [ -n "${KEEP_LOGS:-}" ] || rm -f "$dir"/*.wav
}

# One round of theirs: snapserver reading raw PCM from a FIFO (paced by snapserver's reads) and N
# snapclients with the file player. Their own config, data directory and ports; no HTTP/TCP control.
round_theirs() {
  local n=$1 dir=$2 port i pids=() r
  port=$(free_port)
  mkfifo "$dir/fifo"
  cat >"$dir/snapserver.conf" <<EOF
[server]
datadir = $dir
threads = -1
[http]
enabled = false
[tcp]
enabled = false
[stream]
bind_to_address = 127.0.0.1
port = $port
source = pipe://$dir/fifo?name=bench&mode=read
codec = opus:BITRATE:128000,COMPLEXITY:10
sampleformat = 48000:16:2
chunk_ms = 20
buffer = 1000
[logging]
sink = stderr
EOF
  measured $((seconds + 2)) "$dir/server.time" snapserver -c "$dir/snapserver.conf" 2>"$dir/server.err" &
  local server=$!
  # The feeder blocks on the FIFO: snapserver reads it in real time (chunk_ms at a time).
  timeout -k 5 $((seconds + 10)) cat "$work/song.raw" >"$dir/fifo" 2>/dev/null &
  local feeder=$!
  for _ in $(seq 100); do listening "$port" && break; sleep 0.05; done
  listening "$port" || fail "snapserver did not start: $(cat "$dir/server.err")"
  for i in $(seq "$n"); do
    measured "$seconds" "$dir/c$i.time" snapclient -h 127.0.0.1 -p "$port" --hostID "bench$i" \
      --player "file:filename=$dir/c$i.raw" --logsink stderr 2>"$dir/c$i.err" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  wait "$server" || true
  wait "$feeder" || true
  for i in $(seq "$n"); do
    r=$(client_result "snapclient c$i (N=$n)" "$dir/c$i.time" "$dir/c$i.raw" s16)
    [ "$i" != 1 ] || record_client theirs "$n" "$r"
  done
  record_server theirs "$n" "$(server_result snapserver "$dir/server.time")"
  [ -n "${KEEP_LOGS:-}" ] || rm -f "$dir"/*.raw
}

echo "bench-footprint: $runs runs × (N=1, N=10) × (ours, theirs), ${seconds} s per client; work in $work" >&2
for run in $(seq "$runs"); do
  # Alternate who goes first, so a drift in the machine's load falls on both alike.
  order=(ours theirs)
  [ $((run % 2)) = 1 ] || order=(theirs ours)
  for n in "${counts[@]}"; do
    for who in "${order[@]}"; do
      dir="$work/r$run-$who-n$n"
      mkdir -p "$dir"
      echo "bench-footprint: run $run, $who, N=$n" >&2
      "round_$who" "$n" "$dir"
    done
  done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
m() { median <<<"${values[$1]}"; }
# Ten decodes, for a figure above GNU time's 10 ms resolution.
decode_cpu=$( { /usr/bin/time -f '%U %S' bash -c 'for _ in $(seq 10); do mpg123 -q -t "$0"; done' "$work/song.mp3" 2>&1 >/dev/null; } |
  tail -n 1 | awk '{ printf "%.3f", ($1 + $2) / 10 * '"$seconds"' / '"$song_seconds"' }')

echo
echo "versions: $(snapserver --version 2>&1 | head -n 1), $(snapclient --version 2>&1 | head -n 1)," \
  "PartyCast $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(swift --version 2>&1 | grep -o 'Swift version [0-9.]*' | head -n 1)," \
  "$(nproc) cores"
echo "commands (PORT, DIR, N filled in; each as timeout -s INT W /usr/bin/time -f '%U %S %e %M' …):"
echo "  ours:   ${broadcaster_cmd[*]}"
echo "          ${listener_cmd[*]}"
echo "  theirs: ${snapserver_cmd[*]}   ([stream] source = pipe://DIR/fifo?name=bench&mode=read, codec = opus:BITRATE:128000,COMPLEXITY:10,"
echo "          sampleformat = 48000:16:2, bind_to_address = 127.0.0.1, port = PORT; [http]/[tcp] enabled = false), fed by cat song.raw > DIR/fifo"
echo "          ${snapclient_cmd[*]}"
echo
echo "median of $runs alternating runs; clients ${seconds} s each, servers $((seconds + 2)) s; CPU = user + system s, RSS = peak (MB = 2^20 B)"
fmt='%-36s %8s %8s %7s   %s\n'
printf "$fmt" "" ours theirs ratio bar
row() {  # label ours theirs bar-condition-on-(a,b) bar-text
  local a=$2 b=$3 ratio verdict=""
  ratio=$(calc "a = $a + 0; b = $b + 0; if (b > 0) printf \"%.2f×\", a / b; else print \"n/a\"")
  [ -z "$4" ] || verdict=$(calc "a = $a + 0; b = $b + 0; printf \"%s: %s\", \"$5\", ($4) ? \"bar met\" : \"NOT met\"")
  printf "$fmt" "$1" "$a" "$b" "$ratio" "$verdict"
}
mb() { calc "printf \"%.1f\", $1 / 1024"; }
s2() { calc "printf \"%.2f\", $1"; }
row "listener/snapclient CPU s" "$(s2 "$(m client_cpu_ours_1)")" "$(s2 "$(m client_cpu_theirs_1)")" "a <= 1.0 * b" "CPU ≤ 1.0 × snapclient"
row "listener/snapclient peak RSS MB" "$(mb "$(m client_rss_ours_1)")" "$(mb "$(m client_rss_theirs_1)")" "a <= 12" "peak RSS ≤ 12 MB"
calc "exit !($(m client_rss_ours_1) > 12 * 1024)" && echo "  (over: is Sources/listener/link/text-order.txt stale? \`make text-order\` records it again)"
row "  sound played, s of ${seconds}" "$(m client_heard_ours_1)" "$(m client_heard_theirs_1)" "" ""
for n in "${counts[@]}"; do
  bar="" text=""
  [ "$n" != 10 ] || { bar="a <= b"; text="CPU ≤ snapserver (10 listeners)"; }
  row "broadcaster/snapserver N=$n CPU s" "$(s2 "$(m server_cpu_ours_$n)")" "$(s2 "$(m server_cpu_theirs_$n)")" "$bar" "$text"
  row "broadcaster/snapserver N=$n RSS MB" "$(mb "$(m server_rss_ours_$n)")" "$(mb "$(m server_rss_theirs_$n)")" "" ""
done
echo "one client of N=10, CPU s / peak RSS MB: listener $(s2 "$(m client_cpu_ours_10)") / $(mb "$(m client_rss_ours_10)")," \
  "snapclient $(s2 "$(m client_cpu_theirs_10)") / $(mb "$(m client_rss_theirs_10)")"
echo "server wall s (median): ours $(m server_life_ours_1)/$(m server_life_ours_10), theirs $(m server_life_theirs_1)/$(m server_life_theirs_10) (N=1/N=10);" \
  "the broadcaster's CPU includes decoding the MP3 (mpg123 -t alone: ${decode_cpu} s per ${seconds} s)"
echo "every figure per run: $(for k in $(printf '%s\n' "${!values[@]}" | sort); do printf '%s=[%s] ' "$k" "${values[$k]# }"; done)"
