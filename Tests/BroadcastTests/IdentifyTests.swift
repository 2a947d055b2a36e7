import Foundation
import PartyCastTestSupport
import XCTest

/// `broadcaster ctl identify` end to end on 127.0.0.1 (release builds): two listeners record the
/// party to WAV files; the one identified holds the song plus one chime, the other the song bit for
/// bit (PCM on the wire, so both are exactly sox's samples but for the chime).
final class IdentifyTests: XCTestCase {
    func testIdentifyIsHeardOnOneRecordingOnly() throws {
        let bin = try releaseBuilds()
        let (broadcaster, listener) = ("\(bin)/broadcaster", "\(bin)/listener")
        let directory = try temporaryDirectory()
        let song = "\(directory)/noise.wav", seconds = 6
        XCTAssertEqual(try runProcess("sox", ["-R", "-n", "-r", "48000", "-c", "2", "-b", "16", song, "synth", "\(seconds)", "pinknoise",
                                              "gain", "-n", "-10"]).status, 0)
        let (port, controlPort) = (freePort(), freePort())
        let server = try startProcess(broadcaster, ["share", song, "--no-mdns", "--port", "\(port)", "--control-port", "\(controlPort)",
                                                    "--codec", "pcm", "--start-in", "2"])
        defer { server.signal(SIGKILL) }
        XCTAssertTrue(server.waitForStderr("broadcasting", timeout: 20), server.stderr)
        let names = ["kitchen", "hall"]
        let listeners = try names.map { name in
            try startProcess(listener, ["join", "--host", "127.0.0.1:\(port)", "--output", "wav:\(directory)/\(name).wav",
                                        "--listener-name", name, "--once", "--quiet"])
        }
        defer { for l in listeners { l.signal(SIGKILL) } }
        func ctl(_ arguments: [String]) throws -> ProcessResult {
            try runProcess(broadcaster, ["ctl", "--url", "http://127.0.0.1:\(controlPort)"] + arguments, timeout: 20)
        }
        // Both joined (each has reported its buffer) and the song a second in, then the chime on the kitchen's.
        func playing() throws -> Bool {
            let status = try ctl(["status"]).stdout
            let lines = status.components(separatedBy: "\n")
            return status.contains(/playing: .*  00:0[1-9] \//)
                && names.allSatisfy { name in lines.contains { $0.contains("] \(name) (") && !$0.contains("buffer –") } }
        }
        guard try waitUntil(timeout: 20, every: 0.1, playing) else { return XCTFail("not both playing: \(try ctl(["status"]).stdout)") }
        let identified = try ctl(["identify", "kitchen"])
        XCTAssertEqual(identified.status, 0, identified.stderr)
        XCTAssertTrue(identified.stdout.contains("kitchen"), identified.stdout)
        // The frame the party planned the chime for, as it logs it (its stderr goes once it has exited).
        XCTAssertTrue(server.waitForStderr("a chime from timeline frame", timeout: 10), server.stderr)
        let planned = try XCTUnwrap(server.stderr.firstMatch(of: /a chime from timeline frame (\d+)/).flatMap { Int($0.1) }, server.stderr)
        let refused = try ctl(["identify", "garden"])
        XCTAssertEqual(refused.status, 10, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("no listener garden"), refused.stderr)
        for l in listeners {
            let result = l.wait(timeout: Double(seconds) + 30)
            XCTAssertEqual(result.status, 0, result.stderr)
        }
        XCTAssertEqual(server.wait(timeout: 30).status, 0, server.stderr)

        let source = try readAudio(song).samples
        // Each recording lined up with the song: where the song's first 100 ms are, sample for sample.
        func aligned(_ name: String) throws -> ArraySlice<Float> {
            let recorded = try readAudio("\(directory)/\(name).wav").samples
            let head = source.prefix(9600)
            let start = try XCTUnwrap(stride(from: 0, to: recorded.count - head.count, by: 2).first { recorded[$0..<($0 + head.count)] == head },
                                      "\(name) never played the song's start")
            return recorded[start...].prefix(source.count)
        }
        let hall = try aligned("hall"), kitchen = try aligned("kitchen")
        XCTAssertEqual(hall.count, source.count, "the hall recorded the whole song")
        XCTAssertEqual(kitchen.count, source.count, "the kitchen recorded the whole song")
        XCTAssertNil(zip(hall, source).enumerated().first { $0.element.0 != $0.element.1 }.map { "sample \($0.offset) differs" },
                     "the hall's recording is the song, bit for bit")

        // The kitchen's differs where the chime is, alone: 0.6 s from the frame the party planned or,
        // since a WAV output writes what it receives at once, from the first frame it had not yet
        // received: within the party's lead (--buffer, 1 s) and a batch of chunks after it. Frames
        // of the song are timeline frames: the song started the party at frame 0.
        let added = zip(kitchen, source).map { $0 - $1 }
        let differing = added.indices.filter { added[$0] != 0 }
        let (first, last) = (differing.first.map { $0 / 2 } ?? -1, differing.last.map { $0 / 2 } ?? -1)
        print("identify: planned at frame \(planned); the kitchen's recording differs in frames \(first)…\(last)")
        XCTAssertGreaterThanOrEqual(first, planned, "not before the frame planned")
        XCTAssertLessThan(first, planned + 72_000, "within the lead of the frame planned")
        XCTAssertLessThan(last - first, 28_800, "one chime of 0.6 s")
        XCTAssertGreaterThan(last - first, 28_000, "the whole chime")
        let peak = added.map(\.magnitude).max() ?? 0
        XCTAssertEqual(peak, 0.3, accuracy: 0.02, "clearly heard at full volume")
        for channel in 0..<2 {
            let one = stride(from: channel, to: added.count, by: 2).map { added[$0] }
            XCTAssertEqual(one.map(\.magnitude).max() ?? 0, peak, "channel \(channel) chimes too")
        }
    }
}
