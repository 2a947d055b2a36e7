import Foundation
import PartyCastCore
import PartyCastDSP

/// A live source (a pipe, a station) on the party's timeline: a thread of its own reads it as it
/// delivers, and the pacer takes fixed chunks from a `LiveBuffer` without ever waiting for it — a
/// stall is silence on the timeline, a source ahead of real time waits for room, clock drift is
/// read away.
final class LiveSource: PCMSource {
    /// Taken per `produce`: what the pacer needs for about one chunk.
    static let framesPerTake = 480

    private let shared: Shared
    private let reader: DedicatedThread
    /// The most the buffer holds: the reader waits for room beyond it.
    private let limit: Int
    let format: AudioFormat?
    var tags: TrackTags { shared.state.withLockedValue { $0.tags } }
    var duration: Duration { .unknown }
    var isSeekable: Bool { false }
    var skippedBytes: Int64 { shared.state.withLockedValue { $0.skippedBytes } }
    var cover: CoverArt? { nil }
    /// Frames the source has delivered that the pacer has not taken yet: how long ago the source
    /// made the audio the next chunk holds.
    var bufferedFrames: Int { shared.state.withLockedValue { $0.buffer.level } }

    /// What the reader thread and the pacer share.
    // @unchecked: State (its LiveBuffer, a class) is only ever touched under the lock.
    private final class Shared: @unchecked Sendable {
        struct State {
            var buffer: LiveBuffer
            var tags: TrackTags
            var skippedBytes: Int64 = 0
            var failure: PartyCastError?
            var stopping = false
            /// Frames the reader holds until they fit under the buffer's limit; 0 while it reads.
            var waitingToAppend = 0
        }
        let state: LockedValueBox<State>
        let room = Wakeup()
        init(_ state: State) { self.state = LockedValueBox(state) }
    }

    /// Opens and prepares a source; one that turns out live (no length, no seeking: a pipe, a
    /// station) comes wrapped, to be read on a thread of its own.
    static func open(_ source: ResolvedSource, wakeup: Wakeup, stopping: () -> Bool) throws(PartyCastError) -> PCMSource {
        let opened = try openAside(source.open, mayWait: source.isLive, wakeup: wakeup, stopping: stopping) { source throws(PartyCastError) in
            try source.prepare()
        }
        guard opened.source.duration == .unknown, !opened.source.isSeekable else { return opened.source }
        guard let format = opened.source.format else { throw PartyCastError(.notAudio, "no audio") }
        return LiveSource(taking: opened, format: format)
    }

    /// Opens a source and prepares it (`prepare`). One that may wait (`mayWait`: a FIFO with no
    /// writer yet, a station slow to answer) is opened on a thread of its own, while the pacer stays
    /// within reach of `stop`: it waits on `wakeup`, and gives up with an error once `stopping` says
    /// so (the opening thread is then left to the process's end).
    static func openAside<Source>(_ open: @escaping @Sendable () throws(PartyCastError) -> Source, mayWait: Bool, wakeup: Wakeup, stopping: () -> Bool,
                                  prepare: @escaping @Sendable (Source) throws(PartyCastError) -> Void) throws(PartyCastError) -> HandedOver<Source> {
        guard mayWait else {
            let plain = try open()
            try prepare(plain)
            return HandedOver(plain)
        }
        let result = LockedValueBox<Result<HandedOver<Source>, PartyCastError>?>(nil)
        let opener = DedicatedThread {
            let outcome: Result<HandedOver<Source>, PartyCastError>
            do throws(PartyCastError) {
                let source = try open()
                try prepare(source)
                outcome = .success(HandedOver(source))
            } catch {
                outcome = .failure(error)
            }
            result.withLockedValue { $0 = outcome }
            wakeup.signal()
        }
        while true {
            if let outcome = result.withLockedValue({ $0 }) {
                opener.join()
                return try outcome.get()
            }
            if stopping() { throw PartyCastError(.io, "stopped before it played") }
            wakeup.wait()
        }
    }

    // @unchecked: a source handed from one thread to another whole; the thread that gives it keeps no reference.
    final class HandedOver<Source>: @unchecked Sendable {
        let source: Source
        init(_ source: Source) { self.source = source }
    }

    /// Hands a prepared source to the reader thread, the only one that uses it from then on.
    private init(taking handedOver: HandedOver<PCMSource>, format: AudioFormat) {
        self.format = format
        let buffer = LiveBuffer(format: format)
        let shared = Shared(.init(buffer: buffer, tags: handedOver.source.tags))
        self.shared = shared
        let wakeSource = handedOver.source.wakeProducer
        // A writer faster than real time (`cat file |`), or a burst, waits for room rather than
        // being dropped: the pipe holds the rest, as snapserver's pipes do. Not a station: it sends
        // in real time, so what waited in the socket (all it sent before the party started, a
        // burst on connect) would stay a delay for good, its titles heard seconds late; the
        // LiveBuffer drops that backlog instead.
        let waitsForRoom = !handedOver.source.isRemote
        let limit = buffer.targetFrames + buffer.slackFrames
        self.limit = limit
        reader = DedicatedThread {
            let source = handedOver.source
            var block: [Float] = []
            while true {
                block.removeAll(keepingCapacity: true)
                let more: Bool
                do throws(PartyCastError) {
                    more = try source.produce(into: &block)
                } catch {
                    shared.state.withLockedValue { $0.failure = error; $0.buffer.finish() }
                    return
                }
                let frames = block.count / format.channels
                while true {
                    let (appended, stopping) = shared.state.withLockedValue { state in
                        // A block larger than the limit goes in once the buffer is empty.
                        guard !waitsForRoom || state.stopping || state.buffer.level + frames <= limit || state.buffer.level == 0 else {
                            state.waitingToAppend = frames
                            return (false, false)
                        }
                        state.waitingToAppend = 0
                        state.buffer.append(block)
                        state.tags = source.tags
                        state.skippedBytes = source.skippedBytes
                        if !more { state.buffer.finish() }
                        return (true, state.stopping)
                    }
                    if stopping { return }
                    if appended { break }
                    shared.room.wait()
                }
                if !more { return }
            }
        }
        stopReader = { [shared] in
            shared.state.withLockedValue { $0.stopping = true }
            shared.room.signal()
            wakeSource?()
        }
    }

    private let stopReader: @Sendable () -> Void

    deinit {
        stopReader()
        reader.join()
    }

    func prepare() throws(PartyCastError) {}

    func produce(into output: inout [Float]) throws(PartyCastError) -> Bool {
        let limit = self.limit
        let (more, failure, roomNow) = shared.state.withLockedValue { state in
            let more = state.buffer.take(frames: Self.framesPerTake, into: &output)
            let waiting = state.waitingToAppend
            return (more, state.failure, waiting > 0 && state.buffer.level + waiting <= limit)
        }
        if roomNow { shared.room.signal() }
        if !more, let failure { throw failure }
        return more
    }

    func seek(toFrame frame: Int) throws(PartyCastError) {
        throw PartyCastError(.invalidArgument, "a live source cannot seek")
    }

    /// How the source kept time, for the broadcaster's log.
    var healthSummary: String {
        shared.state.withLockedValue { state in
            let buffer = state.buffer, rate = Double(buffer.format.sampleRate)
            return "\(buffer.stalls) stall(s), \(String(format: "%.2f", Double(buffer.silentFrames) / rate)) s of silence, "
                + "\(String(format: "%.2f", Double(buffer.droppedFrames) / rate)) s dropped, clock correction \(buffer.correctionPPM) ppm"
        }
    }
}
