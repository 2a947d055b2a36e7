import Foundation
import PartyCastTestSupport
import XCTest

/// Internet radio in a party, end to end on the LAN harness: icecast2 fed by ezstream on one host
/// (IcecastStation: noise tracks whose titles change every `trackSeconds`), `broadcaster share URL`
/// on a second, three listeners joined by name over mDNS on three more, each on a virtual card.
/// The issue's bar:
/// - every listener logs "now playing: T" within 2 s of the station switching to T, for two changes
///   before icecast2 is restarted and the first whole one after;
/// - the listeners play in step as for files (the quiet-LAN sync bar of PartySyncTests: skew from
///   the recordings p99 ≤ 100 µs, max ≤ 500 µs);
/// - icecast2 restarted mid-stream (SIGTERM by PID, then started again with the same configuration,
///   ezstream with it): every card plays the station again within 5 s of it being back on air, with
///   no other gap before or after, while the broadcaster and listeners run on (the broadcaster
///   logged its reconnect).
///
/// Release builds (PARTYCAST_RELEASE_BIN) and root; a LAN of its own (prefix pcst).
final class StationPartyOnLANTests: XCTestCase {
    static let trackSeconds = 6
    let harness = LANHarness(prefix: "pcst", state: "pc-station-test")
    var bin = ""
    private var started: [BackgroundProcess] = []
    private let watch = StderrWatch()

    override func setUpWithError() throws {
        let bin = try releaseBuilds()
        self.bin = bin
        guard getuid() == 0 else { throw XCTSkip("needs root: network namespaces") }
        try harness.up(hosts: 5, tools: ["broadcaster", "listener", "partycast-skew"].map { "\(bin)/\($0)" }, timeout: 90)
    }

    override func tearDownWithError() throws {
        // Whatever is still running: SIGTERM by PID, then SIGKILL by PID after 5 s.
        for process in started where process.isRunning { process.signal(SIGTERM) }
        for process in started { _ = process.wait(timeout: 5) }
        started = []
        watch.stop()
        try harness.down()
    }

    /// Starts `command` on `host`, its stderr watched under `name`.
    func on(_ host: String, _ name: String, _ command: [String]) throws -> BackgroundProcess {
        let process = try startProcess(LANHarness.script, ["exec", "pcst-\(host)"] + command, environment: harness.environment)
        started.append(process)
        try watch.watch(process, as: name)
        return process
    }

    func testListenersFollowAStationsTitlesInStepAndPlayOnThroughAnIcecastRestart() throws {
        let directory = try temporaryDirectory()
        let rooms = ["room3", "room4", "room5"]
        // Pink noise with a slow swell: a sharp correlation peak everywhere, and never silent, so a
        // silence in a recording is the station's.
        let tracks = try (1...3).map { n in
            let wav = "\(directory)/t\(n).wav"
            XCTAssertEqual(try runProcess("sox", ["-n", "-r", "44100", "-c", "2", wav, "synth", "\(Self.trackSeconds)", "pinknoise",
                                                  "tremolo", "0.5", "40", "gain", "-n", "-3"]).status, 0)
            XCTAssertEqual(try runProcess("lame", ["--quiet", "-b", "128", wav, "\(directory)/t\(n).mp3"]).status, 0)
            return "\(directory)/t\(n).mp3"
        }
        let address = try harness.run(["address", "pcst-host1"], timeout: 10).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        // icecast2 puts a new title into a listener's stream only at its metadata points, 16000 bytes
        // apart by default: 1 s of this 128 kb/s stream, so by its connection's phase a change reached
        // the broadcaster 0.39-0.98 s late in 10 runs (0.41-0.53 s before the restart, another phase
        // after it) and the 2 s bar judged that phase as much as the party. 1600 bytes: 0.1 s.
        let station = try IcecastStation(directory: directory, address: address, port: 8000, tracks: tracks, metadataInterval: 1600)
        /// icecast2 and ezstream on host1; the line ezstream logs once it is on air.
        func startStation() throws -> (icecast: BackgroundProcess, ezstream: BackgroundProcess, onAir: StderrWatch.Line) {
            let icecast = try on("host1", "icecast", station.icecast)
            guard watch.wait(for: IcecastStation.serving, in: "icecast", timeout: 10) != nil else {
                throw XCTSkip("icecast2 did not start: \(icecast.stderr)")
            }
            let ezstream = try on("host1", "ezstream", station.ezstream)
            let onAir = try XCTUnwrap(watch.wait(for: IcecastStation.onAir, in: "ezstream", timeout: 10), "ezstream: \(ezstream.stderr)")
            return (icecast, ezstream, onAir)
        }
        var (icecast, ezstream, _) = try startStation()

        let server = try on("host2", "broadcaster", ["\(bin)/broadcaster", "share", station.url, "--name", "Station Party", "--start-in", "4"])
        XCTAssertNotNil(watch.wait(for: "mDNS: published as", in: "broadcaster", timeout: 20), server.stderr)
        let listeners = try zip(3...5, rooms).map { host, room in
            try on("host\(host)", room, ["\(bin)/listener", "join", "Station Party", "--listener-name", room,
                                         "--output", "virtual:\(directory)/\(room).wav", "--once"])
        }
        // Every listener hears the station (its first title) before any change is judged.
        let hearing = try rooms.map { room in
            try XCTUnwrap(watch.wait(for: "now playing: Track", in: room, timeout: 30), "\(room): \(watch.lines(room).map(\.text))")
        }
        let allHearing = hearing.map(\.wallClock).max()!

        /// The first `count` track starts after `since`, waiting for them as long as they take to come.
        func changes(after since: Double, count: Int) throws -> [IcecastStation.Change] {
            var found: [IcecastStation.Change] = []
            if waitUntil(timeout: Double(count + 1) * Double(Self.trackSeconds) + 5, every: 0.05, {
                found = station.changes().filter { $0.at > since }
                return found.count >= count
            }) { return Array(found.prefix(count)) }
            XCTFail("only \(found.count) of \(count) title changes after \(since): \(station.changes())")
            throw CocoaError(.executableLoad)
        }
        /// Each listener's "now playing" line for `change`, and how long after the change it came.
        func judge(_ changes: [IcecastStation.Change], bar: Double) {
            for change in changes {
                // Where the time goes: the station to the broadcaster (ICY), then the party's lead.
                if let read = watch.wait(for: "now playing: \(change.title)", in: "broadcaster", since: change.at - 1, timeout: change.at + 3 - Date().timeIntervalSince1970) {
                    print("StationPartyOnLANTests: the broadcaster read \(change.title) \(String(format: "%.2f", read.wallClock - change.at)) s after the change")
                }
                for room in rooms {
                    // From a second before: a title shown early is no later than the bar either.
                    guard let line = watch.wait(for: "now playing: \(change.title)", in: room, since: change.at - 1, timeout: change.at + bar + 3 - Date().timeIntervalSince1970) else {
                        XCTFail("\(room) never showed \(change.title) (changed at \(change.at)): \(watch.lines(room).map(\.text)); "
                                + "the broadcaster's log: \(watch.lines("broadcaster").map { "\($0.text) at \($0.wallClock)" })")
                        continue
                    }
                    let latency = line.wallClock - change.at
                    print("StationPartyOnLANTests: \(room) showed \(change.title) \(String(format: "%.2f", latency)) s after the change")
                    XCTAssertLessThan(latency, bar, "\(room): \(change.title); the station's changes \(station.changes().map { "\($0.title) at \($0.at)" }), "
                                      + "the broadcaster's \(watch.lines("broadcaster").filter { $0.text.contains("now playing") }.map { "\($0.text) at \($0.wallClock)" })")
                }
            }
        }
        judge(try changes(after: allHearing, count: 2), bar: 2)

        // icecast2 restarted mid-stream: its source (ezstream) goes with it and comes back after it.
        let stopped = (wallClock: Date().timeIntervalSince1970, monotonic: monotonicNow())
        icecast.signal(SIGTERM)
        XCTAssertFalse(icecast.wait(timeout: 10).timedOut, "icecast2 took over 10 s to stop")
        ezstream.signal(SIGTERM)
        _ = ezstream.wait(timeout: 5)
        let onAir: StderrWatch.Line
        (icecast, ezstream, onAir) = try startStation()
        print("StationPartyOnLANTests: icecast2 off air for \(String(format: "%.2f", Double(onAir.monotonic - stopped.monotonic) / 1e9)) s")
        XCTAssertNotNil(watch.wait(for: "reconnected", in: "broadcaster", since: stopped.wallClock, timeout: 30),
                        "the broadcaster did not reconnect: \(watch.lines("broadcaster").map(\.text))")
        // ezstream starts on the next track: its title reaches everyone once the party plays on…
        let restarted = try changes(after: stopped.wallClock, count: 1)
        judge(restarted, bar: 5 + onAir.wallClock - restarted[0].at)
        // …and the first change after that keeps the bar of any other.
        judge(try changes(after: restarted[0].at, count: 1), bar: 2)

        // Nobody was restarted: the same processes ran throughout, and each stops cleanly now.
        for (room, process) in zip(rooms, listeners) {
            XCTAssertTrue(process.isRunning, "\(room) stopped: \(process.stderr)")
            process.signal(SIGTERM)
            let result = process.wait(timeout: 10)
            XCTAssertEqual(result.status, 0, "\(room): \(result.stderr)")
        }
        XCTAssertTrue(server.isRunning, server.stderr)
        server.signal(SIGTERM)
        let served = server.wait(timeout: 10)
        XCTAssertEqual(served.status, 0, served.stderr)

        // From the recordings: one silence, the restart's, and the station heard again within 5 s
        // of being back on air.
        for room in rooms {
            let card = try CardRecording(path: "\(directory)/\(room).wav", name: room)
            let silence = Int(card.rate / 10)
            let firstSound = try XCTUnwrap(card.soundStart(from: 0), "\(room) recorded nothing")
            let gap = try XCTUnwrap(card.silenceStart(from: firstSound, run: silence), "\(room) never went quiet after the restart")
            XCTAssertGreaterThanOrEqual(card.time(ofFrame: Double(gap)), stopped.monotonic, "\(room) went quiet before the restart")
            let resumed = try XCTUnwrap(card.soundStart(from: gap), "\(room) never played again after the restart")
            let afterOnAir = Double(card.time(ofFrame: Double(resumed)) - onAir.monotonic) / 1e9
            print("StationPartyOnLANTests: \(room) silent \(String(format: "%.2f", Double(resumed - gap) / card.rate)) s, "
                  + "playing again \(String(format: "%.2f", afterOnAir)) s after the station was back on air")
            XCTAssertLessThan(afterOnAir, 5, room)
            XCTAssertNil(card.silenceStart(from: resumed, run: silence).map { "at \(Double($0) / card.rate) s" }, "\(room): another gap")
        }

        let measured = try runProcess("\(bin)/partycast-skew", rooms.map { "\(directory)/\($0).wav" }
                                      + ["--settle-s", "5", "--json", "--csv", "\(directory)/skew.csv"], timeout: 180)
        XCTAssertEqual(measured.status, 0, measured.stderr)
        let report = try JSONDecoder().decode(SkewReport.self, from: Data(measured.stdout.utf8))
        for s in report.summaries {
            func µs(_ value: Double?) -> String { value.map { "\(Int($0.rounded())) µs" } ?? "none" }
            let figures = "\(s.name): \(s.points) points, median \(µs(s.medianMicroseconds)), p99 \(µs(s.p99Microseconds)), max \(µs(s.maxMicroseconds))"
            print("StationPartyOnLANTests: skew \(figures)")
            // About 20 s settled at 10 points a second, less the restart's silence: icecast2's 1.5-2 s
            // off air plus the reconnect back-off's next step (0.25 s doubling), so 2-4 s (95-115 points).
            XCTAssertGreaterThan(s.points, 80, figures)
            XCTAssertLessThanOrEqual(s.p99Microseconds ?? .infinity, 100, "p99: \(figures) (every point in \(directory)/skew.csv)")
            XCTAssertLessThanOrEqual(s.maxMicroseconds ?? .infinity, 500, "max: \(figures) (every point in \(directory)/skew.csv)")
        }
    }
}
