import Foundation
import Logging
import NIOHTTP1
import PartyCastControlSeam
@testable import PartyCastControl
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// The control port's key: online guesses throttled per address, and the SPAKE2 handshake that gets
/// `broadcaster ctl` and the page a token without the key crossing the network.
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

    /// After three wrong keys an address gets one handshake a second: the fourth is not even
    /// answered (429, Retry-After 1), and neither is the right key's until that second has passed.
    func testWrongKeysCostASecondEachAfterThree() async throws {
        for _ in 0..<KeyGuessThrottle.freeGuesses {
            let guess = try await remote.handshake(key: "not the key")
            XCTAssertEqual(guess.status, 401, guess.text)
        }
        let throttledAt = Date()
        let fourth = try await remote.startSession(Spake2.Party(role: .a, key: PartyKey(secret: "not the key either")))
        XCTAssertEqual(fourth.status, 429)
        XCTAssertEqual(fourth.headers["Retry-After"].first, "1")
        let early = try await remote.startSession(Spake2.Party(role: .a, key: PartyKey(secret: secret)))
        XCTAssertEqual(early.status, 429, "the right key waits its turn too: otherwise the throttle would answer every guess")
        // Retry-After says when, counted from the throttled answer: then the right key gets in.
        try await letTimePass(max(0, 1.2 - Date().timeIntervalSince(throttledAt)))
        let later = try await remote.call(.GET, "/api/status", headers: ["Authorization": "Bearer \(try await remote.token(key: secret))"])
        XCTAssertEqual(later.status, 200)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(throttledAt), 0.9, "a guess a second")
    }

    /// What `broadcaster ctl` and the page do: SPAKE2 over two requests. The broadcaster proves the
    /// key first (a client holding another key sees the proof fail and can stop there); the client's
    /// proof earns a token that works as the Bearer, and the key itself is never sent, nor taken.
    func testTheKeyHandshakeGrantsATokenAndProvesTheBroadcaster() async throws {
        let client = Spake2.Party(role: .a, key: PartyKey(secret: secret))
        let sessionID = Data(KeyHandshake.randomBytes(ControlSession.sessionIDBytes)).base64EncodedString()
        let started = try await remote.startSession(client, sessionID: sessionID)
        XCTAssertEqual(started.status, 200, started.text)
        // The id crosses the network in clear: someone who saw it cannot put a run of theirs in its place.
        let overheard = try await remote.startSession(Spake2.Party(role: .a, key: PartyKey(secret: "a guess")), sessionID: sessionID)
        XCTAssertEqual(overheard.status, 400, overheard.text)
        let challenge = try JSONDecoder().decode(ControlSession.Challenge.self, from: started.body)
        let share = try [UInt8](XCTUnwrap(Data(base64Encoded: challenge.share)))
        let proof = try [UInt8](XCTUnwrap(Data(base64Encoded: challenge.confirmation)))
        let impostor = Spake2.Party(role: .a, key: PartyKey(secret: "another key"))
        XCTAssertEqual(try XCTUnwrap(impostor.finish(peerShare: share)).verify(proof), false, "another key's holder rejects the proof")
        let confirmations = try XCTUnwrap(client.finish(peerShare: share))
        XCTAssertTrue(confirmations.verify(proof), "the broadcaster proved the key")
        let confirm = try String(decoding: JSONEncoder().encode(ControlSession.Confirm(sessionID: sessionID,
                                                                                       confirmation: Data(confirmations.own).base64EncodedString())), as: UTF8.self)
        let confirmed = try await remote.call(.POST, "/api/session/confirm", body: confirm)
        XCTAssertEqual(confirmed.status, 200, confirmed.text)
        let token = try JSONDecoder().decode(ControlSession.Token.self, from: confirmed.body)
        XCTAssertGreaterThan(token.expiresInSeconds, 0)
        let paused = try await remote.call(.POST, "/api/pause", headers: ["Authorization": "Bearer \(token.token)"])
        XCTAssertEqual(paused.status, 200)
        // A handshake is good once: its confirmation replayed earns nothing.
        let replay = try await remote.call(.POST, "/api/session/confirm", body: confirm)
        XCTAssertEqual(replay.status, 401)
        let forged = try await remote.call(.GET, "/api/status", headers: ["Authorization": "Bearer \(Data(repeating: 7, count: 32).base64EncodedString())"])
        XCTAssertEqual(forged.status, 401, "a made-up token is refused")
        let key = try await remote.call(.GET, "/api/status", headers: ["Authorization": "Bearer \(secret)"])
        XCTAssertEqual(key.status, 401, "the key itself is no Bearer: it must never cross the network")
    }

    /// `broadcaster ctl` through a relay that records every byte both ways (Tests/Browser/relay.py):
    /// the command works, the handshake went through, and the key's bytes are in no stream.
    func testCtlNeverSendsTheKey() throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Browser/relay.py").standardized.path
        let relayPort = freePort()
        let relay = try startProcess(testDriver("python"), [script, "\(relayPort)", "127.0.0.1:\(server.port)"])
        XCTAssertTrue(relay.waitForStderr("relay: listening", timeout: 20), relay.stderr)
        let ctl = try runProcess(productPath("broadcaster"), ["ctl", "--url", "http://127.0.0.1:\(relayPort)", "pause"], timeout: 30,
                                 environment: ["PARTYCAST_KEY": secret])
        relay.signal(SIGTERM)
        let recorded = relay.wait(timeout: 20)
        XCTAssertEqual(ctl.status, 0, ctl.stderr)
        XCTAssertEqual(recorded.status, 0, recorded.stderr)
        let streams = recorded.stdout.split(separator: "\n").map { Data(Spake2.bytes(hex: String($0))) }
        let text = streams.map { String(decoding: $0, as: UTF8.self) }
        XCTAssertTrue(text.contains { $0.hasPrefix("POST /api/session ") } && text.contains { $0.hasPrefix("POST /api/session/confirm ") }
                      && text.contains { $0.hasPrefix("POST /api/pause ") }, "the handshake and the command went through the relay:\n\(text)")
        for form in [secret, Data(secret.utf8).base64EncodedString()] {
            XCTAssertFalse(streams.contains { $0.range(of: Data(form.utf8)) != nil }, "the key crossed the network as \(form)")
        }
    }

    /// Shares that are no point of P-256, or the identity, are refused before any answer.
    func testAShareThatIsNoPointIsRefused() async throws {
        for share in [[UInt8](repeating: 0, count: 65), [4] + [UInt8](repeating: 0xff, count: 64), [0]] {
            let body = try String(decoding: JSONEncoder().encode(ControlSession.Start(
                sessionID: Data(KeyHandshake.randomBytes(ControlSession.sessionIDBytes)).base64EncodedString(),
                share: Data(share).base64EncodedString())), as: UTF8.self)
            let answer = try await remote.call(.POST, "/api/session", body: body)
            XCTAssertEqual(answer.status, 400, answer.text)
        }
    }
}

extension Remote {
    /// POST /api/session with a SPAKE2 run's share (role A).
    func startSession(_ client: Spake2.Party,
                      sessionID: String = Data(KeyHandshake.randomBytes(ControlSession.sessionIDBytes)).base64EncodedString()) async throws -> Answer {
        try await call(.POST, "/api/session", body: String(decoding: JSONEncoder().encode(
            ControlSession.Start(sessionID: sessionID, share: Data(client.share).base64EncodedString())), as: UTF8.self))
    }

    /// A whole handshake with `key`, confirming whatever the broadcaster's proof (as a guesser
    /// would): the confirmation's answer.
    func handshake(key: String) async throws -> Answer {
        let client = Spake2.Party(role: .a, key: PartyKey(secret: key))
        let sessionID = Data(KeyHandshake.randomBytes(ControlSession.sessionIDBytes)).base64EncodedString()
        let started = try await startSession(client, sessionID: sessionID)
        guard started.status == 200 else { return started }
        let challenge = try JSONDecoder().decode(ControlSession.Challenge.self, from: started.body)
        let confirmations = try XCTUnwrap(client.finish(peerShare: [UInt8](XCTUnwrap(Data(base64Encoded: challenge.share)))))
        return try await call(.POST, "/api/session/confirm", body: String(decoding: JSONEncoder().encode(
            ControlSession.Confirm(sessionID: sessionID, confirmation: Data(confirmations.own).base64EncodedString())), as: UTF8.self))
    }

    /// A session token for the right key.
    func token(key: String) async throws -> String {
        let answer = try await handshake(key: key)
        XCTAssertEqual(answer.status, 200, answer.text)
        return try JSONDecoder().decode(ControlSession.Token.self, from: answer.body).token
    }
}
