import PartyCastCore
import Synchronization

/// Shared loop of outputs that run as fast as the pipeline can go: take whatever audio is ready,
/// wait briefly when there is none, never invent silence.
public class FastOutput: @unchecked Sendable {
    // @unchecked: `thread` is set in start() before the thread exists and read by stop() after.
    private let stopRequested = Atomic<Bool>(false)
    private let finalOutcome = Mutex<OutputOutcome?>(nil)
    private var thread: DedicatedThread?
    public var isRealTime: Bool { false }
    public var latencyFrames: Int { 0 }
    public var outcome: OutputOutcome? { finalOutcome.withLock { $0 } }

    /// Called on the output thread with each run of audio.
    func consume(_ samples: UnsafeBufferPointer<Float>) throws(PartyCastError) {}
    func open(format: AudioFormat) throws(PartyCastError) {}
    func close() throws(PartyCastError) {}

    public func start(format: AudioFormat, renderer: Renderer, onEnd: @escaping @Sendable () -> Void) throws(PartyCastError) {
        try open(format: format)
        thread = DedicatedThread { [self] in
            let outcome = run(renderer: renderer, format: format)
            finalOutcome.withLock { $0 = outcome }
            onEnd()
        }
    }

    private func run(renderer: Renderer, format: AudioFormat) -> OutputOutcome {
        let buffer = UnsafeMutableBufferPointer<Float>.allocate(capacity: 4096 * format.channels)
        defer { buffer.deallocate() }
        // Waits double while nothing comes, up to 16 ms: a file decodes faster than this drains, but a
        // broadcast arrives in bursts 100 ms apart, and polling every 1 ms was most of a listener's CPU.
        var wait: UInt64 = 1_000_000
        do throws(PartyCastError) {
            while !stopRequested.load(ordering: .acquiring) {
                switch renderer.render(into: buffer) {
                case .audio(let frames):
                    try consume(UnsafeBufferPointer(rebasing: buffer[0..<frames * format.channels]))
                    wait = 1_000_000
                case .silence:
                    sleepUntil(monotonicNanoseconds: monotonicNanoseconds() + wait)
                    wait = min(wait * 2, 16_000_000)
                case .finished(let frames):
                    try consume(UnsafeBufferPointer(rebasing: buffer[0..<frames * format.channels]))
                    try close()
                    return .finished
                }
            }
            try close()
            return .stopped
        } catch {
            return .failed(error)
        }
    }

    public func stop(drain: Bool) {
        stopRequested.store(true, ordering: .releasing)
        thread?.join()
        thread = nil
    }
}

/// `null`: decodes and discards, as fast as possible (benchmarks, tests).
public final class NullOutput: FastOutput, AudioOutput, @unchecked Sendable {
    public var name: String { "null" }
    override public init() {}
}

/// `wav:PATH`: exactly the decoded stream, as a Float32 WAV file.
public final class WavFileOutput: FastOutput, AudioOutput, @unchecked Sendable {
    // @unchecked: `writer` is used only by the output thread between open() and close().
    public let path: String
    private var writer: WavFileWriter?
    public var name: String { "wav:\(path)" }

    public init(path: String) { self.path = path }

    override func open(format: AudioFormat) throws(PartyCastError) {
        writer = try WavFileWriter(path: path, format: format)
    }

    override func consume(_ samples: UnsafeBufferPointer<Float>) throws(PartyCastError) {
        try writer?.write(samples)
    }

    override func close() throws(PartyCastError) {
        try writer?.finish()
        writer = nil
    }
}
