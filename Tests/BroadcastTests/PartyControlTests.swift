import Foundation
import PartyCastTestSupport
import XCTest

/// The party changed while it plays, end to end on 127.0.0.1: a broadcaster and three listeners on
/// simulated cards (release builds), driven by `broadcaster ctl` as a user would. Every change is
/// found in the recordings themselves: when each listener went silent, came back, dipped (the fade
/// of a skip or a seek) or changed level, against the command's time and against each other.
final class PartyControlTests: XCTestCase {
    var broadcaster = "", listener = ""

    override func setUpWithError() throws {
        guard let bin = ProcessInfo.processInfo.environment["PARTYCAST_RELEASE_BIN"] else {
            throw XCTSkip("needs release builds: run `make test` (or set PARTYCAST_RELEASE_BIN)")
        }
        (broadcaster, listener) = ("\(bin)/broadcaster", "\(bin)/listener")
    }

    /// What a command should do to the recordings.
    enum Effect {
        /// Silence from a frame on (pause, and a listener's mute).
        case silence
        /// Sound again after silence (resume).
        case sound
        /// A fade out and in (skip, seek): its bottom is the cut.
        case dip
        /// A level change by `ratio`.
        case level(ratio: Double)
    }

    struct Step {
        var arguments: [String]
        var effect: Effect
        /// Listeners the command changes (the others must not change); nil: all of them.
        var only: String?
    }

    /// A party is a gain of volume³ (the slider's curve).
    static func gain(_ percent: Double) -> Double { pow(percent / 100, 3) }

    func testTwentyCommandsAreHeardOnEveryListenerAtOnceAndSoon() throws {
        let directory = try temporaryDirectory()
        let (port, controlPort) = (freePort(), freePort())
        // Tones whose periods divide 240 frames, so a 5 ms window measures their level exactly.
        let server = try startProcess(broadcaster, ["share", "tone:600:100", "tone:800:100", "tone:1200:100", "--no-mdns",
                                                    "--port", "\(port)", "--control-port", "\(controlPort)", "--start-in", "2"])
        defer { server.signal(SIGKILL) }
        XCTAssertTrue(server.waitForStderr("broadcasting", timeout: 20), server.stderr)
        let names = ["kitchen", "hall", "garden"]
        let listeners = try names.map { name in
            try startProcess(listener, ["join", "--host", "127.0.0.1:\(port)", "--output", "virtual:\(directory)/\(name).wav",
                                        "--listener-name", name, "--once", "--quiet"])
        }
        defer { for l in listeners { l.signal(SIGKILL) } }
        let url = "http://127.0.0.1:\(controlPort)"
        func ctl(_ arguments: [String]) throws -> ProcessResult {
            try runProcess(broadcaster, ["ctl", "--url", url] + arguments, timeout: 20)
        }
        // Every listener has joined and reported in (their status reports come about once a second).
        let deadline = Date().addingTimeInterval(30)
        while try !ctl(["status"]).stdout.components(separatedBy: "\n").filter({ line in names.contains { line.contains($0) } })
            .allSatisfy({ $0.contains("buffer") }) || Date() > deadline {
            if Date() > deadline { break }
            Thread.sleep(forTimeInterval: 0.2)
        }
        let status = try ctl(["status"])
        for name in names { XCTAssertTrue(status.stdout.contains(name), status.stdout + status.stderr) }

        let steps: [Step] = [
            Step(arguments: ["pause"], effect: .silence),
            Step(arguments: ["resume"], effect: .sound),
            Step(arguments: ["next"], effect: .dip),
            Step(arguments: ["seek", "30"], effect: .dip),
            Step(arguments: ["volume", "hall", "40"], effect: .level(ratio: Self.gain(40)), only: "hall"),
            Step(arguments: ["volume", "hall", "100"], effect: .level(ratio: 1 / Self.gain(40)), only: "hall"),
            Step(arguments: ["pause"], effect: .silence),
            Step(arguments: ["resume"], effect: .sound),
            Step(arguments: ["previous"], effect: .dip),
            Step(arguments: ["volume", "50"], effect: .level(ratio: Self.gain(50))),
            Step(arguments: ["volume", "100"], effect: .level(ratio: 1 / Self.gain(50))),
            Step(arguments: ["next"], effect: .dip),
            Step(arguments: ["volume", "garden", "20"], effect: .level(ratio: Self.gain(20)), only: "garden"),
            Step(arguments: ["volume", "garden", "100"], effect: .level(ratio: 1 / Self.gain(20)), only: "garden"),
            Step(arguments: ["seek", "10"], effect: .dip),
            Step(arguments: ["pause"], effect: .silence),
            Step(arguments: ["resume"], effect: .sound),
            Step(arguments: ["previous"], effect: .dip),
            Step(arguments: ["volume", "70"], effect: .level(ratio: Self.gain(70))),
            Step(arguments: ["mute", "kitchen"], effect: .silence, only: "kitchen"),
        ]
        var sent: [Int64] = []
        for step in steps {
            let at = monotonicNow()
            let result = try ctl(step.arguments)
            XCTAssertEqual(result.status, 0, "ctl \(step.arguments): \(result.stdout)\(result.stderr)")
            sent.append(at)
            // Spaced so that each change is over before the next begins.
            Thread.sleep(forTimeInterval: 1.2)
        }
        server.signal(SIGINT)
        for l in listeners {
            let result = l.wait(timeout: 30)
            XCTAssertEqual(result.status, 0, result.stderr)
        }
        XCTAssertEqual(server.wait(timeout: 10).status, 0, server.stderr)

        let recordings = try names.map { try CardRecording(path: "\(directory)/\($0).wav", name: $0) }
        let window = 240
        var latencies: [Double] = []
        var spreads: [Double] = []
        var lines: [String] = []
        for (index, step) in steps.enumerated() {
            let command = sent[index]
            var edges: [String: Int64] = [:]
            for recording in recordings {
                let from = recording.frame(at: command)
                let to = min(recording.audio.frames - 2, from + Int(recording.rate * 0.6))
                let changes = step.only == nil || step.only == recording.name
                let before = recording.level(at: from, window: window)
                guard changes else {
                    // Untouched: the same level throughout.
                    let after = recording.level(at: to, window: window)
                    XCTAssertEqual(after, before, accuracy: max(0.02 * before, 1e-3), "\(recording.name) changed on \(step.arguments)")
                    continue
                }
                var edge: Double?
                switch step.effect {
                case .silence: edge = recording.silenceStart(from: from, run: Int(recording.rate * 0.1)).map(Double.init)
                case .sound: edge = recording.soundStart(from: from).map(Double.init)
                case .dip: edge = recording.dip(from: from, to: to, window: window)
                case .level(let ratio):
                    edge = recording.crossing(from: from, before: before, after: before * ratio, window: window)
                    if let edge {
                        let after = recording.level(at: Int(edge) + Int(recording.rate * 0.1), window: window)
                        XCTAssertEqual(after / before, ratio, accuracy: 0.05 * ratio, "\(recording.name): level after \(step.arguments)")
                    }
                }
                guard let edge else {
                    XCTFail("\(recording.name): no change found after \(step.arguments)")
                    continue
                }
                edges[recording.name] = recording.time(ofFrame: edge)
            }
            guard let latest = edges.values.max(), let earliest = edges.values.min() else { continue }
            latencies.append(Double(latest - command) / 1e6)
            if edges.count > 1 { spreads.append(Double(latest - earliest) / 1e3) }
            lines.append("\(step.arguments.joined(separator: " ")): heard after \(String(format: "%.1f", Double(latest - command) / 1e6)) ms"
                         + (edges.count > 1 ? ", spread \(String(format: "%.1f", Double(latest - earliest) / 1e3)) µs" : ""))
        }
        let report = lines.joined(separator: "\n")
            + String(format: "\ncommand → sound: p50 %.1f ms, p95 %.1f ms, max %.1f ms; spread between listeners: p99 %.1f µs, max %.1f µs",
                     percentile(latencies, 50), percentile(latencies, 95), latencies.max() ?? .nan, percentile(spreads, 99), spreads.max() ?? .nan)
        print(report)
        XCTAssertEqual(latencies.count, steps.count, report)
        XCTAssertLessThanOrEqual(percentile(latencies, 95), 250, report)
        XCTAssertLessThanOrEqual(percentile(spreads, 99), 100, report)
    }

    /// Across a pause and a resume not a sample is lost or repeated: the audio after the resume
    /// continues the song exactly where the audio before the pause left it, and both match Debian's
    /// mpg123 decode of the file.
    func testPauseAndResumeLoseAndRepeatNothing() throws {
        let directory = try temporaryDirectory()
        let song = "\(directory)/noise.mp3"
        XCTAssertEqual(try runProcess("sox", ["-R", "-n", "-r", "48000", "-c", "2", "\(directory)/noise.wav", "synth", "10", "pinknoise",
                                              "gain", "-n", "-3"]).status, 0)
        XCTAssertEqual(try runProcess("lame", ["--quiet", "-b", "192", "\(directory)/noise.wav", song]).status, 0)
        let reference = try mpg123Reference(song, in: directory)
        let (port, controlPort) = (freePort(), freePort())
        let server = try startProcess(broadcaster, [
            "share", song, "--codec", "pcm", "--no-mdns", "--port", "\(port)", "--control-port", "\(controlPort)", "--start-in", "2",
        ])
        defer { server.signal(SIGKILL) }
        XCTAssertTrue(server.waitForStderr("broadcasting", timeout: 20), server.stderr)
        let player = try startProcess(listener, ["join", "--host", "127.0.0.1:\(port)", "--output", "virtual:\(directory)/heard.wav", "--once", "--quiet"])
        defer { player.signal(SIGKILL) }
        XCTAssertTrue(server.waitForStderr("joined", timeout: 20), server.stderr)
        let url = "http://127.0.0.1:\(controlPort)"
        // A short pause (bridged with silence in the ring) and a long one (a new timeline).
        for (playFor, pauseFor) in [(4.0, 0.6), (1.5, 1.8)] {
            Thread.sleep(forTimeInterval: playFor)
            XCTAssertEqual(try runProcess(broadcaster, ["ctl", "--url", url, "pause"]).status, 0)
            Thread.sleep(forTimeInterval: pauseFor)
            XCTAssertEqual(try runProcess(broadcaster, ["ctl", "--url", url, "resume"]).status, 0)
        }
        XCTAssertEqual(player.wait(timeout: 40).status, 0, player.stderr)
        XCTAssertEqual(server.wait(timeout: 10).status, 0, server.stderr)

        let heard = try CardRecording(path: "\(directory)/heard.wav", name: "heard")
        let channels = heard.audio.channels
        /// The offset (reference frame − recording frame) of the 4096 frames from `at`, searched
        /// within ±`range` of `guess` by correlation, and how well they match there (SNR, dB).
        func lag(at frame: Int, guess: Int, range: Int) -> (lag: Int, snr: Double) {
            let length = 4096
            let recorded = heard.audio.samples[(frame * channels)..<((frame + length) * channels)]
            var best = (lag: guess, score: -Double.infinity)
            for candidate in (guess - range)...(guess + range) where frame + candidate >= 0 && frame + candidate + length <= reference.frames {
                let start = (frame + candidate) * channels
                var score = 0.0
                for (i, x) in recorded.enumerated() { score += Double(x) * Double(reference.samples[start + i]) }
                if score > best.score { best = (candidate, score) }
            }
            let start = (frame + best.lag) * channels
            return (best.lag, snr(recorded, reference.samples[start..<(start + length * channels)]))
        }
        guard let first = heard.soundStart(from: 0) else { return XCTFail("nothing was heard") }
        var (previousLag, _) = lag(at: first + 2400, guess: -first, range: 480)
        var cursor = first
        for pause in 1...2 {
            // The pause's silence: every sample exactly zero (the gain reaches 0 at the cut and
            // starts from 0 at the resume, and the gap between is silence).
            guard let silent = heard.silenceStart(from: cursor, run: Int(heard.rate * 0.2), threshold: Float.leastNonzeroMagnitude),
                  let back = heard.soundStart(from: silent, threshold: Float.leastNonzeroMagnitude) else {
                return XCTFail("pause \(pause) not found in the recording")
            }
            let before = lag(at: silent - 2400 - 4096, guess: previousLag, range: 48)
            let after = lag(at: back + 2400, guess: before.lag - (back - silent), range: 480)
            XCTAssertGreaterThan(before.snr, 40, "pause \(pause): the audio before it is not the song")
            XCTAssertGreaterThan(after.snr, 40, "pause \(pause): the audio after it is not the song")
            // The song frame at the cut (gain exactly 0) is the song frame at the resume (gain 0 again):
            // the silent run spans both, so the song moved on by exactly its length less one.
            XCTAssertEqual(before.lag - after.lag, back - silent - 1,
                           "pause \(pause): \(before.lag - after.lag - (back - silent - 1)) frames lost (negative: repeated)")
            print("pause \(pause): \(back - silent) silent frames; the song resumes at the frame where it paused (SNR \(Int(before.snr)) / \(Int(after.snr)) dB)")
            previousLag = after.lag
            cursor = back
        }
    }
}
