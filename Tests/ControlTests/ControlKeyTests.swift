import Foundation
import Logging
import NIOHTTP1
import PartyCastControlSeam
import PartyCastControl
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// The control port's key: online guesses throttled per address, and the CPace handshake that gets
/// `broadcaster ctl` a token without the key crossing the network.
final class ControlKeyTests: XCTestCase {
    private var server: ControlServer!
    private let secret = "correct horse battery"

    override func setUp() async throws {
        server = try await ControlServer(control: RecordingParty(), host: "127.0.0.1", port: 0, key: PartyKey(secret: secret),
                                         logger: Logger(label: "control-key-test"))
    }

    override func tearDown() async throws {
        await server.stop()
    }

    private var remote: Remote { Remote(port: server.port) }

    /// After three wrong keys an address gets one guess a second: the fourth is not even checked
    /// (429, Retry-After 1), and neither is the right key until that second has passed.
    func testWrongKeysCostASecondEachAfterThree() async throws {
        for _ in 0..<KeyGuessThrottle.freeGuesses {
            let wrong = try await remote.call(.GET, "/api/status", headers: ["Authorization": "Bearer not the key"])
            XCTAssertEqual(wrong.status, 401)
        }
        let throttledAt = Date()
        let fourth = try await remote.call(.GET, "/api/status", headers: ["Authorization": "Bearer not the key either"])
        XCTAssertEqual(fourth.status, 429)
        XCTAssertEqual(fourth.headers["Retry-After"].first, "1")
        let right = ["Authorization": "Bearer \(secret)"]
        let early = try await remote.call(.GET, "/api/status", headers: right)
        XCTAssertEqual(early.status, 429, "the right key waits its turn too: otherwise the throttle would answer every guess")
        // Retry-After says when, counted from the throttled answer: then the right key gets in.
        try await letTimePass(max(0, 1.2 - Date().timeIntervalSince(throttledAt)))
        let later = try await remote.call(.GET, "/api/status", headers: right)
        XCTAssertEqual(later.status, 200)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(throttledAt), 0.9, "a guess a second")
    }

    /// What `broadcaster ctl` does: CPace over two requests. The broadcaster proves the key first
    /// (a client holding another key sees the proof fail and can stop there); the client's proof
    /// earns a token that works as the Bearer, and the key itself is never sent.
    func testTheKeyHandshakeGrantsATokenAndProvesTheBroadcaster() async throws {
        let handshake = KeyHandshake.Initiator(key: PartyKey(secret: secret))
        let challenge: ControlSession.Challenge = try await post(ControlSession.Start(sessionID: Data(handshake.sessionID).base64EncodedString(),
                                                                                     share: Data(handshake.share).base64EncodedString()), to: "/api/session")
        let share = try [UInt8](XCTUnwrap(Data(base64Encoded: challenge.share)))
        let proof = try [UInt8](XCTUnwrap(Data(base64Encoded: challenge.confirmation)))
        let impostor = KeyHandshake.Initiator(key: PartyKey(secret: "another key"), sessionID: handshake.sessionID)
        XCTAssertNil(impostor.finish(broadcasterShare: share, broadcasterConfirmation: proof), "another key's holder rejects the proof")
        let (confirmation, _) = try XCTUnwrap(handshake.finish(broadcasterShare: share, broadcasterConfirmation: proof), "the broadcaster proved the key")
        let token: ControlSession.Token = try await post(ControlSession.Confirm(sessionID: Data(handshake.sessionID).base64EncodedString(),
                                                                                confirmation: Data(confirmation).base64EncodedString()), to: "/api/session/confirm")
        XCTAssertGreaterThan(token.expiresInSeconds, 0)
        let paused = try await remote.call(.POST, "/api/pause", headers: ["Authorization": "Bearer \(token.token)"])
        XCTAssertEqual(paused.status, 200)
        // A handshake is good once: its confirmation replayed earns nothing.
        let replay = try await remote.call(.POST, "/api/session/confirm", body: String(decoding: try JSONEncoder().encode(
            ControlSession.Confirm(sessionID: Data(handshake.sessionID).base64EncodedString(), confirmation: Data(confirmation).base64EncodedString())), as: UTF8.self))
        XCTAssertEqual(replay.status, 401)
        let forged = try await remote.call(.GET, "/api/status", headers: ["Authorization": "Bearer \(Data(repeating: 7, count: 32).base64EncodedString())"])
        XCTAssertEqual(forged.status, 401, "a made-up token is a wrong key")
    }

    private func post<Answer: Decodable>(_ body: some Encodable, to path: String) async throws -> Answer {
        let answer = try await remote.call(.POST, path, body: String(decoding: try JSONEncoder().encode(body), as: UTF8.self))
        XCTAssertEqual(answer.status, 200, answer.text)
        return try JSONDecoder().decode(Answer.self, from: answer.body)
    }
}
