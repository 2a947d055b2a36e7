import Foundation

/// What a listener's simulated card (`virtual:PATH`) played, and when: PATH.json gives the true
/// CLOCK_MONOTONIC time of frame 0 and the card's rate, so every event found in the audio has a time
/// comparable with a command's and with the other listeners' events.
public struct CardRecording {
    public var name: String
    public var audio: DecodedAudio
    public var t0: Int64
    public var rate: Double

    public init(path: String, name: String) throws {
        self.name = name
        audio = try readAudio(path)
        let clock = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path + ".json"))) as? [String: Double] ?? [:]
        t0 = Int64(clock["t0_ns"] ?? 0)
        rate = (clock["rate"] ?? 48000) * (1 + (clock["drift_ppm"] ?? 0) * 1e-6)
    }

    /// When (CLOCK_MONOTONIC ns) frame `frame` left the card; fractional frames for interpolated events.
    public func time(ofFrame frame: Double) -> Int64 { t0 + Int64((frame / rate * 1e9).rounded()) }

    public func frame(at time: Int64) -> Int { max(0, Int((Double(time - t0) * rate / 1e9).rounded())) }

    /// The first channel's sample at `frame`.
    public func sample(_ frame: Int) -> Float { audio.samples[frame * audio.channels] }

    /// The first frame at or after `from` that starts `run` frames of silence (|x| < `threshold`).
    public func silenceStart(from: Int, run: Int, threshold: Float = 1e-4) -> Int? {
        var quiet = 0
        var frame = from
        while frame < audio.frames {
            quiet = abs(sample(frame)) < threshold ? quiet + 1 : 0
            if quiet == run { return frame - run + 1 }
            frame += 1
        }
        return nil
    }

    /// The first frame at or after `from` that is not silent.
    public func soundStart(from: Int, threshold: Float = 1e-4) -> Int? {
        (from..<audio.frames).first { abs(sample($0)) >= threshold }
    }

    /// RMS of the first channel over `window` frames centred on `frame`.
    public func level(at frame: Int, window: Int) -> Double {
        let start = max(0, frame - window / 2), end = min(audio.frames, start + window)
        guard end > start else { return 0 }
        var sum = 0.0
        for f in start..<end { let x = Double(sample(f)); sum += x * x }
        return (sum / Double(end - start)).squareRoot()
    }

    /// Where the level (over `window` frames) is lowest between `from` and `to`, refined between
    /// frames by a parabola through the minimum and its neighbours: the bottom of a fade out and in.
    public func dip(from: Int, to: Int, window: Int) -> Double? {
        guard from > 0, to < audio.frames - 1, from < to else { return nil }
        var best = from, bestLevel = Double.infinity
        for f in from...to {
            let l = level(at: f, window: window)
            if l < bestLevel { (best, bestLevel) = (f, l) }
        }
        let (a, b, c) = (level(at: best - 1, window: window), bestLevel, level(at: best + 1, window: window))
        let curvature = a - 2 * b + c
        return Double(best) + (curvature > 0 ? 0.5 * (a - c) / curvature : 0)
    }

    /// The first frame from `from` where the level (over `window` frames) has crossed halfway from
    /// `before` to `after`, refined between frames: the middle of a volume ramp.
    public func crossing(from: Int, before: Double, after: Double, window: Int) -> Double? {
        let middle = (before + after) / 2
        var previous = level(at: from, window: window)
        for f in (from + 1)..<(audio.frames - window) {
            let l = level(at: f, window: window)
            if (previous - middle) * (l - middle) <= 0 && previous != l {
                return Double(f - 1) + (middle - previous) / (l - previous)
            }
            previous = l
        }
        return nil
    }
}

extension CardRecording {
    /// A sine of one of `frequencies` fitted to the first channel over `frames`: its amplitude and
    /// phase at frame 0, and the residual's RMS.
    public func sine(over frames: Range<Int>, frequencies: [Double]) -> (frequency: Double, a: Double, b: Double, residual: Double) {
        var best = (frequency: 0.0, a: 0.0, b: 0.0, residual: Double.infinity)
        for f in frequencies {
            let w = 2 * Double.pi * f / rate
            var (ss, sc, cc, xs, xc) = (0.0, 0.0, 0.0, 0.0, 0.0)
            for n in frames {
                let (sn, cn, x) = (sin(w * Double(n)), cos(w * Double(n)), Double(sample(n)))
                (ss, sc, cc, xs, xc) = (ss + sn * sn, sc + sn * cn, cc + cn * cn, xs + x * sn, xc + x * cn)
            }
            let det = ss * cc - sc * sc
            let a = (xs * cc - xc * sc) / det, b = (ss * xc - sc * xs) / det
            var residual = 0.0
            for n in frames { let e = Double(sample(n)) - a * sin(w * Double(n)) - b * cos(w * Double(n)); residual += e * e }
            residual = (residual / Double(frames.count)).squareRoot()
            if residual < best.residual { best = (f, a, b, residual) }
        }
        return best
    }

    /// The largest change of gain from one frame to the next over `frames`, for a sine that had
    /// gain 1 over `before` (fitted there): x(n) / sine(n), taken where the sine is far from zero.
    public func largestGainStep(over frames: Range<Int>, before: Range<Int>, frequencies: [Double]) -> Double {
        let fit = sine(over: before, frequencies: frequencies)
        let w = 2 * Double.pi * fit.frequency / rate
        let amplitude = (fit.a * fit.a + fit.b * fit.b).squareRoot()
        var largest = 0.0
        var previous: (frame: Int, gain: Double)?
        for n in frames {
            let expected = fit.a * sin(w * Double(n)) + fit.b * cos(w * Double(n))
            guard abs(expected) > 0.5 * amplitude else { continue }
            let gain = Double(sample(n)) / expected
            if let previous { largest = max(largest, abs(gain - previous.gain) / Double(n - previous.frame)) }
            previous = (n, gain)
        }
        return largest
    }
}

/// The p-th percentile (0…100) of `values`, by nearest rank.
public func percentile(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
    return sorted[min(sorted.count - 1, max(0, rank - 1))]
}
