import Foundation
import PartyCastTestSupport
import XCTest

/// Party mode end to end on 127.0.0.1: listeners whose clocks run seconds off and over a hundred
/// ppm fast or slow (--simulate-clock) play on simulated cards, and the skew between what they
/// played is measured from the recordings themselves (partycast-skew cross-correlates the audio).
///
/// It runs release builds (`make test` builds them and sets PARTYCAST_RELEASE_BIN): sync is about
/// timestamps, and a debug build's slow event loop adds tens to hundreds of µs of noise to them.
final class PartySyncTests: XCTestCase {
    var broadcaster = "", listener = "", skewTool = ""

    override func setUpWithError() throws {
        let bin = try releaseBuilds()
        (broadcaster, listener, skewTool) = ("\(bin)/broadcaster", "\(bin)/listener", "\(bin)/partycast-skew")
    }

    func testListenersWithDriftingClocksAndALateJoinerPlayInStep() throws {
        try checkListenersPlayInStep(codec: "opus")
    }

    /// The same with the MP3 file's own frames on the wire, each listener decoding them (a late
    /// joiner's decoder starting mid-song).
    func testListenersPlayPassedThroughMP3InStep() throws {
        try checkListenersPlayInStep(codec: "mp3")
    }

    private func checkListenersPlayInStep(codec: String) throws {
        let directory = try temporaryDirectory()
        // Broadband sound gives a sharp correlation peak (a held note would repeat every period).
        let song = "\(directory)/noise.mp3"
        XCTAssertEqual(try runProcess("sox", ["-R", "-n", "-r", "44100", "-c", "2", "\(directory)/noise.wav", "synth", "25", "pinknoise",
                                              "tremolo", "0.5", "40", "gain", "-n", "-3"]).status, 0)
        XCTAssertEqual(try runProcess("lame", ["--quiet", "-b", "192", "\(directory)/noise.wav", song]).status, 0)
        let port = freePort()
        let server = try startProcess(broadcaster, ["share", song, "--codec", codec, "--no-mdns", "--port", "\(port)", "--start-in", "3"])
        XCTAssertTrue(server.waitForStderr("broadcasting", timeout: 20), server.stderr)
        func join(_ name: String, clock: String) throws -> BackgroundProcess {
            try startProcess(listener, ["join", "--host", "127.0.0.1:\(port)", "--output", "virtual:\(directory)/\(name).wav",
                                        "--simulate-clock=\(clock)", "--once", "--quiet"])
        }
        let early = try [("steady", "0,0"), ("slow", "-3,-120"), ("fast", "7.5,150")].map { try join($0.0, clock: $0.1) }
        letTimePass(9)  // the late joiner arrives 9 s in
        let late = try join("late", clock: "1,50")
        for process in early + [late] {
            let result = process.wait(timeout: 60)
            XCTAssertEqual(result.status, 0, result.stderr)
        }
        let served = server.wait(timeout: 30)
        XCTAssertEqual(served.status, 0, served.stderr)
        // The clock exchanges ran over UDP: the TCP fallback would leave this count at 0.
        let answered = served.stderr.firstMatch(of: /clock: answered (\d+) requests over UDP/).flatMap { Int($0.1) }
        XCTAssertGreaterThan(answered ?? 0, 4 * 25, served.stderr)

        let measured = try runProcess(skewTool, ["\(directory)/steady.wav", "\(directory)/slow.wav", "\(directory)/fast.wav",
                                                 "\(directory)/late.wav", "--settle-s", "5", "--json", "--csv", "\(directory)/skew.csv"], timeout: 120)
        XCTAssertEqual(measured.status, 0, measured.stderr)
        print("skew with --codec \(codec): \(measured.stdout)")
        let report = try JSONDecoder().decode(SkewReport.self, from: Data(measured.stdout.utf8))
        // The issue's bar, 5 s after each listener's first sound.
        for summary in report.summaries {
            // Enough points that the figures mean something: ~10 s settled for the late joiner at 10 per second.
            XCTAssertGreaterThan(summary.points, 60, "\(summary.name): \(measured.stdout)")
            XCTAssertLessThanOrEqual(summary.p99Microseconds ?? .infinity, 100, "\(summary.name): \(measured.stdout) (points in \(directory)/skew.csv)")
            XCTAssertLessThanOrEqual(summary.maxMicroseconds ?? .infinity, 500, "\(summary.name): \(measured.stdout) (points in \(directory)/skew.csv)")
        }
        // The late joiner was heard at the live position within half a second of its card starting.
        let clock = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(directory)/late.wav.json"))) as? [String: Double]
        let audio = try readAudio("\(directory)/late.wav")
        let firstSound = audio.samples.firstIndex { abs($0) > 1e-4 }.map { $0 / audio.channels } ?? audio.frames
        XCTAssertLessThan(Double(firstSound) / Double(clock?["rate"] ?? 48000), 0.5, "the late joiner waited before playing")
    }
}
