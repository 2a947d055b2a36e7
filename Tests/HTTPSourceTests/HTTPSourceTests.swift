import Foundation
import PartyCastCore
import PartyCastDecoder
import PartyCastHTTP
import PartyCastSources
import PartyCastTestSupport
import XCTest

/// HTTPByteSource against fake servers (fake_radio.py) and the listener end to end.
final class HTTPSourceTests: XCTestCase {
    private var servers: [ServerProcess] = []
    private var directory = ""

    override func setUpWithError() throws {
        directory = try temporaryDirectory()
    }

    override func tearDown() {
        for server in servers { server.stop() }
        servers = []
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func radio(_ extra: [String] = []) throws -> ServerProcess {
        for name in ["cbr.mp3", "vbr.mp3", "noxing.mp3"] {
            let copy = "\(directory)/\(name)"
            if !FileManager.default.fileExists(atPath: copy) { try FileManager.default.copyItem(atPath: try fixture(name), toPath: copy) }
        }
        let server = try startFakeRadio(mp3: try fixture("cbr.mp3"), directory: directory, extra: extra)
        servers.append(server)
        return server
    }

    /// Reads until `done` says so or `timeout` passes; returns the bytes read.
    @discardableResult
    private func read(_ source: HTTPByteSource, timeout: TimeInterval, until done: (Int) -> Bool) throws -> Int {
        var total = 0
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline, !done(total) {
            let piece = try source.read(maxBytes: 16384)
            if piece.isEmpty { break }
            total += piece.count
        }
        return total
    }

    // MARK: ICY

    /// SHOUTcast v1 (`ICY 200 OK`): station and titles in Latin-1 and UTF-8, a title holding quotes
    /// followed by a StreamUrl; the audio left after stripping the metadata decodes.
    func testShoutcastStationAndTitlesInLatin1AndUTF8() throws {
        let server = try radio()
        let source = try HTTPByteSource(url: "http://127.0.0.1:\(server.port)/shoutcast")
        var titles = Set<String>()
        try read(source, timeout: 10) { _ in
            if let title = source.streamTags?.title { titles.insert(title) }
            return titles.count == 2
        }
        XCTAssertEqual(source.streamTags?.station, "Radio Café")
        XCTAssertEqual(titles, ["Café del Mar", "Ünïcödé ♫ it's \"quoted\""])
        XCTAssertFalse(source.canSeek)

        let decoded = try DecoderRegistry.open(HTTPByteSource(url: "http://127.0.0.1:\(server.port)/shoutcast"))
        try decoded.prepare()
        XCTAssertEqual(decoded.format?.sampleRate, 44100)
        var samples: [Float] = []
        while samples.count < 44100 * 2 * 2, try decoded.produce(into: &samples) {}
        XCTAssertGreaterThan(samples.map { $0 * $0 }.reduce(0, +) / Float(samples.count), 1e-4, "silent")
        XCTAssertEqual(decoded.skippedBytes, 0, "metadata left in the audio")
    }

    /// A block of 255 × 16 bytes of noise costs that much and no more: the audio around it arrives
    /// whole and the next title is read.
    /// Without a terminal (as under systemd) the listener logs each title a station announces, as
    /// the status line shows them on one.
    func testAStationsTitlesAreLoggedWithoutATerminal() throws {
        let server = try radio()
        let played = try startProcess(productPath("listener"), ["play", "http://127.0.0.1:\(server.port)/shoutcast", "--output", "null"])
        defer { played.signal(SIGTERM); _ = played.wait(timeout: 10) }
        XCTAssertTrue(played.waitForStderr("now playing: Café del Mar", timeout: 15), played.stderr)
        XCTAssertTrue(played.waitForStderr("now playing: Ünïcödé ♫ it's \"quoted\"", timeout: 15), played.stderr)
    }

    func testGarbageMetadataIsSkippedAndTheStreamGoesOn() throws {
        let server = try radio()
        let source = try HTTPByteSource(url: "http://127.0.0.1:\(server.port)/garbage")
        let total = try read(source, timeout: 10) { _ in false }
        XCTAssertEqual(total, 3 * 16000)
        XCTAssertEqual(source.streamTags?.title, "After garbage")
    }

    /// A length byte claiming more than the body holds: the audio before it plays and the stream
    /// ends cleanly (the body has a length, so it ends where the server says).
    func testMetadataClaimingMoreThanTheStreamHoldsEndsCleanly() throws {
        let server = try radio()
        let url = "http://127.0.0.1:\(server.port)/overclaim"
        let source = try HTTPByteSource(url: url)
        XCTAssertEqual(try read(source, timeout: 10) { _ in false }, 2 * 16000)
        XCTAssertEqual(source.streamTags?.title, "Before the end")

        let out = "\(directory)/overclaim.wav"
        let (result, seconds) = try listener([url, "--output", "wav:\(out)"], timeout: 15)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertLessThan(seconds, 15)
        let audio = try readAudio(out)
        // 32000 bytes at 128 kbit/s: 2 s, give or take a frame at each end.
        XCTAssertEqual(Double(audio.frames) / Double(audio.sampleRate), 2.0, accuracy: 0.1)
    }

    // MARK: Reconnects

    /// A live stream that drops is reconnected, through the original URL (not the redirect
    /// target), and keeps delivering; the drop is one line for the log.
    func testLiveStreamResumesAfterADropFromTheOriginalURL() throws {
        let server = try radio()
        for path in ["/drop", "/redirect-drop"] {
            let events = EventLog()
            let source = try HTTPByteSource(url: "http://127.0.0.1:\(server.port)\(path)") { events.append($0) }
            var dropAt: Date?
            var resumedAfter: TimeInterval?
            let total = try read(source, timeout: 20) { total in
                if total >= 65536, dropAt == nil { dropAt = Date() }
                if total > 65536, resumedAfter == nil, let dropAt { resumedAfter = Date().timeIntervalSince(dropAt) }
                return total >= 65536 + 200_000
            }
            XCTAssertGreaterThanOrEqual(total, 65536 + 200_000, path)
            XCTAssertEqual(source.reconnects, 1, path)
            XCTAssertTrue(events.lines.contains { $0.contains("reconnecting in 0.5 s") }, "\(path): \(events.lines)")
            print("\(path): resumed \(String(format: "%.2f", resumedAfter ?? -1)) s after the drop")
        }
        let hits = try String(contentsOf: URL(string: "http://127.0.0.1:\(server.port)/hits")!, encoding: .utf8)
        XCTAssertTrue(hits.contains("/redirect-drop 2"), hits)
        XCTAssertTrue(hits.contains("/redirect-target 2"), hits)
    }

    /// Silence mid-stream counts as a drop once the silence timeout has passed.
    func testSilenceMidStreamIsADrop() throws {
        let server = try radio()
        var options = HTTPByteSource.Options()
        options.timeouts.silence = .seconds(1)
        let source = try HTTPByteSource(url: "http://127.0.0.1:\(server.port)/stall", options: options)
        let started = Date()
        let total = try read(source, timeout: 10) { $0 >= 65536 + 100_000 }
        XCTAssertGreaterThanOrEqual(total, 65536 + 100_000)
        XCTAssertEqual(source.reconnects, 1)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
    }

    /// A stop (wakeReader) ends a read waiting on a silent stream at once.
    func testWakeReaderEndsAWaitingRead() throws {
        let server = try radio()
        let source = try HTTPByteSource(url: "http://127.0.0.1:\(server.port)/stall")
        XCTAssertEqual(try read(source, timeout: 10) { $0 >= 65536 }, 65536)
        let wake = try XCTUnwrap(source.wakeReader)
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { wake() }
        let started = Date()
        XCTAssertEqual(try source.read(maxBytes: 4096), [])
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
    }

    /// A reader that stops reading stops the socket reads too: what the server gets to send levels
    /// off at the source's buffer plus the kernel's socket buffers, however much it has.
    func testAnUnreadStreamHoldsBoundedMemory() throws {
        let server = try radio()
        let source = try HTTPByteSource(url: "http://127.0.0.1:\(server.port)/flood")
        XCTAssertFalse(try source.read(maxBytes: 1).isEmpty)
        let counter = URL(string: "http://127.0.0.1:\(server.port)/flooded")!
        var readings: [Int] = []
        // Read every 0.2 s: levelled when three readings agree.
        let levelled = try waitUntil(timeout: 15, every: 0.2) {
            readings.append(Int(try String(contentsOf: counter, encoding: .utf8)) ?? -1)
            return readings.count >= 3 && readings.suffix(3).allSatisfy { $0 == readings.last }
        }
        print("flood: the server sent \(readings.last ?? -1) bytes and stopped")
        XCTAssertTrue(levelled, "the server kept sending: \(readings)")
        XCTAssertLessThan(readings.last ?? .max, 16 << 20)
        XCTAssertFalse(try source.read(maxBytes: 65536).isEmpty)
    }

    // MARK: Playlists

    func testPlaylistsAreFollowedToTheirFirstPlayableEntry() throws {
        let server = try radio()
        // PLS by content type (File1 is a 404); M3U by content, nested, its first entry refused.
        for path in ["/good.pls", "/good.m3u"] {
            let source = try HTTPByteSource(url: "http://127.0.0.1:\(server.port)\(path)")
            try read(source, timeout: 10) { _ in source.streamTags?.title != nil }
            XCTAssertEqual(source.streamTags?.station, "Radio Café", path)
        }
    }

    func testPlaylistParser() throws {
        let base = URL(string: "http://radio.example/lists/a.pls")!
        let pls = Array("[playlist]\r\nFile2=http://b.example/2\r\nTitle1=One\r\nFile1=one.mp3\r\nNumberOfEntries=2\r\n".utf8)
        XCTAssertEqual(try Playlist.entries(pls, base: base), ["http://radio.example/lists/one.mp3", "http://b.example/2"])
        let m3u = Array("\u{FEFF}#EXTM3U\n#EXTINF:-1,Station\n  http://s.example:8000/live  \n\n/abs.mp3\n".utf8)
        XCTAssertEqual(try Playlist.entries(m3u, base: base), ["http://s.example:8000/live", "http://radio.example/abs.mp3"])
        XCTAssertEqual(Playlist.recognise(m3u), .m3u)
        XCTAssertEqual(Playlist.recognise(pls), .pls)
        XCTAssertEqual(Playlist.recognise(Array("http://x/\n".utf8)), .m3u)
        XCTAssertNil(Playlist.recognise(Array("ID3\u{3}".utf8)))
        XCTAssertThrowsError(try Playlist.entries(Array("#EXTM3U\n#EXT-X-TARGETDURATION:10\nseg.ts\n".utf8), base: nil))
    }

    // MARK: Remote files

    /// `--start 12.5` on a remote VBR MP3 lands on the same sample as mpg123's decode, over a
    /// server with Range and over one without (read forward from the start).
    func testRemoteSeekLandsOnTheExactSampleWithAndWithoutRange() throws {
        let withRange = try radio()
        let withoutRange = try radio(["--no-range"])
        let reference = try mpg123Reference(try fixture("vbr.mp3"), in: directory)
        let offset = Int(12.5 * Double(reference.sampleRate)) * reference.channels
        let tail = reference.samples[offset...]
        for (server, label) in [(withRange, "Range"), (withoutRange, "no Range")] {
            let out = "\(directory)/seek-\(server.port).wav"
            let (result, _) = try listener(["http://127.0.0.1:\(server.port)/file/vbr.mp3", "--start", "12.5", "--output", "wav:\(out)"])
            XCTAssertEqual(result.status, 0, "\(label): \(result.stderr)")
            let ours = try readAudio(out)
            XCTAssertEqual(ours.samples.count, tail.count, label)
            let ratio = snr(ours.samples[...], tail)
            print("remote seek (\(label)): SNR \(ratio) dB")
            XCTAssertGreaterThanOrEqual(ratio, 80, label)
        }
    }

    /// A remote file without a frame count is not downloaded whole to time it: its duration is an
    /// estimate (a local file's is exact), and a seek indexes only the frames before its target.
    func testRemoteFileWithoutFrameCountIsNotScannedWhole() throws {
        let server = try radio()
        let remote = try DecoderRegistry.open(HTTPByteSource(url: "http://127.0.0.1:\(server.port)/file/noxing.mp3"))
        try remote.prepare()
        guard case .estimated(let estimate) = remote.duration else { return XCTFail("\(remote.duration)") }
        let local = try DecoderRegistry.open(FileByteSource(path: try fixture("noxing.mp3")))
        try local.prepare()
        guard case .exact(let exact) = local.duration else { return XCTFail("\(local.duration)") }
        XCTAssertEqual(Double(estimate), Double(exact), accuracy: Double(exact) * 0.05)
        try remote.seek(toFrame: 5 * 44100)
        var samples: [Float] = []
        XCTAssertTrue(try remote.produce(into: &samples))
        guard case .estimated = remote.duration else { return XCTFail("a seek indexed the whole file: \(remote.duration)") }
    }

    func testRemoteFileIsSeekableAndKnowsItsLength() throws {
        let server = try radio(["--no-range"])
        let source = try HTTPByteSource(url: "http://127.0.0.1:\(server.port)/file/cbr.mp3")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: try fixture("cbr.mp3")))
        XCTAssertTrue(source.canSeek)
        XCTAssertTrue(source.isRemote)
        XCTAssertEqual(source.length, Int64(bytes.count))
        try source.seek(to: 100_000)
        var read: [UInt8] = []
        while read.count < 16 {  // pieces come in whatever size the network gives
            let piece = try source.read(maxBytes: 16 - read.count)
            if piece.isEmpty { break }
            read += piece
        }
        XCTAssertEqual(read, Array(bytes[100_000..<100_016]))
        XCTAssertEqual(source.rangeCapable, false)
    }

    // MARK: Bad inputs

    /// Each ends, within 15 s, with one line naming the problem (and the listener's exit status).
    func testBadInputsEndInOneClearLine() throws {
        let server = try radio()
        let base = "http://127.0.0.1:\(server.port)"
        let cases: [(url: String, says: String, status: Int32)] = [
            ("\(base)/status/404", "not found (HTTP 404)", 2),
            ("\(base)/status/500", "HTTP 500", 7),
            ("\(base)/html", "is an HTML page", 5),
            ("\(base)/html-as-audio", "it is an HTML page", 5),
            ("\(base)/dead.m3u", "no playable entry in the playlist", 5),
            ("\(base)/self.m3u", "points back at itself", 10),
            ("\(base)/ping.m3u", "points back at itself", 10),
            ("\(base)/hls.m3u8", "HLS", 6),
            ("\(base)/redirect-loop", "redirects in a loop", 7),
            ("\(base)/endless", "headers go on without end", 7),
            ("\(base)/silent", "sent no answer within 10 s", 7),
            ("http://127.0.0.1:\(freePort())/", "cannot connect", 7),
            ("http://", "not a valid http:// or https:// URL", 10),
        ]
        for (url, says, status) in cases {
            let (result, seconds) = try listener([url, "--output", "null"], timeout: 20)
            let lines = result.stderr.split(separator: "\n")
            XCTAssertEqual(result.status, status, "\(url): \(result.stderr)")
            XCTAssertEqual(lines.count, 1, "\(url): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(says), "\(url): \(result.stderr)")
            XCTAssertLessThan(seconds, 15, url)
        }
    }

    /// A server whose certificate is self-signed: refused, with a line saying so.
    func testUntrustedCertificateIsOneClearLine() throws {
        let key = "\(directory)/key.pem", cert = "\(directory)/cert.pem"
        let made = try runProcess("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                                              "-days", "1", "-subj", "/CN=127.0.0.1"], timeout: 30)
        XCTAssertEqual(made.status, 0, made.stderr)
        let server = try radio(["--tls", cert, key])
        let (result, seconds) = try listener(["https://127.0.0.1:\(server.port)/shoutcast", "--output", "null"], timeout: 20)
        XCTAssertEqual(result.status, 7, result.stderr)
        XCTAssertTrue(result.stderr.contains("certificate was not trusted"), result.stderr)
        XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
        XCTAssertLessThan(seconds, 15)
    }
}

/// Lines from `onEvent`, which runs on the reading thread.
final class EventLog: @unchecked Sendable {
    // @unchecked: every access holds the lock.
    private let lock = NSLock()
    private var stored: [String] = []
    func append(_ line: String) { lock.withLock { stored.append(line) } }
    var lines: [String] { lock.withLock { stored } }
}
