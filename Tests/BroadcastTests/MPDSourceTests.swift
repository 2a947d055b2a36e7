import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PartyCastControlSeam
import PartyCastTestSupport
import XCTest

/// mpd as the party's source, as Snapcast users run it: a private mpd (Debian's, on 127.0.0.1, its
/// own config, database and fifo output in a temporary folder) writes raw PCM into a FIFO the
/// broadcaster shares with `--mpd`. The broadcaster's remote control API shows what mpd plays, as
/// mpd changes it, and its transport commands reach mpd, as `mpc` (mpd's own client) reports.
final class MPDSourceTests: XCTestCase {
    static let broadcaster = productPath("broadcaster")

    /// One song of the private mpd's library: tags set by lame, the audio a sine from sox.
    struct Song {
        var file: String
        var title: String
        var hertz: Int
        /// Its picture, when it has one: a spectrogram of a tone of these hertz.
        var coverHertz: Int?
    }

    static let songs = [
        Song(file: "1.mp3", title: "Song One", hertz: 440),
        Song(file: "2.mp3", title: "Song Two", hertz: 660, coverHertz: 300),
        Song(file: "3.mp3", title: "Song Three", hertz: 880, coverHertz: 500),
    ]
    static let songSeconds = 40.0

    /// mpd in the foreground (its PID is the test's), on a free port of 127.0.0.1.
    final class MPD {
        let port: Int
        let process: BackgroundProcess

        init(directory: String, fifo: String, port: Int = freePort()) throws {
            self.port = port
            let config = """
                music_directory "\(directory)/music"
                db_file "\(directory)/database"
                bind_to_address "127.0.0.1"
                port "\(port)"
                zeroconf_enabled "no"
                audio_output {
                    type "fifo"
                    name "party"
                    path "\(fifo)"
                    format "48000:16:2"
                }
                """
            try config.write(toFile: "\(directory)/mpd.conf", atomically: true, encoding: .utf8)
            process = try startProcess("mpd", ["--no-daemon", "--stderr", "\(directory)/mpd.conf"])
            guard waitForPort(port, timeout: 20) else {
                XCTFail("mpd did not start: \(process.stderr)")
                throw CocoaError(.executableLoad)
            }
        }

        /// `mpc` against this mpd; its output.
        @discardableResult
        func mpc(_ arguments: String...) throws -> String {
            let result = try runProcess("mpc", ["-h", "127.0.0.1", "-p", "\(port)"] + arguments, timeout: 20)
            XCTAssertEqual(result.status, 0, "mpc \(arguments): \(result.stderr)")
            return result.stdout
        }

        func stop() {
            process.signal(SIGTERM)
            _ = process.wait(timeout: 10)
        }
    }

    /// A folder with the songs, a FIFO, and the songs' pictures by title.
    static func makeLibrary() throws -> (directory: String, fifo: String, covers: [String: Data]) {
        let directory = try temporaryDirectory()
        try FileManager.default.createDirectory(atPath: "\(directory)/music", withIntermediateDirectories: true)
        func run(_ command: String) throws {
            let result = try runProcess("/bin/sh", ["-c", command], timeout: 60)
            XCTAssertEqual(result.status, 0, "\(command): \(result.stderr)")
        }
        var covers: [String: Data] = [:]
        for song in Self.songs {
            var cover = ""
            if let hertz = song.coverHertz {
                let picture = "\(directory)/cover\(hertz).png"
                try run("sox -n -r 8000 -c 1 \(directory)/cover\(hertz).wav synth 1 sine \(hertz) && sox \(directory)/cover\(hertz).wav -n spectrogram -r -x 100 -y 65 -o \(picture)")
                covers[song.title] = try Data(contentsOf: URL(fileURLWithPath: picture))
                cover = "--ti \(picture)"
            }
            try run("sox -n -r 44100 -c 2 -b 16 \(directory)/\(song.hertz).wav synth \(Self.songSeconds) sine \(song.hertz) vol 0.3"
                    + " && lame --quiet -b 96 --tt '\(song.title)' --ta 'The Testers' --tl 'Fixtures' \(cover) \(directory)/\(song.hertz).wav \(directory)/music/\(song.file)")
        }
        let fifo = "\(directory)/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        return (directory, fifo, covers)
    }

    /// The broadcaster's remote control API.
    struct Remote {
        let base: String

        func status() async throws -> PartySnapshot {
            try JSONDecoder().decode(PartySnapshot.self, from: try await get("/api/status"))
        }

        func get(_ path: String) async throws -> Data {
            let (data, response) = try await URLSession.shared.data(from: URL(string: base + path)!)
            XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200, "\(path): \(String(decoding: data, as: UTF8.self))")
            return data
        }

        /// POSTs a command; the party's answer.
        func post(_ path: String) async throws -> PartySnapshot {
            var request = URLRequest(url: URL(string: base + path)!)
            request.httpMethod = "POST"
            let (data, response) = try await URLSession.shared.data(for: request)
            XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200, "\(path): \(String(decoding: data, as: UTF8.self))")
            return try JSONDecoder().decode(PartySnapshot.self, from: data)
        }

        /// The first status that satisfies `condition` within `timeout` seconds, and how many seconds
        /// after `since` (monotonic ns) it was seen; nil if none was.
        func wait(timeout: TimeInterval, since: Int64 = monotonicNow(), until condition: (PartySnapshot) -> Bool) async throws
            -> (status: PartySnapshot, seconds: Double)? {
            let deadline = monotonicNow() + Int64(timeout * 1e9)
            while monotonicNow() < deadline {
                let status = try await status()
                if condition(status) { return (status, Double(monotonicNow() - since) / 1e9) }
                try await letTimePass(0.02)
            }
            return nil
        }
    }

    static func title(_ status: PartySnapshot) -> String? { status.queue.first { $0.id == status.current }?.title }

    static func startBroadcaster(_ arguments: [String]) throws -> (BackgroundProcess, Remote, port: Int) {
        let (port, controlPort) = (freePort(), freePort())
        let server = try startProcess(Self.broadcaster, ["share"] + arguments + ["--no-mdns", "--no-sendspin", "--bind", "127.0.0.1",
                                                                          "--port", "\(port)", "--control-port", "\(controlPort)"])
        XCTAssertTrue(server.waitForStderr("remote control:", timeout: 30), server.stderr)
        return (server, Remote(base: "http://127.0.0.1:\(controlPort)"), port)
    }

    /// Titles, artist, album, duration and covers as mpd has them (each new cover under a new
    /// revision of the one item), each song change shown after `mpc next` (how soon is printed);
    /// mpd's pause and play followed; the remote's pause, resume, next, previous and seek carried
    /// out by mpd, each answered with mpd's new state.
    func testTheRemoteFollowsAndDrivesMPD() async throws {
        let (directory, fifo, covers) = try Self.makeLibrary()
        let mpd = try MPD(directory: directory, fifo: fifo)
        defer { mpd.stop() }
        try mpd.mpc("update", "--wait")
        try mpd.mpc("add", "/")
        let (server, remote, port) = try Self.startBroadcaster(["pipe:\(fifo)", "--mpd", "127.0.0.1:\(mpd.port)"])
        defer { server.signal(SIGKILL) }

        // mpd stopped: a pause, not a party that counts on.
        let stopped = try await remote.wait(timeout: 5) { $0.paused }
        XCTAssertNotNil(stopped, server.stderr)
        XCTAssertEqual(stopped?.status.queue.first?.title, "mpd at 127.0.0.1:\(mpd.port)", "no song: named after mpd")
        // A listener that joins meanwhile is told each song too.
        let listener = try startProcess(productPath("listener"), ["join", "--host", "127.0.0.1:\(port)", "--output", "null"])
        defer { listener.signal(SIGKILL) }
        XCTAssertTrue(listener.waitForStderr("connected", timeout: 20), listener.stderr)
        try mpd.mpc("play")
        let playing = try await remote.wait(timeout: 5) { !$0.paused && Self.title($0) == "Song One" }
        XCTAssertNotNil(playing, server.stderr)
        let first = playing?.status.queue.first
        XCTAssertEqual(first?.artist, "The Testers")
        XCTAssertEqual(first?.album, "Fixtures")
        XCTAssertEqual(first?.durationSeconds ?? 0, Self.songSeconds, accuracy: 0.1)
        XCTAssertEqual(first?.hasCover, false)

        for (command, expected) in [("next", "Song Two"), ("next", "Song Three"), ("prev", "Song Two")] {
            let asked = monotonicNow()
            try mpd.mpc(command)
            let shown = try await remote.wait(timeout: 5, since: asked) { Self.title($0) == expected }
            XCTAssertNotNil(shown, "\(expected) never shown: \(server.stderr)")
            print(String(format: "mpc %@: %@ shown %.3f s after", command, expected, shown?.seconds ?? 99))
        }
        // Song Two's picture, read from mpd, byte for byte.
        let withCover = try await remote.wait(timeout: 5) { Self.title($0) == "Song Two" && $0.queue.first?.hasCover == true }
        XCTAssertNotNil(withCover, server.stderr)
        let id = try XCTUnwrap(withCover?.status.current)
        let served = try await remote.get("/api/items/\(id)/cover")
        XCTAssertEqual(served, covers["Song Two"])
        let twosRevision = try XCTUnwrap(withCover?.status.queue.first?.coverRevision)
        // Song Three played for a moment too short to reach the listener's speaker: it never shows there.
        for title in ["Song One", "Song Two"] {
            XCTAssertTrue(listener.waitForStderr("now playing: \(title)", timeout: 5), "the listener was not told \(title): \(listener.stderr)")
        }

        // The remote's pause pauses mpd: by the time it answers, mpd says so.
        let paused = try await remote.post("/api/pause")
        XCTAssertTrue(paused.paused)
        XCTAssertTrue(try mpd.mpc("status").contains("[paused]"))
        // mpd's own play and pause, followed within 1 s.
        var asked = monotonicNow()
        try mpd.mpc("play")
        let resumed = try await remote.wait(timeout: 5, since: asked) { !$0.paused }
        XCTAssertNotNil(resumed, server.stderr)
        asked = monotonicNow()
        try mpd.mpc("pause")
        let pausedByMPD = try await remote.wait(timeout: 5, since: asked) { $0.paused }
        XCTAssertNotNil(pausedByMPD, server.stderr)
        print(String(format: "mpd's play shown %.3f s after, its pause %.3f s after", resumed?.seconds ?? 99, pausedByMPD?.seconds ?? 99))
        // And `ctl`, as a user would: resume, next, seek and previous, each answered with mpd's result.
        func ctl(_ arguments: String...) throws -> String {
            let result = try runProcess(Self.broadcaster, ["ctl", "--url", remote.base] + arguments, timeout: 20)
            XCTAssertEqual(result.status, 0, "ctl \(arguments): \(result.stderr)")
            return result.stdout
        }
        XCTAssertTrue(try ctl("resume").contains("playing"))
        XCTAssertTrue(try mpd.mpc("status").contains("[playing]"))
        XCTAssertTrue(try ctl("next").contains("Song Three"))
        XCTAssertTrue(try mpd.mpc("current").contains("Song Three"))
        // Song Three's own picture, under the same item: a new revision, its bytes.
        let newCover = try await remote.wait(timeout: 5) { Self.title($0) == "Song Three" && $0.queue.first?.hasCover == true }
        let threesRevision = try XCTUnwrap(newCover?.status.queue.first?.coverRevision, server.stderr)
        XCTAssertNotEqual(threesRevision, twosRevision)
        let servedThree = try await remote.get("/api/items/\(id)/cover?rev=\(threesRevision)")
        XCTAssertEqual(servedThree, covers["Song Three"])
        let sought = try ctl("seek", "20")
        let position = try XCTUnwrap(sought.firstMatch(of: /(\d+):(\d\d) \//).map { Int($0.1)! * 60 + Int($0.2)! }, sought)
        XCTAssertGreaterThanOrEqual(position, 20, sought)
        XCTAssertTrue(try mpd.mpc("status").contains("0:2"), "mpd did not seek")
        XCTAssertTrue(try ctl("previous").contains("Song Two"))
        XCTAssertTrue(try mpd.mpc("current").contains("Song Two"))
        XCTAssertTrue(server.isRunning, server.stderr)
    }

    /// mpd away when the party starts, back, and gone again: the broadcaster waits for it (refusing
    /// what only mpd can do meanwhile), follows it once it is up, and shows a pause when it goes,
    /// with one line each time, the party going on.
    func testTheBroadcasterOutlivesMPD() async throws {
        let (directory, fifo, _) = try Self.makeLibrary()
        let mpdPort = freePort()
        let (server, remote, _) = try Self.startBroadcaster(["pipe:\(fifo)", "--mpd", "127.0.0.1:\(mpdPort)"])
        defer { server.signal(SIGKILL) }
        XCTAssertTrue(server.waitForStderr("mpd at 127.0.0.1:\(mpdPort)", timeout: 10), server.stderr)
        let refused = try runProcess(Self.broadcaster, ["ctl", "--url", remote.base, "pause"], timeout: 20)
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("cannot be reached now"), refused.stderr)

        let mpd = try MPD(directory: directory, fifo: fifo, port: mpdPort)
        defer { mpd.stop() }
        try mpd.mpc("update", "--wait")
        try mpd.mpc("add", "/")
        try mpd.mpc("play")
        let playing = try await remote.wait(timeout: 10) { !$0.paused && Self.title($0) == "Song One" }
        XCTAssertNotNil(playing, server.stderr)
        mpd.stop()
        let paused = try await remote.wait(timeout: 5) { $0.paused }
        XCTAssertNotNil(paused, server.stderr)
        XCTAssertTrue(server.waitForStderr("went away", timeout: 5), server.stderr)
        XCTAssertTrue(server.isRunning, "the party ended with mpd: \(server.stderr)")
    }

    /// A pipe without mpd takes its title from --title; --title and --mpd say when they do not fit.
    func testAPlainPipeTakesItsTitle() async throws {
        let fifo = try temporaryDirectory() + "/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let (server, remote, _) = try Self.startBroadcaster(["pipe:\(fifo)", "--title", "Kitchen\u{1B}[2J Radio", "--pcm-format", "48000:16:2"])
        defer { server.signal(SIGKILL) }
        let status = try await remote.status()
        XCTAssertEqual(status.queue.map(\.title), ["Kitchen [2J Radio"], "control characters cleaned: \(server.stderr)")
        let noPipe = try runProcess(Self.broadcaster, ["share", "tone:440:1", "--title", "X", "--no-mdns"], timeout: 20)
        XCTAssertEqual(noPipe.status, 64, noPipe.stderr)
        XCTAssertTrue(noPipe.stderr.contains("--title names a pipe"), noPipe.stderr)
        let notAPipe = try runProcess(Self.broadcaster, ["share", "tone:440:1", "--mpd", "127.0.0.1:6600", "--no-mdns"], timeout: 20)
        XCTAssertEqual(notAPipe.status, 64, notAPipe.stderr)
        XCTAssertTrue(notAPipe.stderr.contains("--mpd follows the pipe"), notAPipe.stderr)
    }
}
