import Foundation
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// Running the scenarios and judging what the listener made of them.
extension HostileBroadcasterTests {
    /// Runs each scenario on each of its outputs, 8 at a time, and fails once per problem found (a
    /// virtual card's run is about 4 s of paced audio, mostly waiting).
    func run(_ scenarios: [Scenario], file: StaticString = #filePath, line: UInt = #line) {
        let runs = scenarios.flatMap { scenario in scenario.outputs.map { (scenario, $0) } }
        let reports = concurrentMap(runs, limit: 8) { scenario, output in
            let started = Date()
            let problems = Self.play(scenario, output: output)
            return (problems, Date().timeIntervalSince(started))
        }
        for ((scenario, output), (problems, seconds)) in zip(runs, reports) {
            let label = "[\(scenario.name) | \(output)]"
            print("hostile \(problems.isEmpty ? "PASS" : "FAIL") \(label) \(String(format: "%.1f", seconds)) s")
            for problem in problems { XCTFail("\(label) \(problem)", file: file, line: line) }
        }
    }

    static func play(_ scenario: Scenario, output kind: String) -> [String] {
        let stream = scenario.stream
        do {
            let fake = try FakeBroadcaster(stream: stream, paced: kind == "virtual", clockAnswer: scenario.clock) { c in
                if c.index == 0 { return try scenario.first(c) }
                if !scenario.reconnects { c.fake.problem("connection \(c.index + 1): the listener reconnected though nothing ended its connection") }
                try c.serveAll()
            }
            defer { fake.stop() }
            // HOSTILE_KEEP=1 keeps the recordings (and prints where) to look into a failure.
            let keep = ProcessInfo.processInfo.environment["HOSTILE_KEEP"] != nil
            let directory = try temporaryDirectory()
            defer { if keep { print("kept \(directory) for [\(scenario.name) | \(kind)]") } else { try? FileManager.default.removeItem(atPath: directory) } }
            let path = "\(directory)/out.wav"
            let run = try ListenerRun(fake: fake, output: "\(kind):\(path)")
            fake.stop()
            var problems = run.problems + fake.problems + helloProblems(fake)
            switch scenario.expect {
            case _ where run.timedOut || run.crashed: break
            case .exit(let status, let mentioning):
                if run.status != status { problems.append("exited with status \(run.status), expected \(status): \(run.lastWords)") }
                if let mentioning, !run.stderr.lowercased().contains(mentioning) { problems.append("stderr does not mention \"\(mentioning)\": \(run.lastWords)") }
            case .timeline(let tone, let settle):
                guard run.status == 0 else {
                    problems.append("exited with status \(run.status), expected 0: \(run.lastWords)")
                    break
                }
                problems += try timelineProblems(path: path, tone: tone, settle: settle, origin: fake.timelineOrigin)
            case .audio(let pieces):
                guard run.status == 0 else {
                    problems.append("exited with status \(run.status), expected 0: \(run.lastWords)")
                    break
                }
                if scenario.reconnects && fake.acceptedConnections.count < 2 { problems.append("never reconnected") }
                problems += try audioProblems(path: path, kind: kind, stream: stream, pieces: pieces, origin: fake.timelineOrigin)
            }
            return problems
        } catch {
            return ["\(error)"]
        }
    }

    /// The listener's first message on each connection must be its Hello, in this build's protocol.
    static func helloProblems(_ fake: FakeBroadcaster) -> [String] {
        fake.acceptedConnections.compactMap { c in
            switch c.firstMessage?.body {
            case .hello(let hello)?:
                hello.protocolVersion == partyCastProtocolVersion ? nil
                    : "connection \(c.index + 1): Hello with protocol \(hello.protocolVersion), expected \(partyCastProtocolVersion)"
            case let body?: "connection \(c.index + 1): the listener's first message was \(String(describing: body).prefix { $0 != "(" }), not Hello"
            case nil: "connection \(c.index + 1): the listener sent nothing"
            }
        }
    }

    static func audioProblems(path: String, kind: String, stream: ToneStream, pieces: [Piece], origin: Int64) throws -> [String] {
        let audio = try readAudio(path)
        let perChunk = ToneStream.framesPerChunk * ToneStream.channels
        let played = pieces.reduce(0) { n, piece in if case .chunks(let r) = piece { n + r.count } else { n } }
        let concealed = pieces.reduce(0) { n, piece in if case .concealed(let c) = piece { n + c } else { n } }
        let chunks = played + concealed

        if kind == "virtual" { return virtualProblems(audio, path: path, playedChunks: played, concealedChunks: concealed, codec: stream.codec, origin: origin) }

        if stream.codec == .pcm {
            // Exactly the accepted chunks, concealed ones as silence, bit for bit.
            var expected: [Float] = []
            for piece in pieces {
                switch piece {
                case .chunks(let r): expected += pcmAsRead[r.lowerBound * perChunk..<r.upperBound * perChunk]
                case .concealed(let n): expected += [Float](repeating: 0, count: n * perChunk)
                }
            }
            guard audio.samples != expected else { return [] }
            let firstDifference = zip(audio.samples, expected).enumerated().first { $1.0 != $1.1 }?.offset ?? min(audio.samples.count, expected.count)
            return ["the WAV holds \(String(format: "%g", Double(audio.samples.count) / Double(perChunk))) chunks of audio, expected \(chunks); "
                    + "first difference in chunk \(firstDifference / perChunk) (frame \(firstDifference / ToneStream.channels))"]
        }

        // Opus: the decoder's delay is trimmed, so frame i of the WAV is frame i of the source.
        // Each piece of good chunks must be close to the source, leaving out the first two chunks
        // of the stream and after a concealment, where the decoder is still settling (after a long
        // run of lost packets, libopus takes more than one 20 ms packet to converge again).
        var problems: [String] = []
        let expectedFrames = chunks * ToneStream.framesPerChunk - stream.preSkip
        if audio.frames != expectedFrames { problems.append("the WAV holds \(audio.frames) frames, expected \(expectedFrames)") }
        for case .chunks(let r) in pieces {
            let from = (r.lowerBound + 2) * perChunk - stream.preSkip * ToneStream.channels
            let to = min(r.upperBound * perChunk - stream.preSkip * ToneStream.channels, audio.samples.count)
            guard from < to else { problems.append("chunks \(r) are missing"); continue }
            let quality = snr(audio.samples[from..<to], stream.samples[from..<to])
            if quality < 20 { problems.append("chunks \(r): SNR \(String(format: "%.1f", quality)) dB against the source (want >= 20)") }
        }
        return problems
    }

    /// The virtual card's recording against the timeline: each 10 ms window 30 ms or more inside a
    /// range of `tone` chunks (`settle` ms after a start other than the stream's) must hold the
    /// tone, and each 30 ms or more outside all of them (up to chunk 100's end) silence.
    static func timelineProblems(path: String, tone: [Range<Int>], settle: Int, origin: Int64) throws -> [String] {
        let audio = try readAudio(path)
        guard let json = FileManager.default.contents(atPath: path + ".json"),
              let clock = try? JSONSerialization.jsonObject(with: json) as? [String: Any], let t0 = (clock["t0_ns"] as? NSNumber)?.int64Value else {
            return ["no readable \(path).json"]
        }
        let window = ToneStream.rate / 100 * ToneStream.channels
        var problems: [String] = []
        for start in stride(from: 0, to: audio.samples.count - window + 1, by: window) {
            // The window's middle, in ms of the timeline (chunk k starts at 20k ms).
            let middle = Double(start / ToneStream.channels) / Double(ToneStream.rate) * 1000 + 5 - Double(origin - t0) / 1e6
            let distances = tone.map { r in min(middle - Double(r.lowerBound * 20), Double(r.upperBound * 20) - middle) }
            guard let inside = distances.max(), middle < 2000 || inside > 0 else { continue }
            let settled = tone.contains { r in middle - Double(r.lowerBound * 20) >= Double(r.lowerBound == 0 ? 30 : settle) && Double(r.upperBound * 20) - middle >= 30 }
            let rms = (audio.samples[start..<start + window].reduce(0.0) { $0 + Double($1) * Double($1) } / Double(window)).squareRoot()
            if settled && abs(rms - ToneStream.toneRMS) > 0.2 * ToneStream.toneRMS {
                problems.append("no tone at \(Int(middle)) ms of the timeline (RMS \(String(format: "%.3f", rms)))")
            } else if inside <= -30 && rms > 0.05 * ToneStream.toneRMS {
                problems.append("sound at \(Int(middle)) ms of the timeline, where there should be none (RMS \(String(format: "%.3f", rms)))")
            }
        }
        return problems.count > 5 ? Array(problems.prefix(5)) + ["and \(problems.count - 5) more windows"] : problems
    }

    /// The virtual card records in real time from t0 (PATH.json): the tone must start at chunk 0's
    /// presentation time and last as long as the chunks played, each within 100 ms, judged by 10 ms
    /// windows whose RMS is the tone's within 20 %.
    static func virtualProblems(_ audio: DecodedAudio, path: String, playedChunks: Int, concealedChunks: Int,
                                codec: ToneStream.Codec, origin: Int64) -> [String] {
        guard let json = FileManager.default.contents(atPath: path + ".json"),
              let clock = try? JSONSerialization.jsonObject(with: json) as? [String: Any], let t0 = (clock["t0_ns"] as? NSNumber)?.int64Value else {
            return ["no readable \(path).json"]
        }
        let window = ToneStream.rate / 100 * ToneStream.channels
        let tone = stride(from: 0, to: audio.samples.count - window + 1, by: window).map { start in
            let power = audio.samples[start..<start + window].reduce(0.0) { $0 + Double($1) * Double($1) } / Double(window)
            return abs(power.squareRoot() - ToneStream.toneRMS) < 0.2 * ToneStream.toneRMS
        }
        let toneMilliseconds = tone.filter { $0 }.count * 10
        // Opus conceals a lost packet by extending the tone, which may or may not pass for it.
        let least = playedChunks * 20 - 100, most = (playedChunks + (codec == .opus ? concealedChunks : 0)) * 20 + 100
        var problems: [String] = []
        if !(least...most).contains(toneMilliseconds) { problems.append("the tone played for \(toneMilliseconds) ms, expected \(playedChunks * 20) ms") }
        if let onset = tone.firstIndex(of: true) {
            let expected = Double(origin - t0) / 1e6
            if abs(Double(onset * 10) - expected) > 100 { problems.append("the tone started at \(onset * 10) ms of the recording, expected \(Int(expected)) ms") }
        }
        return problems
    }
}
