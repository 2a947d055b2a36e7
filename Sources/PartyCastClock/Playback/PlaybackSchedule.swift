import PartyCastCore
import Synchronization

/// A source whose frames are due at set times (a live broadcast). In party mode the player plays
/// each frame when `schedule` says, whatever the ring holds.
public protocol ScheduledPCMSource: PCMSource {
    /// Local clock → stream frame, kept up to date by the source's clock sync.
    var schedule: PlaybackSchedule { get }
    /// The stream frame (frames since the stream began) of the first sample the last `produce`
    /// call appended; nil if it appended none.
    var lastProducedFrame: Int? { get }
    /// What the broadcast said about its timeline since the last call, in order; all of it came
    /// before the audio the last `produce` call appended.
    func takeTimelineEvents() -> [TimelineEvent]
    /// Whether the party is paused (for the status line).
    var isPartyPaused: Bool { get }
    /// The speaker delay the broadcaster set for this listener (ms, −2000…2000); nil until it sets one.
    var latencyOffsetMilliseconds: Int? { get }
    /// The channel the broadcaster set for this listener; nil until it sets one.
    var channel: ChannelAssignment? { get }
    /// The tags of the song heard at stream frame `frame` (the title changes when the song's first
    /// frame plays, not when its metadata comes); `tags` when `frame` is nil.
    func tags(atFrame frame: Int?) -> TrackTags
}

/// A change to a live broadcast's timeline (protocol 4), in stream frames: the broadcast's positions.
public enum TimelineEvent: Sendable, Equatable {
    /// The audio from `fromFrame` on is withdrawn: none of it may be heard. What is produced next
    /// replaces it, from `fromFrame` (a skip, a seek) or a later frame (a pause, resumed).
    case withdraw(fromFrame: Int)
    /// The gain from `atFrame` on: reached by a linear ramp over `rampFrames` from what it is at
    /// `atFrame` (0…1, ramp ≤ 10 s: checked by the source).
    case gain(Float, atFrame: Int, rampFrames: Int)
    /// The identification chime plays from `atFrame` on, on this listener alone.
    case identify(atFrame: Int)
}

/// Which frame of a stream should be heard at each instant of the local clock: a straight line,
/// frame(t) = frameAtReference + (t − localReference) × framesPerNanosecond, drawn by the clock sync
/// and read by the audio thread. Published seqlock-style through atomics: the writer never blocks
/// the reader and the reader never allocates, locks or spins.
public final class PlaybackSchedule: Sendable {
    public struct Line: Sendable, Equatable {
        public var localReference: Int64
        public var frameAtReference: Double
        public var framesPerNanosecond: Double

        public init(localReference: Int64, frameAtReference: Double, framesPerNanosecond: Double) {
            self.localReference = localReference
            self.frameAtReference = frameAtReference
            self.framesPerNanosecond = framesPerNanosecond
        }

        @inline(__always)
        public func frame(at local: Int64) -> Double {
            frameAtReference + Double(local &- localReference) * framesPerNanosecond
        }
    }

    private let settling = Atomic<Bool>(false)

    /// Odd while a publication is under way; 0 until the first one.
    private let version = Atomic<UInt64>(0)
    private let localReference = Atomic<Int64>(0)
    private let frameAtReference = Atomic<UInt64>(0)
    private let framesPerNanosecond = Atomic<UInt64>(0)

    public init() {}

    /// Publishes a new line (one writer at a time: the clock sync's thread).
    public func publish(_ line: Line) {
        version.add(1, ordering: .sequentiallyConsistent)
        localReference.store(line.localReference, ordering: .sequentiallyConsistent)
        frameAtReference.store(line.frameAtReference.bitPattern, ordering: .sequentiallyConsistent)
        framesPerNanosecond.store(line.framesPerNanosecond.bitPattern, ordering: .sequentiallyConsistent)
        version.add(1, ordering: .sequentiallyConsistent)
    }

    /// Whether the stream is under way while its first line waits for the clock to settle
    /// (`ClockSync.settledBound`): what arrives meanwhile will be late by the time it could play.
    /// Set by the clock sync alone.
    public package(set) var isSettling: Bool {
        get { settling.load(ordering: .relaxed) }
        set { settling.store(newValue, ordering: .relaxed) }
    }

    /// The current line, or nil until the clock sync has published one. Wait-free: should it keep
    /// overlapping publications (a writer preempted mid-way), it gives up and returns `fallback`,
    /// the caller's last good line, rather than spin on the audio thread.
    @inline(__always)
    public func line(orElse fallback: Line?) -> Line? {
        for _ in 0..<4 {
            let before = version.load(ordering: .sequentiallyConsistent)
            if before == 0 { return nil }
            if before & 1 == 1 { continue }
            let line = Line(localReference: localReference.load(ordering: .sequentiallyConsistent),
                            frameAtReference: Double(bitPattern: frameAtReference.load(ordering: .sequentiallyConsistent)),
                            framesPerNanosecond: Double(bitPattern: framesPerNanosecond.load(ordering: .sequentiallyConsistent)))
            if version.load(ordering: .sequentiallyConsistent) == before { return line }
        }
        return fallback
    }
}
