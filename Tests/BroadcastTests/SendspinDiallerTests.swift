import Foundation
import PartyCastTestSupport
import XCTest

/// `broadcaster share --sendspin-player URL`: the spec's server-initiated connections, where the
/// party dials a Sendspin player that waits for servers.
final class SendspinDiallerTests: XCTestCase {
    /// `sendspin daemon` without --url waits for servers on the spec's port 8928 and advertises
    /// itself over mDNS, so both it and the broadcaster run in a network namespace of the test's
    /// own. The broadcaster dials it (no port in the URL: 8928) and the daemon plays the song.
    func testTheBroadcasterDialsAWaitingDaemonAndItPlaysTheSong() throws {
        let directory = try temporaryDirectory()
        let song = try fixture("pcm16.wav")
        let namespace = try isolatedLoopback()
        let player = try ReferencePlayer(in: directory, connection: ["--port", "8928"], namespace: namespace)
        defer { player.process.signal(SIGTERM) }
        XCTAssertTrue(player.process.waitForStderr("Listening for server connections on port 8928", timeout: 60), player.process.stderr)
        // Long enough a start for the player's clock to settle before the song starts.
        let broadcaster = try startProcess("/usr/sbin/ip", ["netns", "exec", namespace, productPath("broadcaster"), "share", "--no-mdns",
                                                            "--port", "0", "--control-port", "0", "--sendspin-port", "0", "--start-in", "8",
                                                            "--sendspin-player", "ws://127.0.0.1/sendspin", song])
        defer { broadcaster.signal(SIGTERM) }
        XCTAssertTrue(broadcaster.waitForStderr("Sendspin player reference-player@127.0.0.1 joined (pcm 48000 Hz, 16 bit)", timeout: 60),
                      broadcaster.stderr + player.process.stderr)
        // The party ends with the song, and with it the dialling: no redial after the player joined.
        let shared = broadcaster.wait(timeout: 90)
        XCTAssertEqual(shared.status, 0, shared.stderr)
        let afterJoin = shared.stderr.components(separatedBy: "Sendspin player reference-player@127.0.0.1 joined").last ?? ""
        XCTAssertFalse(afterJoin.contains("dialling again"), shared.stderr)
        try player.assertPlayed(song, in: directory)
    }

    /// Players that answer with garbage, that never answer, that nothing listens for, or that say a
    /// valid hello and close: the broadcaster says one line per failed connection, dials again
    /// later each time (250 ms, doubling to 4 s: a hello alone is no healthy connection), plays
    /// on, and stops cleanly.
    func testHostileAndAbsentPlayersAreRedialledWithOneLineEach() throws {
        let python = testDriver("python")
        guard FileManager.default.isExecutableFile(atPath: python) else { throw XCTSkip("no python in the tests' venv: run `make deps`") }
        let hostilePort = freePort(), absentPort = freePort()
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("sendspin/hostile_player.py").path
        let hostile = try startProcess(python, [script, "\(hostilePort)"])
        defer { hostile.signal(SIGTERM) }
        XCTAssertTrue(waitForPort(hostilePort, timeout: 30), hostile.stderr)
        // Listening, so the kernel completes every connection, but never accepting or answering one.
        let silent = try XCTUnwrap(boundLoopbackSocket())
        defer { close(silent.fd) }
        XCTAssertEqual(listen(silent.fd, 16), 0)
        let hostileURL = "ws://127.0.0.1:\(hostilePort)/sendspin", absentURL = "ws://127.0.0.1:\(absentPort)/sendspin"
        let silentURL = "ws://127.0.0.1:\(silent.port)/sendspin"
        let broadcaster = try startProcess(productPath("broadcaster"), ["share", "--no-mdns", "--port", "\(freePort())", "--control-port", "0",
                                                                        "--sendspin-port", "\(freePort())", "--loop", "--start-in", "0",
                                                                        "--sendspin-player", hostileURL, "--sendspin-player", absentURL, "--sendspin-player", silentURL,
                                                                        try fixture("pcm16.wav")])
        defer { broadcaster.signal(SIGTERM) }
        func failures(_ url: String, in log: String) -> [Substring] {
            log.split(separator: "\n").filter { $0.contains("Sendspin player \(url): ") && $0.contains("dialling again") }
        }
        // Six hostile answers, each kind at least once: 0.25 + 0.5 + 1 + 2 + 4 s of waits between them.
        XCTAssertTrue(waitUntil(timeout: 60) { failures(hostileURL, in: broadcaster.stderr).count >= 6 && failures(absentURL, in: broadcaster.stderr).count >= 6 },
                      broadcaster.stderr)
        // The upgrade's 10 s deadline.
        XCTAssertTrue(waitUntil(timeout: 30) { !failures(silentURL, in: broadcaster.stderr).isEmpty }, broadcaster.stderr)
        broadcaster.signal(SIGTERM)
        let result = broadcaster.wait(timeout: 30)
        XCTAssertEqual(result.status, 0, result.stderr)
        hostile.signal(SIGTERM)
        let told = hostile.wait(timeout: 30).stdout.split(separator: "\n")
        let connections = told.filter { $0.hasPrefix("connection ") && !$0.hasSuffix("closed by the server") }.count
        // The fourth refused the upgrade and kept its connection open: the broadcaster closed it.
        XCTAssertTrue(told.contains("connection 3 closed by the server"), told.joined(separator: "\n"))
        XCTAssertTrue(failures(hostileURL, in: result.stderr).contains { $0.contains("it did not open a WebSocket at /sendspin") }, result.stderr)
        let hostileLines = failures(hostileURL, in: result.stderr), absentLines = failures(absentURL, in: result.stderr)
        // One line per connection; the last may have been cut short by the stop, before its line.
        XCTAssertTrue((connections - 1...connections).contains(hostileLines.count), "\(connections) connections: \(hostileLines.joined(separator: "\n"))")
        XCTAssertTrue(absentLines.allSatisfy { $0.contains("cannot connect") }, absentLines.joined(separator: "\n"))
        XCTAssertTrue(hostileLines.contains { $0.contains("it went away") }, result.stderr)
        let waits = { (lines: [Substring]) in lines.prefix(6).map { $0.split(separator: " ").suffix(2).joined(separator: " ") } }
        XCTAssertEqual(waits(absentLines), ["0.25 s", "0.5 s", "1.0 s", "2.0 s", "4.0 s", "4.0 s"])
        XCTAssertEqual(waits(hostileLines), ["0.25 s", "0.5 s", "1.0 s", "2.0 s", "4.0 s", "4.0 s"], result.stderr)
        XCTAssertEqual(failures(silentURL, in: result.stderr).first?.contains("the connection closed before its WebSocket opened"), true, result.stderr)
        XCTAssertFalse(result.stderr.contains("Fatal error"), result.stderr)
    }

    /// aiosendspin's server dials its players again only after a client/goodbye saying `restart`:
    /// one that leaves for another server is not dialled back, one that restarts is, later each
    /// time while it keeps restarting at once.
    func testAPlayerThatLeavesForAnotherServerIsNotDialledAgain() throws {
        let python = testDriver("python")
        guard FileManager.default.isExecutableFile(atPath: python) else { throw XCTSkip("no python in the tests' venv: run `make deps`") }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("sendspin/hostile_player.py").path
        let leavingPort = freePort(), restartingPort = freePort()
        let leaving = try startProcess(python, [script, "\(leavingPort)", "another_server"])
        defer { leaving.signal(SIGTERM) }
        let restarting = try startProcess(python, [script, "\(restartingPort)", "restart"])
        defer { restarting.signal(SIGTERM) }
        XCTAssertTrue(waitForPort(leavingPort, timeout: 30) && waitForPort(restartingPort, timeout: 30), leaving.stderr + restarting.stderr)
        let leavingURL = "ws://127.0.0.1:\(leavingPort)/sendspin", restartingURL = "ws://127.0.0.1:\(restartingPort)/sendspin"
        let broadcaster = try startProcess(productPath("broadcaster"), ["share", "--no-mdns", "--port", "\(freePort())", "--control-port", "0",
                                                                        "--sendspin-port", "\(freePort())", "--loop", "--start-in", "0",
                                                                        "--sendspin-player", leavingURL, "--sendspin-player", restartingURL,
                                                                        try fixture("pcm16.wav")])
        defer { broadcaster.signal(SIGTERM) }
        func restarts(in log: String) -> [Substring] {
            log.split(separator: "\n").filter { $0.contains("Sendspin player \(restartingURL): it restarts") }
        }
        XCTAssertTrue(waitUntil(timeout: 60) {
            broadcaster.stderr.contains("Sendspin player \(leavingURL) said goodbye (another_server): not dialling it again") && restarts(in: broadcaster.stderr).count >= 3
        }, broadcaster.stderr)
        broadcaster.signal(SIGTERM)
        let result = broadcaster.wait(timeout: 30)
        XCTAssertEqual(result.status, 0, result.stderr)
        leaving.signal(SIGTERM)
        XCTAssertEqual(leaving.wait(timeout: 30).stdout.split(separator: "\n").filter { $0.hasPrefix("connection ") }.count, 1)
        // Doubling (the first dial may have come before the party's first song and taken 0.25 s).
        let waits = restarts(in: result.stderr).prefix(3).compactMap { Double($0.split(separator: " ").suffix(2).first ?? "") }
        XCTAssertEqual(waits.count, 3, result.stderr)
        XCTAssertTrue(zip(waits, waits.dropFirst()).allSatisfy { $1 == 2 * $0 } && waits[0] >= 0.25, result.stderr)
        XCTAssertFalse(result.stderr.split(separator: "\n").contains { $0.contains(leavingURL) && $0.contains("dialling again") }, result.stderr)
    }
}
