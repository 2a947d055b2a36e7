import Foundation
import PartyCastSendspin
import PartyCastTestSupport
import XCTest

/// Our messages against aiosendspin's own models (the reference library, from the tests' venv):
/// what it writes as a client, our session reads; what our server writes, it reads back the same.
final class SendspinReferenceTests: XCTestCase {
    func testOurServerReadsAiosendspinsClientMessages() throws {
        let lines = try aiosendspinReference(["client"])
        XCTAssertEqual(lines.count, 4)
        var session = SendspinServerSession(serverID: "party-1", serverName: "Party", transport: .plain, encodable: [.pcm])
        let hello = session.receiveText(Array(lines[0].utf8), receivedAt: 10)
        let peer = try XCTUnwrap(session.peer)
        XCTAssertEqual(peer.clientID, "ref-1")
        XCTAssertEqual(peer.activeRoles, ["player@v1", "metadata@v1", "controller@v1"])
        XCTAssertEqual(peer.format, SendspinAudioFormat(codec: .pcm, channels: 2, sampleRate: 48000, bitDepth: 16))
        XCTAssertEqual(hello.last, .joined(peer))
        XCTAssertEqual(session.receiveText(Array(lines[1].utf8), receivedAt: 20), [.send(.time(clientTransmitted: 123456789, serverReceived: 20))])
        XCTAssertEqual(session.receiveText(Array(lines[2].utf8), receivedAt: 30),
                       [.available(true), .playerState(volume: 35, muted: true, outputDelayMs: 250)])
        XCTAssertEqual(session.receiveText(Array(lines[3].utf8), receivedAt: 40), [.control(.next)])
        XCTAssertEqual(session.badMessages, 0)
        XCTAssertEqual(session.skippedMessages, 0)
    }

    func testAiosendspinReadsEveryMessageOurServerSends() throws {
        let format = SendspinAudioFormat(codec: .opus, channels: 2, sampleRate: 48000, bitDepth: 16)
        let metadata = SendspinMetadata(timestamp: 5_000_000, title: "Song", artist: "Band", album: nil,
                                        progress: .init(trackProgressMs: 1_500, trackDurationMs: 180_000, playbackSpeed: 1000))
        let ours: [(SendspinServerMessage, expectedClass: String)] = [
            (.hello(serverID: "party-1", name: "Party", activeRoles: ["player@v1"]), "LegacyServerHelloPayload"),
            (.encryptedHello(name: "Party"), "ServerHelloMessage"),
            (.activate(activeRoles: ["player@v1", "controller@v1"]), "ServerActivateMessage"),
            (.time(clientTransmitted: -5, serverReceived: 100), "ServerTimeMessage"),
            (.streamStart(format, codecHeader: [1, 2, 3]), "StreamStartMessage"),
            (.streamClear, "StreamClearMessage"),
            (.streamEnd, "StreamEndMessage"),
            (.groupUpdate(.playing, groupID: "g-1", groupName: "Party"), "GroupUpdateServerMessage"),
            (.metadata(metadata), "ServerStateMessage"),
            (.controller(SendspinControllerState(supportedCommands: ["play", "pause", "next"], volume: 80, muted: false)), "ServerStateMessage"),
            (.command(.volume(42)), "ServerCommandMessage"),
            (.command(.mute(true)), "ServerCommandMessage"),
            (.command(.outputDelay(milliseconds: 120)), "ServerCommandMessage"),
        ]
        let file = try temporaryDirectory() + "/ours.jsonl"
        let text = ours.map { String(decoding: $0.0.encoded(transmittedAt: 777), as: UTF8.self) }.joined(separator: "\n") + "\n"
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        let read = try aiosendspinReference(["server", file]).map { try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        XCTAssertEqual(read.count, ours.count)
        XCTAssertEqual(read.map { $0["class"] as? String }, ours.map(\.expectedClass))
        func payload(_ index: Int) -> [String: Any] {
            let message = read[index]["read"] as? [String: Any] ?? [:]
            return message["payload"] as? [String: Any] ?? message
        }
        XCTAssertEqual(payload(0)["server_id"] as? String, "party-1")
        XCTAssertEqual(payload(0)["active_roles"] as? [String], ["player@v1"])
        XCTAssertEqual(payload(2)["active_roles"] as? [String], ["player@v1", "controller@v1"])
        XCTAssertEqual(payload(3)["client_transmitted"] as? Int, -5)
        XCTAssertEqual(payload(3)["server_received"] as? Int, 100)
        XCTAssertEqual(payload(3)["server_transmitted"] as? Int, 777)
        let player = payload(4)["player"] as? [String: Any]
        XCTAssertEqual(player?["codec"] as? String, "opus")
        XCTAssertEqual(player?["sample_rate"] as? Int, 48000)
        XCTAssertEqual(player?["codec_header"] as? String, "AQID")
        XCTAssertEqual(payload(4)["server_transmitted"] as? Int, 777)
        XCTAssertEqual(payload(7)["playback_state"] as? String, "playing")
        XCTAssertEqual(payload(7)["group_name"] as? String, "Party")
        let readMetadata = payload(8)["metadata"] as? [String: Any]
        XCTAssertEqual(readMetadata?["title"] as? String, "Song")
        XCTAssertEqual((readMetadata?["progress"] as? [String: Any])?["track_duration"] as? Int, 180_000)
        XCTAssertEqual((payload(9)["controller"] as? [String: Any])?["volume"] as? Int, 80)
        XCTAssertEqual((payload(10)["player"] as? [String: Any])?["volume"] as? Int, 42)
        XCTAssertEqual((payload(11)["player"] as? [String: Any])?["mute"] as? Bool, true)
        XCTAssertEqual((payload(12)["player"] as? [String: Any])?["command"] as? String, "set_output_delay")
        XCTAssertEqual((payload(12)["player"] as? [String: Any])?["output_delay_ms"] as? Int, 120)
    }
}
