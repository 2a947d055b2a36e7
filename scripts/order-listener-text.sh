#!/usr/bin/env bash
# Writes the listener's text order (Sources/listener/link/text-order.txt): every function of the listener
# binary that runs while it joins a party (Opus, PCM and MP3 passthrough; virtual card, WAV) or
# plays local files (MP3, FLAC, Vorbis, Opus, AAC, WAV), as callgrind saw them. The linker puts these first
# (--symbol-ordering-file), so the code a listener runs sits in a few hundred KB of pages instead
# of being spread over 16 MB of text, where each first call maps a 64 KB block: 7.7 MB of the
# listener's resident set was text it had touched that way. Functions missing from the list still
# link and run; they only cost pages. Run after a change that adds code to the listener's paths.
# Usage: scripts/order-listener-text.sh RELEASE_BIN FIXTURES_DIR   (what `make text-order` runs)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?release binaries directory}
fixtures=${2:?fixtures directory}
out=Sources/listener/link/text-order.txt
if ! command -v valgrind >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends valgrind >/dev/null
fi

work=$(mktemp -d /tmp/partycast-text-order.XXXXXX)
broadcaster_pid=""
cleanup() {
  [ -z "$broadcaster_pid" ] || { kill -INT "$broadcaster_pid" 2>/dev/null || true; wait "$broadcaster_pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
# valgrind cannot read the release build's DWARF; the symbol table is all it needs.
objcopy --strip-debug "$bin/listener" "$work/listener"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Runs the listener under callgrind for at most $1 seconds (SIGINT, as a user's Ctrl-C).
profiled=0
profile() {
  local seconds=$1; shift
  profiled=$((profiled + 1))
  timeout -s INT -k 10 "$seconds" valgrind --tool=callgrind --demangle=no --compress-strings=no --dump-instr=no \
    --callgrind-out-file="$work/run$profiled.out" "$work/listener" "$@" >"$work/run$profiled.log" 2>&1 || true
  grep -q '^fn=' "$work/run$profiled.out" || { echo "order-listener-text: run $profiled recorded nothing:" >&2; cat "$work/run$profiled.log" >&2; exit 1; }
}
# A broadcaster (stopped by PID when the next one starts) and a listener joining it.
party() {
  local seconds=$1 output=$2; shift 2
  local port; port=$(free_port)
  [ -z "$broadcaster_pid" ] || { kill -INT "$broadcaster_pid"; wait "$broadcaster_pid" || true; }
  "$bin/broadcaster" share --no-mdns --port "$port" --control-port 0 --start-in 1 "$@" >"$work/broadcaster.log" 2>&1 &
  broadcaster_pid=$!
  for _ in $(seq 100); do grep -q broadcasting "$work/broadcaster.log" && break; sleep 0.1; done
  profile "$seconds" join --host "127.0.0.1:$port" --output "$output" --listener-name profiled --quiet
}

party 40 "virtual:$work/opus.wav" tone:440:120
party 25 "wav:$work/pcm.wav" --codec pcm tone:440:120
party 25 null --codec mp3 "$fixtures/id3v2.mp3" --loop
# Not ALSA: on alsa:null under valgrind the listener often ignores Ctrl-C for over a minute (it
# quits at once without valgrind), and a killed run leaves no profile.
for file in vbr.mp3 tone.flac tone.ogg tone.opus tone.aac pcm16.wav; do
  profile 15 play "$fixtures/$file" --output null --quiet
done

# Each run's functions of the listener binary (ob= names the object of the fn= lines that follow),
# first run first, each name once. Left out: names that several local functions share (the
# compiler's merged thunks): the linker would move every object holding one, hot or not.
nm --defined-only "$work/listener" | awk '$2 ~ /^[tT]$/ && count[$3]++ == 1 { print $3 }' >"$work/shared-names"
awk 'FILENAME == shared { skip[$0] = 1; next }
     /^ob=/ { ours = ($0 ~ /\/listener$/) }
     /^fn=/ && ours { name = substr($0, 4); sub(/\047[0-9]+$/, "", name)  # callgrind marks recursion levels: f\0472
                      if (name !~ /^0x/ && !skip[name] && !seen[name]++) print name }' \
  shared="$work/shared-names" "$work/shared-names" $(for run in $(seq "$profiled"); do echo "$work/run$run.out"; done) >"$out"
echo "order-listener-text: $(wc -l <"$out") functions from $profiled runs in $out"
