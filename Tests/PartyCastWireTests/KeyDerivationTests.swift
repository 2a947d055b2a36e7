import Foundation
@testable import PartyCastWire
import XCTest

/// The private party's keys, records and clock datagrams on libsodium, against what Python's
/// hashlib, hmac and cryptography (OpenSSL) compute for the same inputs (the figures below; RFC 4231's test case 2 for
/// HMAC-SHA-512), so a peer written against those libraries interoperates.
final class KeyDerivationTests: XCTestCase {
    let isk = [UInt8](0..<64)
    let sessionID = [UInt8](100..<116)

    func hex(_ text: String) -> [UInt8] {
        stride(from: 0, to: text.count, by: 2).map { UInt8(text.dropFirst($0).prefix(2), radix: 16)! }
    }

    func testSessionKeysAreKeyedBLAKE2bOverPurposeAndSessionID() {
        let session = KeySession(intermediateSessionKey: isk, sessionID: sessionID)
        // hashlib.blake2b(b"PartyCast stream records" + sid, key=isk, digest_size=32)
        XCTAssertEqual(session.recordKey.bytes, hex("6a3b6e930e2b696169a42d4750bf187cdac41453b0d0272b64acc6206d93befa"))
        // The clock key, through the MAC it makes: hmac.new(clock_key, b"the clock's bytes", sha256)
        let clockKey = SecretKey.derived(key: isk, message: Array("PartyCast clock datagrams".utf8) + sessionID)
        XCTAssertEqual(clockKey.bytes, hex("c1b28e1d0da40aea3341ac3891297b575e6eda874cf2cd8b97ee30f431cf34e4"))
        XCTAssertEqual(clockKey.hmacSHA256(Array("the clock's bytes".utf8)),
                       hex("9c19c7a4279c55e0c44006e47dca8123cede9ce592e78957d2732dc32ee24830"))
    }

    func testClockDatagramsAreSealedOverTokenSequenceAndDirection() throws {
        let key = ClockDatagramKey(SecretKey(hex("c1b28e1d0da40aea3341ac3891297b575e6eda874cf2cd8b97ee30f431cf34e4")))
        var request = PCClockDatagram()
        (request.token, request.sequence, request.t1) = (0x0102_0304_0506_0708, 42, 1_000_000_007)
        key.seal(&request, .listenerToBroadcaster)
        // ChaCha20Poly1305(clock_key).encrypt(nonce = 2 (4 bytes) ‖ sequence (8), t1 ‖ t2 ‖ t3, aad = token ‖ sequence)
        XCTAssertEqual([UInt8](request.sealed), hex("be20bac85b65b01e4ce6517c381187be83a50d3294ebeacf8accd075d09460682e9265fead63b406"))
        XCTAssertEqual(request.t1, 0, "no time in the clear")
        var answer = PCClockDatagram()
        (answer.token, answer.sequence, answer.t1, answer.t2, answer.t3, answer.answer) = (0x0102_0304_0506_0708, 42, 1_000_000_007, 1_000_050_000, 1_000_060_000, true)
        key.seal(&answer, .broadcasterToListener)
        // The same with nonce = 1 (an answer) and the three times.
        XCTAssertEqual([UInt8](answer.sealed), hex("48c1a33ff669ae03ab7ca048ea09c006b5731aa177fee231a5f01014aaf44f170ba4eb0317cea2f2"))
        let opened = try XCTUnwrap(key.open(answer, .broadcasterToListener))
        XCTAssertEqual([opened.t1, opened.t2, opened.t3], [1_000_000_007, 1_000_050_000, 1_000_060_000])
        XCTAssertTrue(opened.answer)
        var moved = answer
        moved.sequence = 43
        XCTAssertNil(key.open(moved, .broadcasterToListener), "bound to its sequence")
        moved = answer
        moved.token ^= 1
        XCTAssertNil(key.open(moved, .broadcasterToListener), "bound to its connection's token")
    }

    func testHMACSHA512TakesKeysOfAnyLength() {
        XCTAssertEqual(SecretKey(Array("Jefe".utf8)).hmacSHA512(Array("what do ya want for nothing?".utf8)),
                       hex("164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"))
    }

    func testRecordsAreChaCha20Poly1305OverDirectionAndCount() throws {
        let session = KeySession(intermediateSessionKey: isk, sessionID: sessionID)
        var sealer = session.sealer(sending: .broadcasterToListener)
        let plaintext = Array("hello, listener".utf8)
        // length ‖ ChaCha20Poly1305(record_key).encrypt(nonce = 1 (4 bytes) ‖ count (8 bytes), plaintext, aad = length)
        XCTAssertEqual(sealer.seal(plaintext), hex("0000001f6c5cd3d5c74692237f39a4870e3efe2de3f183da3df86adae2ec968e5d599b"))
        XCTAssertEqual(sealer.seal(plaintext), hex("0000001f50b353db3846bda0cc56cbef10444d19a5ca2a993a126354c48368fb72bf16"))
        var opener = session.opener(receiving: .broadcasterToListener)
        opener.push(hex("0000001f6c5cd3d5c74692237f39a4870e3efe2de3f183da3df86adae2ec968e5d599b"))
        XCTAssertEqual(try opener.next(), plaintext)
    }
}
