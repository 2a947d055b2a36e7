// swift-tools-version:6.0
// libFuzzer targets for the MP3 parser and the wire frame decoder; built by `make fuzz` with -sanitize=fuzzer,address.
import PackageDescription

let package = Package(
    name: "PartyCastFuzz",
    dependencies: [.package(path: "..")],
    targets: [
        .executableTarget(name: "MP3ParserFuzzer", dependencies: [.product(name: "PartyCastMP3Parser", package: "main")]),
        .executableTarget(name: "WireFrameFuzzer", dependencies: [.product(name: "PartyCastWire", package: "main")]),
    ]
)
