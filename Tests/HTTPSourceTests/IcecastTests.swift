import Foundation
import PartyCastCore
import PartyCastDecoder
import PartyCastHTTP
import PartyCastTestSupport
import XCTest

/// Debian's icecast2 on 127.0.0.1, fed by ezstream with three short MP3 tracks in a loop
/// (IcecastStation): the time a title takes to reach us is measured from when its track started.
final class IcecastTests: XCTestCase {
    func testTitlesArriveWithinTwoSecondsOfTheChangeAndTheAudioDecodes() throws {
        let dir = try temporaryDirectory()
        let tracks = try (1...3).map { n in
            let wav = "\(dir)/t\(n).wav"
            XCTAssertEqual(try runProcess("sox", ["-n", "-r", "44100", "-c", "2", wav, "synth", "2.5", "sine", "\(300 * n)", "vol", "0.5"]).status, 0)
            XCTAssertEqual(try runProcess("lame", ["--quiet", "-b", "128", wav, "\(dir)/t\(n).mp3"]).status, 0)
            return "\(dir)/t\(n).mp3"
        }
        let station = try IcecastStation(directory: dir, address: "127.0.0.1", port: freePort(), tracks: tracks)
        let icecast = try ServerProcess(station.icecast[0], Array(station.icecast.dropFirst()), ready: IcecastStation.serving, port: station.port)
        defer { icecast.stop() }
        let ezstream = try startProcess(station.ezstream[0], Array(station.ezstream.dropFirst()))
        defer { ezstream.signal(SIGTERM); _ = ezstream.wait(timeout: 5) }

        let url = station.url
        // The mount exists once ezstream has connected: until then icecast answers 404.
        var source: HTTPByteSource?
        XCTAssertTrue(waitUntil(timeout: 10, every: 0.05) {
            source = try? HTTPByteSource(url: url)
            return source != nil
        }, "the mount never came up: \(ezstream.stderr)")
        let stream = try XCTUnwrap(source)
        XCTAssertEqual(stream.streamTags?.station, IcecastStation.name)

        // Each title change seen, and when (wall clock, as the playlist program logs it).
        var seen: [(title: String, at: Double)] = []
        var last = stream.streamTags?.title
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, seen.count < 4 {
            XCTAssertFalse(try stream.read(maxBytes: 4096).isEmpty)
            let title = stream.streamTags?.title
            if let title, title != last { seen.append((title, Date().timeIntervalSince1970)) }
            last = title
        }
        let changes = station.changes()
        XCTAssertGreaterThanOrEqual(seen.count, 3, "titles seen: \(seen), changes: \(changes)")
        XCTAssertEqual(Set(seen.map(\.title)), ["Track 1", "Track 2", "Track 3"])
        for change in seen {
            // The latest start of that track before we saw it.
            guard let started = changes.last(where: { $0.title == change.title && $0.at <= change.at + 0.05 }) else {
                XCTFail("\(change.title) seen but never started: \(changes)")
                continue
            }
            let latency = change.at - started.at
            print("icecast: \(change.title) after \(String(format: "%.2f", latency)) s")
            XCTAssertLessThan(latency, 2, change.title)
        }

        // The stream decodes: the tracks' rate, and not silent.
        let decoded = try DecoderRegistry.open(HTTPByteSource(url: url))
        try decoded.prepare()
        XCTAssertEqual(decoded.format?.sampleRate, 44100)
        XCTAssertEqual(decoded.tags.station, IcecastStation.name)
        var samples: [Float] = []
        while samples.count < 44100 * 2, try decoded.produce(into: &samples) {}
        XCTAssertGreaterThan(samples.map { $0 * $0 }.reduce(0, +) / Float(samples.count), 0.01)
    }
}
