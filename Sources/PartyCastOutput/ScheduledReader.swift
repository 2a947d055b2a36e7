import PartyCastClock
import PartyCastCore
import PartyCastDSP
import PartyCastRing
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Party mode on the output thread: reads the ring so that each stream frame leaves the device when
/// the `PlaybackSchedule` says. It waits in silence for the first frame's time (or drops what is
/// already late), then follows the schedule by resampling at a ratio a hair off 1 — the schedule's
/// own slope (the clocks' drift) plus a small correction of the measured error, so no click is ever
/// heard. An error too big to slide away (a stall, a jump of the clock) is fixed by fading out and
/// aligning afresh. Everything is preallocated; nothing here allocates, locks or logs.
/// Each frame is scaled by the `GainSchedule`'s gain for its stream frame; a cut drops what it
/// holds of withdrawn audio (see `cut(at:)`).
final class ScheduledReader {
    /// Frames of the interpolation kernel on each side of the read position.
    static let halfTaps = 16
    /// Beyond this error a slide would take too long: fade out and align afresh.
    static let hardResyncSeconds = 0.010
    /// How quickly an error is slid away (time constant), and the largest speed-up or slow-down
    /// used for it: 1000 ppm is 1.7 cents, inaudible.
    static let correctionSeconds = 0.5
    static let maximumCorrection = 1e-3
    static let fadeSeconds = 0.005

    enum State {
        /// Nothing known of the ring's timeline (start, or just flushed).
        case needsTimeline
        /// Knows which stream frame the ring holds next; waits for (or skips to) the scheduled one.
        case aligning
        /// Playing: `position` is the stream frame of the next output frame.
        case locked
    }

    private let ring: SPSCRing
    private let channels: Int
    private let schedule: PlaybackSchedule
    private let nanosecondsPerFrame: Double
    private let gains: GainSchedule
    private let chime: Chime?
    /// Added to every heard-at time; changed at run time, it shows up as an error that is slid
    /// away or faded out and realigned like any other.
    let latencyOffsetNanoseconds: Atomic<Int64>
    /// Set by the ring's producer: the stream frame its first sample after a flush holds.
    let timelineStart = Atomic<Int>(0)
    private let kernel = InterpolationKernel(halfTaps: ScheduledReader.halfTaps)
    private let hardResyncFrames: Double
    private let correctionFrames: Double
    private let fadeFrames: Int

    private var state = State.needsTimeline
    private var lastLine: PlaybackSchedule.Line?
    /// Frames taken from the ring, kept until the kernel has moved past them.
    private let input: UnsafeMutableBufferPointer<Float>
    private let inputCapacity: Int
    private var inputFrames = 0
    /// Stream frame of input[0].
    private var inputStart = 0
    private var position = StreamPosition()
    /// Output frames into the current fade-in; `fadeFrames` once complete.
    private var fadeIn = 0
    /// Times the ring ran dry while locked.
    private(set) var underruns = 0
    /// Whether silence was appended after the stream's last frame.
    private var tailPadded = false
    /// Before the timeline is taken up: how far the ring's first frame is from `timelineStart`
    /// (frames let go while there was no schedule to play them on, a cut before it).
    private var ringShift = 0
    /// Before there is a schedule, the clock settling: whether the ring filled and is let go of
    /// until a quarter is free.
    private var drainingUnplaced = false
    /// The gain curve and the chime of the current `render` call.
    private var gainPoints = GainSchedule.Points()
    private var chiming: Chime.Playing?

    /// Last measured lateness of what is heard against its schedule (µs; negative: early), or Int.min before the first.
    let syncErrorMicroseconds = Atomic<Int>(Int.min)

    init(ring: SPSCRing, channels: Int, sampleRate: Int, schedule: PlaybackSchedule, gains: GainSchedule,
         chime: Chime?, latencyOffsetNanoseconds: Int64) {
        self.ring = ring
        self.channels = channels
        self.schedule = schedule
        self.gains = gains
        self.chime = chime
        self.latencyOffsetNanoseconds = Atomic(latencyOffsetNanoseconds)
        nanosecondsPerFrame = 1e9 / Double(sampleRate)
        hardResyncFrames = Self.hardResyncSeconds * Double(sampleRate)
        correctionFrames = Self.correctionSeconds * Double(sampleRate)
        fadeFrames = max(1, Int(Self.fadeSeconds * Double(sampleRate)))
        // Room for the largest output period at the fastest ratio plus the kernel's reach.
        inputCapacity = Self.maximumBlock * 2 + 4 * Self.halfTaps
        input = .allocate(capacity: inputCapacity * channels)
        fadeIn = fadeFrames
    }

    deinit { input.deallocate() }

    /// Output frames handled per step; longer requests are cut into blocks of this size.
    static let maximumBlock = 4096

    /// The ring was emptied (a flush): what comes next starts a new timeline.
    func reset() {
        state = .needsTimeline
        inputFrames = 0
        tailPadded = false
        ringShift = 0
        drainingUnplaced = false
    }

    /// The stream frame of the next output frame, once playing.
    var playingFrame: Int? {
        if case .locked = state { position.frame } else { nil }
    }

    /// Withdraws stream frames from `frame` on (the producer is parked): frames before it, in the
    /// input or the ring, stay exactly as they were; the rest goes. If playback is past `frame`
    /// already, everything held goes and the replacement's late frames are dropped as they come.
    func cut(at frame: Int) {
        let ringFirst: Int
        if case .needsTimeline = state {
            ringFirst = timelineStart.load(ordering: .acquiring) + ringShift
            if frame < ringFirst { ringShift = frame - timelineStart.load(ordering: .acquiring) }
        } else {
            ringFirst = inputStart + inputFrames
            if frame < ringFirst {
                inputFrames = max(0, frame - inputStart)
                inputStart = min(inputStart, frame)
                tailPadded = false
            }
        }
        ring.truncate(keeping: max(0, frame - ringFirst) * channels)
    }

    /// Playback was held (pause, underrun): on resume, find the scheduled frame again.
    func hold() {
        if case .locked = state { state = .aligning }
    }

    /// Fills `buffer` with what should be heard from `heardAt` (local clock ns) on.
    /// Returns the output frames that carried audio, and whether the stream is over.
    func render(into buffer: UnsafeMutableBufferPointer<Float>, heardAt: Int64, streamEnded: Bool) -> (audio: Int, finished: Bool) {
        let frames = buffer.count / channels
        var done = 0
        var audio = 0
        while done < frames {
            let block = min(Self.maximumBlock, frames - done)
            let at = heardAt + Int64((Double(done) * nanosecondsPerFrame).rounded())
            let out = UnsafeMutableBufferPointer(rebasing: buffer[(done * channels)..<((done + block) * channels)])
            let (played, finished) = renderBlock(out, frames: block, heardAt: at, streamEnded: streamEnded)
            audio += played
            done += block
            if finished {
                if done < frames { UnsafeMutableBufferPointer(rebasing: buffer[(done * channels)...]).update(repeating: 0) }
                return (audio, true)
            }
        }
        return (audio, false)
    }

    private func renderBlock(_ out: UnsafeMutableBufferPointer<Float>, frames: Int, heardAt: Int64, streamEnded: Bool) -> (Int, Bool) {
        out.update(repeating: 0)
        // No schedule yet: wait in silence; a stream that ended before there was one (a broadcaster
        // that answered no clock request) can never be placed, and waiting for it would never end.
        guard let line = schedule.line(orElse: lastLine) else {
            // Nor may a full ring wait: the producer would stall, and with it the reading of the
            // connection whose clock answers bring the schedule. The oldest audio goes instead,
            // keeping its place on the timeline: a period whenever the ring is full. While the song
            // is under way and the line waits for the clock to settle, what is held turns late, so
            // it goes at the stream's pace from when the ring fills until a quarter is free, as the
            // producer that finds it full sleeps until then. Let go only as the producer wrote, a
            // period per sleep, it fell behind the connection for as long as the wait lasted, and a
            // late joiner that waited seconds ran dry 0.1–0.2 s after its first sound. Otherwise
            // (a burst ahead of its time, a reconnection's gap) it would be heard in time.
            let free = ring.capacity - ring.availableToRead
            if free < out.count { drainingUnplaced = schedule.isSettling } else if free >= ring.capacity / 4 { drainingUnplaced = false }
            if free < out.count || drainingUnplaced { ringShift += ring.discard(out.count) / channels }
            return (0, streamEnded)
        }
        lastLine = line
        gainPoints = gains.latest()
        chiming = chime?.latest()
        let heard = heardAt &+ latencyOffsetNanoseconds.load(ordering: .relaxed)
        let due = line.frame(at: heard)
        let dueAfter = line.frame(at: heard &+ Int64((Double(frames) * nanosecondsPerFrame).rounded()))
        let slope = (dueAfter - due) / Double(frames)

        if case .needsTimeline = state {
            guard ring.availableToRead >= channels else { return (0, streamEnded) }
            // Silence before the timeline's first frame, so the kernel has history from the start.
            inputStart = timelineStart.load(ordering: .acquiring) + ringShift - Self.halfTaps
            inputFrames = Self.halfTaps
            input.update(repeating: 0)
            state = .aligning
        }
        var first = 0
        if case .aligning = state {
            refill()
            let earliest = Double(inputStart + Self.halfTaps)
            if due < earliest {
                // Early: silence until the first frame we hold is due.
                let wait = Int(((earliest - due) / slope).rounded(.up))
                guard wait < frames else { return (0, false) }
                first = wait
                position = StreamPosition(due + Double(wait) * slope)
            } else {
                // Late (a late joiner, a resume): drop what has passed.
                position = StreamPosition(due)
                dropInput(before: position.frame - Self.halfTaps)
                refill()
                guard inputStart + inputFrames > position.frame + Self.halfTaps else {
                    return (0, streamEnded && ring.availableToRead < channels)
                }
            }
            state = .locked
            fadeIn = 0
        } else {
            let error = position.value - due
            syncErrorMicroseconds.store(Int(-error * nanosecondsPerFrame / 1000), ordering: .relaxed)
            if abs(error) > hardResyncFrames {
                let fade = min(frames, fadeFrames)
                let (played, finished) = resample(out, from: 0, to: fade, step: slope, streamEnded: streamEnded)
                for i in 0..<played {
                    let gain = Float(played - i) / Float(played + 1)
                    for c in 0..<channels { out[i * channels + c] *= gain }
                }
                state = .aligning
                return (played, finished)
            }
        }
        let error = position.value - (due + Double(first) * slope)
        let correction = min(max(error / correctionFrames, -Self.maximumCorrection), Self.maximumCorrection)
        let (played, finished) = resample(out, from: first, to: frames, step: slope - correction, streamEnded: streamEnded)
        return (played, finished)
    }

    /// Writes output frames `from..<to` by interpolating the input at `position`, advancing it by
    /// `step` per frame. Stops early if the ring runs dry: then an underrun (or the end).
    private func resample(_ out: UnsafeMutableBufferPointer<Float>, from: Int, to: Int, step: Double, streamEnded: Bool) -> (Int, Bool) {
        // The input is topped up only once it runs out: the frames still ahead are moved to the
        // buffer's start then, when they are the kernel's few, not each period when they are most.
        let increment = StreamPosition.increment(step)
        var i = from
        while i < to {
            let base = position.frame
            if base + Self.halfTaps >= inputStart + inputFrames {
                dropInput(before: base - Self.halfTaps)
                refill()
                if base + Self.halfTaps >= inputStart + inputFrames {
                    guard streamEnded && ring.availableToRead < channels else {
                        underruns += 1
                        state = .aligning
                        return (i - from, false)
                    }
                    // The end: silence after the last frame lets the kernel play it out.
                    guard !tailPadded, inputFrames + Self.halfTaps + 1 <= inputCapacity else { return (i - from, true) }
                    UnsafeMutableBufferPointer(rebasing: input[(inputFrames * channels)..<((inputFrames + Self.halfTaps + 1) * channels)]).update(repeating: 0)
                    inputFrames += Self.halfTaps + 1
                    tailPadded = true
                    continue
                }
            }
            let fade: Float = fadeIn < fadeFrames ? Float(fadeIn + 1) / Float(fadeFrames + 1) : 1
            let gain = fade * gainPoints.value(at: base, fraction: position.fraction)
            fadeIn += 1
            kernel.interpolate(input, channels: channels, at: base - inputStart, fraction: position.fraction,
                               into: UnsafeMutableBufferPointer(rebasing: out[(i * channels)..<((i + 1) * channels)]), gain: gain)
            if let added = chiming?.value(at: base, fraction: position.fraction), added != 0 {
                for c in 0..<channels { out[i * channels + c] += added * gain }
            }
            position.advance(by: increment)
            i += 1
        }
        return (to - from, false)
    }

    /// Forgets input frames before stream frame `frame`, from the buffer and then from the ring.
    private func dropInput(before frame: Int) {
        let drop = frame - inputStart
        guard drop > 0 else { return }
        if drop < inputFrames {
            let kept = inputFrames - drop
            let base = input.baseAddress!
            (base).update(from: base + drop * channels, count: kept * channels)
            inputFrames = kept
        } else {
            let fromRing = min(drop - inputFrames, ring.availableToRead / channels)
            ring.discard(fromRing * channels)
            // Short of `frame` if the ring held less: the rest is dropped as it arrives.
            inputStart += inputFrames + fromRing
            inputFrames = 0
            return
        }
        inputStart = frame
    }

    /// Tops the input buffer up from the ring (whole frames only).
    private func refill() {
        let room = (inputCapacity - inputFrames) * channels
        let available = ring.availableToRead
        let count = min(room, available - available % channels)
        guard count > 0 else { return }
        let got = ring.read(into: UnsafeMutableBufferPointer(rebasing: input[(inputFrames * channels)..<(inputFrames * channels + count)]))
        inputFrames += got / channels
    }
}

/// A read position in the stream: a whole frame plus a 32-bit binary fraction. Fixed point, so a
/// step that is 1 to within 2⁻³² frame is exactly 1 and a stream that needs no correction is read
/// frame for frame, whatever rounding the schedule's arithmetic left; and it never loses precision
/// however long the broadcast runs.
struct StreamPosition {
    static let one: UInt64 = 1 << 32
    private(set) var frame = 0
    /// In units of 2⁻³² frame.
    private var fractionBits: UInt64 = 0

    init() {}

    init(_ value: Double) {
        let whole = value.rounded(.down)
        frame = Int(whole)
        fractionBits = min(UInt64(((value - whole) * Double(Self.one)).rounded()), Self.one - 1)
    }

    var fraction: Double { Double(fractionBits) / Double(Self.one) }
    var value: Double { Double(frame) + fraction }

    /// A step per output frame in units of 2⁻³² frame (steps are near 1, never negative).
    static func increment(_ step: Double) -> UInt64 { UInt64((max(0, step) * Double(one)).rounded()) }

    mutating func advance(by increment: UInt64) {
        fractionBits += increment
        frame += Int(fractionBits >> 32)
        fractionBits &= Self.one - 1
    }
}
