#!/usr/bin/env bash
# Which of PartyCast's own object files in `make test`'s build are a release build's, instruction for
# instruction: `make test` builds most dependencies unoptimized (scripts/test-swiftc). Prints, per
# module, how many files are the same and which differ. A file can differ only where it inlines
# code from an unoptimized dependency (NIO, Hummingbird, the argument parser); the audio path
# (sources, parser, decoders, DSP, ring, output, player, clock) inlines none.
# Usage: scripts/compare-test-build.sh [TEST_BUILD_DIR [RELEASE_DIR]]
#   defaults: .build-test/release (`make test`'s) and .build-compare/release, which it builds: a
#   release build, testable as the tests' is (PARTYCAST_TESTABLE), by the toolchain's own swiftc.
set -euo pipefail
cd "$(dirname "$0")/.."
test_build=${1:-.build-test/release}
release=${2:-}
[ -d "$test_build" ] || { echo "no test build at $test_build: run make test first" >&2; exit 1; }
if [ -z "$release" ]; then
    PARTYCAST_TESTABLE=1 swift build --scratch-path .build-compare -c release --build-tests >&2
    release=.build-compare/release
fi

disassembly() { objdump -d --no-show-raw-insn "$1" | tail -n +4; }

modules=$(cd Sources && ls -d */ | tr -d / | grep -v '^C')
printf '%-28s %5s %5s  %s\n' module same differ "files that differ"
for module in $modules; do
    same=0 differ=0 names=()
    for object in "$test_build/$module.build"/*.o; do
        [ -e "$object" ] || continue
        reference="$release/$module.build/$(basename "$object")"
        if [ -e "$reference" ] && cmp -s <(disassembly "$object") <(disassembly "$reference"); then
            same=$((same + 1))
        else
            differ=$((differ + 1)); names+=("$(basename "$object" .swift.o)")
        fi
    done
    printf '%-28s %5d %5d  %s\n' "$module" "$same" "$differ" "${names[*]:-}"
done
