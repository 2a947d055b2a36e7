import Foundation

// The tests' signal maths, in this optimized target: the test targets themselves are built without
// optimization, where a lag search over a recording takes tens of seconds instead of a fraction of one.

/// Σ a·b over the common length of two runs.
public func dotProduct(_ a: ArraySlice<Float>, _ b: ArraySlice<Float>) -> Double {
    var sum = 0.0
    for (x, y) in zip(a, b) { sum += Double(x) * Double(y) }
    return sum
}

/// Normalised correlation of two equally long runs (1: the same up to a gain; 0 when either is silent).
public func normalizedCorrelation(_ a: ArraySlice<Float>, _ b: ArraySlice<Float>) -> Double {
    var (ab, aa, bb) = (0.0, 0.0, 0.0)
    for (x, y) in zip(a, b) {
        ab += Double(x) * Double(y)
        aa += Double(x) * Double(x)
        bb += Double(y) * Double(y)
    }
    return aa > 0 && bb > 0 ? ab / (aa * bb).squareRoot() : 0
}

/// One channel of interleaved samples.
public func channel(_ index: Int, of samples: [Float], channels: Int) -> [Float] {
    stride(from: index, to: samples.count, by: channels).map { samples[$0] }
}

/// The lag in `lags` at which `reference[start..<start+count]` best matches `recording[start+lag…]`,
/// by raw dot product (or by normalised correlation), with the score; lags that run off either end
/// are skipped. Nil when none fits.
public func bestLag(_ reference: [Float], from start: Int, count: Int, in recording: [Float], lags: ClosedRange<Int>,
                    normalized: Bool = false) -> (lag: Int, score: Double)? {
    guard start >= 0, count > 0, start + count <= reference.count else { return nil }
    let window = reference[start..<(start + count)]
    var best: (lag: Int, score: Double)?
    for lag in lags where start + lag >= 0 && start + lag + count <= recording.count {
        let played = recording[(start + lag)..<(start + lag + count)]
        let score = normalized ? normalizedCorrelation(window, played) : dotProduct(window, played)
        if best.map({ score > $0.score }) ?? true { best = (lag, score) }
    }
    return best
}

/// Each `windowFrames` stretch of `reference`, found in `recording`: where it correlates best, and
/// how well. Players correct their clock by stretching or cutting the audio a little, so each window
/// is found on its own, near where the one before it was.
public struct AlignedWindows: RandomAccessCollection {
    public struct Window {
        public var referenceFrame: Int
        public var recordingFrame: Int
        public var correlation: Double
        public var snr: Double
        public var gain: Double
    }

    private let windows: [Window]
    public var startIndex: Int { windows.startIndex }
    public var endIndex: Int { windows.endIndex }
    public subscript(index: Int) -> Window { windows[index] }

    public init(reference: [Float], recording: [Float], windowFrames: Int) {
        let starts = Array(stride(from: 0, to: reference.count - windowFrames, by: windowFrames))
        guard !starts.isEmpty else {
            windows = []
            return
        }
        // Searched for at a 16th of the rate over the whole recording (the middle window, the anchor),
        // then near the last window's place at a 4th, then at the full rate.
        let reference16 = Self.decimate(reference, by: 16), recording16 = Self.decimate(recording, by: 16)
        let reference4 = Self.decimate(reference, by: 4), recording4 = Self.decimate(recording, by: 4)
        let middle = starts[starts.count / 2]
        func lag(_ reference: [Float], _ start: Int, _ count: Int, _ recording: [Float], _ lags: ClosedRange<Int>) -> Int {
            bestLag(reference, from: start, count: count, in: recording, lags: lags)?.lag ?? lags.lowerBound
        }
        let wholeRecording = (-middle / 16)...Swift.max(-middle / 16, (recording.count - middle - windowFrames) / 16)
        let anchor = 16 * lag(reference16, middle / 16, windowFrames / 16, recording16, wholeRecording)
        var found: [Int: Window] = [:]
        for order in [Array(starts[(starts.count / 2)...]), Array(starts[..<(starts.count / 2)].reversed())] {
            var near = anchor
            for start in order {
                // Within 50 ms of the last: a player slews its clock far slower than that per window.
                let coarse = 4 * lag(reference4, start / 4, windowFrames / 4, recording4, ((near - 2400) / 4)...((near + 2400) / 4))
                near = lag(reference, start, windowFrames, recording, (coarse - 8)...(coarse + 8))
                found[start] = Self.measure(reference, from: start, count: windowFrames, in: recording, lag: near)
            }
        }
        windows = starts.compactMap { found[$0] }
    }

    /// Every `factor` samples averaged into one: a low-pass, so a coarse search still finds the peak.
    private static func decimate(_ samples: [Float], by factor: Int) -> [Float] {
        stride(from: 0, to: samples.count - factor + 1, by: factor).map { start in samples[start..<(start + factor)].reduce(0, +) / Float(factor) }
    }

    private static func measure(_ reference: [Float], from start: Int, count: Int, in recording: [Float], lag: Int) -> Window {
        guard start + lag >= 0, start + lag + count <= recording.count else {
            return Window(referenceFrame: start, recordingFrame: start + lag, correlation: 0, snr: -.infinity, gain: 0)
        }
        let (a, b) = (reference[start..<(start + count)], recording[(start + lag)..<(start + lag + count)])
        let dot = dotProduct(a, b), referenceEnergy = dotProduct(a, a), recordedEnergy = dotProduct(b, b)
        let gain = dot / Swift.max(referenceEnergy, 1e-30)
        let residual = Swift.max(recordedEnergy - gain * dot, 1e-30)
        return Window(referenceFrame: start, recordingFrame: start + lag, correlation: dot / Swift.max((referenceEnergy * recordedEnergy).squareRoot(), 1e-30),
                      snr: 10 * log10(gain * dot / residual), gain: gain)
    }
}
