import Foundation
import PartyCastTestSupport
import XCTest

/// The reference Sendspin player (`ReferencePlayer`, `sendspin daemon`) joins `broadcaster share` at
/// its Sendspin port and plays the party; players of the spec's plain dialect get its messages.
final class SendspinPlayerTests: XCTestCase {
    func testSendspinDaemonJoinsThePartyAndPlaysTheSong() throws {
        let directory = try temporaryDirectory()
        let song = try fixture("pcm16.wav")
        let sendspinPort = freePort()
        // Long enough a start for the player to come up (Python, the device probe) before the song does.
        let broadcaster = try startProcess(productPath("broadcaster"), ["share", "--no-mdns", "--port", "\(freePort())", "--control-port", "0",
                                                                        "--sendspin-port", "\(sendspinPort)", "--start-in", "8", song])
        defer { broadcaster.signal(SIGTERM) }
        XCTAssertTrue(waitForPort(sendspinPort, timeout: 30), broadcaster.stderr)
        let player = try ReferencePlayer(in: directory, connection: ["--url", "ws://127.0.0.1:\(sendspinPort)/sendspin"])
        defer { player.process.signal(SIGTERM) }
        XCTAssertTrue(broadcaster.waitForStderr("Sendspin player reference-player@127.0.0.1 joined (pcm 48000 Hz, 16 bit)", timeout: 60),
                      broadcaster.stderr + player.process.stderr)
        let shared = broadcaster.wait(timeout: 90)
        XCTAssertEqual(shared.status, 0, shared.stderr)
        try player.assertPlayed(song, in: directory)
    }

    /// Sendspin players cannot prove a party key: at a private party the Sendspin port stays closed
    /// unless `--sendspin` opens it, saying so; `--no-sendspin` closes it anywhere.
    func testSendspinIsOffAtAPrivatePartyUnlessAskedForAndOffWhenTurnedOff() throws {
        let song = try fixture("pcm16.wav")
        for (extra, serves, line) in [(["--key", "correct horse battery staple"], false, "Sendspin is off at a private party"),
                                      (["--key", "correct horse battery staple", "--sendspin"], true, "Sendspin players join WITHOUT the party key"),
                                      (["--no-sendspin"], false, "remote control:")] {
            let sendspinPort = freePort()
            let broadcaster = try startProcess(productPath("broadcaster"), ["share", "--no-mdns", "--port", "\(freePort())", "--control-port", "0",
                                                                            "--sendspin-port", "\(sendspinPort)", song] + extra)
            defer { broadcaster.signal(SIGTERM) }
            XCTAssertTrue(broadcaster.waitForStderr(line, timeout: 30), broadcaster.stderr)
            XCTAssertTrue(broadcaster.waitForStderr("remote control:", timeout: 30), broadcaster.stderr)
            // Bound before that line is written, or never.
            let connection = connectToLoopback(port: sendspinPort)
            XCTAssertEqual(connection != nil, serves, "\(extra): \(broadcaster.stderr)")
            if let connection { close(connection) }
            broadcaster.signal(SIGTERM)
            XCTAssertEqual(broadcaster.wait(timeout: 30).status, 0)
        }
    }

    /// The Sendspin port holds no more than 16 connections from one address, and none that stays
    /// silent (no WebSocket upgrade asked for) beyond 10 s: what a crowd of idle sockets would
    /// otherwise hold of the broadcaster's descriptors.
    func testSilentAndSurplusSendspinConnectionsAreClosed() throws {
        let sendspinPort = freePort()
        let broadcaster = try startProcess(productPath("broadcaster"), ["share", "--no-mdns", "--port", "\(freePort())", "--control-port", "0",
                                                                        "--sendspin-port", "\(sendspinPort)", "--loop", try fixture("pcm16.wav")])
        defer { broadcaster.signal(SIGTERM); _ = broadcaster.wait(timeout: 30) }
        XCTAssertTrue(broadcaster.waitForStderr("remote control:", timeout: 30), broadcaster.stderr)
        let sockets = (0..<20).compactMap { _ in connectToLoopback(port: sendspinPort) }
        defer { sockets.forEach { close($0) } }
        XCTAssertEqual(sockets.count, 20)
        func closedByPeer(_ fd: Int32) -> Bool {
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 0
        }
        XCTAssertTrue(waitUntil(timeout: 10) { sockets.filter(closedByPeer).count >= 4 }, "the connections over the per-address cap")
        XCTAssertTrue(waitUntil(timeout: 30) { sockets.allSatisfy(closedByPeer) }, "the silent ones, after 10 s")
        XCTAssertTrue(broadcaster.stderr.contains("Sendspin: refused a connection from 127.0.0.1: over 16 connections from one address"), broadcaster.stderr)
        XCTAssertTrue(broadcaster.stderr.contains("Sendspin: closed a connection from 127.0.0.1: no request within 10 s"), broadcaster.stderr)
    }

    /// A player of the spec's plain dialect (no Noise: client/hello first, in the clear), over a
    /// real WebSocket, read with aiosendspin's models: the spec's server/hello, the stream in the
    /// format it asked for, 9-byte audio headers 20 ms apart on the party's clock, its clock answered,
    /// and as metadata and controller client the song's tags and the party's controls.
    func testAPlainDialectPlayerGetsTheSpecsMessagesAndFrames() throws {
        let python = testDriver("python")
        guard (try? runProcess(python, ["-c", "import aiosendspin"], timeout: 60))?.status == 0 else {
            throw XCTSkip("no aiosendspin in \(python): run `make deps`")
        }
        let sendspinPort = freePort()
        let broadcaster = try startProcess(productPath("broadcaster"), ["share", "--no-mdns", "--port", "\(freePort())", "--control-port", "0",
                                                                        "--sendspin-port", "\(sendspinPort)", try fixture("tagged.wav")])
        defer { broadcaster.signal(SIGTERM); _ = broadcaster.wait(timeout: 30) }
        XCTAssertTrue(broadcaster.waitForStderr("remote control:", timeout: 30), broadcaster.stderr)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("sendspin/plain_player.py").path
        let before = monotonicNow() / 1000
        let result = try runProcess(python, [script, "ws://127.0.0.1:\(sendspinPort)/sendspin"], timeout: 60)
        XCTAssertEqual(result.status, 0, result.stderr)
        let seen = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], result.stdout)
        let hello = try XCTUnwrap(seen["hello"] as? [String: Any])
        XCTAssertEqual(hello["active_roles"] as? [String], ["player@v1", "metadata@v1", "controller@v1"])
        // make-fixtures.sh's tags in tagged.wav's LIST/INFO chunk.
        let metadata = try XCTUnwrap(seen["metadata"] as? [String: Any])
        XCTAssertEqual(metadata["title"] as? String, "Fixture Title")
        XCTAssertEqual(metadata["artist"] as? String, "Fixture Artist")
        XCTAssertEqual(metadata["album"] as? String, "Fixture Album")
        XCTAssertEqual((metadata["progress"] as? [String: Any])?["track_duration"] as? Int, 20_000)
        let controller = try XCTUnwrap(seen["controller"] as? [String: Any])
        XCTAssertEqual(controller["supported_commands"] as? [String], ["play", "pause", "stop", "next", "previous", "volume"])
        XCTAssertEqual(controller["volume"] as? Int, 100)
        XCTAssertEqual(hello["version"] as? Int, 1)
        let format = try XCTUnwrap(seen["format"] as? [String: Any])
        XCTAssertEqual(format["codec"] as? String, "pcm")
        XCTAssertEqual(format["sample_rate"] as? Int, 48000)
        XCTAssertEqual(format["bit_depth"] as? Int, 16)
        XCTAssertEqual((seen["text"] as? [String])?.prefix(5), ["server/state", "server/state", "stream/start", "group/update", "server/command"])
        let time = try XCTUnwrap(seen["time"] as? [String: Any])
        XCTAssertEqual(time["client_transmitted"] as? Int, 5)
        let received = try XCTUnwrap(time["server_received"] as? Int), transmitted = try XCTUnwrap(time["server_transmitted"] as? Int)
        XCTAssertLessThanOrEqual(received, transmitted)
        XCTAssertGreaterThanOrEqual(Int64(received), before, "the broadcaster's monotonic clock in µs, the test's too")
        let frames = try XCTUnwrap(seen["frames"] as? [[String: Int]])
        // The join hands the socket a second of audio at once; the clock's answer comes after it.
        XCTAssertGreaterThanOrEqual(frames.count, 10)
        XCTAssertEqual(Set(frames.map { $0["type"] }), [4])
        XCTAssertEqual(Set(frames.map { $0["bytes"] }), [9 + 960 * 4], "the spec's 9-byte header, then 20 ms of 16-bit stereo")
        let timestamps = frames.compactMap { $0["timestamp"] }
        XCTAssertEqual(Set(zip(timestamps, timestamps.dropFirst()).map { $1 - $0 }), [20_000])
        XCTAssertGreaterThan(timestamps[0], received - 2_000_000, "on the same clock as the answers")
    }

    /// Artwork and metadata clients of both dialects get the song's cover, the picture as ffmpeg
    /// finds it in the file. The spec's plain one (its channels in client/hello) gets the title,
    /// stream/start saying what the cover is, then the spec's one binary message. The party cannot
    /// scale or convert (no image library), so it sends the original PNG whatever was asked for.
    func testArtworkClientsOfBothDialectsGetTheSongsCover() throws {
        let python = testDriver("python")
        guard (try? runProcess(python, ["-c", "import aiosendspin"], timeout: 60))?.status == 0 else {
            throw XCTSkip("no aiosendspin in \(python): run `make deps`")
        }
        let directory = try temporaryDirectory()
        let song = try fixture("id3v2.mp3")
        let reference = "\(directory)/reference.png"
        XCTAssertEqual(try runProcess("ffmpeg", ["-v", "error", "-i", song, "-an", "-c:v", "copy", reference]).status, 0)
        let sendspinPort = freePort()
        let broadcaster = try startProcess(productPath("broadcaster"), ["share", "--no-mdns", "--port", "\(freePort())", "--control-port", "0",
                                                                        "--sendspin-port", "\(sendspinPort)", "--loop", song])
        defer { broadcaster.signal(SIGTERM); _ = broadcaster.wait(timeout: 30) }
        XCTAssertTrue(broadcaster.waitForStderr("remote control:", timeout: 30), broadcaster.stderr)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("sendspin/artwork_client.py").path
        let result = try runProcess(python, [script, "ws://127.0.0.1:\(sendspinPort)/sendspin", "\(directory)/shown.png"], timeout: 60)
        XCTAssertEqual(result.status, 0, result.stderr + broadcaster.stderr)
        let seen = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], result.stdout)
        XCTAssertEqual((seen["hello"] as? [String: Any])?["active_roles"] as? [String], ["metadata@v1", "artwork@v1"])
        XCTAssertEqual((seen["metadata"] as? [String: Any])?["title"] as? String, "Fixture Title")
        let described = (seen["starts"] as? [[String: Any]])?.compactMap { ($0["artwork"] as? [String: Any])?["channels"] as? [[String: Any]] }.last?.first
        XCTAssertEqual(described?["source"] as? String, "album")
        XCTAssertEqual(described?["format"] as? String, "png")
        XCTAssertEqual(described?["width"] as? Int, 100)
        XCTAssertEqual(described?["height"] as? Int, 65)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: "\(directory)/shown.png")), try Data(contentsOf: URL(fileURLWithPath: reference)))
        // Each request is answered by stream/start; the picture goes again only to a channel that
        // showed none: not for a new size (3), not for 'none', once for the album again, then not
        // until the budget of 64 changes is spent and the 65th request closes the connection.
        let answers = try XCTUnwrap(seen["answers"] as? [Int], result.stdout)
        XCTAssertEqual(Array(answers.prefix(5)), [0, 0, 0, 0, 1], result.stdout)
        XCTAssertEqual(answers.count, 64, result.stdout)
        XCTAssertEqual(answers.dropFirst(5).reduce(0, +), 0, result.stdout)
        XCTAssertEqual(seen["requests"] as? Int, 65, result.stdout)
        XCTAssertEqual(seen["closed"] as? Bool, true, result.stdout)
        XCTAssertTrue(broadcaster.waitForStderr("it changed its artwork channels more than 64 times", timeout: 30), broadcaster.stderr)

        // aiosendspin 10's own client, encrypted: the cover in its announce-and-parts framing, put
        // together by its code and handed to its artwork listener, with no warning from it.
        let encrypted = try runProcess(python, [URL(fileURLWithPath: script).deletingLastPathComponent().appendingPathComponent("encrypted_artwork_client.py").path,
                                                "ws://127.0.0.1:\(sendspinPort)/sendspin"], timeout: 60)
        XCTAssertEqual(encrypted.status, 0, encrypted.stderr + broadcaster.stderr)
        XCTAssertFalse(encrypted.stderr.contains("WARNING") || encrypted.stderr.contains("ERROR"), encrypted.stderr)
        let images = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(encrypted.stdout.utf8)) as? [[String: Any]], encrypted.stdout)
        let digest = try runProcess("sha256sum", [reference]).stdout.prefix(64)
        XCTAssertEqual(images.last?["channel"] as? Int, 0)
        XCTAssertEqual(images.last?["sha256"] as? String, String(digest), "\(images)")
    }
}
