import PartyCastClock
import PartyCastCore
import PartyCastOutput
import PartyCastRing
import Synchronization

public struct PlayerOptions: Sendable {
    /// Where to start, in seconds of the stream.
    public var startSeconds: Double?
    /// Ring size, in seconds of audio.
    public var bufferSeconds = 2.0
    /// Audio buffered before playback starts or resumes after an underrun.
    public var prebufferSeconds = 0.5
    /// Party mode: a source with a schedule (a broadcast) is played on it by real-time outputs,
    /// each frame at its presentation time. Off: frames play as soon as they arrive.
    public var sync = true
    /// Party mode: the speaker's own delay after the device, played that much earlier.
    public var latencyOffsetSeconds = 0.0
    /// Which of the source's channels every output channel plays (a broadcast's remote may change it).
    public var channel = ChannelAssignment.stereo
    /// How often observers hear the status while its state stays the same (a status line: 0.1 s);
    /// nil: only on state changes, and the player sleeps until something happens.
    public var statusIntervalSeconds: Double? = 0.1
    /// Where a broadcast's gains are applied.
    public var volume = VolumeApplication.software

    public init(startSeconds: Double? = nil) { self.startSeconds = startSeconds }
}

/// Drives source → ring → output. Three threads: the producer (opens, decodes, fills the ring),
/// the output's own thread (drains it), and the control loop in `run()` (the caller's thread),
/// which owns the state machine's timing decisions and tells observers what happened.
/// Every error, from any thread, goes through `fail(_:)`. The control loop sleeps until a command,
/// the producer (it wrote while held, saw an underrun, or reached the end) or the output's end wakes
/// it, or the next status is due; the producer sleeps in its source, or until the ring has room
/// (real-time outputs drain at a known rate) or a command comes. Only what waits on the output
/// thread looks again every millisecond (a flush, a cut answered; room in a file output's ring):
/// the audio thread never signals anyone, as that would take a lock.
public final class Player: Sendable {
    public typealias SourceFactory = @Sendable () throws(PartyCastError) -> PCMSource

    private enum Command: Sendable {
        case seek(toFrame: Int)
        case seekBy(seconds: Double)
    }

    private struct Shared: Sendable {
        var status = PlayerStatus()
        var commands: [Command] = []
        var renderer: Renderer?
        /// Stream position of the first frame after the last seek, and the renderer's count then.
        var positionBase = 0
        var renderedAtBase = 0
        var isSeekable = false
        /// Every state change since the control loop last told the observers, in order.
        var unreported: [PlayerStatus] = []
        /// Makes the source's waiting `produce` return (a broadcast waits for its next message).
        var wakeSource: (@Sendable () -> Void)?
    }

    private let openSource: SourceFactory
    private let output: AudioOutput
    private let options: PlayerOptions
    private let shared = LockedValueBox(Shared())
    private let observers = LockedValueBox<[@Sendable (PlayerStatus) -> Void]>([])
    private let stopRequested = Atomic<Bool>(false)
    /// The renderer's underrun count as the control loop last acted on it (the producer waits for it).
    private let underrunsHandled = Atomic<Int>(0)
    /// Wakes the control loop when the output ends, the user acts or the producer has news.
    private let wakeup = Wakeup()
    /// Wakes the producer from waiting for ring room, or at the end of the stream, for a command.
    private let producerWakeup = Wakeup()

    public init(output: AudioOutput, options: PlayerOptions = PlayerOptions(), source: @escaping SourceFactory) {
        self.openSource = source
        self.output = output
        self.options = options
        shared.withLockedValue {
            $0.status.outputName = output.name
            $0.status.latencyOffsetMilliseconds = Int((options.latencyOffsetSeconds * 1000).rounded())
            $0.status.channel = options.channel
        }
    }

    /// Called on the control thread (never the audio thread) on every state change and ~10 times a second.
    public func observe(_ observer: @escaping @Sendable (PlayerStatus) -> Void) {
        observers.withLockedValue { $0.append(observer) }
    }

    public var status: PlayerStatus { shared.withLockedValue { $0.status } }

    // MARK: Commands (any thread)

    public func togglePause() {
        shared.withLockedValue { s in
            switch s.status.state {
            case .playing, .buffering:
                s.renderer?.setMode(.hold)
                transition(&s, to: .paused)
            case .paused:
                transition(&s, to: .buffering)
            default: break
            }
        }
        wakeup.signal()
        producerWakeup.signal()
    }

    public func seek(bySeconds seconds: Double) {
        let wakeSource = shared.withLockedValue { s in
            s.commands.append(.seekBy(seconds: seconds))
            return s.wakeSource
        }
        producerWakeup.signal()
        wakeSource?()
    }

    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        wakeup.signal()
        wakeProducer()
    }

    private func wakeProducer() {
        producerWakeup.signal()
        shared.withLockedValue { $0.wakeSource }?()
    }

    // MARK: The control loop

    /// Plays until the stream ends, `stop()` is called or something fails; returns why it stopped.
    public func run() -> StopReason {
        shared.withLockedValue { transition(&$0, to: .connecting) }
        let producer = DedicatedThread { [self] in produce() }
        var lastUnderruns = 0
        let interval = options.statusIntervalSeconds.map { UInt64(max(0.01, $0) * 1e9) }
        var statusDue = monotonicNanoseconds() + (interval ?? 0)
        while true {
            if interval != nil {
                let now = monotonicNanoseconds()
                if now < statusDue { wakeup.wait(nanoseconds: statusDue - now) }
            } else {
                wakeup.wait()
            }
            if stopRequested.load(ordering: .acquiring) {
                shared.withLockedValue { s in
                    if s.status.stopReason == nil { s.status.stopReason = .user }
                    transition(&s, to: .stopping)
                }
            }
            let status = step(&lastUnderruns)
            let changes = shared.withLockedValue { s in defer { s.unreported.removeAll() }; return s.unreported }
            for change in changes { notify(change) }
            if let interval, case let now = monotonicNanoseconds(), now >= statusDue {
                if changes.isEmpty { notify(status) }
                statusDue = now + interval
            }
            if status.state == .stopping { break }
        }
        stopRequested.store(true, ordering: .releasing)
        wakeProducer()
        // The producer ends first, so it cannot start the output once the output has been stopped.
        producer.join()
        output.stop(drain: false)
        let (final, changes) = shared.withLockedValue { s in
            transition(&s, to: .stopped)
            defer { s.unreported.removeAll() }
            return (s.status, s.unreported)
        }
        for change in changes { notify(change) }
        return final.stopReason ?? .user
    }

    /// One control tick: buffering ↔ playing by ring fill and underruns, end of stream, output failure.
    private func step(_ lastUnderruns: inout Int) -> PlayerStatus {
        let outcome = output.outcome
        return shared.withLockedValue { s in
            if let renderer = s.renderer, let format = s.status.format {
                let fill = renderer.ring.availableToRead
                s.status.bufferFill = Double(fill) / Double(renderer.ring.capacity)
                s.status.bufferedMilliseconds = fill / format.channels * 1000 / format.sampleRate
                let heard = max(0, renderer.renderedFrames - s.renderedAtBase - output.latencyFrames)
                s.status.positionFrames = s.positionBase + heard
                s.status.underruns = renderer.underruns
                s.status.syncErrorMicroseconds = renderer.syncErrorMicroseconds
                let prebuffer = Int(options.prebufferSeconds * Double(format.sampleRate)) * format.channels
                let target = min(prebuffer, renderer.ring.capacity / 2)
                switch s.status.state {
                case .buffering where fill >= target || renderer.hasStreamEnded:
                    renderer.setMode(.run)
                    transition(&s, to: .playing)
                    producerWakeup.signal()
                case .playing where output.isRealTime && renderer.underruns > lastUnderruns && !renderer.hasStreamEnded:
                    renderer.setMode(.hold)
                    transition(&s, to: .buffering)
                default: break
                }
                if renderer.underruns != lastUnderruns {
                    lastUnderruns = renderer.underruns
                    underrunsHandled.store(lastUnderruns, ordering: .releasing)
                    producerWakeup.signal()
                }
            }
            switch outcome {
            case .finished?:
                if s.status.stopReason == nil { s.status.stopReason = .endOfStream }
                transition(&s, to: .stopping)
            case .failed(let error)?:
                fail(&s, error)
            case .stopped?, nil: break
            }
            return s.status
        }
    }

    private func notify(_ status: PlayerStatus) {
        for observer in observers.withLockedValue({ $0 }) { observer(status) }
    }

    // MARK: State machine

    private func transition(_ s: inout Shared, to next: PlayerState) {
        guard s.status.state != next else { return }
        guard s.status.state.canMove(to: next) else { return }
        s.status.state = next
        s.unreported.append(s.status)
    }

    /// The single path for errors: the first one wins and stops the player.
    private func fail(_ s: inout Shared, _ error: PartyCastError) {
        // Once the user asked to stop, what fails on the way (a cancelled connection) is not news.
        if s.status.stopReason == nil { s.status.stopReason = stopRequested.load(ordering: .acquiring) ? .user : .error(error) }
        transition(&s, to: .stopping)
    }

    private func fail(_ error: PartyCastError) {
        shared.withLockedValue { fail(&$0, error) }
    }

    // MARK: The producer thread

    private func produce() {
        do throws(PartyCastError) {
            let source = try openSource()
            let wakeSource = source.wakeProducer
            shared.withLockedValue { $0.wakeSource = wakeSource }
            // A stop that came while the source was opening found nothing to wake.
            if stopRequested.load(ordering: .acquiring) { return }
            shared.withLockedValue { transition(&$0, to: .waitingForData) }
            try source.prepare()
            guard let format = source.format else {
                throw PartyCastError(.notAudio, "the source produced no audio")
            }
            var startFrame = 0
            if let start = options.startSeconds, start > 0 {
                guard source.isSeekable else { throw PartyCastError(.invalidArgument, "--start needs a seekable source") }
                startFrame = Int((start * Double(format.sampleRate)).rounded())
                if let total = source.duration.frames, startFrame >= total {
                    throw PartyCastError(.invalidArgument, "--start \(start) is past the end of the stream (\(Double(total) / Double(format.sampleRate)) s)")
                }
                try source.seek(toFrame: startFrame)
            }
            let ring = SPSCRing(minimumCapacity: Int(options.bufferSeconds * Double(format.sampleRate)) * format.channels)
            let scheduled = options.sync && output.isRealTime ? source as? ScheduledPCMSource : nil
            let sync = scheduled.map {
                Renderer.Sync(schedule: $0.schedule, sampleRate: format.sampleRate,
                              latencyOffsetNanoseconds: Int64((options.latencyOffsetSeconds * 1e9).rounded()))
            }
            // Only a broadcast can ask for the chime (and only a live source has the timeline it names).
            let chime = source is ScheduledPCMSource ? Chime(sampleRate: format.sampleRate) : nil
            let renderer = Renderer(ring: ring, channels: format.channels, sync: sync, chime: chime)
            renderer.setChannel(options.channel)
            shared.withLockedValue { s in
                s.status.format = format
                s.status.tags = source.tags
                s.status.duration = source.duration
                s.positionBase = startFrame
                s.renderer = renderer
                s.isSeekable = source.isSeekable
                transition(&s, to: .buffering)
            }
            if !output.isRealTime {
                // A file output waits for data anyway; there is nothing to prebuffer for.
                renderer.setMode(.run)
                shared.withLockedValue { transition(&$0, to: .playing) }
            }
            try output.start(format: format, renderer: renderer) { [wakeup] in wakeup.signal() }
            try fill(ring: ring, renderer: renderer, from: source, format: format)
        } catch {
            fail(error)
            wakeup.signal()
        }
    }

    /// Decodes into the ring until stopped; after the end of the stream it stays for seeks.
    private func fill(ring: SPSCRing, renderer: Renderer, from source: PCMSource, format: AudioFormat) throws(PartyCastError) {
        var pending: [Float] = []
        pending.reserveCapacity(1 << 16)
        var written = 0
        var ended = false
        var underrunsSeen = renderer.underruns
        // A live source's frames are kept on its timeline in both modes, so cuts and gains find them.
        let timed = source as? ScheduledPCMSource
        var timeline = TimelineKeeper(sampleRate: format.sampleRate)
        var edits = TimelineEdits(volume: options.volume)
        while !stopRequested.load(ordering: .acquiring) && !isStopping {
            if let command = shared.withLockedValue({ $0.commands.isEmpty ? nil : $0.commands.removeFirst() }) {
                let target: Int
                switch command {
                case .seek(let frame): target = frame
                case .seekBy(let seconds): target = status.positionFrames + Int(seconds * Double(format.sampleRate))
                }
                guard source.isSeekable else { continue }
                let clamped = max(0, min(target, (source.duration.frames ?? target) - 1))
                guard flush(renderer) else { return }
                try source.seek(toFrame: clamped)
                pending.removeAll(keepingCapacity: true)
                written = 0
                ended = false
                renderer.clearEndOfStream()
                shared.withLockedValue { s in
                    s.positionBase = clamped
                    s.renderedAtBase = renderer.renderedFrames
                    s.status.positionFrames = clamped
                    if s.status.state == .playing {
                        renderer.setMode(.hold)
                        transition(&s, to: .buffering)
                    }
                }
                continue
            }
            if written == pending.count && !ended {
                pending.removeAll(keepingCapacity: true)
                written = 0
                ended = !(try source.produce(into: &pending))
                if ended {
                    renderer.markEndOfStream()
                    wakeup.signal()
                }
                if let timed {
                    try edits.apply(timed.takeTimelineEvents(), renderer: renderer, timeline: &timeline)
                    if let frame = timed.lastProducedFrame {
                        switch timeline.place(frame: frame, frames: pending.count / format.channels) {
                        case .continues: break
                        case .gap(let frames):
                            pending.insert(contentsOf: repeatElement(0, count: frames * format.channels), at: 0)
                        case .trim(let frames):
                            pending.removeFirst(frames * format.channels)
                        case .restart:
                            guard awaitCut(renderer, edits.take()), restart(renderer) else { return }
                            renderer.beginTimeline(atFrame: frame)
                        }
                    }
                    applyLiveSettings(of: timed, to: renderer)
                }
                let tags = timed?.tags(atFrame: renderer.playingStreamFrame) ?? source.tags
                let (duration, skipped, concealed) = (source.duration, source.skippedBytes, source.concealedPackets)
                let retitled = shared.withLockedValue { s in
                    s.status.duration = duration
                    s.status.skippedBytes = skipped
                    s.status.concealedPackets = concealed
                    guard s.status.tags != tags else { return false }
                    s.status.tags = tags
                    // A new title heard is news now, not at the next status report (up to a second on).
                    s.unreported.append(s.status)
                    return true
                }
                if retitled { wakeup.signal() }
            }
            if written < pending.count {
                // Nothing is written while a cut is under way: it would be cut too.
                guard awaitCut(renderer, edits.take()) else { return }
                // After an underrun the control loop holds the renderer to buffer anew: let it
                // see the underrun before this audio could slip out ahead of the hold.
                if output.isRealTime && renderer.underruns != underrunsSeen {
                    underrunsSeen = renderer.underruns
                    guard awaitControlLoop(seeingUnderruns: underrunsSeen) else { return }
                }
                written += pending.withUnsafeBufferPointer { ring.write(UnsafeBufferPointer(rebasing: $0[written...])) }
                // While held, the control loop decides by the fill when to play.
                if renderer.currentMode == .hold { wakeup.signal() }
            }
            if ended {
                // Nothing left to decode: stay for a seek (or the stop).
                producerWakeup.wait()
            } else if written < pending.count {
                waitForRoom(in: ring, renderer: renderer, format: format)
            }
        }
    }

    private func awaitControlLoop(seeingUnderruns underruns: Int) -> Bool {
        wakeup.signal()
        while underrunsHandled.load(ordering: .acquiring) < underruns {
            if stopRequested.load(ordering: .acquiring) || isStopping { return false }
            producerWakeup.wait(nanoseconds: 10_000_000)
        }
        return true
    }

    /// The ring is full. A real-time output drains it at the stream's rate: sleep until a quarter
    /// of it is free (or a command comes); while held, nothing drains until the control loop
    /// resumes (and wakes this). Outputs that run as fast as they can drain it within a moment.
    private func waitForRoom(in ring: SPSCRing, renderer: Renderer, format: AudioFormat) {
        guard output.isRealTime else {
            sleepUntil(monotonicNanoseconds: monotonicNanoseconds() + 2_000_000)
            return
        }
        if renderer.currentMode == .hold {
            producerWakeup.wait()
        } else {
            let frames = ring.capacity / 4 / format.channels
            producerWakeup.wait(nanoseconds: UInt64(frames) * 1_000_000_000 / UInt64(format.sampleRate))
        }
    }

    /// Empties the ring through the output thread; false if the output or the player stopped meanwhile.
    private func flush(_ renderer: Renderer) -> Bool {
        let ticket = renderer.requestFlush()
        return awaitOutput { renderer.isFlushed(ticket) }
    }

    /// Waits for the output thread to answer a cut (if one is under way); false if the output or
    /// the player stopped meanwhile.
    private func awaitCut(_ renderer: Renderer, _ ticket: Int?) -> Bool {
        guard let ticket else { return true }
        return awaitOutput { renderer.isCut(ticket) }
    }

    /// A live source's new timeline. Party mode drops what the ring holds of the old one (it is
    /// off the schedule now); the plain path plays it out first, unless held (then nothing would
    /// play it: it goes).
    private func restart(_ renderer: Renderer) -> Bool {
        if !renderer.isScheduled && renderer.currentMode == .run {
            guard awaitOutput({ renderer.ring.availableToRead == 0 || renderer.currentMode != .run }) else { return false }
        }
        return flush(renderer)
    }

    private func awaitOutput(_ done: () -> Bool) -> Bool {
        while !done() {
            if output.outcome != nil || stopRequested.load(ordering: .acquiring) || isStopping { return false }
            sleepUntil(monotonicNanoseconds: monotonicNanoseconds() + 1_000_000)
        }
        return true
    }

    /// What a live source says besides audio: party paused, a latency offset and a channel set by its remote.
    private func applyLiveSettings(of source: ScheduledPCMSource, to renderer: Renderer) {
        let paused = source.isPartyPaused
        let offset = source.latencyOffsetMilliseconds
        let channel = source.channel
        let (changedOffset, changedChannel) = shared.withLockedValue { s -> (Int?, ChannelAssignment?) in
            s.status.partyPaused = paused
            let changedOffset = offset.flatMap { $0 != s.status.latencyOffsetMilliseconds ? $0 : nil }
            let changedChannel = channel.flatMap { $0 != s.status.channel ? $0 : nil }
            if let changedOffset { s.status.latencyOffsetMilliseconds = changedOffset }
            if let changedChannel { s.status.channel = changedChannel }
            return (changedOffset, changedChannel)
        }
        if let changedOffset { renderer.setLatencyOffset(nanoseconds: Int64(changedOffset) * 1_000_000) }
        if let changedChannel { renderer.setChannel(changedChannel) }
    }

    private var isStopping: Bool {
        shared.withLockedValue { $0.status.state == .stopping || $0.status.state == .stopped }
    }
}
