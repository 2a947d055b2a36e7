import Foundation
import PartyCastCodec
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// What a recording must hold, in chunks of the tone stream, in order.
enum Piece: Sendable {
    case chunks(Range<Int>)
    /// Chunks whose payload cannot be decoded: silence (PCM) or packet-loss concealment (Opus).
    case concealed(Int)
}

enum Expectation: Sendable {
    /// Exit 0 having played these pieces.
    case audio([Piece])
    /// Exit with this status, with a stderr line mentioning `mentioning` (when given).
    case exit(Int32, mentioning: String?)
    /// Exit 0, the virtual card having played the tone at the timeline positions of these chunks
    /// (each range in chunks of the timeline) and silence between them; the tone is checked from
    /// `settle` ms into a range that follows silence (Opus takes a while to converge again).
    case timeline(tone: [Range<Int>], settle: Int = 30)
}

/// One hostile broadcast: what its first connection gets (later ones get the clean stream) and
/// what the listener must make of it.
struct Scenario: Sendable {
    var name: String
    var stream = ToneStream.pcm
    var outputs = ["wav", "virtual"]
    /// The first connection must end (a violation) and the listener come back.
    var reconnects = false
    var clock = FakeBroadcaster.honestClock
    var first: FakeBroadcaster.Script
    var expect = Expectation.audio(Scenario.whole)

    static let whole = [Piece.chunks(0..<100)]

    /// The whole stream with `act` between chunks 49 and 50; none of it may disturb the audio.
    static func interleaved(_ name: String, stream: ToneStream = .pcm, at split: Int = 50,
                            _ act: @escaping @Sendable (FakeConnection) throws -> Void) -> Scenario {
        Scenario(name: name, stream: stream, first: { c in
            try c.handshake()
            try c.chunks(0..<split)
            try act(c)
            try c.chunks(split..<c.stream.chunkCount)
            try c.finish()
        })
    }

    /// A copy of chunk 50 spoilt by `spoil`, sent just before the real one: the copy must be
    /// dropped (and must not count as played), the real one played. The copy's payload is silence,
    /// so a recording shows which of the two was played.
    static func dropped(_ name: String, _ spoil: @escaping @Sendable (inout PCAudioChunk) -> Void) -> Scenario {
        interleaved(name) { c in
            try c.chunk(50) { chunk in
                chunk.payload = Data(count: chunk.payload.count)
                spoil(&chunk)
            }
        }
    }

    /// Chunks in `bad` carry `payload(k)` instead of their audio: each is concealed for its 960
    /// frames, and everything around it plays as sent.
    static func concealed(_ name: String, stream: ToneStream = .pcm, _ bad: Range<Int> = 50..<51,
                          payload: @escaping @Sendable (Int) -> [UInt8]) -> Scenario {
        Scenario(name: name, stream: stream, first: { c in
            try c.handshake()
            try c.chunks(0..<bad.lowerBound)
            for k in bad { try c.chunk(k) { $0.payload = Data(payload(k)) } }
            try c.chunks(bad.upperBound..<c.stream.chunkCount)
            try c.finish()
        }, expect: .audio([.chunks(0..<bad.lowerBound), .concealed(bad.count), .chunks(bad.upperBound..<stream.chunkCount)]))
    }

    /// Half the stream, then `act`, which must end the connection; the listener comes back, is
    /// sent the whole stream again and must play every chunk once.
    static func violation(_ name: String, stream: ToneStream = .pcm,
                          _ act: @escaping @Sendable (FakeConnection) throws -> Void) -> Scenario {
        Scenario(name: name, stream: stream, reconnects: true, first: { c in
            try c.handshake()
            try c.chunks(0..<50)
            c.violate(name) { try act(c) }
        })
    }

    /// `act` right after the Hello instead of a proper start; it must end the connection.
    static func badStart(_ name: String, stream: ToneStream = .pcm,
                         _ act: @escaping @Sendable (FakeConnection) throws -> Void) -> Scenario {
        Scenario(name: name, stream: stream, reconnects: true, first: { c in
            _ = try c.waitForHello()
            c.violate(name) { try act(c) }
        })
    }

    /// A StreamFormat the listener cannot play: it ends the connection and comes back.
    static func badFormat(_ name: String, stream: ToneStream = .pcm,
                          _ edit: @escaping @Sendable (inout PCStreamFormat) -> Void) -> Scenario {
        badStart(name, stream: stream) { c in
            try c.welcome()
            try c.streamFormat(edit)
            try c.metadata()
            try c.chunks(0..<10)
        }
    }

    /// `act` right after the Hello must make the listener exit with `status`.
    static func fatal(_ name: String, status: Int32, mentioning: String?, _ act: @escaping @Sendable (FakeConnection) throws -> Void) -> Scenario {
        Scenario(name: name, outputs: ["wav"], first: { c in
            _ = try c.waitForHello()
            c.violate(name) { try act(c) }
        }, expect: .exit(status, mentioning: mentioning))
    }
}

/// Random bytes libopus refuses to decode (checked with a decoder of our own): the listener must
/// conceal them. Random bytes it accepts would decode to noise of unknown length, so they are skipped.
func undecodableOpusPacket() -> [UInt8] {
    let decoder = try! OpusDecoder(channels: ToneStream.channels)
    var scratch: [Float] = []
    while true {
        let packet = (0..<Int.random(in: 2...1275)).map { _ in UInt8.random(in: 0...255) }
        if (try? decoder.decode(packet, into: &scratch)) == nil { return packet }
    }
}

/// Terminal escapes (CSI, OSC with BEL, 8-bit CSI), carriage return, NUL: `bytes` long, in UTF-8.
func hostileText(bytes: Int) -> String {
    let pattern = "\u{1B}[2J\u{1B}[31mred\u{1B}]0;owned\u{07}\r\u{9B}1m\u{0}\n"
    let text = String(repeating: pattern, count: bytes / pattern.utf8.count + 1)
    return String(decoding: text.utf8.prefix(bytes), as: UTF8.self)
}

func errorBody(_ code: PCErrorCode, _ message: String) -> PCEnvelope.OneOf_Body {
    var error = PCError()
    error.code = code
    error.message = message
    return .error(error)
}

func withdrawBody(_ position: UInt64) -> PCEnvelope.OneOf_Body {
    var withdraw = PCWithdraw()
    withdraw.fromPosition = position
    return .withdraw(withdraw)
}

func gainBody(_ value: Float, at position: UInt64, ramp: UInt32) -> PCEnvelope.OneOf_Body {
    var gain = PCGain()
    gain.gain = value
    gain.atPosition = position
    gain.rampFrames = ramp
    return .gain(gain)
}

func latencyBody(_ milliseconds: Int32) -> PCEnvelope.OneOf_Body {
    var settings = PCListenerSettings()
    settings.latencyOffsetMilliseconds = milliseconds
    return .listenerSettings(settings)
}

func channelBody(_ channel: PCChannelAssignment) -> PCEnvelope.OneOf_Body {
    var settings = PCListenerSettings()
    settings.channel = channel
    return .listenerSettings(settings)
}

func clockResponse(_ t1: Int64, _ t2: Int64, _ t3: Int64) -> PCClockResponse {
    var response = PCClockResponse()
    response.t1 = t1
    response.t2 = t2
    response.t3 = t3
    return response
}

/// `listener join` against a fake, under GNU time (for its max RSS), until it exits or has outlived
/// the fake's last message by 25 s (then it is killed, by PID).
struct ListenerRun {
    var status: Int32
    /// The listener's own stderr, GNU time's lines removed.
    var stderr: String
    /// Killed for outliving the fake's last message by 25 s, or ended by a signal of its own.
    var timedOut: Bool, crashed: Bool
    /// What is wrong whatever the scenario: a signal, a hang, a Fatal error, memory, a noisy stderr.
    var problems: [String] = []

    init(fake: FakeBroadcaster, output: String, extra: [String] = []) throws {
        let process = try startProcess("/usr/bin/time", [
            "-f", "maxrss_kb=%M", productPath("listener"), "join", "--host", "127.0.0.1:\(fake.port)",
            "--once", "--quiet", "--output", output,
        ] + extra, environment: ["SWIFT_BACKTRACE": "enable=no"])
        // Until it ends, or 25 s after the fake's last byte (at most 90 s): then it is killed.
        let started = monotonicNow()
        waitUntil(timeout: 90, every: 0.02) { !process.isRunning || monotonicNow() > (fake.lastSentAt ?? started) + 25_000_000_000 }
        let result = process.wait(timeout: 0)
        let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false)
        let timeLines = lines.filter { $0.hasPrefix("maxrss_kb=") || $0.hasPrefix("Command ") }
        status = result.status
        timedOut = result.timedOut
        stderr = lines.filter { !timeLines.contains($0) }.joined(separator: "\n")
        let signal = timeLines.first { $0.hasPrefix("Command terminated by signal") }
        crashed = signal != nil && !timedOut
        if timedOut { problems.append("still running 25 s after the fake's last message (hang); killed") }
        if let signal, crashed { problems.append("ended by a signal: \(signal)") }
        if let line = stderr.split(separator: "\n").first(where: { $0.contains("Fatal error") }) { problems.append(String(line)) }
        if let line = timeLines.first(where: { $0.hasPrefix("maxrss_kb=") }), let kilobytes = Int(line.dropFirst(10)) {
            print("hostile listener \(line)")  // for the record: the suite's worst case
            if kilobytes >= 100_000 { problems.append("max RSS \(kilobytes / 1000) MB (limit 100 MB)") }
        }
        if stderr.utf8.contains(0x1B) || stderr.unicodeScalars.contains("\u{9B}") { problems.append("terminal escapes reached stderr") }
        if stderr.utf8.count >= 8192 { problems.append("stderr is \(stderr.utf8.count) bytes (limit 8 KB)") }
    }

    var lastWords: String { stderr.split(separator: "\n").suffix(2).joined(separator: " | ") }
}

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

    // MARK: Running and judging

    /// Runs each scenario on each of its outputs, 8 at a time, and fails once per problem found (a
    /// virtual card's run is about 4 s of paced audio, mostly waiting).
    func run(_ scenarios: [Scenario], file: StaticString = #filePath, line: UInt = #line) {
        let runs = scenarios.flatMap { scenario in scenario.outputs.map { (scenario, $0) } }
        let reports = concurrentMap(runs, limit: 8) { scenario, output in
            let started = Date()
            let problems = Self.play(scenario, output: output)
            return (problems, Date().timeIntervalSince(started))
        }
        for ((scenario, output), (problems, seconds)) in zip(runs, reports) {
            let label = "[\(scenario.name) | \(output)]"
            print("hostile \(problems.isEmpty ? "PASS" : "FAIL") \(label) \(String(format: "%.1f", seconds)) s")
            for problem in problems { XCTFail("\(label) \(problem)", file: file, line: line) }
        }
    }

    static func play(_ scenario: Scenario, output kind: String) -> [String] {
        let stream = scenario.stream
        do {
            let fake = try FakeBroadcaster(stream: stream, paced: kind == "virtual", clockAnswer: scenario.clock) { c in
                if c.index == 0 { return try scenario.first(c) }
                if !scenario.reconnects { c.fake.problem("connection \(c.index + 1): the listener reconnected though nothing ended its connection") }
                try c.serveAll()
            }
            defer { fake.stop() }
            // HOSTILE_KEEP=1 keeps the recordings (and prints where) to look into a failure.
            let keep = ProcessInfo.processInfo.environment["HOSTILE_KEEP"] != nil
            let directory = try temporaryDirectory()
            defer { if keep { print("kept \(directory) for [\(scenario.name) | \(kind)]") } else { try? FileManager.default.removeItem(atPath: directory) } }
            let path = "\(directory)/out.wav"
            let run = try ListenerRun(fake: fake, output: "\(kind):\(path)")
            fake.stop()
            var problems = run.problems + fake.problems + helloProblems(fake)
            switch scenario.expect {
            case _ where run.timedOut || run.crashed: break
            case .exit(let status, let mentioning):
                if run.status != status { problems.append("exited with status \(run.status), expected \(status): \(run.lastWords)") }
                if let mentioning, !run.stderr.lowercased().contains(mentioning) { problems.append("stderr does not mention \"\(mentioning)\": \(run.lastWords)") }
            case .timeline(let tone, let settle):
                guard run.status == 0 else {
                    problems.append("exited with status \(run.status), expected 0: \(run.lastWords)")
                    break
                }
                problems += try timelineProblems(path: path, tone: tone, settle: settle, origin: fake.timelineOrigin)
            case .audio(let pieces):
                guard run.status == 0 else {
                    problems.append("exited with status \(run.status), expected 0: \(run.lastWords)")
                    break
                }
                if scenario.reconnects && fake.acceptedConnections.count < 2 { problems.append("never reconnected") }
                problems += try audioProblems(path: path, kind: kind, stream: stream, pieces: pieces, origin: fake.timelineOrigin)
            }
            return problems
        } catch {
            return ["\(error)"]
        }
    }

    /// The listener's first message on each connection must be its Hello, in this build's protocol.
    static func helloProblems(_ fake: FakeBroadcaster) -> [String] {
        fake.acceptedConnections.compactMap { c in
            switch c.firstMessage?.body {
            case .hello(let hello)?:
                hello.protocolVersion == partyCastProtocolVersion ? nil
                    : "connection \(c.index + 1): Hello with protocol \(hello.protocolVersion), expected \(partyCastProtocolVersion)"
            case let body?: "connection \(c.index + 1): the listener's first message was \(String(describing: body).prefix { $0 != "(" }), not Hello"
            case nil: "connection \(c.index + 1): the listener sent nothing"
            }
        }
    }

    static func audioProblems(path: String, kind: String, stream: ToneStream, pieces: [Piece], origin: Int64) throws -> [String] {
        let audio = try readAudio(path)
        let perChunk = ToneStream.framesPerChunk * ToneStream.channels
        let played = pieces.reduce(0) { n, piece in if case .chunks(let r) = piece { n + r.count } else { n } }
        let concealed = pieces.reduce(0) { n, piece in if case .concealed(let c) = piece { n + c } else { n } }
        let chunks = played + concealed

        if kind == "virtual" { return virtualProblems(audio, path: path, playedChunks: played, concealedChunks: concealed, codec: stream.codec, origin: origin) }

        if stream.codec == .pcm {
            // Exactly the accepted chunks, concealed ones as silence, bit for bit.
            var expected: [Float] = []
            for piece in pieces {
                switch piece {
                case .chunks(let r): expected += pcmAsRead[r.lowerBound * perChunk..<r.upperBound * perChunk]
                case .concealed(let n): expected += [Float](repeating: 0, count: n * perChunk)
                }
            }
            guard audio.samples != expected else { return [] }
            let firstDifference = zip(audio.samples, expected).enumerated().first { $1.0 != $1.1 }?.offset ?? min(audio.samples.count, expected.count)
            return ["the WAV holds \(String(format: "%g", Double(audio.samples.count) / Double(perChunk))) chunks of audio, expected \(chunks); "
                    + "first difference in chunk \(firstDifference / perChunk) (frame \(firstDifference / ToneStream.channels))"]
        }

        // Opus: the decoder's delay is trimmed, so frame i of the WAV is frame i of the source.
        // Each piece of good chunks must be close to the source, leaving out the first two chunks
        // of the stream and after a concealment, where the decoder is still settling (after a long
        // run of lost packets, libopus takes more than one 20 ms packet to converge again).
        var problems: [String] = []
        let expectedFrames = chunks * ToneStream.framesPerChunk - stream.preSkip
        if audio.frames != expectedFrames { problems.append("the WAV holds \(audio.frames) frames, expected \(expectedFrames)") }
        for case .chunks(let r) in pieces {
            let from = (r.lowerBound + 2) * perChunk - stream.preSkip * ToneStream.channels
            let to = min(r.upperBound * perChunk - stream.preSkip * ToneStream.channels, audio.samples.count)
            guard from < to else { problems.append("chunks \(r) are missing"); continue }
            let quality = snr(audio.samples[from..<to], stream.samples[from..<to])
            if quality < 20 { problems.append("chunks \(r): SNR \(String(format: "%.1f", quality)) dB against the source (want >= 20)") }
        }
        return problems
    }

    /// The virtual card's recording against the timeline: each 10 ms window 30 ms or more inside a
    /// range of `tone` chunks (`settle` ms after a start other than the stream's) must hold the
    /// tone, and each 30 ms or more outside all of them (up to chunk 100's end) silence.
    static func timelineProblems(path: String, tone: [Range<Int>], settle: Int, origin: Int64) throws -> [String] {
        let audio = try readAudio(path)
        guard let json = FileManager.default.contents(atPath: path + ".json"),
              let clock = try? JSONSerialization.jsonObject(with: json) as? [String: Any], let t0 = (clock["t0_ns"] as? NSNumber)?.int64Value else {
            return ["no readable \(path).json"]
        }
        let window = ToneStream.rate / 100 * ToneStream.channels
        var problems: [String] = []
        for start in stride(from: 0, to: audio.samples.count - window + 1, by: window) {
            // The window's middle, in ms of the timeline (chunk k starts at 20k ms).
            let middle = Double(start / ToneStream.channels) / Double(ToneStream.rate) * 1000 + 5 - Double(origin - t0) / 1e6
            let distances = tone.map { r in min(middle - Double(r.lowerBound * 20), Double(r.upperBound * 20) - middle) }
            guard let inside = distances.max(), middle < 2000 || inside > 0 else { continue }
            let settled = tone.contains { r in middle - Double(r.lowerBound * 20) >= Double(r.lowerBound == 0 ? 30 : settle) && Double(r.upperBound * 20) - middle >= 30 }
            let rms = (audio.samples[start..<start + window].reduce(0.0) { $0 + Double($1) * Double($1) } / Double(window)).squareRoot()
            if settled && abs(rms - ToneStream.toneRMS) > 0.2 * ToneStream.toneRMS {
                problems.append("no tone at \(Int(middle)) ms of the timeline (RMS \(String(format: "%.3f", rms)))")
            } else if inside <= -30 && rms > 0.05 * ToneStream.toneRMS {
                problems.append("sound at \(Int(middle)) ms of the timeline, where there should be none (RMS \(String(format: "%.3f", rms)))")
            }
        }
        return problems.count > 5 ? Array(problems.prefix(5)) + ["and \(problems.count - 5) more windows"] : problems
    }

    /// The virtual card records in real time from t0 (PATH.json): the tone must start at chunk 0's
    /// presentation time and last as long as the chunks played, each within 100 ms, judged by 10 ms
    /// windows whose RMS is the tone's within 20 %.
    static func virtualProblems(_ audio: DecodedAudio, path: String, playedChunks: Int, concealedChunks: Int,
                                codec: ToneStream.Codec, origin: Int64) -> [String] {
        guard let json = FileManager.default.contents(atPath: path + ".json"),
              let clock = try? JSONSerialization.jsonObject(with: json) as? [String: Any], let t0 = (clock["t0_ns"] as? NSNumber)?.int64Value else {
            return ["no readable \(path).json"]
        }
        let window = ToneStream.rate / 100 * ToneStream.channels
        let tone = stride(from: 0, to: audio.samples.count - window + 1, by: window).map { start in
            let power = audio.samples[start..<start + window].reduce(0.0) { $0 + Double($1) * Double($1) } / Double(window)
            return abs(power.squareRoot() - ToneStream.toneRMS) < 0.2 * ToneStream.toneRMS
        }
        let toneMilliseconds = tone.filter { $0 }.count * 10
        // Opus conceals a lost packet by extending the tone, which may or may not pass for it.
        let least = playedChunks * 20 - 100, most = (playedChunks + (codec == .opus ? concealedChunks : 0)) * 20 + 100
        var problems: [String] = []
        if !(least...most).contains(toneMilliseconds) { problems.append("the tone played for \(toneMilliseconds) ms, expected \(playedChunks * 20) ms") }
        if let onset = tone.firstIndex(of: true) {
            let expected = Double(origin - t0) / 1e6
            if abs(Double(onset * 10) - expected) > 100 { problems.append("the tone started at \(onset * 10) ms of the recording, expected \(Int(expected)) ms") }
        }
        return problems
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
