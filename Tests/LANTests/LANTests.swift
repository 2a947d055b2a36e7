import Foundation
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// End to end on a LAN of network namespaces (scripts/lan/lan.sh): each host has its own dbus
/// and avahi-daemon, so discovery is real mDNS between hosts and never touches the root namespace.
final class LANTests: XCTestCase {
    static let harness = LANHarness(prefix: "pclan", state: "pc-lan-tests")
    let broadcaster = productPath("broadcaster")
    let listener = productPath("listener")

    override func setUpWithError() throws {
        try Self.harness.up(hosts: 4, tools: [broadcaster, listener], timeout: 60)
    }

    override func tearDownWithError() throws {
        try Self.harness.down()
    }

    func host(_ i: Int) -> String { "pclan-host\(i)" }

    func on(_ host: String, _ command: [String]) throws -> BackgroundProcess {
        try startProcess(LANHarness.script, ["exec", host] + command, environment: Self.harness.environment)
    }

    /// One broadcaster and three listeners that find it by name over mDNS, all joined before the
    /// start: each plays the whole song, ≥ 10 dB against mpg123's decode. Debian's avahi-browse on
    /// another host resolves it with its TXT records, `broadcaster ctl` finds its remote control by
    /// name and lists the three, and a second broadcaster with the same name is renamed "… #2".
    func testThreeListenersJoinByNameOverMDNS() throws {
        let directory = try temporaryDirectory()
        let mp3 = try fixture("cbr.mp3")
        let server = try on(host(1), [broadcaster, "share", mp3, "--name", "LAN Party", "--start-in", "8"])
        var browsed = ""
        for _ in 0..<20 where !browsed.contains("=;") {
            browsed = try on(host(2), ["avahi-browse", "-rtp", "_partycast._tcp"]).wait(timeout: 15).stdout
        }
        let resolved = browsed.split(separator: "\n").first { $0.hasPrefix("=;") && $0.contains("LAN\\032Party;") }
        XCTAssertNotNil(resolved, browsed)
        XCTAssertTrue(resolved?.contains("10.77.0.11;7360") == true, browsed)
        for record in ["\"proto=\(partyCastProtocolVersion)\"", "\"codec=opus\"", "\"id=", "\"control=7361\""] { XCTAssertTrue(resolved?.contains(record) == true, "\(record) in \(browsed)") }

        let listeners = try (2...4).map { i in
            try on(host(i), [listener, "join", "LAN Party", "--listener-name", "room\(i)", "--output", "wav:\(directory)/room\(i).wav", "--once", "--quiet"])
        }
        let twin = try on(host(2), [broadcaster, "share", "tone:440:3", "--name", "LAN Party", "--start-in", "1"])
        // The party's remote control, found by name over mDNS (TXT control=PORT) from another host,
        // sees every listener once they have joined.
        func everyoneListed(_ result: ProcessResult?) -> Bool {
            result?.status == 0 && (2...4).allSatisfy { result?.stdout.contains("] room\($0) (") == true }
        }
        var status: ProcessResult?
        let deadline = Date().addingTimeInterval(40)
        while Date() < deadline && !everyoneListed(status) {
            status = try on(host(3), [broadcaster, "ctl", "LAN Party", "status"]).wait(timeout: 20)
        }
        let controlled = try XCTUnwrap(status)
        XCTAssertEqual(controlled.status, 0, controlled.stderr)
        XCTAssertTrue(controlled.stdout.hasPrefix("LAN Party  —  "), controlled.stdout)
        XCTAssertTrue(everyoneListed(controlled), controlled.stdout)
        // The TXT record counts them as they join, without a refresh on a timer.
        var counted = ""
        for _ in 0..<10 where !counted.contains("\"listeners=3\"") {
            counted = try on(host(2), ["avahi-browse", "-rtp", "_partycast._tcp"]).wait(timeout: 15).stdout
        }
        XCTAssertTrue(counted.contains("\"listeners=3\""), counted)
        for (i, l) in listeners.enumerated() {
            let result = l.wait(timeout: 90)
            XCTAssertEqual(result.status, 0, "room\(i + 2): \(result.stderr)")
        }
        let served = server.wait(timeout: 30)
        XCTAssertEqual(served.status, 0, served.stderr)
        for i in 2...4 { XCTAssertTrue(served.stderr.contains("room\(i)@10.77.0.1\(i) joined"), served.stderr) }
        let renamed = twin.wait(timeout: 30)
        XCTAssertTrue(renamed.stderr.contains("renamed to \"LAN Party #2\""), renamed.stderr)

        let referencePath = "\(directory)/cbr.mp3.mpg123.wav"
        _ = try mpg123Reference(mp3, in: directory)
        XCTAssertEqual(try runProcess("sox", [referencePath, "\(directory)/ref48.wav", "rate", "-v", "48000"]).status, 0)
        let reference = try readAudio("\(directory)/ref48.wav")
        for i in 2...4 {
            let audio = try readAudio("\(directory)/room\(i).wav")
            XCTAssertEqual(audio.frames, reference.frames, "room\(i) got the whole song")
            XCTAssertGreaterThanOrEqual(snr(audio.samples[...], reference.samples[...]), 10, "room\(i)")
        }
    }

    /// A listener told a name that is not on the LAN yet says it waits, and joins once the
    /// broadcaster appears: machines of a party are often switched on together, and a broadcaster
    /// publishes a second or two after it starts.
    func testAListenerToldANameWaitsForItsBroadcaster() throws {
        let directory = try temporaryDirectory()
        let early = try on(host(2), [listener, "join", "Late Party", "--listener-name", "early", "--output", "wav:\(directory)/early.wav",
                                     "--once", "--quiet"])
        XCTAssertTrue(early.waitForStderr("waiting up to 30 s for \"Late Party\"", timeout: 30), early.stderr)
        XCTAssertTrue(early.isRunning, early.stderr)
        let server = try on(host(1), [broadcaster, "share", "tone:440:3", "--name", "Late Party", "--start-in", "2"])
        let joined = early.wait(timeout: 60)
        XCTAssertEqual(joined.status, 0, joined.stderr)
        let served = server.wait(timeout: 30)
        XCTAssertTrue(served.stderr.contains("early@10.77.0.12 joined"), served.stderr)
        let audio = try readAudio("\(directory)/early.wav")
        XCTAssertGreaterThan(audio.frames, 2 * 48_000, "the tone's 3 s, less what played before the join")
    }

    /// avahi-daemon gone: the broadcaster warns once and goes on serving by address.
    func testBroadcasterServesWithoutAvahi() throws {
        let directory = try temporaryDirectory()
        _ = try Self.harness.run(["kill-avahi", host(1)], timeout: 20)
        let server = try on(host(1), [broadcaster, "share", "tone:440:3", "--codec", "pcm", "--start-in", "2"])
        XCTAssertTrue(server.waitForStderr("broadcasting", timeout: 20), server.stderr)
        let joined = try on(host(2), [listener, "join", "--host", "10.77.0.11", "--output", "wav:\(directory)/byaddress.wav", "--once", "--quiet"])
        let result = joined.wait(timeout: 30)
        XCTAssertEqual(result.status, 0, result.stderr)
        let served = server.wait(timeout: 30)
        XCTAssertEqual(served.status, 0, served.stderr)
        XCTAssertEqual(served.stderr.components(separatedBy: "avahi-daemon is not running").count - 1, 1, served.stderr)
        XCTAssertEqual(try readAudio("\(directory)/byaddress.wav").frames, 3 * 44100 / 44100 * 48000)
    }
}
