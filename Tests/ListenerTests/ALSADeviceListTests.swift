import Foundation
import PartyCastTestSupport
import XCTest

/// Choosing the speaker: `listener devices` against alsa-utils' `aplay -L`, which reads the same
/// alsa-lib configuration (here: null and libasound2-plugins' devices, no card).
final class ALSADeviceListTests: XCTestCase {
    let listener = productPath("listener")

    func testDevicesListsWhatAplayLists() throws {
        let aplay = try runProcess("aplay", ["-L"])
        XCTAssertEqual(aplay.status, 0, aplay.stderr)
        XCTAssertTrue(aplay.stdout.hasPrefix("null\n"), "aplay -L: \(aplay.stdout)")
        let listed = try runProcess(listener, ["devices"])
        XCTAssertEqual(listed.status, 0, listed.stderr)
        XCTAssertEqual(listed.stdout, aplay.stdout)
    }

    /// A device that does not open: one line that names every device aplay lists.
    func testAWrongDeviceSaysWhichExist() throws {
        let names = try runProcess("aplay", ["-L"]).stdout.split(separator: "\n").filter { !$0.hasPrefix(" ") }
        XCTAssertFalse(names.isEmpty)
        let played = try runProcess(listener, ["play", try fixture("cbr.mp3"), "--output", "alsa:no-such-card"], timeout: 30)
        XCTAssertNotEqual(played.status, 0)
        let lines = played.stderr.split(separator: "\n").filter { $0.contains("no-such-card") }
        XCTAssertEqual(lines.count, 1, played.stderr)
        for name in names { XCTAssertTrue(lines.first?.contains(" \(name)") == true, "\(name) missing from: \(played.stderr)") }
    }
}
