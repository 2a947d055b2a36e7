import Synchronization
#if canImport(Glibc)
import Glibc  // sin, cos: Foundation would link ICU into the listener
#endif

/// The identification chime (`broadcaster ctl identify`): three rising sine notes, rendered once
/// when the renderer is made, then added by the output thread to the stream frames a broadcaster
/// named, at the listener's gain for them, over whatever the party plays there. Mixing at the
/// output rather than into decoded audio lets the chime start at any frame not yet played, even
/// one already in the ring. One atomic start frame is all the two threads share: a new chime
/// replaces the last, so nothing piles up and nothing is allocated after `init`.
public final class Chime: @unchecked Sendable {
    // @unchecked: `samples` is written in init only; after that both threads only read it.
    /// A major triad (C6, E6, G6): high enough to carry over music, clear of its bass.
    static let noteFrequencies = [1046.5, 1318.5, 1568.0]
    static let noteSeconds = 0.2
    /// Each note's attack and release: a raised cosine, so no note starts or ends with a click.
    static let edgeSeconds = 0.02
    /// Peak amplitude before the listener's gain (−10.5 dBFS): clearly heard over music, and leaves
    /// room for it below full scale.
    static let peak: Float = 0.3

    /// Length of the whole chime, in frames (0.6 s).
    public let frames: Int
    /// Raw memory, not an array: the output thread reads it without even a reference count.
    private let samples: UnsafeMutableBufferPointer<Float>
    /// The stream frame of the chime's first sample, or `Int.min`: none planned.
    private let start = Atomic<Int>(Int.min)

    public init(sampleRate: Int) {
        let noteFrames = Int(Self.noteSeconds * Double(sampleRate))
        let edgeFrames = max(1, Int(Self.edgeSeconds * Double(sampleRate)))
        let samples = UnsafeMutableBufferPointer<Float>.allocate(capacity: noteFrames * Self.noteFrequencies.count)
        samples.initialize(repeating: 0)
        for (n, frequency) in Self.noteFrequencies.enumerated() {
            let step = 2 * Double.pi * frequency / Double(sampleRate)
            for i in 0..<noteFrames {
                let edge = min(i, noteFrames - 1 - i)
                let envelope = edge >= edgeFrames ? 1 : 0.5 - 0.5 * cos(Double.pi * Double(edge) / Double(edgeFrames))
                samples[n * noteFrames + i] = Self.peak * Float(envelope * sin(step * Double(i)))
            }
        }
        self.samples = samples
        frames = samples.count
    }

    deinit { samples.deallocate() }

    /// Producer thread: the chime plays from stream frame `frame` on (replacing one planned before).
    public func play(atFrame frame: Int) { start.store(frame, ordering: .relaxed) }

    /// Output thread, once per block: where the chime stands. Valid until the next call.
    func latest() -> Playing {
        Playing(start: start.load(ordering: .relaxed), samples: UnsafeBufferPointer(samples))
    }

    /// The chime as one output block sees it.
    struct Playing {
        let start: Int
        let samples: UnsafeBufferPointer<Float>

        /// Whether any of stream frames `first..<first + count` (or the frame after, which an
        /// interpolated read position touches) carries the chime.
        @inline(__always)
        func overlaps(_ first: Int, count: Int) -> Bool {
            start != Int.min && first + count >= start && first < start + samples.count
        }

        /// The chime at stream frame `frame` + `fraction` (a resampler's read position), linear
        /// between its samples; 0 outside it.
        @inline(__always)
        func value(at frame: Int, fraction: Double = 0) -> Float {
            guard start != Int.min else { return 0 }
            let offset = frame &- start
            guard offset >= -1, offset < samples.count else { return 0 }
            let a = offset >= 0 ? samples[offset] : 0
            let b = offset + 1 < samples.count ? samples[offset + 1] : 0
            return a + (b - a) * Float(fraction)
        }
    }
}
