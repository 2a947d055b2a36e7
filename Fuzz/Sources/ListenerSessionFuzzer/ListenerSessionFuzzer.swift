import FuzzDriver
import Foundation
import PartyCastClock
@testable import PartyCastNetwork
import PartyCastWire
import SwiftProtobuf

/// Everything a listener does with a broadcaster's messages after framing — the connection gate,
/// then the stream receiver, clock answers included — for any sequence of messages with any
/// values. Each record of the input is: a kind byte (which message, and how much time passes), a
/// 2-byte length, then that many bytes parsed as that message (protobuf's own decoder; unparsable
/// bytes leave it empty). A gate that closes is replaced, as a reconnect would; the receiver
/// lives on. It must never trap, and what it produces must stay whole frames of the format.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let key = size > 0 && bytes[0] & 1 == 1 ? PartyKey(secret: "fuzzing key") : nil
    let clockSync = ClockSync(clock: .system)
    clockSync.connected()
    var gate = ConnectionGate(listenerName: "fuzz", hostName: "fuzz", listenerID: "1", wantsSync: true, key: key)
    var receiver = StreamReceiver(clockSync: clockSync)
    var pcm: [Float] = []
    var now: Int64 = 1_000_000_000
    var offset = min(size, 1)
    while offset + 3 <= size {
        let kind = bytes[offset]
        let length = min(Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]), size - offset - 3)
        let body = Data(bytes[(offset + 3)..<(offset + 3 + length)])
        offset += 3 + length
        now += Int64(kind >> 4) * 5_000_000
        for verdict in gate.handle(envelope(kind: kind & 0x0F, body), arrivedAt: now) {
            switch verdict {
            case .deliver(let message):
                pcm.removeAll(keepingCapacity: true)
                switch receiver.receive(message, arrivedAt: now, into: &pcm) {
                case .continues, .ended: break
                case .violation: gate = ConnectionGate(listenerName: "fuzz", hostName: "fuzz", listenerID: "1", wantsSync: true, key: key)
                }
                if let channels = receiver.spec?.format.channels { precondition(pcm.count % channels == 0, "a partial frame") }
                // A chunk keeps at most its frames per chunk, and a PCM chunk fits one message.
                precondition(pcm.count <= WireFraming.maxMessageBytes / 4, "more audio than one chunk can carry")
                // Timeline events reach the player checked, and a player that never takes them
                // cannot make them pile up.
                let events = receiver.takeEvents()
                precondition(events.count <= StreamReceiver.eventLimit, "events pile up")
                for event in events {
                    switch event {
                    case .withdraw(let frame):
                        precondition((0..<Int(StreamReceiver.maximumPosition)).contains(frame), "a withdraw off the timeline")
                    case .gain(let gain, let frame, let ramp):
                        precondition((0...1).contains(gain), "a gain outside 0…1")
                        precondition((0..<Int(StreamReceiver.maximumPosition)).contains(frame), "a gain off the timeline")
                        precondition((0...StreamReceiver.longestRampSeconds * 384_000).contains(ramp), "an endless ramp")
                    }
                }
                if let offset = receiver.latencyOffsetMilliseconds { precondition(abs(offset) <= 2000, "a latency offset out of range") }
            case .clock(let sample):
                clockSync.record(sample)
            case .close, .fail:
                gate = ConnectionGate(listenerName: "fuzz", hostName: "fuzz", listenerID: "1", wantsSync: true, key: key)
            case .reply, .startSealing:
                break  // the connection's to write and seal; this fuzzer starts after framing
            }
        }
    }
    return 0
}

/// The message of kind `kind` parsed from `bytes` (empty where they don't parse).
func envelope(kind: UInt8, _ bytes: Data) -> PCEnvelope {
    var envelope = PCEnvelope()
    switch kind {
    case 0: envelope.body = .welcome((try? PCWelcome(serializedBytes: bytes)) ?? PCWelcome())
    case 1, 2: envelope.body = .streamFormat((try? PCStreamFormat(serializedBytes: bytes)) ?? PCStreamFormat())
    case 3, 4, 5, 6: envelope.body = .audioChunk((try? PCAudioChunk(serializedBytes: bytes)) ?? PCAudioChunk())
    case 7: envelope.body = .metadata((try? PCMetadata(serializedBytes: bytes)) ?? PCMetadata())
    case 8: envelope.body = .clockResponse((try? PCClockResponse(serializedBytes: bytes)) ?? PCClockResponse())
    case 9: envelope.body = .keyChallenge((try? PCKeyChallenge(serializedBytes: bytes)) ?? PCKeyChallenge())
    case 10: envelope.body = .goodbye((try? PCGoodbye(serializedBytes: bytes)) ?? PCGoodbye())
    case 11: envelope.body = .error((try? PCError(serializedBytes: bytes)) ?? PCError())
    case 12: envelope.body = .endOfStream((try? PCEndOfStream(serializedBytes: bytes)) ?? PCEndOfStream())
    case 13: envelope.body = .withdraw((try? PCWithdraw(serializedBytes: bytes)) ?? PCWithdraw())
    case 14: envelope.body = .gain((try? PCGain(serializedBytes: bytes)) ?? PCGain())
    default: envelope = (try? PCEnvelope(serializedBytes: bytes)) ?? PCEnvelope()
    }
    return envelope
}

/// A well-formed session to start the corpus from: Welcome, a PCM and an Opus-looking format, metadata,
/// chunks on a consistent timeline, a clock answer, goodbye. Mutations of it reach the deep states.
func seed() throws -> [UInt8] {
    var records: [UInt8] = [0]
    func add(_ kind: UInt8, _ message: some SwiftProtobuf.Message) throws {
        let bytes: [UInt8] = try message.serializedBytes()
        records += [kind, UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
    }
    var welcome = PCWelcome()
    welcome.protocolVersion = partyCastProtocolVersion
    welcome.sessionID = 42
    welcome.broadcasterName = "seed"
    try add(0, welcome)
    var format = PCStreamFormat()
    format.codec = .pcmF32Le
    format.sampleRate = 48000
    format.channels = 2
    format.framesPerChunk = 120
    try add(1, format)
    var metadata = PCMetadata()
    metadata.title = "Title"
    metadata.durationFrames = 48000
    try add(7, metadata)
    for k in 0..<4 {
        var chunk = PCAudioChunk()
        chunk.sequence = UInt64(k)
        chunk.mediaPosition = UInt64(k * 120)
        chunk.presentationNanoseconds = 2_000_000_000 + Int64(k) * 2_500_000
        chunk.frameCount = 120
        chunk.payload = Data(repeating: 0x3F, count: 120 * 2 * 4)
        try add(0x13, chunk)
    }
    var withdraw = PCWithdraw()
    withdraw.fromPosition = 240
    try add(13, withdraw)
    var gain = PCGain()
    gain.atPosition = 240
    gain.gain = 0.5
    gain.rampFrames = 120
    try add(14, gain)
    var answer = PCClockResponse()
    answer.t1 = 1_000_000_000
    answer.t2 = 5_000_000_000
    answer.t3 = 5_000_010_000
    try add(8, answer)
    try add(10, PCGoodbye())
    return records
}

@_cdecl("ListenerSessionFuzzer_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    // `--write-seed PATH` writes the seed session instead of fuzzing (make fuzz puts it in the corpus).
    if argc == 3, let flag = argv?[1], String(cString: flag) == "--write-seed", let path = argv?[2] {
        guard let bytes = try? seed(), FileManager.default.createFile(atPath: String(cString: path), contents: Data(bytes)) else { return 1 }
        return 0
    }
    return runLibFuzzer(argc, argv) { fuzzOneInput($0, $1) }
}
