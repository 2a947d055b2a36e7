import PartyCastClock
import PartyCastCore
import PartyCastDSP
import PartyCastRing
import Synchronization

/// The output thread's side of the pipeline: it pulls samples from the ring for the device.
/// Everything here is wait-free and allocation-free; the player steers it through atomics only.
public final class Renderer: Sendable {
    /// What the renderer does with each request for samples.
    public enum Mode: UInt8, Sendable, AtomicRepresentable {
        /// Hand out silence (real-time devices) or nothing (file outputs); leave the ring alone.
        case hold
        /// Hand out samples from the ring.
        case run
    }

    /// What one call to `render` produced.
    public enum Pull: Equatable, Sendable {
        /// This many frames of audio were written (the rest of the buffer is silence).
        case audio(frames: Int)
        /// No audio now (held, flushed or underrun); the buffer is silence.
        case silence
        /// The stream has ended and the ring is empty (the buffer is silence after `frames`).
        case finished(frames: Int)
    }

    /// Party mode: play each frame when a schedule says, rather than as soon as the device asks.
    public struct Sync: Sendable {
        public var schedule: PlaybackSchedule
        public var sampleRate: Int
        /// Added to every heard-at time: a speaker's own delay after the device.
        public var latencyOffsetNanoseconds: Int64
        public init(schedule: PlaybackSchedule, sampleRate: Int, latencyOffsetNanoseconds: Int64 = 0) {
            self.schedule = schedule
            self.sampleRate = sampleRate
            self.latencyOffsetNanoseconds = latencyOffsetNanoseconds
        }
    }

    public let ring: SPSCRing
    public let channels: Int
    /// The gain per stream frame, published by the producer (the broadcaster's Gain messages).
    public let gains = GainSchedule()
    /// A broadcast's identification chime (nil: the source cannot ask for one).
    public let chime: Chime?
    // nonisolated(unsafe), both: their state is used by render() alone (the output thread, where no lock may be taken); others use only their atomics.
    private nonisolated(unsafe) let scheduled: ScheduledReader?
    private nonisolated(unsafe) let plain: PlainReader
    private let mode = Atomic<Mode>(.hold)
    private let streamEnded = Atomic<Bool>(false)
    private let flushesRequested = Atomic<Int>(0)
    private let flushesDone = Atomic<Int>(0)
    /// A cut's stream frame, written by the producer before it takes a ticket.
    private let cutFrame = Atomic<Int>(0)
    private let cutsRequested = Atomic<Int>(0)
    private let cutsDone = Atomic<Int>(0)
    private let framesRendered = Atomic<Int>(0)
    private let framesTakenBack = Atomic<Int>(0)
    private let underrunCount = Atomic<Int>(0)
    private let streamFramePlayed = Atomic<Int>(Int.min)
    private let channelAssignment = Atomic<ChannelAssignment>(.stereo)

    public init(ring: SPSCRing, channels: Int, sync: Sync? = nil, chime: Chime? = nil) {
        self.ring = ring
        self.channels = channels
        self.chime = chime
        plain = PlainReader(ring: ring, channels: channels, gains: gains, chime: chime)
        scheduled = sync.map { [gains] in
            ScheduledReader(ring: ring, channels: channels, sampleRate: $0.sampleRate, schedule: $0.schedule, gains: gains,
                            chime: chime, latencyOffsetNanoseconds: $0.latencyOffsetNanoseconds)
        }
    }

    /// Whether frames are played on a schedule (party mode).
    public var isScheduled: Bool { scheduled != nil }

    /// The stream frame of the next sample the producer writes, which starts a new timeline: call it
    /// before the first write and after each flush.
    public func beginTimeline(atFrame frame: Int) {
        if let scheduled { scheduled.timelineStart.store(frame, ordering: .releasing) } else { plain.timelineStart.store(frame, ordering: .releasing) }
    }

    /// Party mode: changes the speaker delay played ahead of, from the next output period on.
    public func setLatencyOffset(nanoseconds: Int64) { scheduled?.latencyOffsetNanoseconds.store(nanoseconds, ordering: .relaxed) }

    /// Which of the stream's channels every output channel plays, from the next output period on.
    public func setChannel(_ assignment: ChannelAssignment) { channelAssignment.store(assignment, ordering: .relaxed) }

    /// The stream frame playing now (the next one read), once there is one.
    public var playingStreamFrame: Int? {
        let frame = streamFramePlayed.load(ordering: .relaxed)
        return frame == Int.min ? nil : frame
    }

    /// Party mode's last measured lateness of playback (µs; negative: early); nil before there is one.
    public var syncErrorMicroseconds: Int? {
        guard let value = scheduled?.syncErrorMicroseconds.load(ordering: .relaxed), value != Int.min else { return nil }
        return value
    }

    // MARK: Player side

    public func setMode(_ new: Mode) { mode.store(new, ordering: .releasing) }
    public var currentMode: Mode { mode.load(ordering: .acquiring) }
    /// The producer has written its last sample.
    public func markEndOfStream() { streamEnded.store(true, ordering: .releasing) }
    public func clearEndOfStream() { streamEnded.store(false, ordering: .releasing) }
    public var hasStreamEnded: Bool { streamEnded.load(ordering: .acquiring) }
    /// Frames handed to the device so far.
    public var renderedFrames: Int { framesRendered.load(ordering: .acquiring) }
    /// Of those, the frames the plain path had handed out when a cut withdrew them: an output that
    /// keeps what it was handed (a file) drops this many from its end. Output thread only.
    public var takenBackFrames: Int { framesTakenBack.load(ordering: .relaxed) }
    public var underruns: Int { underrunCount.load(ordering: .acquiring) }

    /// Asks the output thread to empty the ring (a seek). The producer must not write until
    /// `isFlushed(ticket)`; then the ring is empty and holds only what comes after the seek.
    public func requestFlush() -> Int {
        flushesRequested.add(1, ordering: .acquiringAndReleasing).newValue
    }

    public func isFlushed(_ ticket: Int) -> Bool { flushesDone.load(ordering: .acquiring) >= ticket }

    /// Asks the output thread to withdraw stream frames from `frame` on (see `ScheduledReader.cut`):
    /// frames before it play as they would have, none from it on is heard. The producer must not
    /// write until `isCut(ticket)`; then what it writes next is stream frame `frame` (or later,
    /// after a gap). A request made before the last one was answered must carry the earlier frame
    /// of the two (the output thread may see the new frame with the old ticket).
    public func requestCut(atFrame frame: Int) -> Int {
        cutFrame.store(frame, ordering: .relaxed)
        return cutsRequested.add(1, ordering: .acquiringAndReleasing).newValue
    }

    public func isCut(_ ticket: Int) -> Bool { cutsDone.load(ordering: .acquiring) >= ticket }

    // MARK: Output thread side

    /// Fills `buffer` (interleaved, a whole number of frames) and says what it holds. Real-time
    /// outputs say when (local clock ns) its first frame will leave the device, `heardAt`, which
    /// party mode needs; they count an empty ring while running as an underrun. Every frame plays
    /// the channels its `ChannelAssignment` takes.
    public func render(into buffer: UnsafeMutableBufferPointer<Float>, heardAt: Int64? = nil) -> Pull {
        let pull = pull(into: buffer, heardAt: heardAt)
        // The whole buffer, whatever it holds: audio may start part-way into it (party mode waits for
        // its first frame), and a fade's tail may come with no frame counted as audio.
        channelAssignment.load(ordering: .relaxed).apply(to: UnsafeMutableBufferPointer(rebasing: buffer[0..<(buffer.count - buffer.count % channels)]),
                                                       channels: channels)
        return pull
    }

    private func pull(into buffer: UnsafeMutableBufferPointer<Float>, heardAt: Int64?) -> Pull {
        let flushTicket = flushesRequested.load(ordering: .acquiring)
        if flushesDone.load(ordering: .relaxed) != flushTicket {
            ring.discard(ring.availableToRead)
            scheduled?.reset()
            plain.reset()
            streamFramePlayed.store(Int.min, ordering: .relaxed)
            flushesDone.store(flushTicket, ordering: .releasing)
            silence(buffer, from: 0)
            return .silence
        }
        // Cuts are done in any mode (held, paused): the producer waits for them.
        let cutTicket = cutsRequested.load(ordering: .acquiring)
        if cutsDone.load(ordering: .relaxed) != cutTicket {
            let frame = cutFrame.load(ordering: .relaxed)
            if let scheduled {
                scheduled.cut(at: frame)
            } else {
                framesTakenBack.add(plain.cut(at: frame), ordering: .relaxed)
            }
            cutsDone.store(cutTicket, ordering: .releasing)
        }
        switch mode.load(ordering: .acquiring) {
        case .hold:
            scheduled?.hold()
            silence(buffer, from: 0)
            return .silence
        case .run:
            if let scheduled, let heardAt {
                let underrunsBefore = scheduled.underruns
                let (frames, finished) = scheduled.render(into: buffer, heardAt: heardAt, streamEnded: streamEnded.load(ordering: .acquiring))
                framesRendered.add(frames, ordering: .releasing)
                if let frame = scheduled.playingFrame { streamFramePlayed.store(frame, ordering: .relaxed) }
                if scheduled.underruns != underrunsBefore { underrunCount.add(1, ordering: .relaxed) }
                if finished { return .finished(frames: frames) }
                return frames > 0 ? .audio(frames: frames) : .silence
            }
            let ended = streamEnded.load(ordering: .acquiring)
            let wanted = buffer.count - buffer.count % channels
            let got = plain.read(into: UnsafeMutableBufferPointer(rebasing: buffer[0..<wanted]))
            silence(buffer, from: got)
            if let frame = plain.nextFrame { streamFramePlayed.store(frame, ordering: .relaxed) }
            let frames = got / channels
            framesRendered.add(frames, ordering: .releasing)
            if got < wanted {
                if ended && ring.availableToRead < channels { return .finished(frames: frames) }
                if got == 0 {
                    underrunCount.add(1, ordering: .relaxed)
                    return .silence
                }
            }
            return .audio(frames: frames)
        }
    }

    private func silence(_ buffer: UnsafeMutableBufferPointer<Float>, from start: Int) {
        guard start < buffer.count else { return }
        UnsafeMutableBufferPointer(rebasing: buffer[start...]).update(repeating: 0)
    }
}

/// The plain path (no schedule: files, --no-sync): frames in ring order, as soon as asked for. Their
/// stream frames are counted from the timeline's start, so gains and cuts find them there too.
/// Output thread only, like `ScheduledReader`.
final class PlainReader {
    private let ring: SPSCRing
    private let channels: Int
    private let gains: GainSchedule
    private let chime: Chime?
    /// Set by the ring's producer: the stream frame its first sample after a flush holds.
    let timelineStart = Atomic<Int>(0)
    /// The stream frame of the ring's next frame, once one was read or cut since the last flush.
    private(set) var nextFrame: Int?
    /// Frames read since the last flush, less those cuts took back: all a cut can take back.
    private var handedOut = 0

    init(ring: SPSCRing, channels: Int, gains: GainSchedule, chime: Chime?) {
        self.ring = ring
        self.channels = channels
        self.gains = gains
        self.chime = chime
    }

    private var ringFirst: Int { nextFrame ?? timelineStart.load(ordering: .acquiring) }

    /// Whole frames from the ring into `buffer`, with the chime and their gain; returns the samples written.
    func read(into buffer: UnsafeMutableBufferPointer<Float>) -> Int {
        let available = ring.availableToRead
        let count = min(buffer.count, available - available % channels)
        let got = ring.read(into: UnsafeMutableBufferPointer(rebasing: buffer[0..<count]))
        guard got > 0 else { return 0 }
        let first = ringFirst
        let points = gains.latest()
        let chiming = chime?.latest()
        if !points.isUnity || chiming?.overlaps(first, count: got / channels) == true {
            for i in 0..<(got / channels) {
                let gain = points.value(at: first + i)
                let added = chiming?.value(at: first + i) ?? 0
                for c in 0..<channels { buffer[i * channels + c] = (buffer[i * channels + c] + added) * gain }
            }
        }
        nextFrame = first + got / channels
        handedOut += got / channels
        return got
    }

    /// Withdraws stream frames from `frame` on (the producer is parked): the ring keeps those before
    /// it. Returns how many of the withdrawn frames were already read.
    func cut(at frame: Int) -> Int {
        let first = ringFirst
        ring.truncate(keeping: max(0, frame - first) * channels)
        // Past `frame` already: the replacement plays from its start, as soon as it comes.
        nextFrame = min(first, frame)
        guard frame < first else { return 0 }
        let (behind, overflow) = first.subtractingReportingOverflow(frame)
        let takenBack = overflow ? handedOut : min(handedOut, behind)
        handedOut -= takenBack
        return takenBack
    }

    /// The ring was emptied: the next timeline starts at `timelineStart`.
    func reset() {
        nextFrame = nil
        handedOut = 0
    }
}
