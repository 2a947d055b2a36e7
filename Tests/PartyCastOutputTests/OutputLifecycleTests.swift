import Foundation
import PartyCastCore
import PartyCastOutput
import PartyCastRing
import PartyCastTestSupport
import Synchronization
import XCTest

/// Every output's thread lives between one start() and the stop() that joins it, whatever the
/// order and timing of the calls: a stop before the start, or racing it, leaves no thread behind.
final class OutputLifecycleTests: XCTestCase {
    let format = AudioFormat(sampleRate: 48_000, channels: 2)

    /// Counts the output threads that have run to their end (each calls `onEnd` as its last act).
    final class EndCounter: Sendable {
        let ends = Atomic<Int>(0)
        var count: Int { ends.load(ordering: .acquiring) }
        func onEnd() { ends.add(1, ordering: .acquiringAndReleasing) }
    }

    /// Holds threads back until the test lets them all go at once.
    final class StartLine: Sendable {
        private let open = Atomic<Bool>(false)
        func release() { open.store(true, ordering: .releasing) }
        func wait() { while !open.load(ordering: .acquiring) {} }
    }

    func makeRenderer() -> Renderer {
        Renderer(ring: SPSCRing(minimumCapacity: 4096), channels: format.channels)
    }

    /// The outputs that need no device, each recording (if at all) to a fresh file in `directory`.
    func outputs(in directory: String) -> [(output: AudioOutput, file: String?)] {
        let wav = directory + "/out.wav", card = directory + "/card.wav"
        return [(NullOutput(), nil), (WavFileOutput(path: wav), wav), (VirtualCardOutput(path: card), card)]
    }

    func testStopBeforeStartRunsNothing() throws {
        for (output, file) in outputs(in: try temporaryDirectory()) {
            let ends = EndCounter()
            output.stop(drain: false)
            XCTAssertEqual(output.outcome, .stopped, output.name)
            try output.start(format: format, renderer: makeRenderer(), onEnd: ends.onEnd)
            XCTAssertEqual(output.outcome, .stopped, output.name)
            // A second stop would join a thread the start had begun: none may have.
            output.stop(drain: false)
            XCTAssertEqual(ends.count, 0, "\(output.name) ran a thread after stop()")
            if let file { XCTAssertFalse(FileManager.default.fileExists(atPath: file), "\(output.name) opened its file after stop()") }
        }
    }

    func testStopEndsTheThreadStartBegan() throws {
        for (output, _) in outputs(in: try temporaryDirectory()) {
            let ends = EndCounter()
            try output.start(format: format, renderer: makeRenderer(), onEnd: ends.onEnd)
            output.stop(drain: false)
            XCTAssertEqual(output.outcome, .stopped, output.name)
            XCTAssertEqual(ends.count, 1, output.name)
            try output.start(format: format, renderer: makeRenderer(), onEnd: ends.onEnd)
            output.stop(drain: false)
            XCTAssertEqual(ends.count, 1, "\(output.name) started a second thread")
        }
    }

    /// start() and stop() on two threads released together, many times: once both have returned,
    /// the output has an outcome and its thread (if it ran) has ended.
    func testStopRacingStartLeavesNoThreadRunning() throws {
        let directory = try temporaryDirectory()
        for round in 0..<100 {
            for (output, _) in outputs(in: directory) {
                let ends = EndCounter()
                let renderer = makeRenderer()
                let line = StartLine()
                let starter = DedicatedThread { [format] in
                    line.wait()
                    try? output.start(format: format, renderer: renderer, onEnd: ends.onEnd)
                }
                let stopper = DedicatedThread {
                    line.wait()
                    output.stop(drain: false)
                }
                line.release()
                starter.join()
                stopper.join()
                XCTAssertNotNil(output.outcome, "\(output.name), round \(round): a thread is still running")
                let endedByNow = ends.count
                XCTAssertLessThanOrEqual(endedByNow, 1, output.name)
                output.stop(drain: false)
                XCTAssertEqual(ends.count, endedByNow, "\(output.name), round \(round): a thread outlived both calls")
            }
        }
    }
}
