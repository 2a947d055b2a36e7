import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PartyCastTestSupport
import XCTest

/// The broadcaster against a hostile "mpd": a Python server speaking mpd's protocol, each `mode`
/// one way of misbehaving. It tells on stderr which commands it was sent.
extension MPDSourceTests {
    static let fakeMPD = #"""
        import socket, sys, time
        port, mode = int(sys.argv[1]), sys.argv[2]
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen(4)
        title = "\x1b[2JEvil\x07 " + "x" * 1000
        song = ("file: evil.mp3\nTitle: " + title + "\nArtist: \x1b]0;owned\x07Band\nId: 7\nOK\n").encode()

        def serve(connection):
            connection.sendall(b"OK MPD 0.23.0\n")
            for line in connection.makefile("rb"):
                command = line.split()[0].decode()
                print(command, file=sys.stderr, flush=True)
                if command == "status" and mode == "trickle":
                    # A byte a second: each read is quick, the answer never whole.
                    connection.sendall(b"state: play\nsongid: 7\nlastloadedplaylist: ")
                    while True:
                        connection.sendall(b"x")
                        time.sleep(1)
                elif command == "status":
                    connection.sendall(b"state: play\nsongid: 7\nelapsed: 12.5\nduration: 99999999999999\nOK\n")
                elif command == "currentsong" and mode == "endless-song":
                    connection.sendall(b"file: evil.mp3\n")
                    while True:
                        connection.sendall(b"Artist: x\n" * 1000)
                elif command == "currentsong":
                    connection.sendall(song)
                elif command in ("readpicture", "albumart") and mode == "endless-picture":
                    connection.sendall(b"size: 99999999999\ntype: image/png\nbinary: 8192\n" + bytes(8192) + b"\nOK\n")
                elif command == "readpicture":
                    connection.sendall(b"OK\n")
                elif command == "albumart":
                    connection.sendall(b"ACK [50@0] {albumart} No file exists\n")
                elif command == "idle":
                    if mode == "close-at-idle":
                        return
                elif command == "noidle":
                    if mode == "close-at-pause":
                        time.sleep(3)  # the commands the party sends meanwhile wait in one batch
                    connection.sendall(b"OK\n")
                elif command == "pause" and mode == "close-at-pause":
                    return
                else:
                    connection.sendall(b"OK\n")

        while True:
            connection, _ = server.accept()
            try:
                serve(connection)
            except OSError:
                pass
            connection.close()
        """#

    /// The fake mpd in `mode`, and a broadcaster following it.
    func startFakeMPD(_ mode: String) throws -> (fake: BackgroundProcess, broadcaster: BackgroundProcess, remote: Remote, mpd: String) {
        let fifo = try temporaryDirectory() + "/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let port = freePort()
        let fake = try startProcess("python3", ["-c", Self.fakeMPD, "\(port)", mode])
        XCTAssertTrue(waitForPort(port, timeout: 10), fake.stderr)
        let (broadcaster, remote, _) = try Self.startBroadcaster(["pipe:\(fifo)", "--mpd", "127.0.0.1:\(port)"])
        return (fake, broadcaster, remote, "127.0.0.1:\(port)")
    }

    /// A title of a thousand characters with terminal escapes, and a picture that never ends: the
    /// party shows the title cleaned and cut, refuses the picture with one line once 4 MiB have
    /// come, and goes on.
    func testAHostileMPDIsCleanedAndBounded() async throws {
        let (fake, broadcast, remote, _) = try startFakeMPD("endless-picture")
        defer { fake.signal(SIGKILL); broadcast.signal(SIGKILL) }
        let shown = try await remote.wait(timeout: 10) { $0.queue.first?.artist != nil }
        let item = try XCTUnwrap(shown?.status.queue.first, broadcast.stderr)
        // The escape's control character gone (what follows it is plain text), cut at 200 characters.
        XCTAssertEqual(item.title, "[2JEvil " + String(repeating: "x", count: 192) + "…")
        XCTAssertEqual(item.artist, "]0;owned Band")
        XCTAssertTrue(broadcast.waitForStderr("is over 4 MiB: not shown", timeout: 30), broadcast.stderr)
        XCTAssertEqual(broadcast.stderr.components(separatedBy: "over 4 MiB").count, 2, "one line: \(broadcast.stderr)")
        let status = try await remote.status()
        XCTAssertFalse(status.queue.first?.hasCover ?? true)
        XCTAssertFalse(status.paused, "mpd says it plays")
        XCTAssertTrue(broadcast.isRunning)
    }

    /// A current song that never ends (libmpdclient would gather its lines until memory runs out),
    /// and a status sent a byte a second (each read well within libmpdclient's 5 s): each is cut
    /// off with one line, and the broadcaster connects again.
    func testAnEndlessOrTricklingAnswerIsCutOff() async throws {
        for (mode, line) in [("endless-song", "its answer to currentsong ran over 256 lines or 64 KiB"), ("trickle", "no whole answer within 5 s")] {
            let (fake, broadcast, _, mpd) = try startFakeMPD(mode)
            defer { fake.signal(SIGKILL); broadcast.signal(SIGKILL) }
            XCTAssertTrue(broadcast.waitForStderr("mpd at \(mpd) went away: \(line)", timeout: 60), "\(mode): \(broadcast.stderr)")
            let followed = { broadcast.stderr.components(separatedBy: "following mpd at").count - 1 }
            let before = followed()
            // The fake answers the next connection once the broken one is gone.
            XCTAssertTrue(waitUntil(timeout: 30, every: 0.05) { followed() > before }, "\(mode): not followed again: \(broadcast.stderr)")
            XCTAssertTrue(broadcast.isRunning, broadcast.stderr)
        }
    }

    /// An mpd that answers once and closes at every idle: it is connected to on the schedule's
    /// growing delays (250 ms, 500 ms, 1 s, …), not at once again and again.
    func testAnMPDThatClosesAtOnceIsNotHammered() async throws {
        let (fake, broadcast, _, mpd) = try startFakeMPD("close-at-idle")
        defer { fake.signal(SIGKILL); broadcast.signal(SIGKILL) }
        XCTAssertTrue(broadcast.waitForStderr("mpd at \(mpd) went away", timeout: 20), broadcast.stderr)
        // What 3 s of the schedule allows: attempts at 0.25, 0.75 and 1.75 s (3.75 s is past it).
        try await letTimePass(3)
        let connections = fake.stderr.components(separatedBy: "currentsong").count - 1
        print("a closing mpd: \(connections) connections in the first 3 s after it first closed")
        XCTAssertGreaterThanOrEqual(connections, 2, fake.stderr)
        XCTAssertLessThanOrEqual(connections, 6, "hammered: \(broadcast.stderr)")
    }

    /// mpd gone while the party's pause and next wait for it in one batch: both remotes are
    /// answered with why, neither left waiting (nor waiting out the party's deadline).
    func testCommandsBatchedBeforeMPDWentAreAllAnswered() async throws {
        let (fake, broadcast, remote, mpd) = try startFakeMPD("close-at-pause")
        defer { fake.signal(SIGKILL); broadcast.signal(SIGKILL) }
        XCTAssertTrue(broadcast.waitForStderr("following mpd at \(mpd)", timeout: 20), broadcast.stderr)
        func post(_ path: String) async throws -> (status: Int, body: String) {
            var request = URLRequest(url: URL(string: remote.base + path)!)
            request.httpMethod = "POST"
            request.timeoutInterval = 60
            let (data, response) = try await URLSession.shared.data(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
        }
        async let pause = post("/api/pause")
        // The fake holds its answer to noidle for 3 s: next joins pause in the link's batch.
        XCTAssertTrue(fake.waitForStderr("noidle", timeout: 20), fake.stderr)
        async let next = post("/api/next")
        let answers = [("pause", try await pause), ("next", try await next)]
        for (command, (status, body)) in answers {
            XCTAssertEqual(status, 500, "\(command): \(body)")
            XCTAssertTrue(body.contains("mpd at \(mpd):"), "\(command): \(body)")
            XCTAssertFalse(body.contains("did not answer"), "\(command) waited for the deadline: \(body)")
        }
        XCTAssertTrue(broadcast.isRunning, broadcast.stderr)
    }
}
