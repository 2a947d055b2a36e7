import ArgumentParser
import Foundation

/// Measures how far apart recordings of the same broadcast played, from the audio itself: on a grid
/// of true (machine) times, a slice of REF is cross-correlated against each other recording around
/// the frame it played at the same instant (per its PATH.json clock), the peak is refined to a
/// fraction of a sample, and the lag becomes seconds on each card's own clock. Positive skew: the
/// other recording played the same sound later than REF.
@main
struct SkewCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "partycast-skew",
        abstract: "Skew between virtual-card recordings (WAV + .json) of one broadcast, from the audio itself.")

    @Argument(help: "REF.wav then the others; each needs PATH.json {t0_ns, rate, drift_ppm}.")
    var recordings: [String]

    @Option(help: "Milliseconds between measurements.")
    var stepMs = 100.0

    @Option(help: "Milliseconds of REF correlated at each point.")
    var windowMs = 40.0

    @Option(help: "Largest skew looked for, in milliseconds either way.")
    var searchMs = 10.0

    @Option(help: "Seconds after a recording's first sound before its points count in the summary.")
    var settleS = 0.0

    @Option(help: "Write every point here: time_s, one skew_us column per other recording, max_pairwise_us.")
    var csv: String?

    @Flag(help: "Print the summary as JSON.")
    var json = false

    @Flag(help: "Also report each recording's longest run of exact zeros between its first and last sound (a dropout: the song is never silent).")
    var gaps = false

    func validate() throws {
        guard recordings.count >= 2 else { throw ValidationError("give REF.wav and at least one other recording") }
        guard stepMs > 0, windowMs > 0, searchMs > 0 else { throw ValidationError("--step-ms, --window-ms and --search-ms must be positive") }
    }

    func run() throws {
        let tracks = try recordings.map { path -> Recording in
            do { return try Recording(path: path) } catch { throw ValidationError("\(path): \(error)") }
        }
        let reference = tracks[0], others = Array(tracks.dropFirst())
        let rate = Double(reference.rate)
        let window = Int(windowMs / 1000 * rate), search = Int(searchMs / 1000 * rate)
        let first = tracks.map(\.firstSound).min()!
        let last = tracks.map(\.end).max()!
        let step = stepMs / 1000

        var points: [(time: Double, skews: [Double?])] = []
        var skipped = 0
        var t = first
        while t < last {
            let skews = others.map { other -> Double? in
                let skew = measure(reference, other, at: t, window: window, search: search)
                if skew == nil && reference.covers(t) && other.covers(t) { skipped += 1 }
                return skew
            }
            points.append((t, skews))
            t += step
        }

        let names = others.map { ($0.path as NSString).lastPathComponent }
        func settled(_ track: Recording, _ time: Double) -> Bool { time >= track.firstSound + settleS }
        var summaries: [Summary] = []
        for (i, other) in others.enumerated() {
            let series = points.compactMap { p in p.skews[i].map { (p.time, $0) } }
            summaries.append(Summary(name: names[i], all: series, settled: series.filter { settled(reference, $0.0) && settled(other, $0.0) },
                                     origin: max(reference.firstSound, other.firstSound)))
        }
        // Pairwise: every recording against every other at the same instant, REF counting as 0.
        func pairwise(onlySettled: Bool) -> [(Double, Double)] {
            points.compactMap { p in
                var values: [Double] = !onlySettled || settled(reference, p.time) ? [0] : []
                for (i, other) in others.enumerated() where !onlySettled || settled(other, p.time) { if let s = p.skews[i] { values.append(s) } }
                guard values.count >= 2 else { return nil }
                return (p.time, values.max()! - values.min()!)
            }
        }
        summaries.append(Summary(name: "max pairwise", all: pairwise(onlySettled: false), settled: pairwise(onlySettled: true), origin: first))

        if let csv {
            var text = "time_s," + names.map { "skew_us_\($0)" }.joined(separator: ",") + ",max_pairwise_us\n"
            for p in points {
                let values = [0.0] + p.skews.compactMap { $0 }
                let spread = values.count >= 2 ? String(format: "%.2f", (values.max()! - values.min()!) * 1e6) : ""
                text += String(format: "%.3f", p.time - first) + "," + p.skews.map { $0.map { String(format: "%.2f", $0 * 1e6) } ?? "" }.joined(separator: ",") + ",\(spread)\n"
            }
            try text.write(toFile: csv, atomically: true, encoding: .utf8)
        }
        let gapReports = gaps ? tracks.map { GapReport($0) } : nil
        if json {
            let data = try JSONEncoder().encode(Report(settleSeconds: settleS, skippedPoints: skipped, summaries: summaries, gaps: gapReports))
            print(String(decoding: data, as: UTF8.self))
        } else {
            print("skew against \((reference.path as NSString).lastPathComponent), points from \(settleS) s after each recording's first sound; \(skipped) points skipped (silent or no clear peak)")
            print("recording".padding(toLength: 28, withPad: " ", startingAt: 0) + "   points  median µs     p99 µs     max µs  converged after s")
            for s in summaries {
                let converged = s.convergedAfterSeconds.map { String(format: "%.1f", $0) } ?? "never"
                print(s.name.padding(toLength: 28, withPad: " ", startingAt: 0)
                      + String(format: " %8d %10.1f %10.1f %10.1f ", s.points, s.medianMicroseconds ?? .nan, s.p99Microseconds ?? .nan, s.maxMicroseconds ?? .nan)
                      + String(repeating: " ", count: max(0, 18 - converged.count)) + converged)
            }
            for g in gapReports ?? [] {
                print("gaps: \(g.name): song \(String(format: "%.3f", Double(g.songFrames) / rate)) s, longest run of zeros "
                      + String(format: "%.1f ms at %.2f s", g.longestGapMs, g.longestGapAtSeconds) + ", \(g.gapsOver5Ms) over 5 ms")
            }
        }
    }

    /// Neighbours either side of the peak that the band-limited reconstruction uses.
    static let reach = 16

    /// Where between samples the correlation peaks. A parabola through three points is biased
    /// towards the nearest sample for broadband audio (the peak is sharp); the correlation of
    /// band-limited signals is itself band-limited, so rebuild it between samples with a
    /// windowed sinc and search its maximum (golden section within a sample of the peak).
    static func refine(_ c: [Double], around peak: Int) -> Double {
        func value(_ x: Double) -> Double {
            var sum = 0.0
            for k in (peak - reach)...(peak + reach) {
                let d = x - Double(k)
                let sinc = abs(d) < 1e-12 ? 1 : sin(Double.pi * d) / (Double.pi * d)
                let r = d / Double(reach + 1)
                let window = abs(r) >= 1 ? 0 : 0.5 + 0.5 * cos(Double.pi * r)
                sum += c[k] * sinc * window
            }
            return sum
        }
        var (a, b) = (Double(peak) - 1, Double(peak) + 1)
        let golden = (5.0.squareRoot() - 1) / 2
        for _ in 0..<50 {
            let x1 = b - golden * (b - a), x2 = a + golden * (b - a)
            if value(x1) < value(x2) { a = x1 } else { b = x2 }
        }
        return (a + b) / 2
    }

    /// The skew (s) of `other` against `reference` at true time `t`, or nil where it can't be told.
    func measure(_ reference: Recording, _ other: Recording, at t: Double, window: Int, search: Int) -> Double? {
        let r0 = Int(reference.frame(at: t).rounded()) - window / 2
        let o0 = Int(other.frame(at: t).rounded()) - window / 2
        guard r0 >= 0, r0 + window <= reference.samples.count,
              o0 - search >= 0, o0 + window + search <= other.samples.count else { return nil }
        var refEnergy: Float = 0
        for i in 0..<window { refEnergy += reference.samples[r0 + i] * reference.samples[r0 + i] }
        guard refEnergy / Float(window) > 1e-6 else { return nil }
        var correlations = [Double](repeating: 0, count: 2 * search + 1)
        reference.samples.withUnsafeBufferPointer { ref in
            other.samples.withUnsafeBufferPointer { oth in
                for lag in -search...search {
                    var sum: Float = 0, energy: Float = 0
                    let base = o0 + lag
                    for i in 0..<window {
                        let x = oth[base + i]
                        sum += ref[r0 + i] * x
                        energy += x * x
                    }
                    correlations[lag + search] = energy > 0 ? Double(sum) / (Double(refEnergy) * Double(energy)).squareRoot() : 0
                }
            }
        }
        let peak = correlations.indices.max { correlations[$0] < correlations[$1] }!
        guard correlations[peak] >= 0.5, peak >= Self.reach, peak < correlations.count - Self.reach else { return nil }
        // Periodic sound (a held note) correlates almost as well one period away: no clear answer.
        // Rivals are the other local maxima outside the peak's own lobe.
        var (lobeStart, lobeEnd) = (peak, peak)
        while lobeStart > 0 && correlations[lobeStart - 1] < correlations[lobeStart] { lobeStart -= 1 }
        while lobeEnd < correlations.count - 1 && correlations[lobeEnd + 1] < correlations[lobeEnd] { lobeEnd += 1 }
        var rival = 0.0
        for i in 1..<(correlations.count - 1) where i < lobeStart || i > lobeEnd {
            let c = correlations[i]
            if c > correlations[i - 1] && c >= correlations[i + 1] { rival = max(rival, c) }
        }
        guard rival < 0.9 * correlations[peak] else { return nil }
        let fraction = Self.refine(correlations, around: peak)
        // REF's frame r0 + k sounds like other's frame o0 + lag + k: compare when each was played.
        let matched = Double(o0 - search) + fraction
        return other.time(ofFrame: matched) - reference.time(ofFrame: Double(r0))
    }
}

/// One virtual-card recording: mono mix and the card's clock.
struct Recording {
    let path: String
    let samples: [Float]
    let rate: Int
    let t0: Double
    let framesPerSecond: Double
    /// True time (s) of the first frame above the noise floor.
    let firstSound: Double
    /// Frame indices of the first and last frames above the noise floor (an empty range when silent).
    let soundFrames: Range<Int>
    var end: Double { time(ofFrame: Double(samples.count)) }

    init(path: String) throws {
        self.path = path
        let wav = try WAV(data: Data(contentsOf: URL(fileURLWithPath: path)))
        samples = wav.mono
        rate = wav.rate
        struct Clock: Decodable { let t0_ns: Double; let rate: Double; let drift_ppm: Double }
        let clock = try JSONDecoder().decode(Clock.self, from: Data(contentsOf: URL(fileURLWithPath: path + ".json")))
        guard Int(clock.rate) == wav.rate else { throw CleanError("the WAV says \(wav.rate) Hz, its .json \(clock.rate) Hz") }
        t0 = clock.t0_ns / 1e9
        framesPerSecond = clock.rate * (1 + clock.drift_ppm * 1e-6)
        let first = samples.firstIndex { abs($0) > 1e-4 } ?? samples.count
        firstSound = t0 + Double(first) / framesPerSecond
        let last = samples.lastIndex { abs($0) > 1e-4 } ?? -1
        soundFrames = first <= last ? first..<(last + 1) : first..<first
    }

    func frame(at time: Double) -> Double { (time - t0) * framesPerSecond }
    func time(ofFrame frame: Double) -> Double { t0 + frame / framesPerSecond }
    func covers(_ time: Double) -> Bool { time >= firstSound && time < end }
}

/// RIFF/WAVE: 32-bit float or 16-bit integer PCM, chunks read by their sizes.
struct WAV {
    let rate: Int
    let mono: [Float]

    init(data: Data) throws {
        let bytes = [UInt8](data)
        func u32(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24 }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        guard bytes.count >= 12, bytes[0..<4].elementsEqual("RIFF".utf8), bytes[8..<12].elementsEqual("WAVE".utf8) else {
            throw CleanError("not a WAV file")
        }
        var format: (tag: Int, channels: Int, rate: Int, bits: Int)?
        var at = 12
        while at + 8 <= bytes.count {
            let id = String(decoding: bytes[at..<(at + 4)], as: UTF8.self), size = u32(at + 4), body = at + 8
            if id == "fmt " && size >= 16 {
                var tag = u16(body)
                if tag == 0xFFFE && size >= 40 { tag = u16(body + 24) }  // WAVE_FORMAT_EXTENSIBLE: the sub-format's tag
                format = (tag, u16(body + 2), u32(body + 4), u16(body + 14))
            } else if id == "data", let format {
                let frameBytes = format.channels * format.bits / 8
                let frames = min(size, bytes.count - body) / frameBytes
                var mono = [Float](repeating: 0, count: frames)
                data.withUnsafeBytes { raw in
                    for f in 0..<frames {
                        var sum: Float = 0
                        for c in 0..<format.channels {
                            let offset = body + f * frameBytes + c * format.bits / 8
                            switch (format.tag, format.bits) {
                            case (3, 32): sum += Float(bitPattern: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndian)
                            default: sum += Float(Int16(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: Int16.self))) / 32768
                            }
                        }
                        mono[f] = sum / Float(format.channels)
                    }
                }
                guard (format.tag == 3 && format.bits == 32) || (format.tag == 1 && format.bits == 16) else {
                    throw CleanError("only 32-bit float and 16-bit PCM WAV are read")
                }
                rate = format.rate
                self.mono = mono
                return
            }
            at = body + size + size % 2
        }
        throw CleanError("no fmt/data chunk")
    }
}

struct Summary: Encodable {
    let name: String
    let points: Int
    /// nil when there are no points.
    let medianMicroseconds: Double?
    let p99Microseconds: Double?
    let maxMicroseconds: Double?
    /// From `origin` (when both had sound): the first time after which |skew| stays within 100 µs.
    let convergedAfterSeconds: Double?

    /// Statistics over `settled` points; convergence over `all` of them.
    init(name: String, all series: [(Double, Double)], settled: [(Double, Double)], origin: Double) {
        self.name = name
        let magnitudes = settled.map { abs($0.1) * 1e6 }.sorted()
        points = magnitudes.count
        func quantile(_ q: Double) -> Double? { magnitudes.isEmpty ? nil : magnitudes[min(magnitudes.count - 1, Int((q * Double(magnitudes.count - 1)).rounded(.up)))] }
        medianMicroseconds = quantile(0.5)
        p99Microseconds = quantile(0.99)
        maxMicroseconds = magnitudes.last
        let lastBad = series.lastIndex { abs($0.1) > 100e-6 }
        switch lastBad {
        case nil: convergedAfterSeconds = series.first.map { max(0, $0.0 - origin) }
        case let i? where i + 1 < series.count: convergedAfterSeconds = max(0, series[i + 1].0 - origin)
        default: convergedAfterSeconds = nil
        }
    }
}

struct Report: Encodable {
    let settleSeconds: Double
    let skippedPoints: Int
    let summaries: [Summary]
    /// With --gaps: one per recording, REF first.
    let gaps: [GapReport]?
}

/// Dropouts in one recording: runs of exact zeros (what a card plays when it has nothing) between
/// its first and last sound. Meant for broadband test songs that are never silent on their own.
struct GapReport: Encodable {
    let name: String
    /// Frames from the first sound to the last, both included.
    let songFrames: Int
    let longestGapMs: Double
    /// Where the longest run starts, in seconds after the first sound.
    let longestGapAtSeconds: Double
    let gapsOver5Ms: Int

    init(_ track: Recording) {
        name = (track.path as NSString).lastPathComponent
        songFrames = track.soundFrames.count
        let over5 = Int(0.005 * Double(track.rate))
        var longest = 0, longestAt = track.soundFrames.lowerBound, over = 0, run = 0
        for i in track.soundFrames {
            if track.samples[i] == 0 {
                run += 1
                if run > longest { longest = run; longestAt = i - run + 1 }
            } else {
                if run > over5 { over += 1 }
                run = 0
            }
        }
        longestGapMs = Double(longest) / Double(track.rate) * 1000
        longestGapAtSeconds = Double(longestAt - track.soundFrames.lowerBound) / Double(track.rate)
        gapsOver5Ms = over
    }
}

struct CleanError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
