import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PartyCastTestSupport
import XCTest

/// The party changed while it plays, end to end on 127.0.0.1: a broadcaster and three listeners on
/// simulated cards (release builds), driven by `broadcaster ctl` as a user would. Every change is
/// found in the recordings themselves: when each listener went silent, came back, dipped (the fade
/// of a skip or a seek) or changed level, against the command's time and against each other.
final class PartyControlTests: XCTestCase {
    var broadcaster = "", listener = ""

    override func setUpWithError() throws {
        let bin = try releaseBuilds()
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

    /// The API request for a command as `broadcaster ctl` would take it.
    static func request(for arguments: [String]) -> (method: String, path: String, body: [String: Any]?) {
        switch (arguments[0], arguments.count) {
        case ("seek", _): ("POST", "/api/seek", ["seconds": Double(arguments[1])!])
        case ("volume", 2): ("PUT", "/api/volume", ["percent": Int(arguments[1])!])
        case ("volume", _): ("PUT", "/api/listeners/\(arguments[1])/volume", ["percent": Int(arguments[2])!])
        case ("mute", _): ("PUT", "/api/listeners/\(arguments[1])/mute", ["muted": true])
        default: ("POST", "/api/\(arguments[0])", nil)
        }
    }

    /// A party is a gain of volume³ (the slider's curve).
    static func gain(_ percent: Double) -> Double { pow(percent / 100, 3) }

    func testTwentyCommandsAreHeardOnEveryListenerAtOnceAndSoon() async throws {
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
        // Every listener has joined and reported its buffer and its clock's bound, and the party has
        // been heard for a second.
        func ready() throws -> Bool {
            let lines = try ctl(["status"]).stdout.components(separatedBy: "\n")
            let elapsed = lines.first?.firstMatch(of: /(\d+):(\d\d) \//).map { Int($0.1)! * 60 + Int($0.2)! } ?? 0
            return elapsed >= 1 && names.allSatisfy { name in
                lines.contains { $0.contains("] \(name) (") && !$0.contains("buffer –") && $0.contains("clock ±") }
            }
        }
        guard try waitUntil(timeout: 30, every: 0.2, ready) else {
            return XCTFail("the listeners never all played: \(try ctl(["status"]).stdout)")
        }
        // Loopback is a quiet link: each listener's own bound on its clock is tight.
        let status = try ctl(["status"]).stdout
        let bounds = status.matches(of: /clock ±(\d+) µs/).map { Int($0.1)! }
        XCTAssertEqual(bounds.count, names.count, status)
        XCTAssert(bounds.allSatisfy { (1...200).contains($0) }, status)

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
            // Straight to the API, as the page sends it: the time of the command is when it leaves.
            let (method, path, body) = Self.request(for: step.arguments)
            var request = URLRequest(url: URL(string: url + path)!)
            request.httpMethod = method
            if let body {
                request.httpBody = try JSONSerialization.data(withJSONObject: body)
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            }
            let at = monotonicNow()
            let (data, response) = try await URLSession.shared.data(for: request)
            XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200, "\(step.arguments): \(String(decoding: data, as: UTF8.self))")
            sent.append(at)
            // Spaced so that each change is over before the next begins.
            try await letTimePass(1.2)
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
        var rampSteps: [Double] = []
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
                        // A ramp, not a jump: no step from one frame to the next beyond the ramp's own
                        // slope (30 ms from the old gain to the new), measured against the tone itself.
                        // The estimate's own noise (the interpolator's) is what it reads where the gain holds still,
                        // over as many frames as the ramp's window: its largest step grows with the frames read.
                        let ramp = Int(recording.rate * 0.030), middle = Int(edge)
                        let slope = abs(ratio - 1) / Double(ramp)
                        let fit = (middle - ramp - 4800)..<(middle - ramp)
                        func steps(_ frames: Range<Int>) -> Double { recording.largestGainStep(over: frames, before: fit, frequencies: [600, 800, 1200]) }
                        let noise = max(steps((middle - 3 * ramp)..<(middle - ramp)), steps((middle + ramp)..<(middle + 3 * ramp)))
                        let jump = steps((middle - ramp)..<(middle + ramp))
                        XCTAssertLessThanOrEqual(jump, 1.5 * slope + 2 * noise,
                                                 "\(recording.name): a step in the gain on \(step.arguments) (slope \(slope), estimate's noise \(noise))")
                        rampSteps.append(jump / (slope + noise))
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
            // The judged spread: the edges of pauses, resumes, skips and seeks (a level's midpoint,
            // found on a slow 30 ms ramp, is reported but measured too coarsely to judge to 100 µs).
            if edges.count > 1, case .level = step.effect {} else if edges.count > 1 { spreads.append(Double(latest - earliest) / 1e3) }
            lines.append("\(step.arguments.joined(separator: " ")): heard after \(String(format: "%.1f", Double(latest - command) / 1e6)) ms"
                         + (edges.count > 1 ? ", spread \(String(format: "%.1f", Double(latest - earliest) / 1e3)) µs" : ""))
        }
        let report = lines.joined(separator: "\n")
            + String(format: "\ncommand → sound: p50 %.1f ms, p95 %.1f ms, max %.1f ms; spread between listeners: p99 %.1f µs, max %.1f µs; largest frame-to-frame gain step in a ramp: %.2f × (its slope + the estimate's noise)",
                     percentile(latencies, 50), percentile(latencies, 95), latencies.max() ?? .nan, percentile(spreads, 99), spreads.max() ?? .nan,
                     rampSteps.max() ?? .nan)
        print(report)
        XCTAssertEqual(latencies.count, steps.count, report)
        XCTAssertLessThanOrEqual(percentile(latencies, 95), 250, report)
        XCTAssertLessThanOrEqual(percentile(spreads, 99), 100, report)
    }

    /// Across a pause and a resume not a sample is lost or repeated: the audio after the resume
    /// continues the song exactly where the audio before the pause left it, and both match Debian's
    /// mpg123 decode of the file. So too in a `wav:` listener's file, which is written ahead of the
    /// speakers, so the pauses take back audio already in it.
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
        let recorder = try startProcess(listener, ["join", "--host", "127.0.0.1:\(port)", "--output", "wav:\(directory)/written.wav", "--once", "--quiet"])
        defer { recorder.signal(SIGKILL) }
        XCTAssertTrue(waitUntil(timeout: 20) { server.stderr.matches(of: /joined/).count >= 2 }, server.stderr)
        let url = "http://127.0.0.1:\(controlPort)"
        // A short pause (bridged with silence in the ring) and a long one (a new timeline).
        for (playFor, pauseFor) in [(4.0, 0.6), (1.5, 1.8)] {
            letTimePass(playFor)
            XCTAssertEqual(try runProcess(broadcaster, ["ctl", "--url", url, "pause"]).status, 0)
            letTimePass(pauseFor)
            XCTAssertEqual(try runProcess(broadcaster, ["ctl", "--url", url, "resume"]).status, 0)
        }
        XCTAssertEqual(player.wait(timeout: 40).status, 0, player.stderr)
        XCTAssertEqual(recorder.wait(timeout: 10).status, 0, recorder.stderr)
        let served = server.wait(timeout: 10)
        XCTAssertEqual(served.status, 0, served.stderr)

        let heard = try CardRecording(path: "\(directory)/heard.wav", name: "heard")
        let left = channel(0, of: reference.samples, channels: reference.channels)
        let recorded = channel(0, of: heard.audio.samples, channels: heard.audio.channels)
        // The listener plays on its clock-sync schedule, through an interpolator: what it recorded is
        // the song delayed by a fraction of a frame too, so everything here is measured to fractions.
        guard let first = heard.soundStart(from: 0) else { return XCTFail("nothing was heard") }
        var lag = Self.lag(recorded, left, at: first + 4800, guess: -first, range: 480)
        var cursor = first
        // Where the broadcaster cut for each pause and resumed, on the timeline.
        let cuts = served.stderr.matches(of: /paused.* \(timeline frame (\d+)\)/).map { Double($0.1)! }
        let resumes = served.stderr.matches(of: /resumed \(timeline frame (\d+)\)/).map { Double($0.1)! }
        guard cuts.count == 2, resumes.count == 2 else { return XCTFail("two pauses and resumes expected: \(served.stderr)") }
        for pause in 1...2 {
            guard let silent = heard.silenceStart(from: cursor, run: Int(heard.rate * 0.2), threshold: Float.leastNonzeroMagnitude),
                  let back = heard.soundStart(from: silent, threshold: Float.leastNonzeroMagnitude) else {
                return XCTFail("pause \(pause) not found in the recording")
            }
            let before = Self.lag(recorded, left, at: silent - 600 - 4096, guess: Int(lag.rounded()), range: 48)
            let after = Self.lag(recorded, left, at: back + 600, guess: Int(before.rounded()) - (back - silent), range: 480)
            // Nothing lost, nothing repeated: the song moved on against the recording by exactly the
            // timeline's gap, so the song frame the pause stopped at is the one the resume starts from.
            let gap = resumes[pause - 1] - cuts[pause - 1]
            let report = String(format: "pause %d: the song moved %.2f frames against the recording over a gap of %.0f on the timeline (%d silent)",
                                pause, before - after, gap, back - silent)
            print(report)
            // Either pause empties the listener's ring (nothing is sent between the pause's silent
            // chunk and the resume), so its reader aligns afresh on the schedule at the resume and
            // sheds its residual sync error there (usually a few µs, up to ~40 µs seen on loopback:
            // under 2 frames), a shift of where it interpolates, not a sample lost; a lost or
            // repeated chunk is hundreds of frames, a fade cut short ~15.
            XCTAssertEqual(before - after, gap, accuracy: 2, report)
            // The fade out is heard to its end: the silence starts where it reaches zero, not before
            // (the fit of the ramp is good to a few frames; a fade cut short loses ~15).
            guard let faded = Self.rampZero(recorded, left, lag: before, frames: (silent - 220)..<(silent - 10)) else {
                return XCTFail("pause \(pause): no fade found")
            }
            XCTAssertGreaterThanOrEqual(Double(silent), faded - 5, report)
            lag = after
            cursor = back
        }

        // The file holds the song once, with the pauses' fades and the silence between. Each fade
        // ends on a frame of gain 0, so without the silence it is the song less a frame per pause.
        let written = try readAudio("\(directory)/written.wav")
        let sound = channel(0, of: written.samples, channels: written.channels).filter { $0 != 0 }
        XCTAssertEqual(Double(sound.count), Double(left.count), accuracy: 4, "the wav: listener's file holds the song, once")
        let strayed = stride(from: 4800, to: sound.count - 4200, by: written.sampleRate / 4)
            .map { (frame: $0, offset: Self.lag(sound, left, at: $0, guess: 0, range: 48)) }
            .first { !(-0.5...2.5).contains($0.offset) }
        XCTAssertNil(strayed.map { "the wav: listener's file at frame \($0.frame) of its sound: \($0.offset) frames off the song" })
    }

    /// The offset (reference frame − recording frame) of `recording` around `frame`, to a fraction
    /// of a frame: the best integer lag within ±`range` of `guess` by correlation over 4096 frames,
    /// refined by a parabola through the peak.
    static func lag(_ recording: [Float], _ reference: [Float], at frame: Int, guess: Int, range: Int) -> Double {
        let length = 4096
        func correlation(_ lag: Int) -> Double {
            guard frame + lag >= 0, frame + lag + length <= reference.count, frame >= 0, frame + length <= recording.count else { return -.infinity }
            return dotProduct(recording[frame..<(frame + length)], reference[(frame + lag)..<(frame + lag + length)])
        }
        let best = bestLag(recording, from: frame, count: length, in: reference, lags: (guess - range)...(guess + range))?.lag ?? guess
        let (a, b, c) = (correlation(best - 1), correlation(best), correlation(best + 1))
        let curvature = a - 2 * b + c
        return Double(best) + (curvature < 0 ? 0.5 * (a - c) / curvature : 0)
    }

    /// Where a linear fade over `frames` of the recording reaches zero: the recording there is the
    /// reference (at `lag`) times gain a + b·n, fitted by least squares; returns −a/b.
    static func rampZero(_ recording: [Float], _ reference: [Float], lag: Double, frames: Range<Int>) -> Double? {
        var (srr, snrr, snnrr, sxr, snxr) = (0.0, 0.0, 0.0, 0.0, 0.0)
        for n in frames {
            // The reference between frames, linearly: the lag is a fraction off a whole frame.
            let position = Double(n) + lag
            let i = Int(position.rounded(.down)), fraction = position - Double(i)
            guard i >= 0, i + 1 < reference.count else { return nil }
            let r = Double(reference[i]) * (1 - fraction) + Double(reference[i + 1]) * fraction
            let x = Double(recording[n]), t = Double(n - frames.lowerBound)
            (srr, snrr, snnrr, sxr, snxr) = (srr + r * r, snrr + t * r * r, snnrr + t * t * r * r, sxr + x * r, snxr + t * x * r)
        }
        let determinant = srr * snnrr - snrr * snrr
        guard determinant != 0 else { return nil }
        let a = (sxr * snnrr - snxr * snrr) / determinant, b = (srr * snxr - snrr * sxr) / determinant
        return b == 0 ? nil : Double(frames.lowerBound) - a / b
    }
}
