import Foundation
import PartyCastClock
import PartyCastSendspin
@testable import PartyCastSendspinClient
import PartyCastSources
import XCTest

/// The player's session in-process against the server's side of this package (whose opening and
/// messages SendspinEncryptedTests holds to aiosendspin's own client), then against hostile servers.
final class SendspinClientSessionTests: XCTestCase {
    static let profile = SendspinPlayerProfile(name: "Kitchen", formats: SendspinTimeline.offered, bufferCapacity: 1 << 20,
                                               requiredLeadTimeMs: 100, minBufferMs: 100)

    /// A server of this package's pieces, speaking to one client session over frames in memory.
    struct Server {
        var handshake = SendspinHandshake(serverKey: .init())
        var channel: SendspinSecureChannel?
        var session: SendspinServerSession?
        var client = SendspinClientSession(profile: SendspinClientSessionTests.profile)
        /// What the client session told its player, in order.
        var events: [SendspinClientSession.Action] = []

        /// Delivers the client's frames to the server side and the server's answers back, until quiet.
        mutating func run(_ actions: [SendspinClientSession.Action]) throws {
            var pending = actions
            while !pending.isEmpty {
                let action = pending.removeFirst()
                switch action {
                case .sendText(let text):
                    switch handshake.receive(text: text) {
                    case .reply(let frames): for frame in frames { pending += client.receive(text: frame) }
                    case .established(let clientID, let channel):
                        self.channel = channel
                        let session = SendspinServerSession(serverID: handshake.serverID, serverName: "Party",
                                                            transport: .encrypted(clientID: clientID), encodable: [.pcm, .opus])
                        pending += try send(session.opening().compactMap { if case .send(let m) = $0 { m } else { nil } })
                        self.session = session
                    case .plain, .reject: XCTFail("the server refused the client's opening")
                    }
                case .sendBinary(let frame):
                    guard case .text(let json)? = try channel?.open(frame), var session else { return XCTFail("not a sealed JSON message") }
                    let answers = session.receiveText(json, receivedAt: 7_000)
                    self.session = session
                    pending += try send(answers.compactMap { if case .send(let m) = $0 { m } else { nil } })
                default:
                    events.append(action)
                }
            }
        }

        mutating func send(_ messages: [SendspinServerMessage]) throws -> [SendspinClientSession.Action] {
            try messages.flatMap { client.receive(binary: try channel!.seal(text: $0.encoded(transmittedAt: 8_000))) }
        }

        mutating func send(binary bytes: [UInt8]) throws -> [SendspinClientSession.Action] {
            client.receive(binary: try channel!.seal(binary: bytes))
        }
    }

    func joinedServer() throws -> Server {
        var server = Server()
        try server.run(server.client.opening())
        return server
    }

    func testAPlayerJoinsKeepsTimeAndGetsItsStreamAndCommands() throws {
        var server = try joinedServer()
        XCTAssertEqual(server.events, [.joined(serverName: "Party")])
        XCTAssertTrue(server.client.isPlaying)
        let peer = try XCTUnwrap(server.session?.peer)
        XCTAssertEqual(peer.name, "Kitchen")
        XCTAssertEqual(peer.activeRoles, ["player@v1"])
        XCTAssertEqual(peer.format, SendspinAudioFormat(codec: .pcm, channels: 2, sampleRate: 48000, bitDepth: 16), "the first format offered that this server encodes")
        XCTAssertEqual(peer.bufferCapacity, 1 << 20)
        XCTAssertEqual(server.session?.playerCommands, ["volume", "mute"], "the first client/state says what it obeys")

        server.events = []
        try server.run([try XCTUnwrap(server.client.timeRequest(now: 6_500))])
        XCTAssertEqual(server.events, [.clock(clientTransmitted: 6_500, serverReceived: 7_000, serverTransmitted: 8_000)])

        let format = try XCTUnwrap(peer.format)
        var actions = try server.send([.streamStart(format, codecHeader: nil)])
        actions += try server.send(binary: SendspinFrame.audio(timestamp: 5_000_000, sendAhead: 100_000, payload: [1, 2, 3, 4], header: .withSendAhead))
        actions += try server.send([.streamClear, .command(.volume(40)), .command(.mute(true)), .streamEnd])
        let events = actions.filter { if case .sendBinary = $0 { false } else { true } }
        XCTAssertEqual(events, [.streamStart(.init(format: format, codecHeader: nil)), .audio(timestamp: 5_000_000, payload: [1, 2, 3, 4]),
                                .streamClear, .volume(40), .mute(true), .streamEnd])
        // Each command's new state goes back to the server.
        try server.run(actions.filter { if case .sendBinary = $0 { true } else { false } })
        XCTAssertEqual(server.session?.badMessages, 0)
    }

    /// The player's opening and messages against aiosendspin's own server handshake and models
    /// (aiosendspin_server.py): admitted under the Sentinel with no deviation noted, its hello, first
    /// state, time request and the state after a volume command all read as the spec has them.
    func testAiosendspinsServerHandshakeAndModelsReadThePlayersSession() throws {
        let server = try SendspinEncryptedTests.ReferenceClient(script: "aiosendspin_server.py", arguments: [])
        let handshake = SendspinClientHandshake()
        var client = SendspinClientSession(profile: Self.profile, handshake: handshake)
        func perform(_ actions: [SendspinClientSession.Action]) throws {
            for action in actions {
                switch action {
                case .sendText(let text): try server.send(text: text)
                case .sendBinary(let frame): try server.send(binary: frame)
                case .joined: try perform([try XCTUnwrap(client.timeRequest(now: 424_242))])
                case .close(let reason): XCTFail(reason)
                default: break
                }
            }
        }
        try perform(client.opening())
        var result: [String: Any]?
        while result == nil, let line = server.next() {
            if let text = line["t"] as? String {
                try perform(client.receive(text: Array(text.utf8)))
            } else if let frame = (line["b"] as? String).flatMap({ Data(base64Encoded: $0) }) {
                try perform(client.receive(binary: Array(frame)))
            }
            result = line["result"] as? [String: Any]
        }
        let seen = try XCTUnwrap(result, "the reference server gave no result")
        XCTAssertEqual(seen["noncompliance"] as? [String], [])
        XCTAssertEqual(seen["psk"] as? String, "sentinel")
        XCTAssertEqual(seen["client_id"] as? String, handshake.clientID, "the client's key, as aiosendspin's server read it")
        let hello = try XCTUnwrap(seen["hello"] as? [String: Any])
        XCTAssertEqual(hello["name"] as? String, "Kitchen")
        XCTAssertEqual(hello["supported_roles"] as? [String], ["player@v1"])
        XCTAssertEqual(hello["formats"] as? [[AnyHashable]], [["flac", 48000, 2, 16], ["pcm", 48000, 2, 16], ["pcm", 48000, 2, 24], ["opus", 48000, 2, 16]])
        XCTAssertEqual(hello["buffer_capacity"] as? Int, 1 << 20)
        XCTAssertEqual(hello["pairing_psk"] as? Bool, true)
        XCTAssertEqual(hello["unpaired_access"] as? Bool, true)
        for flag in ["unpaired_access_incomplete", "legacy_support_keys_used", "unlisted_support_roles", "missing_support_roles"] {
            XCTAssertTrue(hello[flag] is NSNull || hello[flag] as? Bool == false, "\(flag): \(hello[flag] ?? "absent")")
        }
        let state = try XCTUnwrap(seen["state"] as? [String: Any])
        XCTAssertEqual(state["available"] as? Bool, true)
        XCTAssertEqual(state["volume"] as? Int, 100)
        XCTAssertEqual(state["muted"] as? Bool, false)
        XCTAssertEqual(state["output_delay_ms"] as? Int, 0)
        XCTAssertEqual(state["required_lead_time_ms"] as? Int, 100)
        XCTAssertEqual(state["min_buffer_ms"] as? Int, 100)
        XCTAssertEqual(state["supported_commands"] as? [String], ["volume", "mute"])
        XCTAssertEqual(seen["time"] as? Int, 424_242)
        XCTAssertEqual((seen["after_command"] as? [String: Any])?["volume"] as? Int, 30, "the player reports the volume it was set to")
    }

    func testAStreamInAFormatNotOfferedEndsTheSessionAndAudioBeforeAStreamIsBad() throws {
        var server = try joinedServer()
        XCTAssertEqual(try server.send(binary: SendspinFrame.audio(timestamp: 1, sendAhead: 0, payload: [0, 0], header: .withSendAhead)), [])
        XCTAssertEqual(server.client.badMessages, 1, "audio before stream/start")
        let actions = try server.send([.streamStart(SendspinAudioFormat(codec: .pcm, channels: 2, sampleRate: 44100, bitDepth: 16), codecHeader: nil)])
        guard case .close(let reason)? = actions.last else { return XCTFail("\(actions)") }
        XCTAssertTrue(reason.contains("did not offer"), reason)
        XCTAssertTrue(server.client.isEnded)
    }

    /// A server that sends junk: random frames in the clear, sealed frames of mutated JSON, binary
    /// messages of any length. Nothing traps; every message is acted on, counted bad or skipped;
    /// the session ends only after too many bad ones, saying why in one line.
    func testHostileServersFramesAreCountedOrSkippedAndNeverTrap() throws {
        var random = SplitMix64(seed: 2828)
        let seeds = [#"{"type":"server/time","payload":{"client_transmitted":1,"server_received":2,"server_transmitted":3}}"#,
                     #"{"type":"stream/start","payload":{"player":{"codec":"pcm","sample_rate":48000,"channels":2,"bit_depth":16}}}"#,
                     #"{"type":"server/command","payload":{"player":{"command":"volume","volume":55}}}"#,
                     #"{"type":"stream/clear","payload":{"roles":["player"]}}"#, #"{"type":"group/update","payload":{}}"#]
        var closes = 0
        for round in 0..<150 {
            var server = try joinedServer()
            for _ in 0..<60 where !server.client.isEnded {
                var actions: [SendspinClientSession.Action]
                switch Int.random(in: 0..<4, using: &random) {
                case 0:
                    actions = server.client.receive(text: (0..<Int.random(in: 0...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
                case 1:
                    var text = Array(seeds.randomElement(using: &random)!.utf8)
                    for _ in 0..<Int.random(in: 0...3, using: &random) where !text.isEmpty {
                        text[Int.random(in: 0..<text.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                    }
                    actions = server.client.receive(binary: try server.channel!.seal(text: text))
                case 2:
                    let payload = (0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                    actions = try server.send(binary: [UInt8.random(in: 4...255, using: &random)] + payload)
                default:
                    actions = server.client.receive(binary: (0..<Int.random(in: 0...80, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
                }
                for case .close(let reason) in actions {
                    closes += 1
                    XCTAssertFalse(reason.contains("\n"), reason)
                    XCTAssertTrue(server.client.isEnded)
                }
                for case .audio(let timestamp, let payload) in actions {
                    XCTAssertTrue((0..<(1 << 52)).contains(timestamp), "round \(round)")
                    XCTAssertFalse(payload.isEmpty)
                }
                for case .volume(let level) in actions { XCTAssertTrue((0...100).contains(level)) }
            }
            XCTAssertLessThanOrEqual(server.client.badMessages, server.client.limits.maxBadMessages)
        }
        XCTAssertGreaterThan(closes, 0, "junk ends sessions")
    }

    /// Chunks 20 ms apart on the server's clock play as one run of frames; the first sets where the
    /// stream sits on that clock; an absurd timestamp is dropped; a volume is the broadcaster's curve.
    func testTheTimelinePlacesChunksByTheirServerTimestamps() throws {
        let sync = ClockSync(clock: .system)
        var timeline = SendspinTimeline(clockSync: sync)
        var pcm: [Float] = []
        let format = SendspinAudioFormat(codec: .pcm, channels: 2, sampleRate: 48000, bitDepth: 16)
        try timeline.apply(.streamStart(.init(format: format, codecHeader: nil)), into: &pcm)
        let chunk = SendspinPCM.encode([Float](repeating: 0.25, count: 960 * 2), bitDepth: 16)
        var frames: [Int?] = []
        // 20 ms apart, then one 90 s off, then one 40 ms on (a gap of one chunk).
        for timestamp: Int64 in [10_000_000, 10_020_000, 10_040_000, 100_060_000, 10_080_000] {
            try timeline.apply(.audio(timestamp: timestamp, payload: chunk), into: &pcm)
            frames.append(timeline.lastProducedFrame)
        }
        XCTAssertEqual(frames, [0, 960, 1920, nil, 3840])
        XCTAssertEqual(timeline.droppedChunks, 1)
        XCTAssertEqual(pcm.count, 4 * 960 * 2)
        XCTAssertEqual(Double(pcm[0]), 0.25, accuracy: 1e-4)
        // The stream's frame 0 is at the first chunk's timestamp on the server's clock.
        sync.connected()
        let now = sync.clock.now()
        sync.record(ClockSample(t1: now, t2: 20_000_000_000, t3: 20_000_000_000, t4: now))
        let line = try XCTUnwrap(sync.schedule.line(orElse: nil))
        XCTAssertEqual(line.frame(at: now), Double(20_000_000_000 - 10_000_000_000) * 48e-6, accuracy: 1)

        try timeline.apply(.volume(40), into: &pcm)
        guard case .gain(let gain, _, let ramp)? = timeline.takeEvents().first else { return XCTFail("no gain") }
        XCTAssertEqual(gain, 0.064, accuracy: 1e-6)
        XCTAssertEqual(ramp, 1440)
    }

    /// A stream/clear leaves no expected position: a hostile server's next timestamp, as far as the
    /// session allows (2⁵² µs), once overflowed µs × rate and trapped. It starts a new timeline.
    func testAChunkAsFarAsAllowedAfterAClearStartsANewTimeline() throws {
        var timeline = SendspinTimeline(clockSync: ClockSync(clock: .system))
        var pcm: [Float] = []
        let format = SendspinAudioFormat(codec: .pcm, channels: 2, sampleRate: 48000, bitDepth: 16)
        try timeline.apply(.streamStart(.init(format: format, codecHeader: nil)), into: &pcm)
        let chunk = SendspinPCM.encode([Float](repeating: 0.25, count: 960 * 2), bitDepth: 16)
        var frames: [Int?] = []
        for event: SendspinEvent in [.audio(timestamp: 0, payload: chunk), .streamClear, .audio(timestamp: (1 << 52) - 1, payload: chunk),
                                     .audio(timestamp: (1 << 52) - 1 + 20_000, payload: chunk)] {
            try timeline.apply(event, into: &pcm)
            frames.append(timeline.lastProducedFrame)
        }
        XCTAssertEqual(frames, [0, nil, 0, 960], "the far chunk is frame 0 of a new timeline, the next one follows it")
        XCTAssertEqual(pcm.count, 3 * 960 * 2)
    }

    /// A server that changes the format mid-session (stream/start again) gets a new decoder: 24-bit
    /// chunks after 16-bit ones play on at the frames that follow. A stream that cannot be decoded
    /// (a FLAC header that is no FLAC) throws, which ends the connection (SendspinSource), and its
    /// chunks meanwhile are dropped rather than fed to the old stream's decoder.
    func testAFormatChangeMidSessionTakesANewDecoderAndAnUndecodableOneNone() throws {
        var timeline = SendspinTimeline(clockSync: ClockSync(clock: .system))
        var pcm: [Float] = []
        let samples = [Float](repeating: 0.25, count: 960 * 2)
        func format(_ codec: SendspinCodec, _ depth: Int) -> SendspinAudioFormat {
            SendspinAudioFormat(codec: codec, channels: 2, sampleRate: 48000, bitDepth: depth)
        }
        try timeline.apply(.streamStart(.init(format: format(.pcm, 16), codecHeader: nil)), into: &pcm)
        try timeline.apply(.audio(timestamp: 1_000_000, payload: SendspinPCM.encode(samples, bitDepth: 16)), into: &pcm)
        try timeline.apply(.streamStart(.init(format: format(.pcm, 24), codecHeader: nil)), into: &pcm)
        // 5760 bytes: 960 frames at 24 bits, 1440 if still read as 16.
        let chunk24 = SendspinPCM.encode(samples, bitDepth: 24)
        try timeline.apply(.audio(timestamp: 1_020_000, payload: chunk24), into: &pcm)
        XCTAssertEqual(timeline.lastProducedFrame, 960)
        XCTAssertEqual(pcm.count, 2 * 960 * 2)
        XCTAssertEqual(Double(pcm[pcm.count - 1]), 0.25, accuracy: 1e-6)

        let notFLAC = Array("fLaC".utf8) + [UInt8](repeating: 0xFF, count: 38)
        XCTAssertThrowsError(try timeline.apply(.streamStart(.init(format: format(.flac, 16), codecHeader: notFLAC)), into: &pcm))
        XCTAssertFalse(timeline.hasStream)
        try timeline.apply(.audio(timestamp: 1_040_000, payload: chunk24), into: &pcm)
        XCTAssertNil(timeline.lastProducedFrame)
        XCTAssertEqual(pcm.count, 2 * 960 * 2)
    }

    func testPCMDecodesWhatItEncodes() {
        let samples: [Float] = [0, 0.5, -0.5, 0.999, -1, 0.123456]
        for depth in [16, 24] {
            var decoded: [Float] = []
            SendspinPCM.decode(SendspinPCM.encode(samples, bitDepth: depth), bitDepth: depth, into: &decoded)
            XCTAssertEqual(decoded.count, samples.count)
            for (a, b) in zip(decoded, samples) { XCTAssertEqual(a, b, accuracy: depth == 16 ? 1e-4 : 1e-6) }
        }
    }
}
