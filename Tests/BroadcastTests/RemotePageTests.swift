import Foundation
import PartyCastTestSupport
import XCTest

/// The web remote in headless Chromium (Tests/Browser/remote_test.py) against a real party: a
/// broadcaster sharing the tagged fixture and three listeners on simulated cards. The page must show
/// the title, and the library by the titles of the files' tags (one read in the background, from
/// --library); its pause button must silence every listener's recording; the volume slider it moves
/// (while paused) must change that listener's level, and only that one's, once it resumes.
final class RemotePageTests: XCTestCase {
    func testThePageControlsAPartyOfThree() throws {
        let bin = try releaseBuilds()
        try ensureHeadlessBrowser()
        let directory = try temporaryDirectory()
        let (port, controlPort) = (freePort(), freePort())
        try FileManager.default.createDirectory(atPath: "\(directory)/library", withIntermediateDirectories: false)
        try FileManager.default.copyItem(atPath: try fixture("id3v2.mp3"), toPath: "\(directory)/library/tagged.mp3")
        let server = try startProcess("\(bin)/broadcaster", ["share", try fixture("id3v2.mp3"), "--loop", "--no-mdns", "--port", "\(port)",
                                                             "--library", "\(directory)/library",
                                                             "--control-port", "\(controlPort)", "--start-in", "1", "--name", "Garden party"])
        defer { server.signal(SIGKILL) }
        XCTAssertTrue(server.waitForStderr("remote control", timeout: 20), server.stderr)
        let names = ["kitchen", "hall", "garden"]
        let listeners = try names.map { name in
            try startProcess("\(bin)/listener", ["join", "--host", "127.0.0.1:\(port)", "--output", "virtual:\(directory)/\(name).wav",
                                                 "--listener-name", name, "--quiet"])
        }
        defer { for l in listeners { l.signal(SIGKILL) } }

        let screenshot = ProcessInfo.processInfo.environment["PARTYCAST_SCREENSHOT"] ?? "\(directory)/remote.png"
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Browser/remote_test.py").standardized.path
        let driven = try runProcess(testDriver("python"), [script], timeout: 240, environment: [
            "PARTYCAST_REMOTE_URL": "http://127.0.0.1:\(controlPort)/", "PARTYCAST_SCREENSHOT": screenshot,
            "TMPDIR": directory,  // Chromium's profile, with the test's files
            "PARTYCAST_EXPECT_LISTENERS": "3", "PARTYCAST_EXPECT_TITLE": "Fixture Title", "PARTYCAST_RESUME": "1",
            "PARTYCAST_EXPECT_LIBRARY": #"{"id3v2.mp3": "Fixture Title", "/tagged.mp3": "Fixture Title"}"#,
        ])
        XCTAssertEqual(driven.status, 0, driven.stdout + driven.stderr)
        let png = FileManager.default.contents(atPath: screenshot) ?? Data()
        XCTAssertEqual(Array(png.prefix(4)), [0x89, 0x50, 0x4E, 0x47], "a PNG at \(screenshot)")
        // When the page's buttons were pressed (CLOCK_MONOTONIC, as the script printed them), and
        // which listener's slider it moved, from what to what.
        func clicked(_ button: String) -> Int64? {
            driven.stdout.firstMatch(of: try! Regex("clicked \(button) at (\\d+)")).flatMap { Int64($0.output[1].substring ?? "") }
        }
        guard let paused = clicked("pause"), let resumed = clicked("resume"),
              let moved = driven.stdout.firstMatch(of: /move listener (\S+)'s volume slider from (\d+)/),
              let volume = driven.stdout.firstMatch(of: /volume: (\d+) -> (\d+)/) else {
            return XCTFail("the script did not say what it did: \(driven.stdout)")
        }
        let status = try runProcess("\(bin)/broadcaster", ["ctl", "--url", "http://127.0.0.1:\(controlPort)", "status"]).stdout
        guard let slid = names.first(where: { status.contains("[\(moved.1)] \($0) (") }) else { return XCTFail("no listener \(moved.1) in \(status)") }
        // Let a second of the resumed party play, then end it.
        letTimePass(1.5)
        server.signal(SIGINT)
        XCTAssertEqual(server.wait(timeout: 10).status, 0)
        for l in listeners { l.signal(SIGINT); _ = l.wait(timeout: 10) }

        let expected = pow(Double(volume.2)! / 100, 3) / pow(Double(volume.1)! / 100, 3)
        let recordings = try names.map { try CardRecording(path: "\(directory)/\($0).wav", name: $0) }
        for recording in recordings {
            guard let silent = recording.silenceStart(from: recording.frame(at: paused), run: Int(recording.rate * 0.2)) else {
                XCTFail("\(recording.name) never went silent after the page's pause")
                continue
            }
            let heardAfter = Double(recording.time(ofFrame: Double(silent)) - paused) / 1e6
            print("\(recording.name): silent \(String(format: "%.0f", heardAfter)) ms after the click")
            XCTAssertLessThan(heardAfter, 500, "\(recording.name): the page's pause took too long")
            XCTAssertNotNil(recording.soundStart(from: max(silent, recording.frame(at: resumed))), "\(recording.name) never played again")
        }
        // They all play the same samples at the same instants: their levels at one instant differ
        // only by their volumes. Before the pause all were equal; after the resume the slid one's
        // is its new volume's.
        func levels(at time: Int64) -> [String: Double] {
            Dictionary(uniqueKeysWithValues: recordings.map { ($0.name, $0.level(at: $0.frame(at: time), window: Int($0.rate * 0.3))) })
        }
        let (before, after) = (levels(at: paused - 400_000_000), levels(at: resumed + 800_000_000))
        guard let other = names.first(where: { $0 != slid }), let reference = before[other], let referenceAfter = after[other] else { return }
        for name in names {
            XCTAssertEqual(before[name]! / reference, 1, accuracy: 0.03, "\(name): louder or softer than \(other) before the slider moved")
            XCTAssertEqual(after[name]! / referenceAfter, name == slid ? expected : 1, accuracy: 0.03,
                           "\(name) against \(other) after the resume (\(slid)'s slider went \(volume.1) → \(volume.2))")
        }
        print("levels against \(other) after the resume: " + names.map { "\($0) \(String(format: "%.3f", after[$0]! / referenceAfter))" }.joined(separator: ", ")
              + " (expected \(String(format: "%.3f", expected)) for \(slid))")
    }
}
