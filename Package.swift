// swift-tools-version:6.1
// PartyCast: the module names follow the data flow.
// Listener side: Sources → MP3 parser → decoder → ring → output, driven by the player.
import PackageDescription

/// One system-library target per C library, each with its pkg-config name and Debian package.
func systemLibrary(_ name: String, pkgConfig: String, apt: String) -> Target {
    .systemLibrary(name: name, pkgConfig: pkgConfig, providers: [.apt([apt])])
}

/// A C library PartyCast opens at its first use (dlopen, through loadCLibrary) rather than links: its
/// shim resolves the functions PartyCast calls. No pkg-config: its link flags would put the library
/// back in every program's start-up, and its headers are on the default include path.
func lazySystemLibrary(_ name: String, apt: String) -> Target {
    .systemLibrary(name: name, providers: [.apt([apt])])
}

/// How the listener is linked, to load less on a Pi (issue 14): the Swift runtime and FoundationEssentials
/// linked in statically (what a program calls is pulled in, not whole shared libraries; FoundationEssentials'
/// own shims are not in the toolchain's static link list), by lld, whose packed relative relocations
/// (RELR) keep the loader from reading a 1.7 MB relocation table, and exporting no symbols (the
/// toolchain's -export-dynamic made every symbol part of each library's lookups, another 1.7 MB).
/// The sections of the functions a listener runs go first, as `make text-order` recorded them, so they
/// share fewer pages (each first call into scattered text maps a 64 KB block), and libstdc++ is linked
/// from its archive (Sources/listener/link/libstdc++.so says why). The libraries only some jobs use are
/// not linked at all (`lazySystemLibrary`).
/// The broadcaster uses all of Foundation, whose static form brings ICU's 30 MB: linked so in release
/// builds only (the packaged program; `make deb`), since no Debian package has the Swift runtime. Foundation's
/// C parts are not in the toolchain's static link list either, hence the libraries named.
let listenerLinkInputs = "\(Context.packageDirectory)/Sources/listener/link"
let leanListener: [LinkerSetting] = [.unsafeFlags([
    "-static-stdlib", "-l_FoundationCShims", "-l_FoundationCollections",
    "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic",
    "-Xlinker", "--symbol-ordering-file=\(listenerLinkInputs)/text-order.txt", "-Xlinker", "--no-warn-symbol-ordering",
    "-L\(listenerLinkInputs)",
])]

/// The pure maths the unit tests drive through long simulations (clock estimation, resampling, MP3
/// parsing over every split): optimized in debug builds too, so `make check` stays an inner loop.
/// Unoptimized, their simulations took most of its four minutes.
let optimizedInDebug: [SwiftSetting] = [.unsafeFlags(["-O"], .when(configuration: .debug))]

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
        .library(name: "PartyCastClockExchange", targets: ["PartyCastClockExchange"]),
        .library(name: "PartyCastNetwork", targets: ["PartyCastNetwork"]),
        .library(name: "PartyCastSendspin", targets: ["PartyCastSendspin"]),
        .library(name: "PartyCastSendspinClient", targets: ["PartyCastSendspinClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        // No default traits: the Foundation-stream API (BinaryDelimitedStreams) would link all of
        // Foundation (and ICU) into the listener, which needs only FoundationEssentials.
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0", traits: []),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // No traits: swift-configuration (ConfigurationSupport) is a module tree PartyCast never calls.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        // Its WSCore: the WebSocket handler Hummingbird's server runs, run by the party's dialler too.
        .package(url: "https://github.com/hummingbird-project/swift-websocket", from: "1.6.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        systemLibrary("CMPG123", pkgConfig: "libmpg123", apt: "libmpg123-dev"),
        systemLibrary("COpus", pkgConfig: "opus", apt: "libopus-dev"),
        lazySystemLibrary("CALSA", apt: "libasound2-dev"),
        lazySystemLibrary("CAvahi", apt: "libavahi-client-dev"),
        systemLibrary("CSpeexDSP", pkgConfig: "speexdsp", apt: "libspeexdsp-dev"),
        lazySystemLibrary("CFAAD2", apt: "libfaad-dev"),
        lazySystemLibrary("CFLAC", apt: "libflac-dev"),
        lazySystemLibrary("CCurl", apt: "libcurl4-openssl-dev"),
        lazySystemLibrary("CVorbisFile", apt: "libvorbis-dev"),
        systemLibrary("COpusFile", pkgConfig: "opusfile", apt: "libopusfile-dev"),
        // ristretto255 and SHA-512 for the party key's PAKE (CPace).
        systemLibrary("CSodium", pkgConfig: "libsodium", apt: "libsodium-dev"),
        // P-256, SHA-256, HMAC and HKDF for the control port's PAKE (SPAKE2, which the web page runs
        // too, over Debian's node-elliptic): linked by the broadcaster only.
        systemLibrary("CLibCrypto", pkgConfig: "libcrypto", apt: "libssl-dev"),
        // The remote page's URL as a QR code on the broadcaster's terminal, for phones.
        systemLibrary("CQREncode", pkgConfig: "libqrencode", apt: "libqrencode-dev"),
        // mpd's protocol, for the broadcaster following the mpd that feeds its pipe (--mpd).
        systemLibrary("CMPDClient", pkgConfig: "libmpdclient", apt: "libmpdclient-dev"),

        // Errors, formats, clocks, the lock (LockedValueBox) and the one place syscalls go through.
        // No dependencies: the listener's audio path (Output, Player) builds on it without NIO.
        .target(name: "PartyCastCore"),
        // Byte sources that hand out data in arbitrary pieces, as a network would; PCM generators.
        .target(name: "PartyCastSources", dependencies: ["PartyCastCore"]),
        // http(s):// byte sources: internet radio (ICY titles, reconnects) and remote files (Range
        // seeks), over libcurl opened at first use (why: see HTTPConnection.swift).
        .target(name: "PartyCastHTTP", dependencies: ["PartyCastCore", "CCurl"]),
        // Incremental MP3 parsing: frame sync, headers, Xing/Info/VBRI, ID3.
        .target(name: "PartyCastMP3Parser", dependencies: ["PartyCastCore"], swiftSettings: optimizedInDebug),
        // Encoded streams → Float32 PCM, the format chosen by the stream's first bytes (DecoderRegistry):
        // MP3 through libmpg123, AAC (ADTS) through libfaad2, FLAC through libFLAC, Ogg Vorbis and Opus
        // through vorbisfile and opusfile, WAV and raw PCM in Swift.
        .target(name: "PartyCastDecoder", dependencies: [
            "PartyCastCore", "PartyCastMP3Parser", "CMPG123", "CFAAD2", "CFLAC", "CVorbisFile", "COpusFile",
        ]),
        // Every source a spec names (files by content, URLs, tones, pipes), for both programs: SourceRegistry.
        .target(name: "PartyCastSourceRegistry", dependencies: ["PartyCastCore", "PartyCastSources", "PartyCastDecoder", "PartyCastHTTP"]),
        // DSP on PCM, whatever decoded it: resampling (libspeexdsp) and channel mapping.
        .target(name: "PartyCastDSP", dependencies: ["PartyCastCore", "CSpeexDSP"], swiftSettings: optimizedInDebug),
        // Lock-free single-producer single-consumer ring between the decoder and the output thread.
        .target(name: "PartyCastRing"),
        // Output devices behind one protocol: wav, null, virtual (simulated card), ALSA.
        .target(name: "PartyCastOutput", dependencies: ["PartyCastCore", "PartyCastClock", "PartyCastRing", "PartyCastDSP", "CALSA"]),
        // The player's state machine wiring source → parser → decoder → ring → output.
        .target(name: "PartyCastPlayer", dependencies: [
            "PartyCastCore", "PartyCastClock", "PartyCastRing", "PartyCastOutput",
        ]),

        // Broadcaster side: source → encoder → fan-out, plus the wire protocol and discovery.
        // Messages of Proto/partycast.proto (generated code committed) and their length-prefixed framing.
        // The party key handshake (CPace, a PAKE, on libsodium) and the sealing of everything after it
        // live here too: they are part of the protocol.
        .target(name: "PartyCastWire", dependencies: [
            "PartyCastCore", "CSodium",
            .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            .product(name: "NIOCore", package: "swift-nio"),
        ]),
        // Opus and PCM packet encoders/decoders, and the registry of wire codecs (WireCodecs).
        .target(name: "PartyCastCodec", dependencies: ["PartyCastCore", "PartyCastWire", "PartyCastDecoder", "COpus"]),
        // Sendspin (Music Assistant's protocol), free of I/O: its messages, binary frames and the
        // server's session as a state machine.
        .target(name: "PartyCastSendspin", dependencies: ["PartyCastCore", "PartyCastWire", "CSodium"]),
        // The broadcaster's Sendspin server role: a WebSocket (Hummingbird's) where Sendspin players
        // join the party as listeners, and the players it dials.
        .target(name: "PartyCastSendspinServer", dependencies: [
            "PartyCastSendspin", "PartyCastBroadcast", "PartyCastWebServer", "PartyCastControlSeam", "PartyCastCore", "PartyCastNetwork", "PartyCastOutput",
            .product(name: "Hummingbird", package: "hummingbird"), .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"), .product(name: "WSCore", package: "swift-websocket"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"), .product(name: "Logging", package: "swift-log"),
        ]),
        // The listener's Sendspin client role: a WebSocket (NIO's) to any Sendspin server, its stream
        // played through the listener's pipeline on the server's clock.
        .target(name: "PartyCastSendspinClient", dependencies: [
            "PartyCastSendspin", "PartyCastNetwork", "PartyCastClock", "PartyCastClockExchange", "PartyCastCodec", "PartyCastDecoder", "PartyCastCore", "PartyCastWire",
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOWebSocket", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The mpd behind a pipe (--mpd): its songs and pauses reported to the party, the party's
        // transport commands carried to it, over one connection asleep in mpd's idle.
        .target(name: "PartyCastMPD", dependencies: [
            "CMPDClient", "PartyCastControlSeam", "PartyCastCore", "PartyCastNetwork", .product(name: "Logging", package: "swift-log"),
        ]),
        // mDNS publish/browse through avahi-client.
        .target(name: "PartyCastDiscovery", dependencies: ["PartyCastCore", "CAvahi"]),
        // Benchmark tool: skew between virtual-card recordings, measured from the audio.
        .executableTarget(name: "partycast-skew", dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")],
                          path: "Benchmarks/partycast-skew"),
        // Benchmark tool: the clock estimator, old and new, over simulated links (jitter, loss, stalls, head-of-line).
        .executableTarget(name: "partycast-clock-sim", dependencies: [
            "PartyCastClock", "PartyCastSources", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], path: "Benchmarks/partycast-clock-sim"),
        // Test tools (Tools/), apart from the two programs.
        // Publishes or browses from the command line; what the LAN harness tests drive inside namespaces.
        .executableTarget(name: "partycast-mdns-probe", dependencies: ["PartyCastDiscovery", "PartyCastCore"], path: "Tools/partycast-mdns-probe"),
        // A man in the middle for the LAN tests of the party key handshake: captures a session's frames
        // and replays them to either side.
        .executableTarget(name: "partycast-relay", dependencies: ["PartyCastWire", "PartyCastCore"], path: "Tools/partycast-relay"),
        // A bad IP link between two network namespaces for the sync benchmark and the bad-link test:
        // TUN devices with jitter, loss, stalls and a rate limit per direction (no `tc netem` here).
        // CTun: the TUN and setns calls Swift cannot make itself (ioctl is variadic), header-only.
        .systemLibrary(name: "CTun", path: "Tools/CTun"),
        .executableTarget(name: "partycast-netem", dependencies: ["CTun"], path: "Tools/partycast-netem"),
        // The seam between the party and its remotes: commands, snapshots and the PartyControl protocol
        // Broadcast's Party conforms to, so that Control needs none of the broadcaster's insides.
        // Also what both sides of the broadcaster count and throttle: refusals, key guesses.
        .target(name: "PartyCastControlSeam", dependencies: ["PartyCastCore", .product(name: "Logging", package: "swift-log")]),
        // The broadcaster: paces encoded chunks and shares them with every listener over SwiftNIO.
        .target(name: "PartyCastBroadcast", dependencies: [
            "PartyCastCore", "PartyCastControlSeam", "PartyCastClockExchange", "PartyCastDSP", "PartyCastCodec", "PartyCastSources", "PartyCastWire",
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"), .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // Clock sync's maths, free of the wire: what maps a listener's clock to the broadcaster's (at
        // the top), the local clock and the schedule the audio thread reads (Playback/), and the one
        // place exchanges' results become that schedule (Sync/).
        .target(name: "PartyCastClock", dependencies: ["PartyCastCore"], swiftSettings: optimizedInDebug),
        // recvmsg's control messages through the C library's own macros (kernel receive timestamps).
        .target(name: "CSocketMessages"),
        // The exchanges themselves: UDP with kernel timestamps, TCP as the fallback, both ends.
        .target(name: "PartyCastClockExchange", dependencies: [
            "CSocketMessages", "PartyCastCore", "PartyCastClock", "PartyCastWire",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The listener's network source: wire frames → packets → PCM for the player.
        .target(name: "PartyCastNetwork", dependencies: [
            "PartyCastCore", "PartyCastClock", "PartyCastClockExchange", "PartyCastCodec", "PartyCastWire",
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // What both programs share at the command line: one writer for every line, swift-log's
        // handler, the party key option, exit statuses, Ctrl-C and keys.
        .target(name: "PartyCastCLI", dependencies: [
            "PartyCastCore", "PartyCastWire",
            .product(name: "ArgumentParser", package: "swift-argument-parser"), .product(name: "Logging", package: "swift-log"),
        ]),

        .executableTarget(name: "listener", dependencies: [
            "PartyCastPlayer", "PartyCastNetwork", "PartyCastSendspin", "PartyCastSendspinClient", "PartyCastClock", "PartyCastDiscovery", "PartyCastCLI", "PartyCastSourceRegistry", "PartyCastDSP",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], exclude: ["link"], linkerSettings: leanListener),
        // What the broadcaster's two web ports (the remote control, Sendspin) share: a Hummingbird
        // application bound before the party is announced, the connection census and caps, and the
        // WebSocket context that knows the peer's address. Apart, so that neither port builds on the other.
        .target(name: "PartyCastWebServer", dependencies: [
            "PartyCastControlSeam",
            .product(name: "Hummingbird", package: "hummingbird"), .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The party's remote control: the HTTP + JSON API, its WebSocket of snapshots and the web page.
        .target(name: "PartyCastControl", dependencies: [
            "PartyCastControlSeam", "PartyCastCore", "PartyCastNetwork", "PartyCastWebServer", "PartyCastWire", "CQREncode", "CLibCrypto",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "Logging", package: "swift-log"),
        ], resources: [.copy("Web")]),
        .executableTarget(name: "broadcaster", dependencies: [
            "PartyCastBroadcast", "PartyCastControl", "PartyCastControlSeam", "PartyCastDiscovery", "PartyCastMPD", "PartyCastSendspin", "PartyCastSendspinServer", "PartyCastSourceRegistry", "PartyCastWire", "PartyCastCLI",
            .product(name: "ArgumentParser", package: "swift-argument-parser"), .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
        ], linkerSettings: [.unsafeFlags(["-static-stdlib", "-lCoreFoundation", "-l_FoundationICU", "-l_FoundationCShims", "-l_FoundationCollections"],
                                         .when(configuration: .release))]),

        // Fixture paths, process running, audio reading and SNR for the tests.
        .target(name: "PartyCastTestSupport", path: "Tests/Support"),
        .testTarget(name: "PartyCastMP3ParserTests", dependencies: ["PartyCastMP3Parser", "PartyCastSources", "PartyCastDecoder", "PartyCastTestSupport"]),
        .testTarget(name: "PartyCastRingTests", dependencies: ["PartyCastRing", "PartyCastOutput"]),
        .testTarget(name: "PartyCastPlayerTests", dependencies: ["PartyCastPlayer", "PartyCastOutput", "PartyCastSources", "PartyCastDecoder", "PartyCastTestSupport"]),
        .testTarget(name: "ListenerTests", dependencies: ["PartyCastTestSupport"]),
        // The HTTP source against real servers (icecast2 fed by ezstream) and fake ones (Python, loopback).
        .testTarget(name: "HTTPSourceTests", dependencies: [
            "PartyCastHTTP", "PartyCastDecoder", "PartyCastCore", "PartyCastSources", "PartyCastTestSupport",
        ], exclude: ["servers"]),
        // Each decoder against Debian's reference decoder for its format, sniffing, seeking and hostile input.
        .testTarget(name: "DecoderTests", dependencies: ["PartyCastDecoder", "PartyCastSources", "PartyCastCore", "PartyCastTestSupport"]),
        .testTarget(name: "PartyCastWireTests", dependencies: ["PartyCastWire", "PartyCastSources"]),
        .testTarget(name: "PartyCastNetworkTests", dependencies: [
            "PartyCastNetwork", "PartyCastClock", "PartyCastCodec", "PartyCastWire", "PartyCastCore", "PartyCastDecoder", "PartyCastSources", "PartyCastTestSupport",
        ]),
        .testTarget(name: "PartyCastClockTests", dependencies: [
            "PartyCastClock", "PartyCastClockExchange", "PartyCastCore", "PartyCastWire", "PartyCastSources", "PartyCastTestSupport",
            .product(name: "Logging", package: "swift-log"),
        ], exclude: ["RecordedLinks"]),  // clock logs from real links, read by path
        .testTarget(name: "PartyCastDSPTests", dependencies: ["PartyCastDSP", "PartyCastCore"]),
        .testTarget(name: "SkewAnalyzerTests", dependencies: ["PartyCastTestSupport"]),
        .testTarget(name: "PartyCastOutputTests", dependencies: ["PartyCastOutput", "PartyCastClock", "PartyCastRing", "PartyCastCore", "PartyCastTestSupport"]),
        // The party in-process: its timeline and gains as values, its commands against a real Fanout
        // whose listener is an EmbeddedChannel, on a clock the test moves.
        .testTarget(name: "PartyCastBroadcastTests", dependencies: [
            "PartyCastBroadcast", "PartyCastControlSeam", "PartyCastCodec", "PartyCastCore", "PartyCastSources", "PartyCastTestSupport", "PartyCastWire",
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "BroadcastTests", dependencies: ["PartyCastTestSupport", "PartyCastWire", "PartyCastBroadcast", "PartyCastControlSeam"],
                    exclude: ["sendspin"]),
        .testTarget(name: "LANTests", dependencies: ["PartyCastTestSupport", "PartyCastWire"]),
        // Sendspin's messages and session, hostile and fuzzed, and against aiosendspin's own models.
        .testTarget(name: "PartyCastSendspinTests", dependencies: ["PartyCastSendspin", "PartyCastSendspinClient", "PartyCastClock", "PartyCastSources", "PartyCastTestSupport"], exclude: ["aiosendspin_reference.py", "aiosendspin_client.py", "aiosendspin_server.py", "line_socket.py"]),
        // The command line's own parts: the party key from a file (a systemd credential).
        .testTarget(name: "PartyCastCLITests", dependencies: [
            "PartyCastCLI", "PartyCastWire", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // `make deb`'s packages, read back with dpkg-deb and systemd-analyze, and their listener playing a party.
        .testTarget(name: "PackagingTests", dependencies: ["PartyCastTestSupport"]),
        // A fake broadcaster, written from the protocol, that feeds the real listener hostile streams.
        .testTarget(name: "HostileBroadcasterTests", dependencies: ["PartyCastTestSupport", "PartyCastWire", "PartyCastCodec"]),
        // Hostile guests against a broadcaster process (issue 26's table): memory, log, a listener that plays.
        .testTarget(name: "HostileGuestTests", dependencies: ["PartyCastTestSupport", "PartyCastWire"]),
        // The remote control's HTTP mapping against a recording PartyControl, over a live server.
        .testTarget(name: "ControlTests", dependencies: [
            "PartyCastControl", "PartyCastControlSeam", "PartyCastCore", "PartyCastWire", "PartyCastTestSupport",
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOWebSocket", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ], exclude: ["spake2_runs.js"]),
    ]
)

// The test targets' own code is unoptimized in `make test`'s release build too: it spawns programs,
// waits and compares, while what it tests (and the programs it drives) is optimized. Optimizing
// it took about two minutes of the suite's build.
for target in package.targets where target.type == .test {
    target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-Onone"], .when(configuration: .release))]
}

// `make test`'s release build is testable (the tests' @testable imports) through PARTYCAST_TESTABLE=1,
// on PartyCast's own modules only: -enable-testing on the dependencies (-Xswiftc) added a tenth to
// their compile, and no test imports them so.
if Context.environment["PARTYCAST_TESTABLE"] == "1" {
    for target in package.targets where target.type == .regular {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-enable-testing"])]
    }
}
