import Foundation
import PartyCastSendspin
import PartyCastTestSupport
import PartyCastSources
import XCTest

/// The encrypted opening aiosendspin 10's clients (`sendspin daemon`) insist on, against that
/// library's own client handshake, and against hostile frames.
final class SendspinEncryptedTests: XCTestCase {
    /// aiosendspin_client.py (or another script of line_socket.py's) as a process whose stdin and
    /// stdout stand in for the WebSocket.
    final class ReferenceClient {
        let process = Process()
        let input = Pipe(), output = Pipe()
        var buffered = Data()

        convenience init(suite: NoiseSuite) throws { try self.init(script: "aiosendspin_client.py", arguments: [suite.rawValue]) }

        init(script: String, arguments: [String]) throws {
            let python = testDriver("python")
            guard (try? runProcess(python, ["-c", "import aiosendspin"], timeout: 60))?.status == 0 else {
                throw XCTSkip("no aiosendspin in \(python): run `make deps`")
            }
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments = [URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(script).path] + arguments
            process.standardInput = input
            process.standardOutput = output
            try process.run()
        }

        /// The next frame or result it printed; nil once it exited (it gives up by itself after 30 s).
        func next() -> [String: Any]? {
            while true {
                if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = buffered[..<newline]
                    buffered = Data(buffered[(newline + 1)...])
                    return try? JSONSerialization.jsonObject(with: line) as? [String: Any]
                }
                let more = output.fileHandleForReading.availableData
                if more.isEmpty { return nil }
                buffered.append(more)
            }
        }

        func send(text: [UInt8]) throws { try write(["t": String(decoding: text, as: UTF8.self)]) }
        func send(binary: [UInt8]) throws { try write(["b": Data(binary).base64EncodedString()]) }

        private func write(_ frame: [String: String]) throws {
            var line = try JSONSerialization.data(withJSONObject: frame)
            line.append(UInt8(ascii: "\n"))
            input.fileHandleForWriting.write(line)
        }

        deinit { if process.isRunning { process.terminate() } }
    }

    func testAiosendspinsClientHandshakeSealsAndReadsAPlayersSession() throws {
        for suite in NoiseSuite.available {
            let client = try ReferenceClient(suite: suite)
            var handshake = SendspinHandshake(serverKey: .init())
            let clientInit = try XCTUnwrap(client.next()?["t"] as? String)
            guard case .reply(let frames) = handshake.receive(text: Array(clientInit.utf8)) else { return XCTFail("client/init refused") }
            XCTAssertEqual(frames.count, 2)
            try frames.forEach(client.send(text:))
            let message2 = try XCTUnwrap(client.next()?["t"] as? String)
            guard case .established(let clientID, var channel) = handshake.receive(text: Array(message2.utf8)) else { return XCTFail("message 2 refused") }
            XCTAssertEqual(clientID.utf8.count, 43)

            var session = SendspinServerSession(serverID: handshake.serverID, serverName: "Party", transport: .encrypted(clientID: clientID), encodable: [.pcm])
            func perform(_ actions: [SendspinServerSession.Action]) throws {
                for case .send(let message) in actions { try client.send(binary: try channel.seal(text: message.encoded(transmittedAt: 900))) }
            }
            func receive() throws -> [SendspinServerSession.Action] {
                let frame = try XCTUnwrap(Data(base64Encoded: try XCTUnwrap(client.next()?["b"] as? String)))
                guard case .text(let json) = try channel.open(frame) else { XCTFail("not a JSON message"); return [] }
                return session.receiveText(json, receivedAt: 800)
            }
            try perform(session.opening())
            let joined = try receive()
            XCTAssertEqual(session.peer?.format, SendspinAudioFormat(codec: .pcm, channels: 2, sampleRate: 48000, bitDepth: 16))
            try perform(joined)
            try perform(try receive())
            try client.send(binary: try channel.seal(binary: SendspinFrame.audio(timestamp: 5_000_000, sendAhead: 250_000, payload: [9, 8, 7], header: .withSendAhead)))

            let result = try XCTUnwrap(client.next()?["result"] as? [String: Any], "\(suite): the reference client gave no result")
            XCTAssertEqual(result["server_id"] as? String, handshake.serverID)
            XCTAssertEqual(result["psk"] as? String, "sentinel")
            XCTAssertEqual(result["server_name"] as? String, "Party")
            XCTAssertEqual(result["activities"] as? [String], ["playback"])
            XCTAssertEqual(result["active_roles"] as? [String], ["player@v1"])
            let time = try XCTUnwrap(result["time"] as? [String: Any])
            XCTAssertEqual(time["client_transmitted"] as? Int, 424242)
            XCTAssertEqual(time["server_received"] as? Int, 800)
            XCTAssertEqual(time["server_transmitted"] as? Int, 900)
            let audio = try XCTUnwrap(result["audio"] as? [String: Any])
            XCTAssertEqual(audio["type"] as? Int, 4)
            XCTAssertEqual(audio["timestamp"] as? Int, 5_000_000)
            XCTAssertEqual(audio["send_ahead"] as? Int, 250_000)
            XCTAssertEqual(audio["payload"] as? [Int], [9, 8, 7])
        }
    }

    func testASpecClientsHelloSelectsThePlainDialect() {
        var handshake = SendspinHandshake(serverKey: .init())
        guard case .plain = handshake.receive(text: Array(SendspinSessionTests.specHello.utf8)) else { return XCTFail("not plain") }
    }

    func testBadOpeningsAreRefusedWithTheReasonAiosendspinKnows() {
        let key = X25519KeyPair()
        let clientID = Data(key.publicKey).base64EncodedString().replacing("+", with: "-").replacing("/", with: "_").replacing("=", with: "")
        let cases: [(String, String?)] = [
            ("not json", "malformed"),
            (#"{"type":"client/init","payload":{"client_id":"\#(clientID)","version":2,"suite":"25519_ChaChaPoly_SHA256"}}"#, "unsupported_version"),
            (#"{"type":"client/init","payload":{"client_id":"\#(clientID)","version":1,"suite":"448_ChaChaPoly_BLAKE2b"}}"#, "unsupported_suite"),
            (#"{"type":"client/init","payload":{"client_id":"short","version":1,"suite":"25519_ChaChaPoly_SHA256"}}"#, "malformed"),
            (#"{"type":"client/time","payload":{"client_transmitted":1}}"#, "malformed"),
        ]
        for (text, reason) in cases {
            var handshake = SendspinHandshake(serverKey: .init())
            guard case .reject(let reply, _) = handshake.receive(text: Array(text.utf8)) else { XCTFail(text); continue }
            let payload = reply.flatMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }?["payload"] as? [String: Any]
            XCTAssertEqual(payload?["reason"] as? String, reason, text)
        }
    }

    /// A message 2 that is not the client's (flipped bits, random bytes, truncated) is refused and
    /// nothing is established; nothing traps.
    func testTamperedMessage2IsRefused() {
        let clientKey = X25519KeyPair()
        let clientID = Data(clientKey.publicKey).base64EncodedString().replacing("+", with: "-").replacing("/", with: "_").replacing("=", with: "")
        let clientInit = #"{"type":"client/init","payload":{"client_id":"\#(clientID)","version":1,"suite":"25519_ChaChaPoly_SHA256"}}"#
        var random = SplitMix64(seed: 2)
        for length in [0, 31, 48, 64, 200] {
            var handshake = SendspinHandshake(serverKey: .init())
            guard case .reply = handshake.receive(text: Array(clientInit.utf8)) else { return XCTFail("client/init refused") }
            let bogus = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let data = Data(bogus).base64EncodedString().replacing("+", with: "-").replacing("/", with: "_").replacing("=", with: "")
            guard case .reject(nil, let reason) = handshake.receive(text: Array(#"{"type":"noise/handshake","payload":{"data":"\#(data)"}}"#.utf8)) else {
                XCTFail("\(length) random bytes were taken for message 2"); continue
            }
            XCTAssertFalse(reason.isEmpty)
            guard case .reject = handshake.receive(text: Array(clientInit.utf8)) else { return XCTFail("a refused handshake went on") }
        }
    }
}
