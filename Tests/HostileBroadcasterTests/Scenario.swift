import Foundation
import PartyCastCodec
import PartyCastTestSupport
import PartyCastWire

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
