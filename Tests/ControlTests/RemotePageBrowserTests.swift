import Foundation
import Logging
import PartyCastControlSeam
import PartyCastControl
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// The web page in headless Chromium (Tests/Browser/remote_test.py): against a real broadcaster
/// when PARTYCAST_REMOTE_URL names one, else against a server over the recording party, which the
/// test stops at the end: the page must then disable its controls and say the party ended.
/// PARTYCAST_SCREENSHOT says where the PNG goes. Skipped only when Chromium, its driver or
/// Selenium are missing and cannot be installed.
final class RemotePageBrowserTests: XCTestCase {
    private static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Browser/remote_test.py").standardized.path

    func testThePageShowsTheTitlePausesAndMovesAListenersVolume() async throws {
        try await drive(key: nil)
    }

    /// The page asks for the key (the script types a wrong one, then the right one), proves it with
    /// SPAKE2 for a token and sends only that, through a relay that records every byte: the key's
    /// must be in none. Only against the recording party: a real one sets its own key.
    func testAPrivatePartysPageAsksForTheKeyOnce() async throws {
        guard ProcessInfo.processInfo.environment["PARTYCAST_REMOTE_URL"] == nil else { throw XCTSkip("runs against the recording party only") }
        try await drive(key: "a private party key")
    }

    private func drive(key: String?) async throws {
        try ensureHeadlessBrowser()
        let environment = ProcessInfo.processInfo.environment
        let directory = try temporaryDirectory()
        let screenshot = environment["PARTYCAST_SCREENSHOT"] ?? directory + "/remote.png"
        var party: RecordingParty?
        var server: ControlServer?
        // The browser's profile too (chromium's own temporary directories) goes with the test's files.
        var variables = ["PARTYCAST_SCREENSHOT": screenshot, "TMPDIR": directory]
        if environment["PARTYCAST_REMOTE_URL"] == nil {
            party = RecordingParty()
            server = try await ControlServer(control: party!, host: "127.0.0.1", port: 0, key: key.map(PartyKey.init(secret:)),
                                             logger: Logger(label: "browser-test"))
            if let key { variables["PARTYCAST_KEY"] = key }
            variables["PARTYCAST_REMOTE_URL"] = "http://127.0.0.1:\(server!.port)/"
            variables["PARTYCAST_EXPECT_TITLE"] = "First Song"
            variables["PARTYCAST_IDENTIFY"] = "1"
            variables["PARTYCAST_EXPECT_LIBRARY"] = #"{"music/one.mp3": "First Song", "music/covered.mp3": "covered.mp3"}"#
            variables["PARTYCAST_EXPECT_END"] = "1"
        }
        let script = try startProcess(testDriver("python"), [Self.script], environment: variables)
        if server != nil { _ = script.waitForStderr("remote page: waiting for the party to end", timeout: 180) }
        await server?.stop()
        let result = script.wait(timeout: 60)
        XCTAssertEqual(result.status, 0, "\(result.stdout)\n\(result.stderr)")
        if key != nil {
            XCTAssertTrue(result.stdout.contains("the key in none"), "the relay's check ran:\n\(result.stdout)")
            print(result.stdout.split(separator: "\n").filter { $0.hasPrefix("login:") || $0.hasPrefix("relayed") }.joined(separator: "\n"))
        }
        let png = FileManager.default.contents(atPath: screenshot) ?? Data()
        XCTAssertEqual(Array(png.prefix(4)), [0x89, 0x50, 0x4E, 0x47], "a PNG at \(screenshot)")
        if let party {
            XCTAssertTrue(party.performed.contains(.pause))
            XCTAssertTrue(party.performed.contains { if case .listenerVolume(listener: "L1", _) = $0 { true } else { false } })
            XCTAssertTrue(party.performed.contains(.identify(listener: "L1")), "the listener's Identify button")
            XCTAssertEqual(party.snapshot.paused, false, "resumed at the end")
        }
    }
}
