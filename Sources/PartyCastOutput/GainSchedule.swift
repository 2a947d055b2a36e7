import Synchronization

/// A gain per stream frame, piecewise linear between breakpoints: before the first it is the
/// first's gain, after the last the last's, and with none at all 1. Kept by the producer thread,
/// which applies the broadcaster's Gain messages to it; the output thread reads it through a
/// `GainSchedule`.
public struct GainCurve: Equatable, Sendable {
    /// At most this many breakpoints: when full, the oldest go (they are past by then, unless a
    /// broadcaster floods; then only the gain of frames long before the newest change suffers).
    public static let capacity = 64

    public struct Point: Equatable, Sendable {
        public var frame: Int
        public var gain: Float
    }

    public private(set) var points: [Point] = []

    public init() {}

    /// From stream frame `frame` on, ramp linearly from what the gain is there to `gain` over
    /// `rampFrames` frames: what was planned after `frame` is replaced.
    public mutating func set(_ gain: Float, atFrame frame: Int, rampFrames: Int) {
        let start = value(at: frame)
        points.removeAll { $0.frame >= frame }
        points.append(Point(frame: frame, gain: start))
        points.append(Point(frame: frame + max(0, rampFrames), gain: gain))
        if points.count > Self.capacity { points.removeFirst(points.count - Self.capacity) }
    }

    /// Forgets breakpoints no frame from `frame` on depends on (played already).
    public mutating func forget(before frame: Int) {
        guard let last = points.lastIndex(where: { $0.frame <= frame }), last > 0 else { return }
        points.removeFirst(last)
    }

    public func value(at frame: Int) -> Float {
        points.withUnsafeBufferPointer { GainSchedule.Points(base: $0.baseAddress, count: $0.count).value(at: frame) }
    }
}

/// A `GainCurve` handed from the producer thread to the output thread without locks or allocation:
/// a triple buffer. The writer fills a slot of its own and swaps it for the shared one; the reader
/// swaps its slot for the shared one when that is fresh. Each swap is one atomic exchange, so a
/// slot always belongs to one side only and neither ever waits.
public final class GainSchedule: @unchecked Sendable {
    // @unchecked: `writing` and `reading` are each touched by one thread only, and each slot is owned by one side at a time (handed over by the exchange on `shared`).
    /// The breakpoints of one slot, as the output thread reads them.
    struct Points {
        var base: UnsafePointer<GainCurve.Point>?
        var count = 0

        /// The gain at a stream frame: a linear scan (a curve has a few breakpoints).
        @inline(__always)
        func value(at frame: Int) -> Float {
            guard let points = base, count > 0 else { return 1 }
            if frame < points[0].frame { return points[0].gain }
            var i = count - 1
            while points[i].frame > frame { i -= 1 }
            guard i + 1 < count else { return points[i].gain }
            let (a, b) = (points[i], points[i + 1])
            // a.frame ≤ frame < b.frame: per-frame linear, so no step exceeds the ramp's slope.
            let t = Double(frame - a.frame) / Double(b.frame - a.frame)
            return Float(Double(a.gain) + (Double(b.gain) - Double(a.gain)) * t)
        }

        var isUnity: Bool { count == 0 }
    }

    private static let fresh = 4
    private let slots: UnsafeMutablePointer<GainCurve.Point>
    private let counts: UnsafeMutablePointer<Int>
    /// The slot neither side holds, plus `fresh` when the writer put it there after the reader's last swap.
    private let shared = Atomic<Int>(1)
    private var writing = 0
    private var reading = 2

    public init() {
        slots = .allocate(capacity: 3 * GainCurve.capacity)
        slots.initialize(repeating: GainCurve.Point(frame: 0, gain: 1), count: 3 * GainCurve.capacity)
        counts = .allocate(capacity: 3)
        counts.initialize(repeating: 0, count: 3)
    }

    deinit {
        slots.deallocate()
        counts.deallocate()
    }

    /// Producer thread (one writer): makes `curve` the one the output thread reads from now on.
    public func publish(_ curve: GainCurve) {
        let slot = slots + writing * GainCurve.capacity
        for (i, point) in curve.points.prefix(GainCurve.capacity).enumerated() { slot[i] = point }
        counts[writing] = min(curve.points.count, GainCurve.capacity)
        writing = shared.exchange(writing | Self.fresh, ordering: .acquiringAndReleasing) & 3
    }

    /// Output thread (one reader): the latest curve published. Valid until its next call.
    func latest() -> Points {
        if shared.load(ordering: .relaxed) & Self.fresh != 0 {
            reading = shared.exchange(reading, ordering: .acquiringAndReleasing) & 3
        }
        return Points(base: UnsafePointer(slots + reading * GainCurve.capacity), count: counts[reading])
    }
}
