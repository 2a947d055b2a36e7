import PartyCastSendspin
import PartyCastSources
import XCTest

/// Random and mutated messages against the session and the frame parser: nothing traps, every
/// message is either acted on, counted bad or skipped, and the session ends only by saying why.
final class SendspinFuzzTests: XCTestCase {
    static let seeds = [
        SendspinSessionTests.specHello,
        #"{"type":"client/time","payload":{"client_transmitted":123456}}"#,
        #"{"type":"client/state","payload":{"state":"synchronized","player":{"volume":40,"muted":false,"output_delay_ms":10}}}"#,
        #"{"type":"client/command","payload":{"controller":{"command":"volume","volume":30}}}"#,
        #"{"type":"client/goodbye","payload":{"reason":"restart"}}"#,
        #"{"type":"stream/request-format","payload":{"player":{"codec":"opus"}}}"#,
        #"{"type":"client/state","payload":{"artwork":{"channels":[{"source":"album","format":"jpeg","width":300,"height":300}]}}}"#,
        #"{"type":"stream/request-format","payload":{"artwork":{"channel":0,"source":"artist","media_width":64}}}"#,
    ]
    /// Splices that hit the decoder's edges: huge and fractional numbers, wrong types, deep nesting.
    static let splices = ["1e400", "-9223372036854775809", "9223372036854775807", "0.5", "null", "[]", "{}", "\"\u{0}\"",
                          String(repeating: "[", count: 300), "\"\\ud800\"", "true", "\"player@v1\""]

    func mutate(_ text: String, _ random: inout SplitMix64) -> [UInt8] {
        var bytes = Array(text.utf8)
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let at = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0 where !bytes.isEmpty: bytes[at] = UInt8.random(in: 0...255, using: &random)
            case 1: bytes = Array(bytes.prefix(at))
            case 2: bytes.insert(contentsOf: Self.splices.randomElement(using: &random)!.utf8, at: at)
            case 3 where !bytes.isEmpty: bytes.remove(at: at)
            default: bytes.insert(contentsOf: (0..<Int.random(in: 1...16, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }, at: at)
            }
        }
        return bytes
    }

    func testMutatedMessagesAreActedOnCountedOrSkippedAndNeverTrap() {
        var random = SplitMix64(seed: 28)
        var closes = 0
        for round in 0..<400 {
            var session = SendspinServerSession(serverID: "s", serverName: "S", transport: round.isMultiple(of: 2) ? .plain : .encrypted(clientID: "c"),
                                                encodable: [.pcm, .opus])
            // Half the rounds start joined, so the mutations reach the joined phase's handlers too.
            if round % 4 < 2 { _ = session.receiveText(Array(SendspinSessionTests.specHello.utf8), receivedAt: 0) }
            for _ in 0..<40 {
                let before = (session.badMessages, session.skippedMessages, session.isEnded)
                let message = Int.random(in: 0..<10, using: &random) == 0
                    ? Array(Self.seeds.randomElement(using: &random)!.utf8)
                    : mutate(Self.seeds.randomElement(using: &random)!, &random)
                let actions = session.receiveText(message, receivedAt: Int64.random(in: .min ... .max, using: &random))
                if before.2 {
                    XCTAssertEqual(actions, [], "an ended session acts on nothing")
                    continue
                }
                let counted = session.badMessages > before.0 || session.skippedMessages > before.1
                XCTAssertTrue(counted || !actions.isEmpty || isQuietlyValid(message), "round \(round): \(String(decoding: message, as: UTF8.self)) left no trace")
                let closing = actions.filter { if case .close = $0 { true } else { false } }
                XCTAssertEqual(closing.isEmpty, !session.isEnded, "the session ends exactly when it says why")
                closes += closing.count
                XCTAssertLessThanOrEqual(session.badMessages, session.limits.maxBadMessages)
                for case .send(let reply) in actions { XCTAssertFalse(reply.encoded(transmittedAt: 0).isEmpty) }
            }
        }
        XCTAssertGreaterThan(closes, 0, "the run reached the sessions' endings")
    }

    /// A well-formed message that asks for nothing: a client/state without fields, a command with no controller.
    func isQuietlyValid(_ message: [UInt8]) -> Bool {
        guard let decoded = try? SendspinClientMessage.decode(message) else { return false }
        switch decoded {
        case .state(let state): return state.available == nil && state.state == nil && state.player == nil
        default: return false
        }
    }

    /// Picture headers (a cover is the party's, but from any file a remote may queue), mutated: none
    /// traps, and whatever is read has a size.
    func testMutatedPictureHeadersNeverTrap() {
        var random = SplitMix64(seed: 95)
        let png = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8) + [0, 0, 1, 44, 0, 0, 0, 200, 8, 2, 0, 0, 0]
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0, 16] + Array(repeating: 0, count: 14) + [0xFF, 0xC0, 0, 17, 8, 0, 200, 1, 44, 3]
        let bmp: [UInt8] = [0x42, 0x4D] + Array(repeating: 0, count: 16) + [44, 1, 0, 0, 56, 255, 255, 255]
        for base in [png, jpeg, bmp] {
            XCTAssertNotNil(SendspinPicture(base), "the unmutated header reads")
            for _ in 0..<5_000 {
                var bytes = base
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    let at = Int.random(in: 0..<bytes.count, using: &random)
                    if Bool.random(using: &random) { bytes[at] = UInt8.random(in: 0...255, using: &random) } else { bytes = Array(bytes.prefix(at)) }
                    if bytes.isEmpty { break }
                }
                if let picture = SendspinPicture(bytes) { XCTAssertTrue(picture.width > 0 && picture.height > 0) }
            }
        }
    }

    func testRandomBinaryMessagesParseWithinTheirBounds() {
        var random = SplitMix64(seed: 4)
        for _ in 0..<20_000 {
            let bytes = (0..<Int.random(in: 0...32, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            for header in [SendspinFrame.AudioHeader.spec, .withSendAhead] {
                let needed = bytes.first == SendspinFrame.audioType ? header.size : 9
                guard let frame = SendspinFrame(bytes[...], audioHeader: header) else {
                    XCTAssertLessThan(bytes.count, needed)
                    continue
                }
                XCTAssertEqual(frame.payload.count, bytes.count - needed)
                XCTAssertEqual(frame.type, bytes[0])
            }
        }
    }
}
