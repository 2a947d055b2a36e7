import Foundation
@testable import PartyCastWire
import XCTest

/// The sealed record layer of a private party: what one side seals, the other opens, in order and
/// once; anything replayed, reordered, altered, reflected or made under another key ends the stream.
final class SessionRecordsTests: XCTestCase {
    func session(_ secret: String = "party") throws -> (listener: KeySession, broadcaster: KeySession) {
        let key = PartyKey(secret: secret)
        let listener = KeyHandshake.Initiator(key: key)
        let broadcaster = try XCTUnwrap(KeyHandshake.Responder(key: key, sessionID: listener.sessionID, listenerShare: listener.share))
        let finished = try XCTUnwrap(listener.finish(broadcasterShare: broadcaster.share, broadcasterConfirmation: broadcaster.confirmation))
        return (finished.session, broadcaster.session)
    }

    func frames(_ count: Int) throws -> [[UInt8]] {
        try (0..<count).map { i in
            var envelope = PCEnvelope()
            var chunk = PCAudioChunk()
            chunk.sequence = UInt64(i)
            chunk.payload = Data((0..<(100 + i)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) })
            envelope.body = .audioChunk(chunk)
            return try WireFraming.encode(envelope)
        }
    }

    func decode(_ bytes: [UInt8], _ opener: RecordOpener, pieces: Int = 1) throws(WireError) -> [UInt64] {
        var decoder = WireFrameDecoder()
        decoder.openRecords(with: opener)
        var sequences: [UInt64] = []
        let size = max(1, bytes.count / pieces)
        for start in stride(from: 0, to: bytes.count, by: size) {
            decoder.push(bytes[start..<min(bytes.count, start + size)])
            while let envelope = try decoder.next() {
                if case .audioChunk(let chunk)? = envelope.body { sequences.append(chunk.sequence) }
            }
        }
        return sequences
    }

    func testSealedFramesOpenInOrderHoweverTheyArrive() throws {
        let (listener, broadcaster) = try session()
        var sealer = broadcaster.sealer(sending: .broadcasterToListener)
        let frames = try frames(5)
        // One write of two frames, and three writes of one.
        let records = sealer.seal(frames[0] + frames[1]) + sealer.seal(frames[2]) + sealer.seal(frames[3]) + sealer.seal(frames[4])
        for pieces in [1, 3, records.count] {
            XCTAssertEqual(try decode(records, listener.opener(receiving: .broadcasterToListener), pieces: pieces), [0, 1, 2, 3, 4])
        }
        // No plaintext byte run of a payload survives sealing.
        XCTAssertNil(records.firstRange(of: frames[2].suffix(16)))
    }

    func testReplayedReorderedAlteredReflectedOrForeignRecordsAreRefused() throws {
        let (listener, broadcaster) = try session()
        let frames = try frames(3)
        var sealer = broadcaster.sealer(sending: .broadcasterToListener)
        let records = frames.map { sealer.seal($0) }
        let opener = listener.opener(receiving: .broadcasterToListener)
        func refused(_ bytes: [UInt8], _ why: String) {
            XCTAssertThrowsError(try decode(bytes, opener), why) { error in
                guard case .unsealable = error as? WireError else { return XCTFail("\(why): \(error)") }
            }
        }
        refused(records[0] + records[0], "a replayed record")
        refused(records[1] + records[0], "reordered records")
        refused(records[0] + records[2], "a dropped record")
        var altered = records[0]
        altered[10] ^= 1
        refused(altered, "an altered record")
        var lengthened = records[0]
        lengthened[3] &+= 1
        refused(lengthened + [0], "a record whose length was changed")
        refused(records[0] + frames[1], "a plaintext frame injected after a sealed one")
        var listenerSealer = listener.sealer(sending: .listenerToBroadcaster)
        refused(listenerSealer.seal(frames[0]), "a record reflected back in the other direction")
        let (other, _) = try session()
        var foreign = other.sealer(sending: .broadcasterToListener)
        refused(foreign.seal(frames[0]), "a record from another handshake's session")
        var oversized = [UInt8]([0x7f, 0xff, 0xff, 0xff])
        oversized += [UInt8](repeating: 0, count: 16)
        refused(oversized, "a record that claims 2 GiB")
    }

    /// Bytes that came in the same read as the handshake's last plaintext message are sealed ones.
    func testBytesAfterTheLastPlaintextMessageAreOpened() throws {
        let (listener, broadcaster) = try session()
        let frames = try frames(2)
        var sealer = broadcaster.sealer(sending: .broadcasterToListener)
        var decoder = WireFrameDecoder()
        decoder.push(frames[0] + sealer.seal(frames[1]).prefix(7))
        XCTAssertEqual(try decoder.next().map { if case .audioChunk(let c)? = $0.body { c.sequence } else { 99 } }, UInt64(0))
        decoder.openRecords(with: listener.opener(receiving: .broadcasterToListener))
        XCTAssertNil(try decoder.next())
        var again = broadcaster.sealer(sending: .broadcasterToListener)
        decoder.push(again.seal(frames[1]).dropFirst(7))
        XCTAssertEqual(try decoder.next().map { if case .audioChunk(let c)? = $0.body { c.sequence } else { 99 } }, UInt64(1))
    }

    func testReplayWindowTakesEachSequenceOnceAndLateOnesWithinItsReach() {
        var window = ReplayWindow()
        XCTAssertTrue(window.accept(5))
        XCTAssertFalse(window.accept(5))
        XCTAssertTrue(window.accept(3), "late, but not seen")
        XCTAssertFalse(window.accept(3))
        XCTAssertTrue(window.accept(100))
        XCTAssertTrue(window.accept(37), "63 behind: still within reach")
        XCTAssertFalse(window.accept(36), "64 behind: too old to tell")
        XCTAssertFalse(window.accept(5))
        XCTAssertFalse(window.accept(0))
        XCTAssertTrue(window.accept(1000))
        XCTAssertFalse(window.accept(100))
    }
}
