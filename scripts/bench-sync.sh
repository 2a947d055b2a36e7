#!/usr/bin/env bash
# Party-mode sync benchmark on the LAN harness: a broadcaster on one test host, three listeners
# joining it by mDNS with clocks (−3 s, −120 ppm), (0, 0), (+7.5 s, +150 ppm), a fourth joining
# 20 s into the broadcast (+1 s, +50 ppm), two CPU hogs, one minute of broadband audio. Each
# listener plays on a simulated card; the skew between them is measured from the recordings by
# partycast-skew (cross-correlation), never from the code's own bookkeeping.
#   scripts/bench-sync.sh [BIN_DIR]     → summary on stdout, bench-out/sync-skew.{csv,json,png}
#   BENCH_SEED=N draws the links' jitter and loss from seed N (default 11). Each seed is one fixed
#   sequence of draws per direction, so the lucky packets fall at about the same times in every run
#   of a configuration: compare configurations over several seeds, not over runs of one.
#   KEEP=1 keeps the recordings and logs (the script says where), and each link's clock exchange
#   logs (linkN/NAME.clock): partycast-clock-sim --judged-from 11 --replay linkN/far*.clock runs
#   them through the clock estimator again.
#
# Then a table over link conditions (scripts/lan/badlink.sh: an IP link through partycast-netem):
# the broadcaster and a (0, 0) listener on the near side, two listeners with clocks (−5 s, −150 ppm)
# and (+9 s, +120 ppm) on the far side, a CPU hog, the same minute of audio, once per condition.
# Each row: the skew of the worse far listener (by p99) against the near one, 5 s after each first
# sound; the max pairwise p99 over all three; the longest dropout (run of exact zeros) in a far
# recording while the song plays; the far listeners' clock error against the truth (their exchanges
# replayed by partycast-clock-sim) and the least any estimator reading the two directions' floors
# could have had with the same exchanges (its floor oracle: the drift known, each direction's least
# delay so far taken as its floor) and reading the tops instead (its ceiling oracle: the drift known,
# each direction's greatest delay below the stragglers), the median of their own 99 % bound and the
# share of the time it held; exchanges a second and clock bytes a second (IP included, both ways)
# per far listener.
#                                                     → bench-out/sync-links.{md,json}
#   BENCH_SYNC=lan | links | all (default)   runs only the LAN part, only the link table, or both.
#   BENCH_LINKS="1 7"                         runs only those rows of the table (default: all nine).
#   BENCH_START_IN=S                          the table's broadcaster starts the song S s after launch
#                                             (default 6; 1, the broadcaster's own default, judges from
#                                             ~6 s after the listeners join).
#   BENCH_RELAY_PRIORITY=normal               partycast-netem at the default priority (--normal-priority)
#                                             instead of real time: the CPU hog then holds packets past
#                                             their drawn holds, as on a relay not set up for real time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/.build/release}
out=$root/bench-out
lan=$root/scripts/lan/lan.sh
badlink=$root/scripts/lan/badlink.sh
mode=${BENCH_SYNC:-all}
seed=${BENCH_SEED:-11}
start_in=${BENCH_START_IN:-6}
relay_priority=${BENCH_RELAY_PRIORITY:-realtime}
[[ $start_in =~ ^[0-9]+$ ]] || { echo "bench-sync: BENCH_START_IN is whole seconds, not \"$start_in\"" >&2; exit 2; }
[[ $mode =~ ^(lan|links|all)$ ]] || { echo "bench-sync: BENCH_SYNC is lan, links or all, not \"$mode\"" >&2; exit 2; }
case $relay_priority in
  realtime) relay_options=() ;;
  normal) relay_options=(--normal-priority) ;;
  *) echo "bench-sync: BENCH_RELAY_PRIORITY is realtime or normal, not \"$relay_priority\"" >&2; exit 2 ;;
esac
export PC_LAN_PREFIX=pcsync PC_LAN_STATE=/tmp/pc-lan-sync PC_LAN_LIFETIME=400
# One condition at a time; each link lives at most as long as one run could take.
export PC_BADLINK_PREFIX=pcblsync PC_BADLINK_STATE=/tmp/pc-badlink-sync PC_BADLINK_LIFETIME=300 PC_BADLINK_NETEM=$bin/partycast-netem
work=$(mktemp -d /tmp/partycast-bench-sync.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  "$lan" down >/dev/null 2>&1 || true
  "$badlink" down >/dev/null 2>&1 || true
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

run_lan() {
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
hogs=()
for _ in 1 2; do timeout 120 sh -c 'while :; do :; done' & pids+=($!); hogs+=($!); done
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
kill "${hogs[@]}" 2>/dev/null || true  # before the link table, which has a hog of its own
wait "${hogs[@]}" 2>/dev/null || true
"$lan" down >/dev/null
pids=()
}

# The link table. Rows: label|partycast-netem options ("down" is broadcaster → far listeners).
# Wi-Fi keeps order: a frame held (contention, retransmission, power save) holds everything behind it.
wifi="--keep-order --jitter-ms 0-2 --spike-pct 3 --spike-ms 5-20 --burst-ms 5-50 --burst-every-s 3 --burst-length-ms 150 --loss 0.5"
link_conditions=(
  "relay, no impairment|"
  "250 ms stall every 8 s|--stall-ms 250 --stall-every-s 8"
  "each packet held 0–5 ms (may reorder)|--jitter-ms 0-5"
  "0–20 ms per packet, 1 % loss, 250 ms stall every 8 s (may reorder)|--jitter-ms 0-20 --loss 1 --stall-ms 250 --stall-every-s 8"
  # The bottleneck carries both far streams: 2 × 128 kbit/s of Opus, so 512 kbit/s is twice the load.
  "asymmetric: downlink only, 0–10 ms per packet, 512 kbit/s bottleneck (2 × the two streams' audio bitrate)|--down-jitter-ms 0-10 --down-rate-kbps 512"
  "each packet held 0–5 ms, order kept|--jitter-ms 0-5 --keep-order"
  "**0–20 ms per packet, 1 % loss, 250 ms stall every 8 s, order kept (judged)**|--jitter-ms 0-20 --loss 1 --stall-ms 250 --stall-every-s 8 --keep-order"
  "Wi-Fi (order kept): 0–2 ms, 3 % held 5–20 ms, bursts of 5–50 ms for ~150 ms every ~3 s, 0.5 % loss|$wifi"
  # Another stream shares the downlink (its bad spells twice as often), an uploading station contends
  # the uplink (longer ones, every ~1 s). Not a slow bottleneck: at 1 Mbit/s a 75-byte answer spends
  # 0.6 ms on the wire one way only, a standing asymmetry no two-way exchange can see (row 5's kind).
  "Wi-Fi, asymmetric load: another stream down (spells every ~1.5 s), an uploading station (~300 ms spells every ~1 s)|$wifi --down-burst-every-s 1.5 --up-burst-every-s 1 --up-burst-length-ms 300"
)

# Waits (bounded) until FILE contains TEXT.
wait_for_text() {
  local deadline=$((SECONDS + $1)) file=$2 text=$3
  until grep -q "$text" "$file" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

run_link() {  # INDEX LABEL OPTIONS
  local i=$1 label=$2 options=$3 dir=$work/link$1
  mkdir -p "$dir"
  echo "bench-sync: link $i: $label (netem: ${options:-no options})"
  # shellcheck disable=SC2086  # the options are words
  "$badlink" up $options "${relay_options[@]}" --seed "$seed" > "$dir/up.log"
  "$badlink" check > "$dir/check.log"
  "$badlink" exec near "$bin/broadcaster" share "$work/song.mp3" --no-mdns --name "Link bench" --start-in "$start_in" 2> "$dir/broadcaster.log" &
  pids+=($!); local broadcaster=$!
  wait_for_text 20 "$dir/broadcaster.log" broadcasting || { echo "bench-sync: the broadcaster did not start: $(tail -n 3 "$dir/broadcaster.log")" >&2; return 1; }
  local listeners=() host name clock
  for spec in near:near:0,0 far:far1:-5,-150 far:far2:9,120; do
    IFS=: read -r host name clock <<< "$spec"
    "$badlink" exec "$host" "$bin/listener" join --host 10.78.0.1 --listener-name "$name" --output "virtual:$dir/$name.wav" \
      --simulate-clock="$clock" --clock-log "$dir/$name.clock" --once --quiet 2> "$dir/$name.log" &
    pids+=($!); listeners+=($!)
  done
  timeout 150 sh -c 'while :; do :; done' & pids+=($!); local hog=$!
  wait_all 150 "${listeners[@]}" "$broadcaster"
  kill "$hog" 2>/dev/null || true
  wait "$hog" 2>/dev/null || true
  "$badlink" down > "$dir/netem.log"
  pids=()  # all waited for: no PID of ours left to stop
  "$bin/partycast-skew" "$dir/near.wav" "$dir/far1.wav" "$dir/far2.wav" --settle-s 5 --json --gaps --csv "$dir/skew.csv" > "$dir/skew.json"
  # The far listeners' clocks against the truth (their exchanges replayed; the broadcaster's clock is
  # this machine's), with each one's own 99 % bound and how often it held, from the start + 5 s.
  "$bin/partycast-clock-sim" --judged-from $((start_in + 5)) --json --replay "$dir/far1.clock" "$dir/far2.clock" | jq -s . > "$dir/clock.json"
  # Clock traffic: every UDP packet netem forwarded is a far listener's exchange (no mDNS here).
  local udp_bytes netem_seconds
  udp_bytes=$(grep -o 'udp-bytes [0-9]*' "$dir/netem.log" | awk '{ s += $2 } END { print s + 0 }')
  netem_seconds=$(sed -n 's/.* after \([0-9.]*\) s;.*/\1/p' "$dir/netem.log")
  # One row: the worse far listener by p99; the far recordings' longest dropout and shortest song.
  jq --arg cond "$label" --arg options "$options" --arg netem "$(cat "$dir/netem.log")" \
    --slurpfile clock "$dir/clock.json" --argjson udp_bytes "$udp_bytes" --argjson netem_seconds "${netem_seconds:-0}" '
    [.summaries[] | select(.name == "far1.wav" or .name == "far2.wav")] as $far
    | ($far | max_by(.p99Microseconds)) as $worse
    | [.gaps[] | select(.name != "near.wav")] as $farGaps
    | {condition: $cond, netem_options: $options, netem: $netem,
       worse_far: $worse.name, median_us: $worse.medianMicroseconds, p99_us: $worse.p99Microseconds, max_us: $worse.maxMicroseconds,
       pairwise_p99_us: (.summaries[] | select(.name == "max pairwise") | .p99Microseconds),
       longest_gap_ms: ($farGaps | map(.longestGapMs) | max),
       shortest_song_s: ($farGaps | map(.songFrames) | min / 48000),
       exchanges_per_s: ($clock[0] | map(.exchanges_per_s) | add / length),
       clock_bytes_per_s: (if $netem_seconds > 0 then $udp_bytes / 2 / $netem_seconds else null end),
       clock_p99_us: ($clock[0] | map(.p99_us) | max), floor_oracle_p99_us: ($clock[0] | map(.floor_oracle_p99_us) | max),
       ceiling_oracle_p99_us: ($clock[0] | map(.ceiling_oracle_p99_us) | max),
       bound_median_us: ($clock[0] | map(.bound_median_us) | max),
       bound_covered_pct: ($clock[0] | map(.covered_pct) | min),
       clock: $clock[0], skew: .}' "$dir/skew.json" > "$dir/row.json"
}

run_links() {
  [ -x "$bin/partycast-netem" ] || { echo "bench-sync: no $bin/partycast-netem (swift build -c release --product partycast-netem)" >&2; return 1; }
  local i=0 row rc
  for row in "${link_conditions[@]}"; do
    i=$((i + 1))
    [ -z "${BENCH_LINKS:-}" ] || [[ " $BENCH_LINKS " == *" $i "* ]] || continue
    # A row that fails (a listener that never ends, say) is reported as such and the table goes on:
    # it runs in a subshell that stops its own processes and link whatever happens.
    set +e
    (
      set -e
      trap 'rc=$?; for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done; "$badlink" down >/dev/null 2>&1; exit $rc' EXIT
      run_link "$i" "${row%%|*}" "${row#*|}"
    )
    rc=$?
    set -e
    if [ $rc != 0 ]; then
      echo "bench-sync: link $i did not finish (status $rc); logs kept in $work/link$i" >&2
      KEEP=1
      mkdir -p "$work/link$i"
      jq -n --arg cond "${row%%|*}" --arg options "${row#*|}" '{condition: $cond, netem_options: $options, failed: true}' > "$work/link$i/row.json"
    fi
  done
  jq -s . "$work"/link*/row.json > "$out/sync-links.json"
  {
    echo "Skew of the worse far listener against the near one (µs, from the recordings, 5 s after each first sound; one minute"
    echo "of pink noise; clocks near 0/0, far −5 s/−150 ppm and +9 s/+120 ppm; a CPU hog). Pairwise: max over all three."
    [ "$relay_priority" = realtime ] || echo "The relay runs at normal priority (BENCH_RELAY_PRIORITY=normal): the CPU hog holds packets past their holds."
    echo
    echo "| link between the broadcaster and the two far listeners | median | p99 | max | worse | pairwise p99 | longest gap (far) | song (far, shortest) | clock p99 (far, replayed) | floor oracle p99 (far) | ceiling oracle p99 (far) | own bound, median | bound held | exchanges/s | clock B/s |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    jq -r '.[] | if .failed then "| \(.condition) | did not finish | | | | | | | | | | | | | |" else "| \(.condition) | \(.median_us | round) µs | \(.p99_us | round) µs | \(.max_us | round) µs | \(.worse_far | rtrimstr(".wav")) | \(.pairwise_p99_us | round) µs | \(.longest_gap_ms * 10 | round / 10) ms | \(.shortest_song_s * 1000 | round / 1000) s | \(.clock_p99_us | round) µs | \(.floor_oracle_p99_us | round) µs | \(.ceiling_oracle_p99_us // null | if . == null then "–" else "\(round) µs" end) | ±\(.bound_median_us | round) µs | \(.bound_covered_pct * 10 | round / 10) % | \(.exchanges_per_s | round) | \(.clock_bytes_per_s // 0 | round) |" end' "$out/sync-links.json"
    echo
    jq -r '.[] | "- \(.condition): netem \(.netem_options | if . == "" then "(no options)" else . end) --seed '"$seed"' → \(.netem // "no summary" | sub("^partycast-netem: "; ""))"' "$out/sync-links.json"
  } > "$out/sync-links.md"
  cat "$out/sync-links.md"
  echo "bench-sync: wrote $out/sync-links.md, $out/sync-links.json"
}

case $mode in
  lan) run_lan ;;
  links) run_links ;;
  all) run_lan; run_links ;;
esac
