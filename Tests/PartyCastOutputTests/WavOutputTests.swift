import PartyCastCore
import PartyCastOutput
import PartyCastRing
import PartyCastTestSupport
import XCTest

/// A `wav:` listener writes the stream as fast as it comes, ahead of when a speaker would play it,
/// so a broadcaster's withdrawal (a pause, a start held for a listener's clock) finds frames it
/// takes back already in the file: the file must drop them, or it keeps audio no speaker played.
final class WavOutputTests: XCTestCase {
    let format = AudioFormat(sampleRate: 48_000, channels: 2)

    /// Stream frames `frames`, each sample `sign × (frame + 1) / 2²⁴`: the file shows which frame of
    /// which version it holds, within ±1 (sox clips beyond) and exact through its 32-bit integers.
    func samples(_ frames: Range<Int>, sign: Float) -> [Float] {
        frames.flatMap { frame -> [Float] in
            let sample = sign * Float(frame + 1) / 0x1p24
            return [sample, sample]
        }
    }

    func write(_ samples: [Float], to ring: SPSCRing) {
        var written = 0
        while written < samples.count {
            written += samples.withUnsafeBufferPointer { ring.write(UnsafeBufferPointer(rebasing: $0[written...])) }
            if written < samples.count { XCTAssertTrue(waitUntil(timeout: 10) { ring.availableToWrite > 0 }, "the output drains the ring") }
        }
    }

    /// Cuts behind what was written: one reaching into frames already out of the writer's block
    /// and in the file, one within the block, one before the first frame (a start held and taken
    /// back whole). After each, the replacement follows the last frame kept, exactly.
    func testFramesACutTakesBackAfterTheyWereWrittenLeaveTheFile() throws {
        let path = try temporaryDirectory() + "/heard.wav"
        let ring = SPSCRing(minimumCapacity: 1 << 18)
        let renderer = Renderer(ring: ring, channels: format.channels)
        renderer.beginTimeline(atFrame: 0)
        renderer.setMode(.run)
        let output = WavFileOutput(path: path)
        try output.start(format: format, renderer: renderer) {}
        defer { output.stop(drain: false) }

        var expected: [Float] = []
        /// Writes `frames` and waits until the output has taken them all from the ring.
        func play(_ frames: Range<Int>, sign: Float) {
            let rendered = renderer.renderedFrames
            write(samples(frames, sign: sign), to: ring)
            XCTAssertTrue(waitUntil(timeout: 10) { renderer.renderedFrames == rendered + frames.count }, "the output takes everything")
            expected += samples(frames, sign: sign)
        }
        func cut(at frame: Int, keeping kept: Int) {
            let ticket = renderer.requestCut(atFrame: frame)
            XCTAssertTrue(waitUntil(timeout: 10) { renderer.isCut(ticket) }, "the cut is answered")
            expected.removeLast(expected.count - kept * format.channels)
        }
        // 20 000 frames are 160 000 bytes: two 64 KiB blocks in the file and 28 928 bytes (3616
        // frames) in the block. The cut takes back 8000: the block's and 4384 from the file.
        play(0..<20_000, sign: 1)
        cut(at: 12_000, keeping: 12_000)
        play(12_000..<13_000, sign: -1)
        // Within the block alone.
        cut(at: 12_500, keeping: 12_500)
        play(12_500..<16_000, sign: 1)
        // Before the first frame: all of it goes.
        cut(at: 0, keeping: 0)
        play(0..<9_000, sign: -1)
        renderer.markEndOfStream()
        XCTAssertTrue(waitUntil(timeout: 10) { output.outcome != nil })
        XCTAssertEqual(output.outcome, .finished)

        let written = try readAudio(path)
        XCTAssertEqual(written.channels, format.channels)
        XCTAssertEqual(written.frames, 9_000, "the file holds what was not taken back")
        let mismatch = zip(written.samples, expected).enumerated().first { $0.element.0 != $0.element.1 }
        XCTAssertNil(mismatch.map { "sample \($0.offset): \($0.element.0), expected \($0.element.1)" })
    }
}
