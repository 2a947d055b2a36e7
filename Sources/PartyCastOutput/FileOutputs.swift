import PartyCastCore

/// Where an output that runs as fast as the pipeline can go puts the audio. Made by `start`, then
/// used by the output thread alone.
protocol FastSink {
    func write(_ samples: UnsafeBufferPointer<Float>) throws(PartyCastError)
    /// Drops the last `frames` frames written: a broadcast took them back (a pause, a held start).
    func dropLast(frames: Int) throws(PartyCastError)
    func finish() throws(PartyCastError)
}

/// `null`: decodes and discards, as fast as possible (benchmarks, tests).
public final class NullOutput: AudioOutput {
    private struct Discard: FastSink {
        func write(_ samples: UnsafeBufferPointer<Float>) throws(PartyCastError) {}
        func dropLast(frames: Int) throws(PartyCastError) {}
        func finish() throws(PartyCastError) {}
    }

    private let thread = OutputThread()
    public var name: String { "null" }
    public var isRealTime: Bool { false }
    public var latencyFrames: Int { 0 }
    public var outcome: OutputOutcome? { thread.outcome }

    public init() {}

    public func start(format: AudioFormat, renderer: Renderer, onEnd: @escaping @Sendable () -> Void) throws(PartyCastError) {
        thread.start(onEnd: onEnd) { [thread] in playAsFastAsPossible(renderer, format: format, into: Discard(), until: thread) }
    }

    public func stop(drain: Bool) { thread.stop() }
}

/// `wav:PATH`: exactly the decoded stream, as a Float32 WAV file; of a broadcast, what a speaker
/// plays, without its timing: what the broadcaster takes back after it was written is dropped again.
public final class WavFileOutput: AudioOutput {
    public let path: String
    private let thread = OutputThread()
    public var name: String { "wav:\(path)" }
    public var isRealTime: Bool { false }
    public var latencyFrames: Int { 0 }
    public var outcome: OutputOutcome? { thread.outcome }

    public init(path: String) { self.path = path }

    public func start(format: AudioFormat, renderer: Renderer, onEnd: @escaping @Sendable () -> Void) throws(PartyCastError) {
        // A stopped output leaves the file alone.
        guard thread.canStart else { return }
        let writer = try WavFileWriter(path: path, format: format)
        thread.start(onEnd: onEnd) { [thread] in playAsFastAsPossible(renderer, format: format, into: writer, until: thread) }
    }

    public func stop(drain: Bool) { thread.stop() }
}

extension WavFileWriter: FastSink {}

/// The loop of outputs that run as fast as the pipeline can go: take whatever audio is ready,
/// wait briefly when there is none, never invent silence.
private func playAsFastAsPossible(_ renderer: Renderer, format: AudioFormat, into sink: some FastSink,
                                  until thread: OutputThread) -> OutputOutcome {
    let buffer = UnsafeMutableBufferPointer<Float>.allocate(capacity: 4096 * format.channels)
    defer { buffer.deallocate() }
    // Waits double while nothing comes, up to 16 ms: a file decodes faster than this drains, but a
    // broadcast arrives in bursts 100 ms apart, and polling every 1 ms was most of a listener's CPU.
    var wait: UInt64 = 1_000_000
    var takenBack = 0
    do throws(PartyCastError) {
        while !thread.isStopRequested {
            let pull = renderer.render(into: buffer)
            // A cut is made before the render reads anything: what it took back precedes the audio.
            if renderer.takenBackFrames != takenBack {
                try sink.dropLast(frames: renderer.takenBackFrames - takenBack)
                takenBack = renderer.takenBackFrames
            }
            switch pull {
            case .audio(let frames):
                try sink.write(UnsafeBufferPointer(rebasing: buffer[0..<frames * format.channels]))
                wait = 1_000_000
            case .silence:
                sleepUntil(monotonicNanoseconds: monotonicNanoseconds() + wait)
                wait = min(wait * 2, 16_000_000)
            case .finished(let frames):
                try sink.write(UnsafeBufferPointer(rebasing: buffer[0..<frames * format.channels]))
                try sink.finish()
                return .finished
            }
        }
        try sink.finish()
        return .stopped
    } catch {
        return .failed(error)
    }
}
