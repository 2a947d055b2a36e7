import Foundation
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// Hostile guests against a real broadcaster (its own process, so its memory can be read), from the
/// protocol alone: each attack of issue 26's table while a real listener joins and plays. Guests
/// connect from 127.0.0.2, the listener from 127.0.0.1: two machines to the broadcaster's caps.
/// What must hold: the broadcaster's RSS under 150 MB, its log under 1 MB, the listener's song heard.
/// The party and the checks every attack shares; the attacks are in HostileGuestTests.swift.
class HostileGuestCase: XCTestCase {
    let broadcaster = productPath("broadcaster")
    let listener = productPath("listener")
    static let rssBoundMiB = 150.0
    static let logBoundBytes = 1 << 20

    struct Party {
        let process: BackgroundProcess
        let port: Int
        let controlPort: Int
        var control: String { "http://127.0.0.1:\(controlPort)" }
    }

    override func setUp() {
        raiseTestOpenFileLimit()
    }

    func startParty(seconds: Int) throws -> Party {
        let port = freePort()
        let controlPort = freePort()
        let process = try startProcess(broadcaster, ["share", "tone:440:\(seconds)", "--codec", "pcm", "--start-in", "1", "--no-mdns",
                                                     "--port", "\(port)", "--control-port", "\(controlPort)"])
        XCTAssertTrue(process.waitForStderr("remote control: http://", timeout: 30), process.stderr)
        return Party(process: process, port: port, controlPort: controlPort)
    }

    func join(_ party: Party, recording: String) throws -> BackgroundProcess {
        try startProcess(listener, ["join", "--host", "127.0.0.1:\(party.port)", "--output", "wav:\(recording)", "--quiet", "--once"])
    }

    /// The listener played to the end (exit 0) and its last second is the tone, not silence.
    func assertPlayed(_ joined: BackgroundProcess, recording: String, atLeast seconds: Int, _ party: Party,
                      file: StaticString = #filePath, line: UInt = #line) throws {
        let played = joined.wait(timeout: 90)
        XCTAssertEqual(played.status, 0, played.stderr + "\nbroadcaster:\n" + party.process.stderr.suffix(4000), file: file, line: line)
        let audio = try readAudio(recording)
        XCTAssertGreaterThanOrEqual(audio.frames, seconds * audio.sampleRate, "the listener heard too little", file: file, line: line)
        let tail = audio.samples.suffix(audio.sampleRate * audio.channels)
        let rms = (tail.reduce(0) { $0 + Double($1) * Double($1) } / Double(max(1, tail.count))).squareRoot()
        XCTAssertGreaterThan(rms, 0.05, "the listener's last second is silent", file: file, line: line)
    }

    /// After the song: the broadcaster exited 0, its log stayed small, and `status` counted the
    /// refusals of `kind` (at least `refused`).
    func assertBounded(_ party: Party, peakMiB: Double, refusals kind: String, atLeast refused: Int, status: String,
                       file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertLessThanOrEqual(peakMiB, Self.rssBoundMiB, "broadcaster RSS", file: file, line: line)
        let served = party.process.wait(timeout: 60)
        XCTAssertEqual(served.status, 0, served.stderr.suffix(4000).description, file: file, line: line)
        XCTAssertLessThanOrEqual(served.stderr.utf8.count, Self.logBoundBytes, "the broadcaster's log", file: file, line: line)
        // Not a line per connection: each attack here makes hundreds or a thousand.
        XCTAssertLessThanOrEqual(served.stderr.split(separator: "\n").count, 500, "lines in the broadcaster's log", file: file, line: line)
        let count = Self.refusalCount(kind, in: status)
        XCTAssertGreaterThanOrEqual(count, refused, "refusals of \(kind) in status: \(status.prefix(2000))", file: file, line: line)
    }

    /// Status once it counts `atLeast` refusals of `kind` (the broadcaster may still be working
    /// through its accept queue), or after 10 s as it is then.
    func waitForRefusals(_ kind: String, atLeast count: Int, _ party: Party) throws -> String {
        let deadline = Date().addingTimeInterval(10)
        var status = ""
        repeat {
            status = try curl(["\(party.control)/api/status"]).body
        } while Self.refusalCount(kind, in: status) < count && Date() < deadline
        return status
    }

    /// Listeners in a status snapshot (`Int.max` for one that does not parse, which no bound passes).
    static func listenerCount(in status: String) -> Int {
        guard let json = try? JSONSerialization.jsonObject(with: Data(status.utf8)) as? [String: Any],
              let listeners = json["listeners"] as? [[String: Any]] else { return .max }
        return listeners.count
    }

    static func refusalCount(_ kind: String, in status: String) -> Int {
        guard let json = try? JSONSerialization.jsonObject(with: Data(status.utf8)) as? [String: Any],
              let refused = json["refused"] as? [String: Int] else { return 0 }
        return refused[kind] ?? 0
    }
}
