// swift-tools-version:6.0
// libFuzzer targets for the MP3 parser, the wire frame decoder, the listener's handling of message
// sequences (a broadcaster's, and a Sendspin server's) and both ends of the UDP clock channel; built by `make fuzz` with -sanitize=fuzzer,address (and -enable-testing, for the last one's
// @testable import of the listener's internal state machines).
// The parent package is reached through the committed symlink `partycast`, so its package name
// does not depend on what the clone's directory is called.
import PackageDescription

let package = Package(
    name: "PartyCastFuzz",
    dependencies: [.package(path: "partycast"), .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0")],
    targets: [
        .target(name: "FuzzDriver"),
        .executableTarget(name: "MP3ParserFuzzer", dependencies: ["FuzzDriver", .product(name: "PartyCastMP3Parser", package: "partycast")]),
        .executableTarget(name: "WireFrameFuzzer", dependencies: ["FuzzDriver", .product(name: "PartyCastWire", package: "partycast")]),
        .executableTarget(name: "ListenerSessionFuzzer", dependencies: [
            "FuzzDriver", .product(name: "PartyCastNetwork", package: "partycast"), .product(name: "PartyCastWire", package: "partycast"),
            .product(name: "PartyCastClock", package: "partycast"), .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        ]),
        .executableTarget(name: "SendspinClientFuzzer", dependencies: [
            "FuzzDriver", .product(name: "PartyCastSendspin", package: "partycast"), .product(name: "PartyCastSendspinClient", package: "partycast"),
            .product(name: "PartyCastClock", package: "partycast"),
        ]),
        .executableTarget(name: "ClockDatagramFuzzer", dependencies: [
            "FuzzDriver", .product(name: "PartyCastClock", package: "partycast"), .product(name: "PartyCastClockExchange", package: "partycast"),
            .product(name: "PartyCastWire", package: "partycast"),
        ]),
    ]
)
