import Foundation
import PartyCastCodec
import PartyCastTestSupport
import PartyCastWire
import XCTest

final class HostileBroadcasterTests: XCTestCase {
    /// The PCM source as `readAudio` reads it back from a WAV (sox rounds through 32-bit integers),
    /// so that recordings can be compared with it bit for bit. Every stream starts with the same samples.
    static let pcmAsRead: [Float] = {
        let directory = try! temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try! writeAudio(ToneStream.longPCM.samples, sampleRate: ToneStream.rate, channels: ToneStream.channels, to: directory + "/source.wav")
        return try! readAudio(directory + "/source.wav").samples
    }()

    // MARK: The scenarios

    func testCleanStreams() {
        run([
            Scenario(name: "clean PCM stream", first: { try $0.serveAll() }),
            Scenario(name: "clean Opus stream", stream: .opus, first: { try $0.serveAll() }),
            Scenario(name: "Goodbye, then the fake keeps the connection open and says nothing", first: { c in
                try c.handshake()
                try c.chunks(0..<100)
                c.waitForTimelineEnd()
                try c.send(.goodbye(PCGoodbye()))
                if !c.waitForListenerClose(timeout: 30) { c.fake.problem("the listener never closed the connection after Goodbye") }
            }),
            // Each request gets the absurd answers first, then the honest one.
            Scenario(name: "ClockResponses for t1s never sent", clock: { request in
                let now = monotonicNow()
                return [clockResponse(request.t1 &- 500_000_000, now, now), clockResponse(request.t1 &+ 987_654_321, now, now)]
                    + FakeBroadcaster.honestClock(request)
            }, first: { try $0.serveAll() }),
            Scenario(name: "ClockResponses at Int64.min and Int64.max", clock: { request in
                [clockResponse(.min, .min, .min), clockResponse(.max, .max, .max), clockResponse(.min, .max, .min),
                 clockResponse(request.t1, .max, .max), clockResponse(request.t1, .min, .max)]
                    + FakeBroadcaster.honestClock(request)
            }, first: { try $0.serveAll() }),
        ])
    }

    func testChunksWithAbsurdNumbersAreDropped() {
        let at50: UInt64 = 50 * 960
        run([
            .dropped("media_position Int.max + 1") { $0.mediaPosition = UInt64(Int.max) + 1 },
            .dropped("media_position UInt64.max") { $0.mediaPosition = .max },
            .dropped("media_position 2^50 + 960") { $0.mediaPosition = 1 << 50 + 960 },
            .dropped("presentation Int64.min") { $0.presentationNanoseconds = .min },
            .dropped("presentation Int64.min + 1") { $0.presentationNanoseconds = .min + 1 },
            .dropped("presentation Int64.max - 1") { $0.presentationNanoseconds = .max - 1 },
            .dropped("presentation Int64.max") { $0.presentationNanoseconds = .max },
            .dropped("presentation 0") { $0.presentationNanoseconds = 0 },
            .dropped("presentation 2 ms off the timeline") { $0.presentationNanoseconds += 2_000_000 },
            .dropped("a consistent chunk 31 s ahead of the timeline") {
                $0.mediaPosition = at50 + 31 * 48000
                $0.presentationNanoseconds += 31_000_000_000
            },
            .dropped("frame_count 0") { $0.frameCount = 0 },
            .dropped("frame_count 961") { $0.frameCount = 961 },
            .dropped("frame_count UInt32.max") { $0.frameCount = .max },
            .interleaved("chunks 40-49 sent again") { try $0.chunks(40..<50) },
            .interleaved("chunks 40-49 sent again under new sequence numbers") { c in
                for k in 40..<50 { try c.chunk(k) { $0.sequence += 1000 } }
            },
            Scenario(name: "sequence UInt64.max mid-stream, then normal sequences", first: { c in
                try c.handshake()
                try c.chunks(0..<50)
                try c.chunk(50) { $0.sequence = .max }
                try c.chunks(51..<100)
                try c.finish()
            }),
            Scenario(name: "sequence 0 mid-stream", first: { c in
                try c.handshake()
                try c.chunks(0..<50)
                try c.chunk(50) { $0.sequence = 0 }
                try c.chunks(51..<100)
                try c.finish()
            }),
        ])
    }

    func testUndecodablePayloadsAreConcealed() {
        run([
            .concealed("PCM payload empty") { _ in [] },
            .concealed("PCM payload of 1 byte") { _ in [0x42] },
            .concealed("PCM payload of 7679 bytes") { Array(ToneStream.pcm.payloads[$0].dropLast()) },
            .concealed("PCM payload of 7681 bytes") { ToneStream.pcm.payloads[$0] + [0] },
            .concealed("PCM payload of two chunks") { ToneStream.pcm.payloads[$0] + ToneStream.pcm.payloads[$0] },
            .concealed("one corrupt random Opus packet", stream: .opus) { _ in undecodableOpusPacket() },
            .concealed("20 random Opus payloads", stream: .opus, 40..<60) { _ in undecodableOpusPacket() },
            .concealed("empty Opus payload", stream: .opus) { _ in [] },
        ])
    }

    func testMetadataAndTextAreTolerated() {
        let escapes = hostileText(bytes: 10_000)
        run([
            .interleaved("Metadata duration_frames UInt64.max", at: 0) { try $0.metadata { $0.durationFrames = .max } },
            .interleaved("Metadata duration_frames Int.max + 1, 0, stream_index UInt32.max") { c in
                try c.metadata { $0.durationFrames = UInt64(Int.max) + 1 }
                try c.metadata { $0.durationFrames = 0; $0.title = ""; $0.artist = "" }
                try c.metadata { $0.streamIndex = .max }
            },
            Scenario(name: "1 MB title of terminal escapes, escapes in every other text", first: { c in
                _ = try c.waitForHello()
                try c.welcome { $0.broadcasterName = escapes; $0.broadcasterID = escapes }
                try c.streamFormat()
                try c.metadata { $0.title = hostileText(bytes: 1_000_000); $0.artist = escapes; $0.album = escapes }
                try c.chunks(0..<100)
                try c.finish(reason: escapes)
            }),
            .interleaved("a message type from the future (envelope field 99)") { c in
                // Field 99, length-delimited: key (99 << 3 | 2) as a varint, length 3, 3 bytes.
                let body: [UInt8] = [0x9A, 0x06, 3, 1, 2, 3]
                try c.send(raw: [0, 0, 0, UInt8(body.count)] + body)
            },
            Scenario(name: "Welcome with session_id UInt64.max and empty names", first: { c in
                _ = try c.waitForHello()
                try c.welcome { $0.sessionID = .max; $0.broadcasterName = ""; $0.broadcasterID = "" }
                try c.streamFormat()
                try c.metadata()
                try c.chunks(0..<100)
                try c.finish()
            }),
            // After 3 s of audio, more than the listener's ring holds, so its producer is waiting for
            // playback: the junk is dropped as it is read, so it neither piles up in memory nor
            // holds back the audio behind it (200 MiB read only as the ring drains came too late).
            Scenario(name: "flood of 200 x 1 MiB Metadata after 3 s of audio", stream: .longPCM, first: { c in
                try c.handshake()
                try c.chunks(0..<150)
                // Lets the first clock answer through first: a listener that never hears one
                // cannot play in sync at all (that case is its own scenario).
                try c.waitForClockAnswer()
                // The bulk is a field from the future (99, bytes) rather than the title: a debug
                // build takes ~0.3 s to validate 1 MiB of UTF-8, which would make this a minute long.
                let bulk = WireFraming.maxMessageBytes - 16
                var metadata = try PCMetadata(serializedBytes: [0x9A, 0x06, UInt8(bulk & 0x7F | 0x80), UInt8(bulk >> 7 & 0x7F | 0x80), UInt8(bulk >> 14)]
                                                  + [UInt8](repeating: 0x78, count: bulk))
                metadata.title = "flood"
                let frame = try WireFraming.encode(envelope(.metadata(metadata)))
                for _ in 0..<200 { try c.send(raw: frame) }
                try c.chunks(150..<200)
                try c.finish()
            }, expect: .audio([.chunks(0..<200)])),
        ])
    }

    func testWelcomeVersionAndErrors() {
        run([
            .fatal("Welcome with protocol version 99", status: 11, mentioning: "protocol") { c in
                try c.welcome(version: 99)
                try c.streamFormat()
                try c.chunks(0..<10)
            },
            .fatal("Welcome with protocol version 0", status: 11, mentioning: "protocol") { try $0.welcome(version: 0) },
            .fatal("Error KEY_REQUIRED instead of Welcome", status: 12, mentioning: nil) {
                try $0.send(errorBody(PCErrorCode(rawValue: 6)!, "this broadcast needs a key"))
            },
            .fatal("Error KEY_REJECTED instead of Welcome", status: 12, mentioning: nil) {
                try $0.send(errorBody(PCErrorCode(rawValue: 7)!, "wrong key"))
            },
            .violation("Error QUEUE_OVERFLOW mid-stream") { try $0.send(errorBody(.queueOverflow, "you are too slow")) },
            .violation("Error with unknown code 99 mid-stream") { try $0.send(errorBody(PCErrorCode(rawValue: 99)!, "?")) },
        ])
    }

    func testProtocolViolationsEndTheConnection() {
        run([
            .badStart("AudioChunk before Welcome") { try $0.chunks(0..<10) },
            .badStart("StreamFormat and chunks before Welcome") { c in
                try c.streamFormat()
                try c.metadata()
                try c.chunks(0..<10)
            },
            .badStart("Metadata before Welcome") { try $0.metadata() },
            .badStart("AudioChunk before any StreamFormat") { c in
                try c.welcome()
                try c.chunks(0..<10)
            },
            .violation("garbage mid-stream: a frame that is no envelope") { try $0.send(raw: [0, 0, 0, 10] + [UInt8](repeating: 0xFF, count: 10)) },
            .violation("garbage mid-stream: length prefix 1 MiB + 1") { try $0.send(raw: [0x00, 0x10, 0x00, 0x01, 1, 2, 3]) },
            .violation("garbage mid-stream: length prefix 0xFFFFFFFF") { try $0.send(raw: [0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3]) },
            .violation("garbage mid-stream: length prefix 0") { try $0.send(raw: [0, 0, 0, 0]) },
            .violation("sample rate changes to 44100 mid-stream") { c in
                try c.streamFormat { $0.sampleRate = 44100 }
                try c.chunks(50..<100)
            },
            .violation("channels change to 1 mid-stream") { c in
                try c.streamFormat { $0.channels = 1 }
                try c.chunks(50..<100)
            },
            .violation("codec changes to Opus mid-stream") { c in
                try c.streamFormat { $0.codec = .opus }
                try c.chunks(50..<100)
            },
        ])
    }

    func testUnplayableStreamFormats() {
        run([
            .badFormat("codec 77") { $0.codec = PCCodecKind(rawValue: 77)! },
            .badFormat("codec PCM_S16LE (no decoder)") { $0.codec = .pcmS16Le },
            .badFormat("codec unspecified") { $0.codec = .codecUnspecified },
            .badFormat("0 Hz") { $0.sampleRate = 0 },
            .badFormat("sample_rate UInt32.max") { $0.sampleRate = .max },
            .badFormat("a million channels") { $0.channels = 1_000_000 },
            .badFormat("0 channels") { $0.channels = 0 },
            .badFormat("channels UInt32.max") { $0.channels = .max },
            .badFormat("Opus at 44100 Hz", stream: .opus) { $0.sampleRate = 44100 },
            .badFormat("frames_per_chunk 0") { $0.framesPerChunk = 0 },
            .badFormat("frames_per_chunk UInt32.max") { $0.framesPerChunk = .max },
            .badFormat("pre_skip UInt32.max") { $0.preSkip = .max },
            .badFormat("Opus pre_skip UInt32.max", stream: .opus) { $0.preSkip = .max },
            Scenario(name: "StreamFormat total_frames UInt64.max, stream_index UInt32.max everywhere", first: { c in
                _ = try c.waitForHello()
                try c.welcome()
                try c.streamFormat { $0.totalFrames = .max; $0.streamIndex = .max }
                try c.metadata { $0.streamIndex = .max }
                for k in 0..<100 { try c.chunk(k) { $0.streamIndex = .max } }
                try c.finish()
            }),
        ])
    }

    /// The listener's first message on every connection is its Hello, however its threads are
    /// scheduled: 5 rounds of 8 listeners joining at once (real-time output, so the player's status
    /// reports run while they connect), each cut off halfway so that it also reconnects mid-play.
    /// Protocol 4's live timeline against the real listener in party mode: a withdraw at chunk 50
    /// whose replacement is silence (a skip to a silent song), or a gap (a pause, resumed 200 ms
    /// later on the same line). What was sent from chunk 50 on before the withdraw is never heard;
    /// everything before it is, in place, and so is the replacement.
    func testWithdrawnAudioIsNeverHeardAndItsReplacementFollows() throws {
        let opusSilence = try OpusEncoder(channels: ToneStream.channels, bitrateKbps: 128)
            .encode([Float](repeating: 0, count: ToneStream.framesPerChunk * ToneStream.channels).withUnsafeBufferPointer { $0 })
        func skip(_ name: String, stream: ToneStream, silence: [UInt8]) -> Scenario {
            Scenario(name: name, stream: stream, outputs: ["virtual"], first: { c in
                try c.handshake()
                try c.chunks(0..<60)
                try c.send(withdrawBody(UInt64(50 * ToneStream.framesPerChunk)))
                for k in 50..<60 { try c.chunk(k) { $0.payload = Data(silence) } }
                try c.chunks(60..<100)
                try c.finish()
            }, expect: .timeline(tone: [0..<50, 60..<100], settle: stream.codec == .opus ? 120 : 30))
        }
        func pause(_ name: String, stream: ToneStream) -> Scenario {
            Scenario(name: name, stream: stream, outputs: ["virtual"], first: { c in
                try c.handshake()
                try c.chunks(0..<60)
                try c.send(withdrawBody(UInt64(50 * ToneStream.framesPerChunk)))
                var paused = PCPartyState()
                paused.paused = true
                try c.send(.partyState(paused))
                // Resumed at chunk 60's place with the song where it paused (chunk 50 on).
                for k in 60..<100 { try c.chunk(k) { $0.payload = Data(c.stream.payloads[k - 10]) } }
                try c.finish()
            }, expect: .timeline(tone: [0..<50, 60..<100]))
        }
        run([
            skip("Withdraw at chunk 50, replaced by silence (PCM)", stream: .pcm, silence: [UInt8](repeating: 0, count: ToneStream.pcm.payloads[0].count)),
            skip("Withdraw at chunk 50, replaced by silence (Opus)", stream: .opus, silence: opusSilence),
            pause("Withdraw at chunk 50, resumed at chunk 60 (PCM)", stream: .pcm),
            pause("Withdraw at chunk 50, resumed at chunk 60 (Opus)", stream: .opus),
        ])
    }

    /// Gain from the broadcaster, sent ahead of the audio: muted (a 5 ms ramp down) from chunk 50,
    /// back (a 5 ms ramp up) from chunk 60, each on its frames in party mode.
    func testGainMutesAndUnmutesOnItsFrames() {
        func muted(_ stream: ToneStream) -> Scenario {
            Scenario(name: "Gain 0 from chunk 50, 1 from chunk 60 (\(stream.codec))", stream: stream, outputs: ["virtual"], first: { c in
                try c.handshake()
                try c.send(gainBody(0, at: UInt64(50 * ToneStream.framesPerChunk), ramp: 240),
                           gainBody(1, at: UInt64(60 * ToneStream.framesPerChunk), ramp: 240))
                try c.chunks(0..<100)
                try c.finish()
            }, expect: .timeline(tone: [0..<50, 60..<100]))
        }
        run([muted(.pcm), muted(.opus)])
    }

    /// The latency offset and the channel the remote sets reach the listener's Status reports, each
    /// message leaving what it does not carry as it was.
    func testListenerSettingsAreReportedBack() throws {
        let fake = try FakeBroadcaster(stream: .pcm, paced: true) { c in
            try c.handshake()
            try c.send(latencyBody(-300))
            try c.send(channelBody(.mono))
            try c.chunks(0..<100)
            if !c.waitForReport(offset: -300, channel: .mono) {
                c.fake.problem("no Status reported the latency offset of -300 ms and the mono channel within 10 s")
            }
            try c.finish()
        }
        defer { fake.stop() }
        let directory = try temporaryDirectory()
        let run = try ListenerRun(fake: fake, output: "virtual:\(directory)/out.wav")
        fake.stop()
        XCTAssertEqual(run.status, 0, run.lastWords)
        XCTAssertEqual(run.problems, [])
        XCTAssertEqual(fake.problems, [])
    }

    /// Timeline messages with absurd numbers, or harmless ones in a flood, change nothing heard.
    func testHostileTimelineMessagesChangeNothing() {
        run([
            .interleaved("Withdraw at UInt64.max, 2^48, Int.max + 1") { c in
                try c.send(withdrawBody(.max), withdrawBody(1 << 48), withdrawBody(UInt64(Int.max) + 1))
            },
            .interleaved("10000 Withdraws past everything sent") { c in
                let frame = try WireFraming.encode(envelope(withdrawBody(UInt64(100 * ToneStream.framesPerChunk))))
                try c.send(raw: Array(repeating: frame, count: 10_000).flatMap { $0 })
            },
            .interleaved("Gain NaN, ±∞, at UInt64.max, ramp UInt32.max; Gain 1 at 0") { c in
                try c.send(gainBody(.nan, at: 0, ramp: 0), gainBody(.infinity, at: 0, ramp: 0), gainBody(-.infinity, at: 0, ramp: 0),
                           gainBody(0, at: .max, ramp: 0), gainBody(0, at: 0, ramp: .max), gainBody(1, at: 0, ramp: 0))
            },
            .interleaved("ListenerSettings latency offset ±2001 ms, Int32.min, Int32.max") { c in
                try c.send(latencyBody(2001), latencyBody(-2001), latencyBody(.min), latencyBody(.max))
            },
            .interleaved("ListenerSettings channel 5, -1, Int32.max, Int32.min") { c in
                try c.send(channelBody(.UNRECOGNIZED(5)), channelBody(.UNRECOGNIZED(-1)), channelBody(.UNRECOGNIZED(Int(Int32.max))),
                           channelBody(.UNRECOGNIZED(Int(Int32.min))))
            },
            .interleaved("10000 PartyStates") { c in
                var state = PCPartyState()
                for k in 0..<10_000 {
                    state.paused = k % 2 == 0
                    try c.send(.partyState(state))
                }
            },
        ])
    }

    func testTheFirstMessageIsAlwaysHello() throws {
        for round in 1...5 {
            let names = NamesSeen()
            let fake = try FakeBroadcaster(stream: .pcm, paced: true) { c in
                let hello = try c.waitForHello()
                guard names.insert(hello.listenerName) else { return try c.serveAll() }
                try c.handshake()
                try c.chunks(0..<50)
            }
            defer { fake.stop() }
            let directory = try temporaryDirectory()
            let runs = concurrentMap(Array(1...8), limit: 8) { i in
                Result { try ListenerRun(fake: fake, output: "virtual:\(directory)/\(i).wav", extra: ["--listener-name", "r\(round)-\(i)"]) }
            }
            fake.stop()
            for (i, run) in runs.enumerated() {
                let run = try run.get()
                XCTAssertEqual(run.status, 0, "round \(round), listener \(i + 1): \(run.lastWords)")
                XCTAssertEqual(run.problems, [], "round \(round), listener \(i + 1)")
            }
            XCTAssertEqual(Self.helloProblems(fake), [], "round \(round)")
            XCTAssertEqual(fake.problems, [], "round \(round)")
            XCTAssertEqual(fake.acceptedConnections.count, 16, "round \(round): each listener joins, is cut off, rejoins")
        }
    }
}

/// Listener names the Hello test has half-served already.
final class NamesSeen: @unchecked Sendable {
    // @unchecked: `names` is only touched under `lock`.
    private let lock = NSLock()
    private var names: Set<String> = []
    /// True the first time `name` comes.
    func insert(_ name: String) -> Bool { lock.withLock { names.insert(name).inserted } }
}
