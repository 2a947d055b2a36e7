#!/usr/bin/env bash
# Runs every test class of a built XCTest bundle, TEST_JOBS classes at a time (default 4), each in a
# process of its own, the slowest first; then prints each failure and exits non-zero if any class failed.
# Most of the suite's time is real-time audio played by the programs (a 20 s song takes 20 s on any
# machine), so four lanes share two cores well. A class keeps its tests in one process, in order, so
# their shared set-up (a LAN, a package build) happens once. The classes that time the audio run one
# after another in a lane of their own, never two at once; the other lanes run at a lower priority
# (nice OTHERS_NICE, default 5) so that their load reaches those classes as a busy machine's would, not
# as three lanes' worth of it (at equal priority a fourth lane cost the bad link's clock bound its
# margin: 94.5 % held against a 95 % bar on a clean clone).
# Usage: scripts/run-tests.sh BUNDLE LOG_DIR [CLASS ...]   (TEST_JOBS=1 runs them one after another;
# a CLASS may leave out its module: SendspinPlayerTests)
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BUNDLE LOG_DIR [CLASS ...]" >&2; exit 2; }
bundle=$1 logs=$2
shift 2
jobs=${TEST_JOBS:-4}
mkdir -p "$logs"
rm -f "$logs"/*.log "$logs"/*.status

# The classes that take longest here (tens of seconds each, measured on two cores), in that order:
# started first, they do not end up alone at the tail of the run.
slowest=(
    BadLinkSyncTests LoopbackBroadcastTests HostileBroadcasterTests PartySyncTests DebianPackageTests SendspinListenerTests
    SendspinPlayerTests HostileGuestFloodTests SendspinDiallerTests LANTests PartyControlTests HostileGuestTests
    OpenAPIContractTests PrivatePartyLoopbackTests StationPartyOnLANTests StereoPairTests PrivatePartyOnLANTests
    HTTPSourceTests MPDSourceTests DiscoveryOnLANTests MixerTests RemotePageBrowserTests MPDPauseFadeTests
    SendspinArtworkTests IcecastTests DecoderTests PipeSourceTests IdentifyTests ListenerFootprintTests SkewAnalyzerTests
)
# The classes that measure time on the audio (sync, latency, gain ramps): beside each other (the bad
# link's CPU hog among them) each would be under load its bars were not set for. Some classes time
# things against bars they meet at load 8 and run beside the others: SendspinListenerTests (two
# players within 200 µs), RemotePageTests (a tap heard within 500 ms), ListenerFootprintTests
# (wake-ups, which load does not add). A guest's flood of thousands of connections runs beside them
# too, its load at the others' lower priority.
timing="BadLinkSyncTests PartySyncTests StereoPairTests PartyControlTests MPDPauseFadeTests"
mapfile -t listed < <("$bundle" --list-tests | sed -n 's|^\([A-Za-z0-9_]*\.[A-Za-z0-9_]*\)/.*|\1|p' | awk '!seen[$0]++')
[ ${#listed[@]} -gt 0 ] || { echo "$bundle lists no tests" >&2; exit 1; }
if [ $# -gt 0 ]; then
    # Named with or without their module; a name the bundle lacks would run no test and pass.
    classes=()
    for name in "$@"; do
        match=""
        for class in "${listed[@]}"; do
            if [ "$class" = "$name" ] || [ "${class#*.}" = "$name" ]; then match=$class; fi
        done
        [ -n "$match" ] || { echo "$bundle has no test class $name" >&2; exit 2; }
        classes+=("$match")
    done
else
    classes=()
    for name in "${slowest[@]}"; do
        for class in "${listed[@]}"; do [ "${class#*.}" = "$name" ] && classes+=("$class"); done
    done
    for class in "${listed[@]}"; do
        [[ " ${classes[*]} " == *" $class "* ]] || classes+=("$class")
    done
fi

run_class() {
    local class=$1 started status=0
    started=$(date +%s)
    "$bundle" "$class" >"$logs/$class.log" 2>&1 || status=$?
    echo "$status" >"$logs/$class.status"
    printf '%-55s %4ss  %s\n' "$class" "$(($(date +%s) - started))" "$([ "$status" = 0 ] && echo passed || echo "FAILED ($status)")"
}
export -f run_class
export bundle logs
timed=() others=()
for class in "${classes[@]}"; do
    if [[ " $timing " == *" ${class#*.} "* ]]; then timed+=("$class"); else others+=("$class"); fi
done
if [ "$jobs" -le 1 ]; then
    for class in "${timed[@]}" "${others[@]}"; do run_class "$class"; done
else
    for class in "${timed[@]}"; do run_class "$class"; done &
    timing_lane=$!
    [ ${#others[@]} -eq 0 ] || printf '%s\n' "${others[@]}" | xargs -P "$((jobs - 1))" -I{} nice -n "${OTHERS_NICE:-5}" bash -c 'run_class "$1"' _ {}
    wait "$timing_lane"
fi

failed=0
for class in "${classes[@]}"; do
    status=$(cat "$logs/$class.status" 2>/dev/null || echo missing)
    [ "$status" = 0 ] && continue
    failed=$((failed + 1))
    echo "--- $class: status $status (whole output: $logs/$class.log)"
    grep -E ": error: |' failed \(|Fatal error|Crash|Program crashed|signal [0-9]+" "$logs/$class.log" | tail -40 || tail -20 "$logs/$class.log"
done
echo "$((${#classes[@]} - failed)) of ${#classes[@]} test classes passed"
[ "$failed" = 0 ]
