import FuzzDriver
import Foundation
import PartyCastClock
import PartyCastSendspin
@testable import PartyCastSendspinClient

/// Everything a Sendspin listener does with a server's messages: the client session (after a real
/// handshake with this package's server side, so sealed messages get past the crypto), then the
/// timeline that turns its events into PCM, timeline events and the stream's timing. Each record of
/// the input is a kind byte (low bits: a clear text frame, a sealed JSON message, a sealed binary
/// message, a raw binary frame; high bits: time passing), a 2-byte length, then that many bytes.
/// It must never trap; what it produces must stay whole frames, its events bounded and checked.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let profile = SendspinPlayerProfile(name: "fuzz", formats: SendspinTimeline.offered, bufferCapacity: 1 << 20, requiredLeadTimeMs: 100, minBufferMs: 100)
    var client = SendspinClientSession(profile: profile)
    var server = SendspinHandshake(serverKey: .init())
    var channel: SendspinSecureChannel?
    var pending = client.opening()
    // The opening, as a server would answer it; then hello and activate so the player role is on.
    while !pending.isEmpty, channel == nil {
        guard case .sendText(let text) = pending.removeFirst() else { continue }
        switch server.receive(text: text) {
        case .reply(let frames): for frame in frames { pending += client.receive(text: frame) }
        case .established(_, let established): channel = established
        default: return 0
        }
    }
    guard var channel else { return 0 }
    for message in [SendspinServerMessage.encryptedHello(name: "fuzz"), .activate(activeRoles: ["player@v1"])] {
        guard let sealed = try? channel.seal(text: message.encoded(transmittedAt: 0)) else { return 0 }
        _ = client.receive(binary: sealed)
    }
    let clockSync = ClockSync(clock: .system)
    clockSync.connected()
    var timeline = SendspinTimeline(clockSync: clockSync)
    var pcm: [Float] = []
    var offset = 0
    while offset + 3 <= size, !client.isEnded {
        let kind = bytes[offset]
        let length = min(Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]), size - offset - 3)
        let body = Array(bytes[(offset + 3)..<(offset + 3 + length)])
        offset += 3 + length
        let actions: [SendspinClientSession.Action]
        switch kind & 3 {
        case 0: actions = client.receive(text: body)
        case 1: actions = (try? channel.seal(text: body)).map { client.receive(binary: $0) } ?? []
        case 2: actions = (try? channel.seal(binary: [4] + body)).map { client.receive(binary: $0) } ?? []
        default: actions = client.receive(binary: body)
        }
        for action in actions {
            let event: SendspinEvent
            switch action {
            case .streamStart(let stream): event = .streamStart(stream)
            case .streamClear: event = .streamClear
            case .streamEnd: event = .streamEnd
            case let .audio(timestamp, payload): event = .audio(timestamp: timestamp, payload: payload)
            case .volume(let level):
                precondition((0...100).contains(level), "a volume out of range")
                event = .volume(level)
            case .mute(let muted): event = .mute(muted)
            case .close(let reason):
                precondition(!reason.contains("\n") && client.isEnded, "a close that does not end the session in one line")
                continue
            default: continue
            }
            pcm.removeAll(keepingCapacity: true)
            do { try timeline.apply(event, into: &pcm) } catch { continue }
            precondition(pcm.count % SendspinTimeline.format.channels == 0, "a partial frame")
            precondition(pcm.count <= client.limits.maxBinaryBytes, "more audio than one message can carry")
            let events = timeline.takeEvents()
            precondition(events.count <= SendspinTimeline.eventLimit, "events pile up")
            for case .gain(let gain, _, let ramp) in events { precondition((0...1).contains(gain) && ramp == SendspinTimeline.rampFrames, "an unchecked gain") }
        }
        precondition(client.badMessages <= client.limits.maxBadMessages, "bad messages beyond the limit")
    }
    return 0
}

@_cdecl("SendspinClientFuzzer_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv) { fuzzOneInput($0, $1) }
}
