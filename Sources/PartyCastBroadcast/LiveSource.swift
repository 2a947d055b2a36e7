import NIOConcurrencyHelpers
import PartyCastCore
import PartyCastDSP

/// A live source (a pipe, a station) on the party's timeline: a thread of its own reads it as it
/// delivers, and the pacer takes fixed chunks from a `LiveBuffer` without ever waiting for it — a
/// stall is silence on the timeline, a backlog is dropped, clock drift is resampled away.
final class LiveSource: PCMSource {
    /// Taken per `produce`: what the pacer needs for about one chunk.
    static let framesPerTake = 480
    /// The reader pauses while this much is buffered beyond the target: a writer faster than real
    /// time (`cat file |`) waits for the party instead of being dropped.
    static let backpressureMilliseconds = 250

    private let shared: Shared
    private let reader: DedicatedThread
    let format: AudioFormat?
    var tags: TrackTags { shared.state.withLockedValue { $0.tags } }
    var duration: Duration { .unknown }
    var isSeekable: Bool { false }
    var skippedBytes: Int64 { shared.state.withLockedValue { $0.skippedBytes } }
    var cover: CoverArt? { nil }

    /// What the reader thread and the pacer share.
    // @unchecked: State (its LiveBuffer, a class) is only ever touched under the lock.
    private final class Shared: @unchecked Sendable {
        struct State {
            var buffer: LiveBuffer
            var tags: TrackTags
            var skippedBytes: Int64 = 0
            var failure: PartyCastError?
            var stopping = false
        }
        let state: NIOLockedValueBox<State>
        let room = Wakeup()
        init(_ state: State) { self.state = NIOLockedValueBox(state) }
    }

    /// Opens and prepares a source; one that turns out live (no length, no seeking: a pipe, a
    /// station) comes wrapped, to be read on a thread of its own.
    static func open(_ open: () throws(PartyCastError) -> PCMSource) throws(PartyCastError) -> PCMSource {
        let source = try open()
        try source.prepare()
        guard source.duration == .unknown, !source.isSeekable else { return source }
        guard let format = source.format else { throw PartyCastError(.notAudio, "no audio") }
        return LiveSource(taking: HandedOver(source), format: format)
    }

    // @unchecked: a source handed to the reader thread whole; the thread that opened it keeps no reference.
    private final class HandedOver: @unchecked Sendable {
        let source: PCMSource
        init(_ source: PCMSource) { self.source = source }
    }

    /// Hands a prepared source to the reader thread, the only one that uses it from then on.
    private init(taking handedOver: HandedOver, format: AudioFormat) {
        self.format = format
        let buffer = LiveBuffer(format: format)
        let shared = Shared(.init(buffer: buffer, tags: handedOver.source.tags))
        self.shared = shared
        let wakeSource = handedOver.source.wakeProducer
        let limit = buffer.targetFrames + format.sampleRate * Self.backpressureMilliseconds / 1000
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
                let (stopping, full) = shared.state.withLockedValue { state in
                    state.buffer.append(block)
                    state.tags = source.tags
                    state.skippedBytes = source.skippedBytes
                    if !more { state.buffer.finish() }
                    return (state.stopping, state.buffer.level > limit)
                }
                if stopping || !more { return }
                if full { shared.room.wait() }
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
        let (more, failure, roomNow) = shared.state.withLockedValue { state in
            let more = state.buffer.take(frames: Self.framesPerTake, into: &output)
            return (more, state.failure, state.buffer.level <= state.buffer.targetFrames)
        }
        if roomNow { shared.room.signal() }
        if !more, let failure { throw failure }
        return more
    }

    func seek(toFrame frame: Int) throws(PartyCastError) {
        throw PartyCastError(.invalidArgument, "a live source cannot seek")
    }

    /// Stalls and drops so far, for the broadcaster's log.
    var health: (stalls: Int, silentFrames: Int, droppedFrames: Int, correctionPPM: Int) {
        shared.state.withLockedValue { ($0.buffer.stalls, $0.buffer.silentFrames, $0.buffer.droppedFrames, $0.buffer.correctionPPM) }
    }
}
