import Foundation
import PartyCastWire
import XCTest

final class WireFramingTests: XCTestCase {
    func sampleMessages() -> [PCEnvelope] {
        var hello = PCHello(); hello.protocolVersion = 1; hello.listenerName = "kitchen"; hello.hostName = "pi-kitchen"
        var welcome = PCWelcome(); welcome.protocolVersion = 1; welcome.broadcasterName = "Party"; welcome.sessionID = 42
        var format = PCStreamFormat(); format.codec = .opus; format.sampleRate = 48000; format.channels = 2; format.framesPerChunk = 960; format.preSkip = 312
        var chunk = PCAudioChunk(); chunk.sequence = 7; chunk.mediaPosition = 6720; chunk.presentationNanoseconds = 123_456_789
        chunk.frameCount = 960; chunk.payload = Data((0..<300).map { UInt8($0 % 251) })
        var metadata = PCMetadata(); metadata.title = "Song"; metadata.artist = "Band"; metadata.durationFrames = 960_000
        var end = PCEndOfStream(); end.streamIndex = 1
        var goodbye = PCGoodbye(); goodbye.reason = "the broadcast is over"
        var error = PCError(); error.code = .queueOverflow; error.message = "too slow"
        var request = PCClockRequest(); request.t1 = 1
        var response = PCClockResponse(); response.t1 = 1; response.t2 = 2; response.t3 = 3
        var status = PCStatus(); status.bufferMilliseconds = 480; status.syncErrorMicroseconds = -12
        let bodies: [PCEnvelope.OneOf_Body] = [.hello(hello), .welcome(welcome), .streamFormat(format), .audioChunk(chunk), .metadata(metadata),
                                               .endOfStream(end), .goodbye(goodbye), .error(error), .clockRequest(request), .clockResponse(response), .status(status)]
        return bodies.map { body in var e = PCEnvelope(); e.body = body; return e }
    }

    func decodeAll(_ bytes: [UInt8], pieces: (Int) -> Int) throws -> [PCEnvelope] {
        var decoder = WireFrameDecoder()
        var out: [PCEnvelope] = []
        var i = 0
        while i < bytes.count {
            let n = min(pieces(i), bytes.count - i)
            decoder.push(bytes[i..<i + n])
            i += n
            while let e = try decoder.next() { out.append(e) }
        }
        return out
    }

    func testEveryMessageRoundTripsForAnySplit() throws {
        let messages = sampleMessages() + sampleMessages().reversed()
        let stream = try messages.flatMap { try WireFraming.encode($0) }
        XCTAssertEqual(try decodeAll(stream) { _ in stream.count }, messages)
        XCTAssertEqual(try decodeAll(stream) { _ in 1 }, messages)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20 {
            let seed = UInt64.random(in: 0...UInt64.max, using: &generator)
            var state = seed
            let decoded = try decodeAll(stream) { _ in
                state = state &* 6364136223846793005 &+ 1442695040888963407
                return Int(state >> 33) % 700 + 1
            }
            XCTAssertEqual(decoded, messages, "split seed \(seed)")
        }
    }

    /// A 4 GiB length prefix is refused from its four bytes alone, before any body is awaited.
    func testOversizedLengthIsRefusedBeforeAllocating() {
        var decoder = WireFrameDecoder()
        decoder.push([0xFF, 0xFF, 0xFF, 0xFF])
        XCTAssertThrowsError(try decoder.next()) { XCTAssertEqual($0 as? WireError, .messageTooLarge(claimed: UInt32.max)) }
        decoder.push([UInt8](repeating: 0, count: 100))
        XCTAssertThrowsError(try decoder.next(), "the stream stays failed")

        var atLimit = WireFrameDecoder()
        let limit = UInt32(WireFraming.maxMessageBytes + 1)
        atLimit.push([UInt8(limit >> 24), UInt8(limit >> 16 & 0xFF), UInt8(limit >> 8 & 0xFF), UInt8(limit & 0xFF)])
        XCTAssertThrowsError(try atLimit.next()) { XCTAssertEqual($0 as? WireError, .messageTooLarge(claimed: limit)) }
    }

    func testZeroLengthAndGarbage() {
        var zero = WireFrameDecoder()
        zero.push([0, 0, 0, 0])
        XCTAssertThrowsError(try zero.next()) { XCTAssertEqual($0 as? WireError, .zeroLength) }

        // A plausible length followed by bytes that are not a protobuf message.
        var garbage = WireFrameDecoder()
        garbage.push([0, 0, 0, 8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        XCTAssertThrowsError(try garbage.next()) { error in
            guard case .malformed = error as? WireError else { return XCTFail("\(error)") }
        }

        // Random bytes never crash it: they fail or wait for more.
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var decoder = WireFrameDecoder()
            decoder.push((0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            _ = try? decoder.next()
        }
    }

    func testProtocolMismatchSaysWhatToUpgrade() {
        XCTAssertNil(protocolMismatch(peerVersion: partyCastProtocolVersion, peerRole: "listener"))
        guard case .error(let error)? = protocolMismatch(peerVersion: partyCastProtocolVersion + 1, peerRole: "listener")?.body else {
            return XCTFail("no error")
        }
        XCTAssertEqual(error.code, .protocolVersionMismatch)
        XCTAssertTrue(error.message.contains("upgrade the broadcaster"), error.message)
        guard case .error(let older)? = protocolMismatch(peerVersion: 0, peerRole: "listener")?.body else { return XCTFail("no error") }
        XCTAssertTrue(older.message.contains("upgrade the listener"), older.message)
    }
}
