#if canImport(Glibc)
import Glibc
#endif

/// A windowed-sinc interpolator for reading between samples: `halfTaps` input frames on each side,
/// Kaiser window, full band (at a fraction of 0 it is the identity, so a stream that needs no
/// correction comes out bit for bit). Coefficients are tabulated for `phases` fractions and blended
/// linearly between neighbours.
public final class InterpolationKernel {
    public let halfTaps: Int
    @usableFromInline let phases = 512
    /// (phases + 1) rows of 2 × halfTaps coefficients; row p is for fraction p / phases.
    @usableFromInline let table: UnsafeMutableBufferPointer<Float>
    @usableFromInline let blended: UnsafeMutableBufferPointer<Float>

    public init(halfTaps: Int, beta: Double = 8.6) {
        self.halfTaps = halfTaps
        let taps = 2 * halfTaps
        table = .allocate(capacity: (phases + 1) * taps)
        blended = .allocate(capacity: taps)
        let windowNorm = Self.besselI0(beta)
        for p in 0...phases {
            let fraction = Double(p) / Double(phases)
            for k in 0..<taps {
                // Tap k sits at input offset k − (halfTaps − 1) from the frame before the read position.
                let x = Double(k - (halfTaps - 1)) - fraction
                let sinc = x == 0 ? 1 : sin(Double.pi * x) / (Double.pi * x)
                let r = x / Double(halfTaps)
                let window = abs(r) >= 1 ? 0 : Self.besselI0(beta * (1 - r * r).squareRoot()) / windowNorm
                table[p * taps + k] = Float(sinc * window)
            }
        }
    }

    deinit {
        table.deallocate()
        blended.deallocate()
    }

    /// Writes one output frame: the input interpolated at frame `index` + `fraction` (0 ≤ fraction < 1),
    /// where `index` counts frames from the start of `input` and has `halfTaps` frames on each side.
    // Inlinable: the audio thread calls it for every frame, from another module.
    @inlinable
    public func interpolate(_ input: UnsafeMutableBufferPointer<Float>, channels: Int, at index: Int, fraction: Double,
                     into out: UnsafeMutableBufferPointer<Float>, gain: Float) {
        let taps = 2 * halfTaps
        let scaled = fraction * Double(phases)
        let row = min(Int(scaled), phases - 1)
        let weight = Float(scaled - Double(row))
        let first = (index - (halfTaps - 1)) * channels
        if weight == 0 && row == 0 {
            for c in 0..<channels { out[c] = input[index * channels + c] * gain }
            return
        }
        let lower = row * taps
        let upper = lower + taps
        if channels == 2 && taps % 8 == 0 {
            // Stereo, the common case, eight taps at a time: the coefficients of eight taps, and
            // the eight frames they weigh split into left and right lanes.
            let coefficients = table.baseAddress!
            let frames = UnsafeRawPointer(input.baseAddress! + first)
            var left = SIMD8<Float>(), right = SIMD8<Float>()
            for group in stride(from: 0, to: taps, by: 8) {
                let below = UnsafeRawPointer(coefficients + lower + group).loadUnaligned(as: SIMD8<Float>.self)
                let above = UnsafeRawPointer(coefficients + upper + group).loadUnaligned(as: SIMD8<Float>.self)
                let weights = below + weight * (above - below)
                let pairs = frames.loadUnaligned(fromByteOffset: group * 2 * MemoryLayout<Float>.stride, as: SIMD16<Float>.self)
                left += weights * pairs.evenHalf
                right += weights * pairs.oddHalf
            }
            out[0] = left.sum() * gain
            out[1] = right.sum() * gain
            return
        }
        for k in 0..<taps { blended[k] = table[lower + k] + weight * (table[upper + k] - table[lower + k]) }
        for c in 0..<channels {
            var sum: Float = 0
            for k in 0..<taps { sum += blended[k] * input[first + k * channels + c] }
            out[c] = sum * gain
        }
    }

    private static func besselI0(_ x: Double) -> Double {
        var sum = 1.0, term = 1.0
        for k in 1..<40 {
            term *= (x / (2 * Double(k))) * (x / (2 * Double(k)))
            sum += term
        }
        return sum
    }
}
