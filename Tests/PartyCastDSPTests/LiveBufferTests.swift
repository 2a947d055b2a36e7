import PartyCastCore
import PartyCastDSP
import XCTest

/// The live buffer in simulated time: the source delivers in pieces at its own clock's rate, the
/// timeline takes 10 ms chunks at the broadcaster's. The controller works in seconds, so 8 kHz
/// simulates its minutes six times faster than 48 kHz would.
final class LiveBufferTests: XCTestCase {
    let format = AudioFormat(sampleRate: 8000, channels: 2)
    var rate: Int { format.sampleRate }

    /// A source whose clock runs `ppm` fast, delivering `piece` frames whenever it has them, for
    /// `seconds` of the timeline; returns the buffer and every level seen after each chunk.
    func run(ppm: Double, seconds: Int, piece: Int = 256, stallAt: ClosedRange<Int>? = nil) -> (LiveBuffer, [Int], [Float]) {
        let buffer = LiveBuffer(format: format)
        var delivered = 0.0, levels: [Int] = [], output: [Float] = [], counter: Float = 0
        let chunk = rate / 100
        for step in 0..<(seconds * 100) {
            // What the source's clock has produced by the end of this chunk, in whole pieces.
            let due = Double((step + 1) * chunk) * (1 + ppm / 1e6)
            let stalled = stallAt.map { $0.contains(step) } ?? false
            while !stalled, delivered + Double(piece) <= due {
                var samples: [Float] = []
                for _ in 0..<piece { counter += 1; samples.append(sin(counter / 10)); samples.append(-sin(counter / 10)) }
                buffer.append(samples)
                delivered += Double(piece)
            }
            if stalled { delivered = due }  // a stalled live source loses that time
            XCTAssertTrue(buffer.take(frames: chunk, into: &output))
            levels.append(buffer.level)
        }
        return (buffer, levels, output)
    }

    func testASourceOnTimePlaysEverythingWithoutStallsOrDrops() throws {
        let (buffer, levels, output) = run(ppm: 0, seconds: 60)
        XCTAssertEqual(buffer.stalls, 0)
        XCTAssertEqual(buffer.droppedFrames, 0)
        // Delivered in pieces, the level sits about half a piece above its target: a small correction.
        XCTAssertLessThanOrEqual(abs(buffer.correctionPPM), 100)
        XCTAssertEqual(output.count, 60 * rate * 2)
        // Silence only until the target was first buffered; then sound, and the delay stays put.
        let firstSound = try XCTUnwrap(output.firstIndex { $0 != 0 })
        XCTAssertLessThanOrEqual(firstSound / 2, buffer.targetFrames + 256)
        XCTAssertLessThanOrEqual(levels.suffix(100).max()!, buffer.targetFrames + 512)
    }

    /// With no correction to make, what is read is the source's own samples, bit for bit.
    func testNoCorrectionPassesSamplesThroughUnchanged() {
        let buffer = LiveBuffer(format: format)
        let samples = (0..<(rate * 2 / 5)).map { Float($0 % 1000) / 1000 }
        buffer.append(samples)
        buffer.finish()
        var output: [Float] = []
        while buffer.take(frames: rate / 100, into: &output) {}
        XCTAssertEqual(buffer.correctionPPM, 0)
        XCTAssertEqual(output.count, samples.count)
        XCTAssertTrue(output == samples, "the samples changed on the way through")
    }

    /// A clock 0.1 % off either way: the delay settles (over the last minute of five it stays
    /// within the buffer's bounds and no longer moves) instead of growing by 300 ms or running dry.
    func testClockDriftIsAbsorbedWithoutAGrowingDelay() throws {
        for ppm in [1000.0, -1000.0] {
            let (buffer, levels, _) = run(ppm: ppm, seconds: 300)
            XCTAssertEqual(buffer.stalls, 0, "ppm \(ppm)")
            XCTAssertEqual(buffer.droppedFrames, 0, "ppm \(ppm)")
            let lastMinute = levels.suffix(6000)
            XCTAssertLessThan(lastMinute.max()!, buffer.targetFrames + buffer.slackFrames, "ppm \(ppm)")
            XCTAssertGreaterThan(lastMinute.min()!, 0, "ppm \(ppm)")
            // Settled: the last minute's mean level moved less than 5 ms from the minute before's.
            let mean = { (s: ArraySlice<Int>) in Double(s.reduce(0, +)) / Double(s.count) }
            XCTAssertLessThan(abs(mean(lastMinute) - mean(levels.dropLast(6000).suffix(6000))), Double(rate) * 0.005, "ppm \(ppm)")
            XCTAssertEqual(Double(buffer.correctionPPM), ppm, accuracy: 150, "ppm \(ppm)")
        }
    }

    /// Two seconds with nothing from the source: silence on the timeline, then the source again —
    /// not two seconds late for the rest of the party.
    func testAStallIsSilenceAndDoesNotDelayWhatFollows() throws {
        let (buffer, levels, _) = run(ppm: 0, seconds: 30, stallAt: 1000...1199)
        XCTAssertEqual(buffer.stalls, 1)
        XCTAssertGreaterThanOrEqual(buffer.silentFrames, 2 * rate)
        XCTAssertLessThanOrEqual(levels.suffix(500).max()!, buffer.targetFrames + 512)
    }

    /// A burst (a reconnect's backlog, a writer faster than real time) is cut back to the target.
    func testABacklogIsDroppedBackToTheTarget() throws {
        let buffer = LiveBuffer(format: format)
        buffer.append([Float](repeating: 0.25, count: rate * 2 * 3))
        XCTAssertEqual(buffer.level, buffer.targetFrames)
        // All but the target and the interpolator's lookahead (16 frames) is dropped.
        XCTAssertEqual(buffer.droppedFrames, 3 * rate - buffer.targetFrames - 16)
    }

    func testAnEndedSourcePlaysOutThenEnds() throws {
        let buffer = LiveBuffer(format: format)
        buffer.append([Float](repeating: 0.25, count: 800 * 2))
        buffer.finish()
        var output: [Float] = []
        while buffer.take(frames: 80, into: &output) {}
        XCTAssertEqual(output.count, 800 * 2)
    }
}
