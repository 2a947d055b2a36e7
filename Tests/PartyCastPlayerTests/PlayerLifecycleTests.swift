import PartyCastCore
import PartyCastOutput
import PartyCastPlayer
import PartyCastSources
import PartyCastTestSupport
import Synchronization
import XCTest

/// The player's threads end under any timing of a stop: the producer is joined before the output
/// is stopped, so no output is ever started after its stop and no output thread outlives `run()`.
final class PlayerLifecycleTests: XCTestCase {
    /// An output that watches how the player drives it. Like a naive device it does start a thread
    /// when asked after a stop; it counts those starts and the threads still alive.
    final class WatchingOutput: AudioOutput {
        let name = "watching"
        let isRealTime = false
        var latencyFrames: Int { 0 }
        let liveThreads = Atomic<Int>(0)
        let startsAfterStop = Atomic<Int>(0)
        private let stopRequested = Atomic<Bool>(false)
        private let wakeup = Wakeup()
        private let threads = Mutex<[DedicatedThread]>([])
        private let ended = Mutex<OutputOutcome?>(nil)
        var outcome: OutputOutcome? { ended.withLock { $0 } }

        /// Its thread never takes any audio: a device that has stalled.
        func start(format: AudioFormat, renderer: Renderer, onEnd: @escaping @Sendable () -> Void) {
            if stopRequested.load(ordering: .acquiring) { startsAfterStop.add(1, ordering: .relaxed) }
            liveThreads.add(1, ordering: .relaxed)
            let thread = DedicatedThread { [self] in
                while !stopRequested.load(ordering: .acquiring) { wakeup.wait(nanoseconds: 100_000_000) }
                ended.withLock { $0 = .stopped }
                liveThreads.subtract(1, ordering: .releasing)
                onEnd()
            }
            threads.withLock { $0.append(thread) }
        }

        func stop(drain: Bool) {
            stopRequested.store(true, ordering: .releasing)
            wakeup.signal()
            for thread in threads.withLock({ $0 }) { thread.join() }
        }
    }

    /// A tone whose prepare() takes 10 ms, as opening a file or a connection might.
    final class SlowToPrepare: PCMSource {
        let tone: ToneGenerator
        init() throws(PartyCastError) { tone = try ToneGenerator(spec: "440") }
        var format: AudioFormat? { tone.format }
        var tags: TrackTags { tone.tags }
        var duration: Duration { tone.duration }
        var isSeekable: Bool { tone.isSeekable }
        func prepare() throws(PartyCastError) { sleepUntil(monotonicNanoseconds: monotonicNanoseconds() + 10_000_000) }
        func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool { try tone.produce(into: &buffer) }
        func seek(toFrame frame: Int) throws(PartyCastError) { try tone.seek(toFrame: frame) }
    }

    /// Stops at moments from 0 to 20 ms after run() begins, before, during and after prepare(): the
    /// output is never started after its stop, and run() returns with its thread ended.
    func testStopAtAnyMomentLeavesNoOutputThread() {
        for step in 0..<40 {
            let output = WatchingOutput()
            let player = Player(output: output) { () throws(PartyCastError) -> PCMSource in try SlowToPrepare() }
            let stopAt = monotonicNanoseconds() + UInt64(step) * 500_000
            let stopper = DedicatedThread {
                sleepUntil(monotonicNanoseconds: stopAt)
                player.stop()
            }
            XCTAssertEqual(player.run(), .user)
            stopper.join()
            XCTAssertEqual(output.startsAfterStop.load(ordering: .relaxed), 0, "stop \(step * 500) µs in: output started after its stop")
            XCTAssertEqual(output.liveThreads.load(ordering: .acquiring), 0, "stop \(step * 500) µs in: an output thread outlived run()")
            XCTAssertEqual(player.status.state, .stopped)
        }
    }

    /// A seek waits for the output to flush the ring; with the output stalled, a stop must still end
    /// the producer (it is joined before the output is stopped).
    func testStopEndsAProducerWaitingForAStalledOutput() {
        let output = WatchingOutput()
        let player = Player(output: output) { () throws(PartyCastError) -> PCMSource in try ToneGenerator(spec: "440") }
        let reason = Outcome()
        let runner = DedicatedThread { reason.set(player.run()) }
        XCTAssertTrue(waitUntil(timeout: 10, every: 0.001) { player.status.bufferFill >= 1 }, "the ring never filled")
        player.seek(bySeconds: 1)
        player.stop()
        XCTAssertTrue(waitUntil(timeout: 10, every: 0.001) { reason.value != nil }, "run() did not return after stop()")
        runner.join()
        XCTAssertEqual(reason.value, .user)
        XCTAssertEqual(output.liveThreads.load(ordering: .acquiring), 0)
    }

    /// What run() returned on another thread, once it has.
    final class Outcome: Sendable {
        private let reason = Mutex<StopReason?>(nil)
        var value: StopReason? { reason.withLock { $0 } }
        func set(_ value: StopReason) { reason.withLock { $0 = value } }
    }

}
