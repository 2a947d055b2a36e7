import Foundation
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// Ctrl-C ends either program within 2 s with status 0 (a user's stop), whatever the peer does.
final class PromptQuitTests: XCTestCase {
    let broadcaster = productPath("broadcaster")
    let listener = productPath("listener")

    /// Sends SIGINT and returns how long the process took to exit, and its result.
    func interrupt(_ process: BackgroundProcess) -> (seconds: Double, result: ProcessResult) {
        let sent = Date()
        process.signal(SIGINT)
        let result = process.wait(timeout: 10)
        return (Date().timeIntervalSince(sent), result)
    }

    func assertQuitPromptly(_ process: BackgroundProcess, _ situation: String) {
        let (seconds, result) = interrupt(process)
        XCTAssertFalse(result.timedOut, "\(situation): still running 10 s after Ctrl-C\n\(result.stderr)")
        XCTAssertLessThan(seconds, 2, "\(situation): took \(seconds) s to quit\n\(result.stderr)")
        XCTAssertEqual(result.status, 0, "\(situation): a user's stop\n\(result.stderr)")
        XCTAssertFalse(result.stderr.contains("Fatal error"), result.stderr)
    }

    /// A listener that joined and then stopped reading: the broadcaster's writes to it back up to a
    /// zero TCP window, and its goodbye can never be delivered.
    func testBroadcasterQuitsWithAListenerThatStoppedReading() throws {
        let port = freePort()
        // Float PCM sent 10 s ahead: about 4 MB at once, more than the socket buffers take.
        let server = try startProcess(broadcaster, ["share", "--no-mdns", "--port", "\(port)", "tone:440:60", "--codec", "pcm",
                                                    "--start-in", "0", "--buffer", "10000", "--log-level", "debug"])
        XCTAssertTrue(server.waitForStderr("broadcasting", timeout: 20), server.stderr)
        let fd = try XCTUnwrap(connectToLoopback(port: port))
        defer { close(fd) }
        var hello = PCHello()
        hello.protocolVersion = partyCastProtocolVersion
        hello.listenerName = "stalled"
        var envelope = PCEnvelope()
        envelope.body = .hello(hello)
        let frame = try WireFraming.encode(envelope)
        XCTAssertEqual(frame.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }, frame.count)
        XCTAssertTrue(server.waitForStderr("backed up", timeout: 30), "the connection never stalled: \(server.stderr)")
        assertQuitPromptly(server, "broadcaster with a stalled listener")
    }

    /// A broadcaster frozen mid-broadcast (SIGSTOP: it neither reads nor writes) while the listener plays.
    func testListenerQuitsWhileItsBroadcasterIsFrozen() throws {
        let directory = try temporaryDirectory()
        let port = freePort()
        let server = try startProcess(broadcaster, ["share", "--no-mdns", "--port", "\(port)", "tone:440:60", "--start-in", "0"])
        XCTAssertTrue(server.waitForStderr("broadcasting", timeout: 20), server.stderr)
        let listening = try startProcess(listener, ["join", "--host", "127.0.0.1:\(port)", "--output", "virtual:\(directory)/v.wav", "--quiet"])
        XCTAssertTrue(server.waitForStderr("joined", timeout: 20), server.stderr)
        server.signal(SIGSTOP)
        defer {
            server.signal(SIGCONT)
            server.signal(SIGINT)
            _ = server.wait(timeout: 10)
        }
        assertQuitPromptly(listening, "listener whose broadcaster froze")
    }

    /// A server that accepts the connection and never says a word: the listener is still joining.
    func testListenerQuitsWhileJoiningABroadcasterThatNeverAnswers() throws {
        guard let (fd, port) = boundLoopbackSocket(), listen(fd, 4) == 0 else { return XCTFail("no socket") }
        defer { close(fd) }
        let joining = try startProcess(listener, ["join", "--host", "127.0.0.1:\(port)", "--output", "null", "--quiet"])
        let peer = accept(fd, nil, nil)
        defer { close(peer) }
        XCTAssertGreaterThanOrEqual(peer, 0)
        XCTAssertTrue(joining.waitForStderr("connected to", timeout: 20), joining.stderr)
        assertQuitPromptly(joining, "listener joining a silent broadcaster")
    }

    /// The broadcaster went away: the listener waits between attempts to reconnect (up to 4 s).
    func testListenerQuitsDuringReconnectBackoff() throws {
        let port = freePort()
        let server = try startProcess(broadcaster, ["share", "--no-mdns", "--port", "\(port)", "tone:440:2", "--codec", "pcm", "--start-in", "0"])
        XCTAssertTrue(server.waitForStderr("broadcasting", timeout: 20), server.stderr)
        let listening = try startProcess(listener, ["join", "--host", "127.0.0.1:\(port)", "--output", "null", "--quiet"])
        XCTAssertEqual(server.wait(timeout: 30).status, 0)
        // Gone for good: each attempt is refused and the wait before the next one doubles.
        XCTAssertTrue(listening.waitForStderr("retrying in 1.0 s", timeout: 30), listening.stderr)
        assertQuitPromptly(listening, "listener backing off between reconnections")
    }
}
