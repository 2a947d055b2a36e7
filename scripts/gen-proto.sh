#!/usr/bin/env bash
# Regenerates Sources/PartyCastWire/Generated/ from Proto/*.proto with Debian's protoc and the
# protoc-gen-swift plugin built from the same swift-protobuf version the package depends on (the
# generated code only compiles against its own runtime version). The plugin is built once into
# the gitignored .build-protoc/; the clone URL goes wherever git's url.insteadOf points it, so this
# works offline against a local mirror.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.39.0
plugin_dir=.build-protoc/swift-protobuf
plugin="$plugin_dir/.build/release/protoc-gen-swift"
if [ "$(git -C "$plugin_dir" describe --tags 2>/dev/null)" != "$version" ] || [ ! -x "$plugin" ]; then
  rm -rf "$plugin_dir"
  git clone --quiet --branch "$version" https://github.com/apple/swift-protobuf "$plugin_dir"
  swift build --package-path "$plugin_dir" -c release --product protoc-gen-swift
fi
mkdir -p Sources/PartyCastWire/Generated
protoc --plugin=protoc-gen-swift="$plugin" \
  --swift_opt=Visibility=Public --swift_out=Sources/PartyCastWire/Generated -I Proto Proto/partycast.proto
echo "regenerated Sources/PartyCastWire/Generated/partycast.pb.swift"
