@testable import PartyCastWire
import XCTest

/// CPace against the test vectors of draft-irtf-cfrg-cpace (cfrg/draft-irtf-cfrg-cpace at 8fb4056),
/// appendix "Test vector for CPace using group ristretto255 and hash SHA-512" and the string
/// utilities' vectors ("prepend_len test vectors", "Testvector for lv_cat()"), copied byte for byte.
final class CPaceTests: XCTestCase {
    // "Test vectors for calculate_generator with group ristretto255": inputs.
    let password = Array("Password".utf8)
    let channel = hex("0b415f696e69746961746f720b425f726573706f6e646572")
    let sessionID = hex("7e4b4791d6a8ef019b936c79fb7f2c57")
    // "Test vector for message from A" / "from B".
    let ya = hex("da3d23700a9e5699258aef94dc060dfda5ebb61f02a5ea77fad53f4ff0976d08")
    let yb = hex("d2316b454718c35362d83d69df6320f38578ed5984651435e2949762d900b80d")
    let initiatorShare = hex("d6bac480f2c386c394efc7c47adb9925dcd2630b64f240c50f8d0eec482b9157")
    let responderShare = hex("3ea7e0b19560d7c0b0f5734f63b955286dfa8232b5ebe63324e2d9e7433f7258")
    // "Test vector for secret points K".
    let sharedPoint = hex("80b69a8a76457ab6a4d7f887a4bf6b55a2f80ac19c333f917a05fc9887c8b40f")

    func testStringUtilitiesMatchTheDraft() {
        XCTAssertEqual(CPace.prependLength([]), hex("00"))
        XCTAssertEqual(CPace.prependLength(Array("1234".utf8)), hex("0431323334"))
        XCTAssertEqual(CPace.prependLength((0..<127).map(UInt8.init)), hex("7f") + (0..<127).map(UInt8.init))
        XCTAssertEqual(CPace.prependLength((0..<128).map(UInt8.init)), hex("8001") + (0..<128).map(UInt8.init))
        XCTAssertEqual(CPace.lengthValueConcatenation(Array("1234".utf8), Array("5".utf8), [], Array("678".utf8)),
                       hex("043132333401350003363738"))
    }

    func testGeneratorMatchesTheDraft() {
        let generatorString = CPace.generatorString(password: password, channel: channel, sessionID: sessionID)
        XCTAssertEqual(generatorString, hex("""
            11435061636552697374726574746f3235350850617373776f726464
            00000000000000000000000000000000000000000000000000000000
            00000000000000000000000000000000000000000000000000000000
            00000000000000000000000000000000000000000000000000000000
            00000000000000000000000000000000180b415f696e69746961746f
            720b425f726573706f6e646572107e4b4791d6a8ef019b936c79fb7f
            2c57
            """))
        XCTAssertEqual(CPace.sha512(generatorString), hex("""
            da6d3ddc8802fca9058755ffd3ebde08a9c2c74945901a258482a288
            b6663af06bf645c93cd1c51512307199c80e84908916d983b34af772
            05f90851a657ee27
            """))
        XCTAssertEqual(CPace.generator(password: password, channel: channel, sessionID: sessionID),
                       hex("222b6b195fe84b1652badb6f6a3ae3d24341e7306967f0b8115b40d5698c7e56"))
    }

    func testSharesSecretPointAndISKMatchTheDraft() throws {
        let generator = CPace.generator(password: password, channel: channel, sessionID: sessionID)
        XCTAssertEqual(CPace.multiply(scalar: ya, point: generator), initiatorShare)
        XCTAssertEqual(CPace.multiply(scalar: yb, point: generator), responderShare)
        XCTAssertEqual(CPace.multiply(scalar: ya, point: responderShare), sharedPoint)
        XCTAssertEqual(CPace.multiply(scalar: yb, point: initiatorShare), sharedPoint)
        // "Test vector for ISK calculation initiator/responder".
        let transcript = CPace.initiatorResponderTranscript(initiatorShare: initiatorShare, initiatorData: Array("ADa".utf8),
                                                            responderShare: responderShare, responderData: Array("ADb".utf8))
        XCTAssertEqual(transcript, hex("""
            20d6bac480f2c386c394efc7c47adb9925dcd2630b64f240c50f8d0e
            ec482b915703414461203ea7e0b19560d7c0b0f5734f63b955286dfa
            8232b5ebe63324e2d9e7433f725803414462
            """))
        XCTAssertEqual(CPace.intermediateSessionKey(sessionID: sessionID, sharedPoint: sharedPoint, transcript: transcript), hex("""
            b69effbf61b51d56401c0f65601abe428de8206feaaf0e32198896dc
            ae7b35cd2b38950a39dfd5d4a79164614c2984f7daa460b588c1e80c
            3fa2068af7900447
            """))
    }

    /// "Test case for scalar_mult with valid inputs" and "Invalid inputs for scalar_mult_vfy": a
    /// string that is no encoding of a group element, and the identity, both give G.I (nil here).
    func testScalarMultVfyAcceptsValidAndRejectsInvalidPointsAsTheDraftSays() {
        let s = hex("7cd0e075fa7955ba52c02759a6c90dbbfc10e6d40aea8d283e407d88cf538a05")
        XCTAssertEqual(CPace.multiply(scalar: s, point: hex("2c3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c")),
                       hex("7c13645fe790a468f62c39beb7388e541d8405d1ade69d1778c5fe3e7f6b600e"))
        XCTAssertNil(CPace.multiply(scalar: s, point: hex("2b3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c")))
        XCTAssertNil(CPace.multiply(scalar: s, point: [UInt8](repeating: 0, count: 32)))
        XCTAssertNil(CPace.multiply(scalar: s, point: [UInt8](repeating: 0, count: 31)), "a short string")
    }

    func testAWrongKeyGivesAnotherISKAndNoConfirmation() throws {
        let sid = KeyHandshake.randomBytes(KeyHandshake.sessionIDBytes)
        let listener = KeyHandshake.Initiator(key: PartyKey(secret: "correct horse"), sessionID: sid)
        let right = try XCTUnwrap(KeyHandshake.Responder(key: PartyKey(secret: "correct horse"), sessionID: sid, listenerShare: listener.share))
        let wrong = try XCTUnwrap(KeyHandshake.Responder(key: PartyKey(secret: "battery staple"), sessionID: sid, listenerShare: listener.share))
        XCTAssertNil(listener.finish(broadcasterShare: wrong.share, broadcasterConfirmation: wrong.confirmation), "a wrong key confirmed")
        let finished = try XCTUnwrap(listener.finish(broadcasterShare: right.share, broadcasterConfirmation: right.confirmation))
        XCTAssertTrue(right.verify(listenerConfirmation: finished.confirmation))
        XCTAssertFalse(wrong.verify(listenerConfirmation: finished.confirmation))
        // The ISKs themselves, for the same shares and point but another PRS behind the generator.
        let generator = { (key: String) in CPace.generator(password: Array(key.utf8), channel: KeyHandshake.channel, sessionID: sid) }
        let scalar = CPace.sampleScalar(), other = CPace.sampleScalar()
        let isk = { (key: String) -> [UInt8] in
            let share = CPace.multiply(scalar: scalar, point: generator(key))!, peer = CPace.multiply(scalar: other, point: generator(key))!
            let point = CPace.multiply(scalar: scalar, point: peer)!
            return CPace.intermediateSessionKey(sessionID: sid, sharedPoint: point, transcript: share + peer)
        }
        XCTAssertNotEqual(isk("correct horse"), isk("battery staple"))
        XCTAssertEqual(isk("correct horse"), isk("correct horse"))
    }

    func testAnAnswerToAnotherRunConfirmsNothing() throws {
        let key = PartyKey(secret: "k")
        let first = KeyHandshake.Initiator(key: key), second = KeyHandshake.Initiator(key: key)
        let answer = try XCTUnwrap(KeyHandshake.Responder(key: key, sessionID: first.sessionID, listenerShare: first.share))
        XCTAssertNotNil(first.finish(broadcasterShare: answer.share, broadcasterConfirmation: answer.confirmation))
        XCTAssertNil(second.finish(broadcasterShare: answer.share, broadcasterConfirmation: answer.confirmation), "a replayed answer")
        // The responder aborts on the identity or a non-point, and on a session id of another size.
        XCTAssertNil(KeyHandshake.Responder(key: key, sessionID: first.sessionID, listenerShare: [UInt8](repeating: 0, count: 32)))
        XCTAssertNil(KeyHandshake.Responder(key: key, sessionID: [1, 2, 3], listenerShare: first.share))
        XCTAssertNil(first.finish(broadcasterShare: [UInt8](repeating: 0, count: 32), broadcasterConfirmation: answer.confirmation))
    }
}

func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.utf8.filter { !$0.isWhitespace })
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16)! }
}

private extension UInt8 {
    var isWhitespace: Bool { self == 0x20 || self == 0x0a || self == 0x09 }
}
