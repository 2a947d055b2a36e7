// swift-tools-version:6.0
// libFuzzer targets for the MP3 parser and the wire frame decoder; built by `make fuzz` with -sanitize=fuzzer,address.
// The parent package is reached through the committed symlink `partycast`, so its package name
// does not depend on what the clone's directory is called.
import PackageDescription

let package = Package(
    name: "PartyCastFuzz",
    dependencies: [.package(path: "partycast")],
    targets: [
        .target(name: "FuzzDriver"),
        .executableTarget(name: "MP3ParserFuzzer", dependencies: ["FuzzDriver", .product(name: "PartyCastMP3Parser", package: "partycast")]),
        .executableTarget(name: "WireFrameFuzzer", dependencies: ["FuzzDriver", .product(name: "PartyCastWire", package: "partycast")]),
    ]
)
