import Foundation
import PartyCastSendspin
import XCTest

/// The server's session against messages as the spec's examples and field lists write them.
final class SendspinSessionTests: XCTestCase {
    static let specHello = """
        {"type":"client/hello","payload":{"client_id":"kitchen-1","name":"Kitchen","version":1,
         "supported_roles":["player@v2","player@v1","controller@v1","artwork@v1"],
         "player@v1_support":{"supported_formats":[
            {"codec":"flac","channels":2,"sample_rate":48000,"bit_depth":24},
            {"codec":"aac","channels":2,"sample_rate":48000,"bit_depth":16},
            {"codec":"pcm","channels":2,"sample_rate":44100,"bit_depth":16}],
          "buffer_capacity":1048576,"supported_commands":["volume","mute"]},
         "artwork@v1_support":{"channels":[]}}}
        """

    func session(_ transport: SendspinServerSession.Transport = .plain, encodable: Set<SendspinCodec> = [.pcm, .opus]) -> SendspinServerSession {
        SendspinServerSession(serverID: "party-1", serverName: "Party", transport: transport, encodable: encodable)
    }

    func joined() -> SendspinServerSession {
        var session = session()
        _ = session.receiveText(Array(Self.specHello.utf8), receivedAt: 0)
        return session
    }

    func json(_ bytes: [UInt8]) throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    func sent(_ actions: [SendspinServerSession.Action]) -> [SendspinServerMessage] {
        actions.compactMap { if case .send(let message) = $0 { message } else { nil } }
    }

    func testSpecHelloIsAnsweredWithTheSpecsHelloAndTheFirstFormatItCanEncode() throws {
        var session = session()
        XCTAssertEqual(session.opening(), [], "a plain client speaks first")
        let actions = session.receiveText(Array(Self.specHello.utf8), receivedAt: 5)
        let peer = try XCTUnwrap(session.peer)
        XCTAssertEqual(peer.clientID, "kitchen-1")
        XCTAssertEqual(peer.name, "Kitchen")
        XCTAssertEqual(peer.activeRoles, ["player@v1", "controller@v1"], "player@v2 is not implemented here, and an artwork role with no channels is none (the spec asks for 1–4)")
        XCTAssertEqual(peer.format, SendspinAudioFormat(codec: .pcm, channels: 2, sampleRate: 44100, bitDepth: 16),
                       "flac is not encodable here and aac is no Sendspin codec")
        XCTAssertEqual(actions.last, .joined(peer))
        let reply = try json(try XCTUnwrap(sent(actions).first).encoded(transmittedAt: 9))
        XCTAssertEqual(reply["type"] as? String, "server/hello")
        let payload = try XCTUnwrap(reply["payload"] as? [String: Any])
        XCTAssertEqual(payload["server_id"] as? String, "party-1")
        XCTAssertEqual(payload["name"] as? String, "Party")
        XCTAssertEqual(payload["version"] as? Int, 1)
        XCTAssertEqual(payload["active_roles"] as? [String], ["player@v1", "controller@v1"])
        XCTAssertEqual(payload["connection_reason"] as? String, "discovery")
    }

    func testClientTimeIsAnsweredWithBothServerTimes() throws {
        var session = joined()
        let actions = session.receiveText(Array(#"{"type":"client/time","payload":{"client_transmitted":-123456789012}}"#.utf8), receivedAt: 1_000)
        let reply = try json(try XCTUnwrap(sent(actions).first).encoded(transmittedAt: 1_250))
        XCTAssertEqual(reply["type"] as? String, "server/time")
        let payload = try XCTUnwrap(reply["payload"] as? [String: Any])
        XCTAssertEqual(payload["client_transmitted"] as? Int64, -123456789012)
        XCTAssertEqual(payload["server_received"] as? Int64, 1_000)
        XCTAssertEqual(payload["server_transmitted"] as? Int64, 1_250)
    }

    func testAnythingBeforeTheHelloEndsTheSession() {
        var session = session()
        XCTAssertEqual(session.receiveText(Array(#"{"type":"client/time","payload":{"client_transmitted":1}}"#.utf8), receivedAt: 0),
                       [.close("it spoke before its client/hello")])
        XCTAssertTrue(session.isEnded)
        XCTAssertEqual(session.receiveText(Array(Self.specHello.utf8), receivedAt: 0), [], "nothing counts after the end")
    }

    func testEncryptedConnectionGreetsFirstAndActivatesTheAuthenticatedClient() throws {
        var session = session(.encrypted(clientID: "noise-key-id"))
        XCTAssertEqual(session.opening(), [.send(.encryptedHello(name: "Party"))])
        let hello = #"{"type":"client/hello","payload":{"name":"Den","supported_roles":["metadata@v1","player@v1"],"#
            + #""player@v1_support":{"supported_formats":[{"codec":"opus","channels":2,"sample_rate":48000,"bit_depth":16}],"buffer_capacity":32000000}}}"#
        let actions = session.receiveText(Array(hello.utf8), receivedAt: 0)
        XCTAssertEqual(session.peer?.clientID, "noise-key-id")
        XCTAssertEqual(session.peer?.activeRoles, ["player@v1", "metadata@v1"])
        XCTAssertEqual(sent(actions), [.activate(activeRoles: ["player@v1", "metadata@v1"])])
        let activate = try json(SendspinServerMessage.activate(activeRoles: ["player@v1"]).encoded(transmittedAt: 0))
        XCTAssertEqual((activate["payload"] as? [String: Any])?["activities"] as? [String], ["playback"])
    }

    func testAHelloWithNothingThisServerCanPlayIsRefused() {
        var session = session(encodable: [.pcm])
        let hello = #"{"type":"client/hello","payload":{"client_id":"x","name":"X","version":1,"supported_roles":["player@v1"],"#
            + #""player@v1_support":{"supported_formats":[{"codec":"pcm","channels":6,"sample_rate":48000,"bit_depth":16},"#
            + #"{"codec":"pcm","channels":2,"sample_rate":48000,"bit_depth":12}],"buffer_capacity":1000}}}"#
        XCTAssertEqual(session.receiveText(Array(hello.utf8), receivedAt: 0),
                       [.close("it asked for no role this server plays (or no format it can encode)")])
    }

    func testPlayerStateReachesThePartyAndOutOfRangeValuesAreCounted() {
        var session = joined()
        XCTAssertEqual(session.receiveText(Array(#"{"type":"client/state","payload":{"state":"synchronized","player":{"volume":40,"muted":false,"static_delay_ms":120}}}"#.utf8), receivedAt: 0),
                       [.available(true), .playerState(volume: 40, muted: false, outputDelayMs: 120)])
        XCTAssertEqual(session.playerCommands, [], "a state that names none")
        XCTAssertEqual(session.receiveText(Array(#"{"type":"client/state","payload":{"player":{"supported_commands":["volume","set_output_delay"]}}}"#.utf8), receivedAt: 0),
                       [.playerState(volume: nil, muted: nil, outputDelayMs: nil)])
        XCTAssertEqual(session.playerCommands, ["volume", "set_output_delay"])
        XCTAssertEqual(session.receiveText(Array(#"{"type":"client/state","payload":{"available":false}}"#.utf8), receivedAt: 0), [.available(false)])
        XCTAssertEqual(session.playerCommands, ["volume", "set_output_delay"], "an update without the list keeps it")
        XCTAssertEqual(session.receiveText(Array(#"{"type":"client/state","payload":{"player":{"volume":101}}}"#.utf8), receivedAt: 0), [])
        XCTAssertEqual(session.badMessages, 1)
    }

    func testControllerCommandsMapOntoThePartyAndUnannouncedOnesAreIgnored() {
        var session = joined()
        func command(_ body: String) -> [SendspinServerSession.Action] {
            session.receiveText(Array(#"{"type":"client/command","payload":{"controller":\#(body)}}"#.utf8), receivedAt: 0)
        }
        XCTAssertEqual(command(#"{"command":"pause"}"#), [.control(.pause)])
        XCTAssertEqual(command(#"{"command":"next"}"#), [.control(.next)])
        XCTAssertEqual(command(#"{"command":"volume","volume":30}"#), [.control(.volume(30))])
        XCTAssertEqual(command(#"{"command":"mute","mute":true}"#), [.control(.mute(true))])
        XCTAssertEqual(command(#"{"command":"repeat_one"}"#), [])
        XCTAssertEqual(session.skippedMessages, 1)
        XCTAssertEqual(command(#"{"command":"volume","volume":-1}"#), [])
        XCTAssertEqual(session.badMessages, 1)
    }

    func testBadMessagesAreCountedUntilTheBudgetEndsTheSession() {
        var session = joined()
        let budget = session.limits.maxBadMessages
        for _ in 1..<budget {
            XCTAssertEqual(session.receiveText(Array("{not json".utf8), receivedAt: 0), [])
        }
        XCTAssertEqual(session.receiveText(Array(repeating: UInt8(ascii: " "), count: session.limits.maxTextBytes + 1), receivedAt: 0),
                       [.close("\(budget) bad messages, the last a text message of \(session.limits.maxTextBytes + 1) bytes")])
        XCTAssertEqual(session.badMessages, budget)
    }

    func testGoodbyeEndsTheSession() {
        var session = joined()
        XCTAssertEqual(session.receiveText(Array(#"{"type":"client/goodbye","payload":{"reason":"shutdown"}}"#.utf8), receivedAt: 0),
                       [.close("it said goodbye (shutdown)")])
    }

    func testServerMessagesCarryTheSpecsFields() throws {
        let start = try json(SendspinServerMessage.streamStart(SendspinAudioFormat(codec: .flac, channels: 2, sampleRate: 48000, bitDepth: 16),
                                                               codecHeader: Array("fLaC".utf8)).encoded(transmittedAt: 7))
        let player = try XCTUnwrap((start["payload"] as? [String: Any])?["player"] as? [String: Any])
        XCTAssertEqual(player["codec"] as? String, "flac")
        XCTAssertEqual(player["sample_rate"] as? Int, 48000)
        XCTAssertEqual(player["bit_depth"] as? Int, 16)
        XCTAssertEqual(player["codec_header"] as? String, "ZkxhQw==")
        let group = try json(SendspinServerMessage.groupUpdate(.playing, groupID: "g", groupName: "Party").encoded(transmittedAt: 0))
        XCTAssertEqual((group["payload"] as? [String: Any])?["playback_state"] as? String, "playing")
        let command = try json(SendspinServerMessage.command(.volume(20)).encoded(transmittedAt: 0))
        XCTAssertEqual(((command["payload"] as? [String: Any])?["player"] as? [String: Any])?["volume"] as? Int, 20)
    }

    func testAudioFrameHeadersOfBothLayouts() throws {
        let payload: [UInt8] = [1, 2, 3]
        let spec = SendspinFrame.audio(timestamp: -2, sendAhead: 10, payload: payload, header: .spec)
        XCTAssertEqual(spec, [4, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 1, 2, 3])
        let parsed = try XCTUnwrap(SendspinFrame(spec[...], audioHeader: .spec))
        XCTAssertEqual(parsed.kind, .audio)
        XCTAssertEqual(parsed.timestamp, -2)
        XCTAssertEqual(Array(parsed.payload), payload)
        let ahead = SendspinFrame.audio(timestamp: 0x0102030405060708, sendAhead: Int64(UInt32.max) + 5, payload: payload, header: .withSendAhead)
        XCTAssertEqual(Array(ahead[1..<13]), [1, 2, 3, 4, 5, 6, 7, 8, 0xFF, 0xFF, 0xFF, 0xFF], "send_ahead saturates")
        XCTAssertEqual(SendspinFrame(ahead[...], audioHeader: .withSendAhead)?.payload.count, 3)
        XCTAssertNil(SendspinFrame(ahead[0..<12], audioHeader: .withSendAhead), "shorter than its header")
        XCTAssertEqual(SendspinFrame([9, 0, 0, 0, 0, 0, 0, 0, 1][...], audioHeader: .spec)?.kind, .artwork(channel: 1))
        XCTAssertNil(SendspinFrame([][...], audioHeader: .spec))
    }

    func testPCMIsLittleEndianSignedAndClipped() {
        XCTAssertEqual(SendspinPCM.encode([1, -1, 0, 0.5, .nan, 2, -0.25], bitDepth: 16).chunked(2).map { Int16(bitPattern: UInt16($0[0]) | UInt16($0[1]) << 8) },
                       [32767, -32767, 0, 16384, 0, 32767, -8192])
        XCTAssertEqual(SendspinPCM.encode([1, -1, 0.5], bitDepth: 24), [0xFF, 0xFF, 0x7F, 0x01, 0x00, 0x80, 0x00, 0x00, 0x40])
    }

    /// HOST:PORT, [IPv6]:PORT, a default port; an unbracketed IPv6 address is refused, not split at its last colon.
    func testSendspinURLsAreParsed() throws {
        let parsed = try SendspinURL(parsing: "ws://[::1]:8930/x")
        XCTAssertEqual([parsed.host, "\(parsed.port)", parsed.path, parsed.authority], ["::1", "8930", "/x", "[::1]:8930"])
        let plain = try SendspinURL(parsing: "ws://speaker.local", defaultPort: SendspinURL.playerPort)
        XCTAssertEqual([plain.host, "\(plain.port)", plain.path], ["speaker.local", "8928", "/sendspin"])
        XCTAssertEqual(try SendspinURL(parsing: "ws://10.0.0.2:9000/sendspin").description, "ws://10.0.0.2:9000/sendspin")
        for bad in ["ws://::1:8928/sendspin", "ws://fe80::1/sendspin", "ws://host:port/", "wss://host/", "ws://:8928/"] {
            XCTAssertThrowsError(try SendspinURL(parsing: bad), bad)
        }
        XCTAssertThrowsError(try SendspinURL(parsing: "ws://::1:8928/sendspin")) { error in
            XCTAssertTrue("\(error)".contains("brackets"), "\(error)")
        }
    }
}

extension Array {
    func chunked(_ size: Int) -> [[Element]] { stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) } }
}
