import PartyCastClock
import PartyCastCore
#if canImport(Glibc)
import Glibc
#endif

/// `virtual:PATH`: a simulated sound card for machines without one. It plays in real time on the
/// listener's clock (CLOCK_MONOTONIC, or a simulated one running offset and fast or slow) at the
/// stream's rate, one 25 ms period at a time (what alsa-lib gives `ALSAOutput`: its 100 ms buffer in
/// four periods), and records every frame it "played" (silence included) to PATH as WAV. PATH.json says when frame 0 played on the machine's true clock and how
/// fast the card ran: frame k played at t0_ns + k / (rate × (1 + drift_ppm·1e-6)).
public final class VirtualCardOutput: AudioOutput {
    public let path: String
    public let clock: LocalClock
    private let thread = OutputThread()

    public var name: String { "virtual:\(path)" }
    public var isRealTime: Bool { true }
    /// The card plays each period as it takes it.
    public var latencyFrames: Int { 0 }
    public var outcome: OutputOutcome? { thread.outcome }

    public init(path: String, clock: LocalClock = .system) {
        self.path = path
        self.clock = clock
    }

    public func start(format: AudioFormat, renderer: Renderer, onEnd: @escaping @Sendable () -> Void) throws(PartyCastError) {
        // A stopped card leaves its recording alone.
        guard thread.canStart else { return }
        let writer = try WavFileWriter(path: path, format: format)
        // Frame 0 plays 10 ms from now, giving the thread time to start.
        let periodFrames = max(1, format.sampleRate / 40)
        let t0 = clock.now() + 10_000_000
        try writeClockFile(t0: clock.machine(fromLocal: t0), rate: format.sampleRate)
        thread.start(onEnd: onEnd) { [self] in
            run(renderer: renderer, writer: writer, format: format, periodFrames: periodFrames, t0: t0)
        }
    }

    private func run(renderer: Renderer, writer: WavFileWriter, format: AudioFormat, periodFrames: Int, t0: Int64) -> OutputOutcome {
        let buffer = UnsafeMutableBufferPointer<Float>.allocate(capacity: periodFrames * format.channels)
        defer { buffer.deallocate() }
        var framesPlayed: UInt64 = 0
        do throws(PartyCastError) {
            while !thread.isStopRequested {
                // Frame n plays at t0 + n / rate; each period is taken exactly when it starts playing.
                let heardAt = t0 + Int64(framesPlayed * 1_000_000_000 / UInt64(format.sampleRate))
                clock.sleep(until: heardAt)
                let pull = renderer.render(into: buffer, heardAt: heardAt)
                try writer.write(UnsafeBufferPointer(buffer))
                framesPlayed += UInt64(periodFrames)
                if case .finished = pull { break }
            }
            try writer.finish()
            return thread.isStopRequested ? .stopped : .finished
        } catch {
            return .failed(error)
        }
    }

    private func writeClockFile(t0: UInt64, rate: Int) throws(PartyCastError) {
        let json = "{\"t0_ns\": \(t0), \"rate\": \(rate), \"drift_ppm\": \(clock.driftPPM)}\n"
        let jsonPath = path + ".json"
        let fd: Int32
        do {
            fd = try systemCall("open") { open(jsonPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
            defer { close(fd) }
            var bytes = Array(json.utf8)
            _ = try systemCall("write") { write(fd, &bytes, bytes.count) }
        } catch {
            throw PartyCastError(.output, "cannot write \(jsonPath): \(error)")
        }
    }

    public func stop(drain: Bool) { thread.stop() }
}
