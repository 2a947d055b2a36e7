import Foundation
import PartyCastTestSupport
import XCTest

/// partycast-skew against recordings whose skew sox put there: whole-sample and sub-sample delays,
/// a later start on the card's clock, and a card that ran 150 ppm fast.
final class SkewAnalyzerTests: XCTestCase {
    let tool = productPath("partycast-skew")

    struct Summary: Decodable { let name: String; let points: Int; let medianMicroseconds: Double; let maxMicroseconds: Double }
    struct Report: Decodable { let summaries: [Summary] }

    func sox(_ arguments: [String]) throws {
        let result = try runProcess("sox", arguments)
        XCTAssertEqual(result.status, 0, result.stderr)
    }

    func card(_ path: String, t0: Int, driftPPM: Double = 0) throws {
        try "{\"t0_ns\": \(t0), \"rate\": 48000, \"drift_ppm\": \(driftPPM)}".write(toFile: path + ".json", atomically: true, encoding: .utf8)
    }

    func testRecoversKnownSkews() throws {
        let d = try temporaryDirectory()
        let float = ["-e", "floating-point", "-b", "32"]
        try sox(["-R", "-n", "-r", "48000", "-c", "2"] + float + ["\(d)/ref.wav", "synth", "10", "pinknoise", "gain", "-n", "-6"])
        // 48 samples later: 1000 µs.
        try sox(["\(d)/ref.wav"] + float + ["\(d)/whole.wav", "pad", "48s", "trim", "0", "10"])
        // 0.3 sample later (delayed at 10× the rate, band-limited back): 6.25 µs.
        try sox(["\(d)/ref.wav", "-r", "480000"] + float + ["\(d)/up.wav", "rate", "-v", "480000"])
        try sox(["\(d)/up.wav", "-r", "48000"] + float + ["\(d)/fraction.wav", "pad", "3s", "rate", "-v", "48000", "trim", "0", "10"])
        // The same audio, started 2.5 ms later on the machine's clock: 2500 µs.
        try FileManager.default.copyItem(atPath: "\(d)/ref.wav", toPath: "\(d)/later.wav")
        // A card 150 ppm fast played the same sound at the same instants: its frame count drifts
        // 1.5 ms from REF's over 10 s, the skew stays ~0 (sox's rate leaves a constant ~3 µs, the
        // same size and opposite sign for a slow card).
        try sox(["\(d)/ref.wav"] + float + ["-t", "f32", "\(d)/fast.raw", "rate", "-v", "48007.2"])
        try sox(["-t", "f32", "-r", "48000", "-c", "2", "\(d)/fast.raw"] + float + ["\(d)/fast.wav"])
        let t0 = 1_000_000_000_000
        for name in ["ref", "whole", "fraction"] { try card("\(d)/\(name).wav", t0: t0) }
        try card("\(d)/later.wav", t0: t0 + 2_500_000)
        try card("\(d)/fast.wav", t0: t0, driftPPM: 150)

        let result = try runProcess(tool, ["\(d)/ref.wav", "\(d)/whole.wav", "\(d)/fraction.wav", "\(d)/later.wav", "\(d)/fast.wav",
                                           "--settle-s", "0.5", "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let report = try JSONDecoder().decode(Report.self, from: Data(result.stdout.utf8))
        let expected: [String: (Double, Double)] = ["whole.wav": (1000, 0.5), "fraction.wav": (6.25, 1.5), "later.wav": (2500, 0.5), "fast.wav": (0, 4)]
        for summary in report.summaries {
            guard let (skew, tolerance) = expected[summary.name] else { continue }
            XCTAssertGreaterThan(summary.points, 80, summary.name)
            XCTAssertEqual(summary.medianMicroseconds, skew, accuracy: tolerance, "\(summary.name): \(result.stdout)")
            XCTAssertEqual(summary.maxMicroseconds, skew, accuracy: 2 * tolerance, "\(summary.name): \(result.stdout)")
        }
        XCTAssertEqual(Set(report.summaries.map(\.name)), Set(expected.keys).union(["max pairwise"]))
    }

    /// --gaps: the longest run of exact zeros between the first and last sound, where it starts,
    /// how many runs pass 5 ms, and the song's length; the card's leading silence is not a gap.
    func testGapsFindDropoutsBetweenTheFirstAndLastSound() throws {
        struct Gap: Decodable { let name: String; let songFrames: Int; let longestGapMs: Double; let longestGapAtSeconds: Double; let gapsOver5Ms: Int }
        struct GapReport: Decodable { let gaps: [Gap] }
        let d = try temporaryDirectory()
        let float = ["-e", "floating-point", "-b", "32"]
        try sox(["-R", "-n", "-r", "48000", "-c", "2"] + float + ["\(d)/song.wav", "synth", "4", "pinknoise", "gain", "-n", "-6"])
        // Half a second of leading silence (a card waiting for the start), then 12 ms and 3 ms
        // dropouts 2 s and 3 s into the song.
        try sox(["\(d)/song.wav"] + float + ["\(d)/ref.wav", "pad", "0.5"])
        try sox(["\(d)/song.wav"] + float + ["\(d)/gappy.wav", "pad", "0.012@2", "0.003@3", "pad", "0.5"])
        for name in ["ref", "gappy"] { try card("\(d)/\(name).wav", t0: 1_000_000_000_000) }

        let result = try runProcess(tool, ["\(d)/ref.wav", "\(d)/gappy.wav", "--gaps", "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let gaps = try JSONDecoder().decode(GapReport.self, from: Data(result.stdout.utf8)).gaps
        XCTAssertEqual(gaps.map(\.name), ["ref.wav", "gappy.wav"])
        guard gaps.count == 2 else { return }
        // The first and last frames above the noise floor may sit a sample or two inside the song.
        XCTAssertEqual(Double(gaps[0].songFrames), 4 * 48000, accuracy: 4, result.stdout)
        XCTAssertEqual(gaps[0].longestGapMs, 0, accuracy: 0.1, result.stdout)
        XCTAssertEqual(gaps[0].gapsOver5Ms, 0, result.stdout)
        XCTAssertEqual(Double(gaps[1].songFrames), 4 * 48000 + 576 + 144, accuracy: 4, result.stdout)
        XCTAssertEqual(gaps[1].longestGapMs, 12, accuracy: 0.1, result.stdout)
        XCTAssertEqual(gaps[1].longestGapAtSeconds, 2, accuracy: 0.001, result.stdout)
        XCTAssertEqual(gaps[1].gapsOver5Ms, 1, result.stdout)
    }
}
