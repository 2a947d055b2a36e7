// swift-tools-version:6.0
// PartyCast: the module names follow the data flow.
// Listener side: Sources → MP3 parser → decoder → ring → output, driven by the player.
import PackageDescription

/// One system-library target per C library, each with its pkg-config name and Debian package.
func systemLibrary(_ name: String, pkgConfig: String, apt: String) -> Target {
    .systemLibrary(name: name, pkgConfig: pkgConfig, providers: [.apt([apt])])
}

let package = Package(
    name: "PartyCast",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "listener", targets: ["listener"]),
        .executable(name: "broadcaster", targets: ["broadcaster"]),
        .library(name: "PartyCastPlayer", targets: ["PartyCastPlayer"]),
        .library(name: "PartyCastMP3Parser", targets: ["PartyCastMP3Parser"]),
        .library(name: "PartyCastWire", targets: ["PartyCastWire"]),
        .library(name: "PartyCastDiscovery", targets: ["PartyCastDiscovery"]),
        .library(name: "PartyCastClock", targets: ["PartyCastClock"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
    ],
    targets: [
        systemLibrary("CMPG123", pkgConfig: "libmpg123", apt: "libmpg123-dev"),
        systemLibrary("COpus", pkgConfig: "opus", apt: "libopus-dev"),
        systemLibrary("CALSA", pkgConfig: "alsa", apt: "libasound2-dev"),
        systemLibrary("CAvahi", pkgConfig: "avahi-client", apt: "libavahi-client-dev"),
        systemLibrary("CSpeexDSP", pkgConfig: "speexdsp", apt: "libspeexdsp-dev"),

        // Errors, formats, clocks and the one place syscalls go through.
        .target(name: "PartyCastCore"),
        // Byte sources that hand out data in arbitrary pieces, as a network would; PCM generators.
        .target(name: "PartyCastSources", dependencies: ["PartyCastCore"]),
        // Incremental MP3 parsing: frame sync, headers, Xing/Info/VBRI, ID3.
        .target(name: "PartyCastMP3Parser", dependencies: ["PartyCastCore"]),
        // Frames → Float32 PCM through libmpg123; resampling and channel mapping.
        .target(name: "PartyCastDecoder", dependencies: ["PartyCastCore", "PartyCastMP3Parser", "CMPG123", "CSpeexDSP"]),
        // Lock-free single-producer single-consumer ring between the decoder and the output thread.
        .target(name: "PartyCastRing"),
        // Output devices behind one protocol: wav, null, virtual (simulated card), ALSA.
        .target(name: "PartyCastOutput", dependencies: ["PartyCastCore", "PartyCastRing", "CALSA"]),
        // The player's state machine wiring source → parser → decoder → ring → output.
        .target(name: "PartyCastPlayer", dependencies: [
            "PartyCastCore", "PartyCastSources", "PartyCastMP3Parser", "PartyCastDecoder", "PartyCastRing", "PartyCastOutput",
        ]),

        // Broadcaster side: source → encoder → fan-out, plus the wire protocol and discovery.
        // Messages of Proto/partycast.proto (generated code committed) and their length-prefixed framing.
        .target(name: "PartyCastWire", dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")]),
        // Opus and PCM packet encoders/decoders.
        .target(name: "PartyCastCodec", dependencies: ["PartyCastCore", "COpus"]),
        // mDNS publish/browse through avahi-client.
        .target(name: "PartyCastDiscovery", dependencies: ["PartyCastCore", "CAvahi"]),
        // Publishes or browses from the command line; what the LAN harness tests drive inside namespaces.
        // Benchmark tool: skew between virtual-card recordings, measured from the audio.
        .executableTarget(name: "partycast-skew", dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")],
                          path: "Benchmarks/partycast-skew"),
        .executableTarget(name: "partycast-mdns-probe", dependencies: ["PartyCastDiscovery", "PartyCastCore"]),
        // The broadcaster: paces encoded chunks and shares them with every listener over SwiftNIO.
        .target(name: "PartyCastBroadcast", dependencies: [
            "PartyCastCore", "PartyCastDecoder", "PartyCastCodec", "PartyCastWire",
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        // Maps the listener's clock to the broadcaster's from NTP-style exchanges: offset and drift.
        .target(name: "PartyCastClock"),
        // The listener's network source: wire frames → packets → PCM for the player.
        .target(name: "PartyCastNetwork", dependencies: [
            "PartyCastCore", "PartyCastClock", "PartyCastCodec", "PartyCastWire",
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
        ]),

        .executableTarget(name: "listener", dependencies: [
            "PartyCastPlayer", "PartyCastNetwork", "PartyCastDiscovery",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "broadcaster", dependencies: [
            "PartyCastBroadcast", "PartyCastDiscovery", "PartyCastSources", "PartyCastWire",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        // Fixture paths, process running, audio reading and SNR for the tests.
        .target(name: "PartyCastTestSupport", path: "Tests/Support"),
        .testTarget(name: "PartyCastMP3ParserTests", dependencies: ["PartyCastMP3Parser", "PartyCastSources", "PartyCastDecoder", "PartyCastTestSupport"]),
        .testTarget(name: "PartyCastRingTests", dependencies: ["PartyCastRing", "PartyCastOutput"]),
        .testTarget(name: "PartyCastPlayerTests", dependencies: ["PartyCastPlayer", "PartyCastOutput", "PartyCastSources", "PartyCastDecoder", "PartyCastTestSupport"]),
        .testTarget(name: "ListenerTests", dependencies: ["PartyCastTestSupport"]),
        .testTarget(name: "PartyCastWireTests", dependencies: ["PartyCastWire", "PartyCastSources"]),
        .testTarget(name: "PartyCastClockTests", dependencies: ["PartyCastClock", "PartyCastSources"]),
        .testTarget(name: "SkewAnalyzerTests", dependencies: ["PartyCastTestSupport"]),
        .testTarget(name: "PartyCastOutputTests", dependencies: ["PartyCastOutput", "PartyCastRing", "PartyCastCore"]),
        .testTarget(name: "BroadcastTests", dependencies: ["PartyCastTestSupport"]),
        .testTarget(name: "LANTests", dependencies: ["PartyCastTestSupport"]),
        // A fake broadcaster, written from the protocol, that feeds the real listener hostile streams.
        .testTarget(name: "HostileBroadcasterTests", dependencies: ["PartyCastTestSupport", "PartyCastWire", "PartyCastCodec"]),
    ]
)
